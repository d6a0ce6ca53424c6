-- The habits CONTRIBUTING.md asks of the tree that a program can check:
-- no issue numbers or session history in code, comments or docs (git log
-- keeps history).
local files = require("spec.support.files")

local CHECKED = { "src", "lua", "bench", "scripts", "tools", "tests", "spec", "cmake", "docs" }
local TOP_FILES = { "CMakeLists.txt", "README.md", "CONTRIBUTING.md" }
local HISTORY = { "[Ii]ssues? #?%d+", "%f[%w][Tt]urn[- ]%d+%f[^%w]" }

describe("the tree's habits", function()
  it("names no issue or turn in code, comments or docs", function()
    local paths = files.tracked(CHECKED)
    for _, file in ipairs(TOP_FILES) do paths[#paths + 1] = file end
    if #paths == 0 then pending("not a git checkout") return end
    local found = {}
    for _, path in ipairs(paths) do
      if path ~= "spec/code_habits_spec.lua" and not path:match("%.png$") then
        local text = files.read(path) or ""
        local number = 0
        for line in (text .. "\n"):gmatch("([^\n]*)\n") do
          number = number + 1
          for _, pattern in ipairs(HISTORY) do
            if line:find(pattern) then found[#found + 1] = ("%s:%d: %s"):format(path, number, line) end
          end
        end
      end
    end
    assert.are.same({}, found)
  end)
end)
