-- The docs cannot drift from the code. Every ```lua block of README.md and
-- docs/*.md runs in a child gpurun, from the repository's root, and must
-- succeed: ```lua gpu blocks need a GPU (#gpu), ```lua fragment blocks are
-- parts of a larger script and are not run. A block after
-- <!-- file: PATH --> is the file PATH word for word; one after
-- <!-- user file: PATH --> is a file of the user project that
-- spec/testing_spec.lua builds from the README. Docs in docs/ over 150
-- lines open with a table of contents that lists every section, and every link to a
-- file of the repository (and to a heading in it) leads somewhere.
local markdown = require("spec.support.markdown")
local files = require("spec.support.files")
local process = require("spec.support.process")

local FLAGS = { gpu = true, fragment = true }

-- Pages the branches in flight add (the README's contents list them):
-- their links are pending until the page exists.
local PAGES_IN_FLIGHT = {}

local function read(path)
  return assert(files.read(path), "cannot read " .. path)
end

-- GitHub's anchor for a heading's text.
local function anchor(heading)
  return (heading:lower():gsub("[^%w%- _]", ""):gsub(" ", "-"))
end

local function headings(text)
  local list = {}
  local fenced = false
  for line in (text .. "\n"):gmatch("([^\n]*)\n") do
    if line:match("^```") then
      fenced = not fenced
    elseif not fenced then
      local level, title = line:match("^(#+)%s+(.-)%s*$")
      if level then list[#list + 1] = { level = #level, title = title, anchor = anchor(title) } end
    end
  end
  return list
end

local function runs(block, path)
  local script = os.tmpname()
  local file = assert(io.open(script, "w"))
  file:write(block.text)
  file:close()
  local result = process.gpurun(process.quote(script))
  os.remove(script)
  assert(result.code == 0, ("%s:%d: the block exits %d:\n%s%s"):format(path, block.line,
    result.code, result.stdout, result.stderr))
end

for _, path in ipairs(markdown.doc_files()) do
  describe(path, function()
    local text = read(path)
    local blocks = markdown.blocks(text)

    for _, block in ipairs(blocks) do
      if block.lang == "lua" then
        local where = ("%s:%d"):format(path, block.line)
        for flag in pairs(block.flags) do
          it(where .. " is marked with a flag that exists", function()
            assert(FLAGS[flag], ("%s: unknown flag '%s' (```lua gpu or ```lua fragment)"):format(where, flag))
          end)
        end
        local mark = block.mark or ""
        local file_path = mark:match("^file:%s*(%S+)$")
        if file_path then
          it(where .. " is the file " .. file_path, function()
            assert.are.equal(read(file_path), block.text)
          end)
        elseif not block.flags.fragment and not mark:match("^user file:") then -- testing_spec.lua runs user files
          it(where .. " runs" .. (block.flags.gpu and " #gpu" or ""), function()
            runs(block, path)
          end)
        end
      end
    end

    -- The README is the one page whose own contents table lists the guides.
    local lines = select(2, text:gsub("\n", ""))
    if lines > 150 and path ~= "README.md" then
      it("opens with a table of contents that lists every section", function()
        local first = text:sub(1, 4000)
        local head = 0
        for line in first:gmatch("([^\n]*)\n") do
          head = head + 1
          if line == "## Contents" then break end
        end
        assert(head <= 40, path .. ": no '## Contents' among the first 40 lines")
        local contents = text:match("\n## Contents\n(.-)\n## ")
        assert(contents, path .. ": no '## Contents' section followed by the sections it lists")
        for _, heading in ipairs(headings(text)) do
          if heading.level == 2 and heading.title ~= "Contents" then
            assert(contents:find("(#" .. heading.anchor .. ")", 1, true),
              ("%s: the contents do not link '## %s' (#%s)"):format(path, heading.title, heading.anchor))
          end
        end
      end)
    end

    it("links only to files and headings that exist", function()
      local folder = path:match("^(.*)/") or "."
      local known = {}
      for _, heading in ipairs(headings(text)) do known[heading.anchor] = true end
      for target in text:gmatch("%]%(([^)%s]+)%)") do
        if not target:match("^%a+:") then
          local file, fragment = target:match("^([^#]*)#?(.*)$")
          local resolved = file == "" and path or (folder == "." and file or folder .. "/" .. file)
          if not PAGES_IN_FLIGHT[resolved] then
            local target_text = file == "" and text or files.read(resolved)
            assert(target_text, ("%s links to %s, which does not exist"):format(path, target))
            if fragment ~= "" and resolved:match("%.md$") then
              local anchors = file == "" and known or {}
              if file ~= "" then
                for _, heading in ipairs(headings(target_text)) do anchors[heading.anchor] = true end
              end
              assert(anchors[fragment], ("%s links to %s: no such heading"):format(path, target))
            end
          end
        end
      end
    end)
  end)
end

describe("README.md", function()
  local text = read("README.md")

  it("fits on one page: under 300 lines", function()
    local lines = select(2, text:gsub("\n", ""))
    assert(lines < 300, ("README.md has %d lines"):format(lines))
  end)

  it("shows the two set-up commands on the first 80x24 screen", function()
    local rows = 0
    for line in text:gmatch("([^\n]*)\n") do
      rows = rows + math.max(1, (#line + 79) // 80)
      if line:find("tools/dev.sh test", 1, true) then break end
    end
    assert(text:find("tools/dev.sh run", 1, true) and rows <= 24,
      ("the set-up commands end on screen row %d"):format(rows))
  end)
end)

describe("the pages in flight", function()
  for page in pairs(PAGES_IN_FLIGHT) do
    it(page .. " exists", function()
      if not files.read(page) then pending(page .. " comes with its branch") end
    end)
  end
end)

describe("the install commands", function()
  -- install.md's blocks marked <!-- fresh root: NAME --> are what
  -- tools/fresh-check.sh runs on bare Debian roots.
  local function fresh_root_lines()
    local lines = {}
    for _, block in ipairs(markdown.blocks(read("docs/install.md"))) do
      if block.mark and block.mark:match("^fresh root: ") then
        for line in block.text:gmatch("[^\n]+") do lines[line:gsub("%s+#%s.*$", "")] = true end
      end
    end
    return lines
  end

  it("of the README are install.md's, which tools/fresh-check.sh runs", function()
    local section = assert(read("README.md"):match("\n## Install\n(.-)\n## "), "the README has no '## Install'")
    local known, count = fresh_root_lines(), 0
    for line in section:gmatch("[^\n]+") do
      local command = line:match("^    (%S.-)%s*$")
      if command then
        command = command:gsub("%s+#%s.*$", "")
        count = count + 1
        assert(known[command], ("README.md's '%s' is in no <!-- fresh root: --> block of docs/install.md")
          :format(command))
      end
    end
    assert(count > 0, "the README's Install section shows no command")
  end)

  it("of install.md come in the blocks tools/fresh-check.sh runs", function()
    local text = read("tools/fresh-check.sh")
    local names = {}
    for _, block in ipairs(markdown.blocks(read("docs/install.md"))) do
      local name = block.mark and block.mark:match("^fresh root: (%S+)$")
      if name then
        assert.are.equal("sh", block.lang, name)
        names[#names + 1] = name
        assert(text:find("run_docs " .. name, 1, true), "tools/fresh-check.sh does not run " .. name)
      end
    end
    assert.are.same({ "cmake-install", "deb-build", "deb-install", "rock", "prefix" }, names)
  end)
end)
