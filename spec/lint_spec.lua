-- The lint gate works: luacheck with the repository's .luacheckrc reports
-- an undefined global in a file checked as part of lua/ or spec/, and
-- passes the same file once the name is defined. (tools/lint.sh over the
-- whole tree is CI's own step, not a spec.)
local process = require("spec.support.process")

local quote = process.quote

local function luacheck_path()
  local pipe = io.popen("command -v luacheck")
  local path = pipe and pipe:read("l")
  if pipe then pipe:close() end
  return path ~= "" and path or nil
end

-- luacheck on `text` in a temporary file, with the configuration of the
-- path `as` in the repository -> its exit code and its warnings, one a line.
local function lint(luacheck, text, as)
  local path = os.tmpname()
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
  local result = process.run(("%s --config .luacheckrc --no-color --codes --formatter plain --filename %s %s")
    :format(quote(luacheck), quote(as), quote(path)))
  os.remove(path)
  assert.are.equal("", result.stderr)
  return result.code, result.stdout
end

local LIBRARY = [[
local M = {}

function M.argument(value)
  return converted(value)
end

return M
]]

local SPEC = [[
describe("a spec", function()
  it("uses busted's globals and one of its own", function()
    assert.is_true(convertd(1))
  end)
end)
]]

describe("the luacheck gate", function()
  local luacheck = luacheck_path()
  if not luacheck then
    pending("luacheck is not installed (apt-get install lua-check): the lint gate was not tried")
    return
  end

  it("reports an undefined global in lua/, and passes the file with the name defined", function()
    local code, warnings = lint(luacheck, LIBRARY, "lua/gpurun/lint_probe.lua")
    assert.are.equal(1, code, warnings)
    assert.are.equal("lua/gpurun/lint_probe.lua:4:10: (W113) accessing undefined variable 'converted'\n",
                     warnings)
    code, warnings = lint(luacheck, "local function converted(value) return value end\n" .. LIBRARY,
                          "lua/gpurun/lint_probe.lua")
    assert.are.equal(0, code, warnings)
    assert.are.equal("", warnings)
  end)

  it("knows busted's globals in spec/, and nothing more", function()
    local code, warnings = lint(luacheck, SPEC, "spec/lint_probe_spec.lua")
    assert.are.equal(1, code, warnings)
    assert.are.equal("spec/lint_probe_spec.lua:3:20: (W113) accessing undefined variable 'convertd'\n", warnings)
  end)

  it("holds lua/ to 120 columns, and leaves spec/'s rows their length", function()
    local long = "return " .. ("x"):rep(110) .. " -- past 120\n"
    local code, warnings = lint(luacheck, "local " .. ("x"):rep(110) .. " = 1\n" .. long, "lua/gpurun/lint_probe.lua")
    assert.are.equal(1, code, warnings)
    assert.matches("^lua/gpurun/lint_probe%.lua:2:121: %(W631%) line is too long %(129 > 120%)\n$", warnings)
    code, warnings = lint(luacheck, "local " .. ("x"):rep(110) .. " = 1\n" .. long, "spec/lint_probe_spec.lua")
    assert.are.equal(0, code, warnings)
  end)
end)
