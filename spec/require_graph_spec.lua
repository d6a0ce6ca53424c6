-- tools/require_graph.lua: the Lua code's requires form no cycle, and none
-- hides inside a function unless its line says why (lazy or optional).
local process = require("spec.support.process")
local files = require("spec.support.files")

local quote = process.quote

local function graph_of(dir)
  return process.run(("%s tools/require_graph.lua %s"):format(quote(process.gpurun_bin()), quote(dir)))
end

local function write(path, text)
  os.execute("mkdir -p " .. quote(path:match("^(.*)/[^/]*$")))
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
end

describe("the require graph", function()
  local folder = files.folder_per_spec(before_each, after_each)

  it("of lua/ has no cycle and no require hidden in a function", function()
    local result = graph_of("lua")
    assert.are.equal("", result.stderr)
    assert.are.equal(0, result.code)
    assert.matches("^require graph of lua: %d+ modules, %d+ requires, 0 cycles\n$", result.stdout)
  end)

  it("fails on a cycle, naming it with the lines of its requires", function()
    local dir = folder()
    write(dir .. "/gpurun/a.lua", 'local b = require("gpurun.b")\nreturn {}\n')
    write(dir .. "/gpurun/b.lua", '-- b\nlocal c = require("gpurun.sub.c")\nreturn {}\n')
    write(dir .. "/gpurun/sub/c.lua", 'return require("gpurun.a")\n')
    local result = graph_of(dir)
    assert.are.equal(1, result.code)
    assert.matches(("require cycle: gpurun.a (%s/gpurun/a.lua:1) -> gpurun.b (%s/gpurun/b.lua:2) -> "
      .. "gpurun.sub.c (%s/gpurun/sub/c.lua:1) -> gpurun.a"):format(dir, dir, dir), result.stderr, 1, true)
  end)

  it("fails on a require inside a function, unless its line or the one before says why", function()
    local dir = folder()
    write(dir .. "/gpurun/a.lua", table.concat({
      "local M = {}",
      "function M.f()",
      '  local x = require("x")',
      "  -- lazy: loaded on first use",
      '  local y = require "y"',
      '  local ok, z = pcall(require, "z") -- optional: only where it is installed',
      "  return x, y, ok and z",
      "end",
      'local s = [[ function() require("in a string") end ]]',
      "--[[ function g() require('in a comment') end ]]",
      'do local w = require("w") end',
      "return M", "" }, "\n"))
    local result = graph_of(dir)
    assert.are.equal(1, result.code)
    assert.are.equal(("%s/gpurun/a.lua:3: require(\"x\") inside a function, not marked `-- lazy: why` "
      .. "or `-- optional: why`\nrequire graph of %s: 1 problem(s)\n"):format(dir, dir), result.stderr)
  end)
end)
