-- How an object's keys resolve (runtime/object.c): a method is a plain
-- table read from the second look-up on, fields and elements are read by
-- their getters, and nothing else changes for the script. Program and
-- ObjectCode have methods and fields and need no GPU; the Buffer's and the
-- Graph's are in their own specs (#gpu).
local gpurun = require("gpurun")

local SOURCE = 'extern "C" __global__ void k(float *x) { x[0] = 1; }'

local function program()
  return gpurun.Program(SOURCE, "c++", { arch = "sm_90" })
end

local error_of = require("spec.support.expect").error_of

describe("method lookup", function()
  it("finds the type's methods, the same functions every time", function()
    local methods = debug.getregistry()["gpurun.Program"].methods
    local p <close> = program()
    for _ = 1, 3 do
      assert.are.equal(methods.compile, p.compile)
      assert.are.equal(methods.close, p.close)
    end
    local q <close> = program()
    assert.are.equal(p.compile, q.compile)
  end)

  it("leaves getmetatable as the type's metatable", function()
    local p <close> = program()
    assert.are.equal(debug.getregistry()["gpurun.Program"], getmetatable(p))
    assert.are.equal("gpurun.Program", getmetatable(p).__name)
    assert.matches("^gpurun%.Program", tostring(p))
  end)

  it("names an object by its type in messages after it has a metatable of its own", function()
    local p <close> = program()
    for _ = 1, 5 do local _ = p.compile end -- past the look-ups that give it its own
    local ok, err = pcall(gpurun.Device, p)
    assert.is_false(ok)
    assert.matches("number expected, got gpurun.Program)", err, 1, true)
  end)

  it("reads fields through their getters, each time anew", function()
    local p <close> = program()
    assert.are.equal(SOURCE, p.source)
    assert.are.equal("c++", p.code_type)
    local ptx <close> = p:compile("ptx")
    assert.are.equal("ptx", ptx.code_type)
    assert.is_true(ptx.size > 0)
    assert.are.equal(ptx.size, #ptx.code)
  end)

  it("gives nil for a key that is neither, metamethod names included", function()
    local p <close> = program()
    for _, key in ipairs({ "nothing", "__gc", "__close", "__index", "__metatable", 1, true }) do
      assert.is_nil(p[key], tostring(key))
    end
  end)

  it("resolves methods of a closed object, and refuses its fields and other keys", function()
    local p = program()
    local compile = p.compile
    p:close()
    assert.are.equal(compile, p.compile)
    assert.are.equal("function", type(p.close))
    p:close() -- closing twice is fine
    assert.matches("attempt to use a closed gpurun.Program", error_of(function() return p.source end))
    assert.matches("attempt to use a closed gpurun.Program", error_of(function() return p.nothing end))
    assert.matches("attempt to use a closed gpurun.Program", error_of(function() return p:compile("ptx") end))
  end)

  it("points a field's error at the script's line", function()
    local p = program()
    p:close()
    local line = debug.getinfo(1, "l").currentline + 1
    local message = error_of(function() return p.options end)
    assert.matches("method_lookup_spec.lua:" .. line .. ": attempt to use a closed", message, 1, true)
  end)

  it("finds a method added to the type after the object was made", function()
    local methods = debug.getregistry()["gpurun.Program"].methods
    local p <close> = program()
    assert.is_nil(p.spec_extra)
    methods.spec_extra = function(self) return self.code_type end
    local ok, result = pcall(function() return p:spec_extra() end)
    methods.spec_extra = nil
    assert.is_true(ok, result)
    assert.are.equal("c++", result)
  end)

  it("allocates nothing for a method once it has been looked up a few times", function()
    local p <close> = program()
    for _ = 1, 4 do local _ = p.compile; local _ = p.close end -- the object's own metatable is made by now
    collectgarbage("collect")
    collectgarbage("stop")
    local before = collectgarbage("count")
    for _ = 1, 10000 do
      local _ = p.compile
      local _ = p.close
    end
    local after = collectgarbage("count")
    collectgarbage("restart")
    assert.are.equal(before, after)
  end)

  it("lets an object be collected, and finalised, as before", function()
    local weak = setmetatable({}, { __mode = "k" })
    for _ = 1, 10 do
      local p = program()
      local _ = p.compile
      weak[p] = true
    end
    collectgarbage("collect")
    collectgarbage("collect")
    assert.is_nil(next(weak))
  end)

  it("closes a <close> variable at the end of its scope", function()
    local kept
    do
      local p <close> = program()
      kept = p
    end
    assert.matches("attempt to use a closed", error_of(function() return kept.source end))
  end)

  it("still answers the type's __index called by hand", function()
    local index = getmetatable(program()).__index
    local p <close> = program()
    assert.are.equal(p.compile, index(p, "compile"))
    assert.are.equal(SOURCE, index(p, "source"))
    assert.matches("gpurun.Program expected, got string", error_of(index, "x", "source"))
  end)
end)
