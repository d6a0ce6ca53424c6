-- docs/architecture.md matches the tree: every tracked file of src/, lua/,
-- tools/, tests/ and bench/ is named there in code (`copies`, `buffer.[ch]`,
-- `tools/lint.sh`), by its name or its stem (the name without its
-- extension); a file of a data folder (fixtures, the sample's kernel texts)
-- through the folder, which the doc names with what all of it holds.
local files = require("spec.support.files")

local FOLDERS = { "src", "lua", "tools", "tests", "bench" }
local DATA_FOLDERS = { "tests/fixtures/", "lua/gpurun/samples/kernels/" }

-- Every word of the doc's code spans and blocks: the names it gives.
local function code_words(doc)
  local words = {}
  local function take(code)
    for word in code:gmatch("[%w_%-%.]+") do
      words[word] = true
      for part in word:gmatch("[%w_%-]+") do words[part] = true end
    end
  end
  for block in doc:gmatch("```.-\n(.-)```") do take(block) end
  for span in doc:gsub("```.-```", ""):gmatch("`([^`\n]+)`") do take(span) end
  return words
end

-- Whether the file lies in a data folder the doc names.
local function folder_named(doc, path)
  for _, folder in ipairs(DATA_FOLDERS) do
    if path:sub(1, #folder) == folder then
      return doc:find(folder, 1, true) ~= nil
    end
  end
  return false
end

describe("docs/architecture.md", function()
  it("names every file of src/, lua/, tools/, tests/ and bench/", function()
    local doc = assert(files.read("docs/architecture.md"))
    local words = code_words(doc)
    local paths = files.tracked(FOLDERS)
    if #paths == 0 then pending("not a git checkout") return end
    local missing = {}
    for _, path in ipairs(paths) do
      local name = path:match("[^/]+$")
      local stem = name:match("^(.+)%.[^.]+$") or name
      if not (words[name] or words[stem] or folder_named(doc, path)) then
        missing[#missing + 1] = path
      end
    end
    assert.are.same({}, missing)
  end)
end)
