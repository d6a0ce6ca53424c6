-- docs/pipelines.md's examples run as written: the blocks marked
-- "runs anywhere" on every run, those marked "runs on a GPU" on a GPU host.
local function blocks(marker)
  local file = assert(io.open("docs/pipelines.md", "rb"))
  local text = file:read("a")
  file:close()
  local found = {}
  for code in text:gmatch("<!%-%- " .. marker .. " %-%->\n```lua\n(.-)\n```") do
    found[#found + 1] = code
  end
  return found
end

local function run(code, label)
  local chunk = assert(load(code, "=" .. label, "t"))
  local printed = {}
  local env = setmetatable({ print = function(...) printed[#printed + 1] = table.concat({ ... }, "\t") end },
                           { __index = _G })
  debug.setupvalue(chunk, 1, env)
  chunk()
  return table.concat(printed, "\n")
end

describe("docs/pipelines.md", function()
  it("has examples that run anywhere, and they do", function()
    local list = blocks("runs anywhere")
    assert.is_true(#list >= 1)
    for i, code in ipairs(list) do
      local printed = run(code, "docs/pipelines.md block " .. i)
      assert.truthy(printed:find("pipeline '", 1, true))
    end
  end)

  it("has examples that run on a GPU, and they do #gpu", function()
    local list = blocks("runs on a GPU")
    assert.is_true(#list >= 1)
    for i, code in ipairs(list) do
      local printed = run(code, "docs/pipelines.md GPU block " .. i)
      assert.truthy(printed:find("fusion group", 1, true))
    end
  end)
end)
