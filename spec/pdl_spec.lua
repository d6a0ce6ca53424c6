-- Programmatic dependent launch (PDL) in what gpurun generates: the
-- generated kernels wait for the kernel before them on sm_90 and up only,
-- declared pipelines' plans mark the launches that may overlap the kernel
-- before them on their stream, and such pipelines compute what they
-- compute without it.
local gpurun = require("gpurun")
local ss = require("gpurun.compute.scan_source")

local WAIT = "griddepcontrol.wait"
local TRIGGER = "griddepcontrol.launch_dependents"

local function compiled(text, arch, target)
  return gpurun.Program(text, "c++", gpurun.ProgramOptions{ std = "c++17", arch = arch })
    :compile(target).code
end

describe("generated kernels and the grid-dependency wait", function()
  local add = gpurun.elementwise("float32 x, float32 y", "float32 r", "r = x + y", "pdl_add")
  local sum = gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "pdl_sum")
  local scan = ss.generate({ name = "pdl_scan", mode = "inclusive", in_c = "float", out_c = "float",
                             value_c = "float", combine = "a + b", identity = "0", block = 128,
                             items = 23 })
  local sources = { elementwise = add.source, reduction = sum.source, scan = scan }

  it("guards the wait and the trigger by the arch in the source", function()
    for what, text in pairs(sources) do
      local guard = text:find("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900", 1, true)
      assert.truthy(guard, what)
      assert.truthy(text:find(WAIT, guard, true), what)
      assert.truthy(text:find(TRIGGER, guard, true), what)
    end
  end)

  it("waits only when compiled for sm_90 and up, and compiles for sm_80 and sm_90", function()
    for what, text in pairs(sources) do
      local old, new = compiled(text, "sm_80", "ptx"), compiled(text, "sm_90", "ptx")
      assert.is_nil(old:find(WAIT, 1, true), what .. " on sm_80")
      assert.is_nil(old:find(TRIGGER, 1, true), what .. " on sm_80")
      assert.truthy(new:find(WAIT, 1, true), what .. " on sm_90")
      assert.truthy(new:find(TRIGGER, 1, true), what .. " on sm_90")
      -- and ptxas takes both
      assert.is_true(#compiled(text, "sm_80", "cubin") > 0, what)
      assert.is_true(#compiled(text, "sm_90", "cubin") > 0, what)
    end
  end)

  it("waits before the kernel touches memory", function()
    local text = add.source
    local body = text:find("pdl_add_scalar(", 1, true)
    local wait = text:find(WAIT, body, true)
    local first_read = text:find("_in_x[", body, true)
    assert.truthy(wait and first_read and wait < first_read, text)
  end)
end)

describe("declared pipelines' PDL launches", function()
  local ew = gpurun.elementwise
  local add = ew("float32 x, float32 y", "float32 r", "r = x + y", "add")
  local mul = ew("float32 x, float32 y", "float32 r", "r = x * y", "mul")
  local sum = gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil, "total")
  local n = 4096

  -- { [unit name] = programmatic } of p's plan, and the plan.
  local function marks(p)
    local plan = p:plan()
    local out = {}
    for _, unit in ipairs(plan.units) do out[unit.name] = unit.programmatic end
    return out, plan
  end

  local function chain(options)
    local p = gpurun.pipeline(options)
    local a, b = p:temporary("a", n), p:temporary("b", n)
    local r1, r2, r3 = p:temporary("r1", n), p:temporary("r2", n), p:temporary("r3", n)
    p:fill(a, 1.0)
    p:fill(b, 2.0)
    p:call{ add, a, b, r1, name = "first" }
    p:call{ mul, r1, b, r2, name = "second" }
    p:call{ add, r2, a, r3, name = "third" }
    return p
  end

  it("marks each kernel that follows a kernel on its stream", function()
    local p <close> = chain({ name = "chain", fuse = false })
    local found, plan = marks(p)
    -- first waits for the fill of b on another stream; fills are no kernels.
    assert.are.same({ ["fill a"] = false, ["fill b"] = false, first = false, second = true,
                      third = true }, found)
    assert.truthy(p:explain():find("second (PDL) -> third (PDL)", 1, true), p:explain())
    for _, unit in ipairs(plan.units) do
      assert.are.equal("boolean", type(unit.programmatic))
    end
  end)

  it("marks none when timing events come between units", function()
    local p <close> = chain({ name = "timed", fuse = false, timing = true })
    local found = marks(p)
    for name, programmatic in pairs(found) do
      assert.is_false(programmatic, name)
    end
    assert.is_nil(p:explain():find("(PDL)", 1, true))
  end)

  it("marks no kernel after a host stage or a fill, and no reduction object", function()
    local p <close> = gpurun.pipeline{ name = "mixed", fuse = false }
    local a, t = p:temporary("a", n), p:temporary("t", n)
    local u, s = p:temporary("u", n), p:temporary("s", 1)
    p:fill(a, 1.0)
    p:call{ add, a, a, t, name = "after_fill" }
    p:host(function() end, { reads = { t }, writes = { t }, name = "look" })
    p:call{ add, t, a, u, name = "after_host" }
    p:call{ sum, u, s, name = "reduce" }
    local found, plan = marks(p)
    assert.are.equal(1, #plan.streams, p:explain())
    assert.is_false(found.after_fill)
    assert.is_false(found.look)
    assert.is_false(found.after_host)
    assert.is_false(found.reduce)
  end)

  it("marks a fused group that follows a kernel", function()
    local p <close> = gpurun.pipeline{ name = "fused" }
    local a, t = p:temporary("a", n), p:temporary("t", n)
    local v, w = p:temporary("v", n), p:temporary("w", n)
    p:fill(a, 1.0)
    -- Not one `out = expression`: it does not fuse.
    p:call{ ew("float32 x", "float32 r", "r = x; r *= 2.0f", "twice"), a, t, name = "twice" }
    p:call{ mul, t, a, v, name = "f1" }   -- f1 and f2 fuse: v stays in registers
    p:call{ add, v, a, w, name = "f2" }
    local found, plan = marks(p)
    assert.are.equal(1, #plan.groups, p:explain())
    assert.is_false(found.twice)
    assert.is_true(found["f1 + f2"], p:explain())
  end)

  it("marks none on a stream's first unit, nor where a unit waits for another stream", function()
    local p <close> = gpurun.pipeline{ name = "branches", fuse = false }
    local a, b = p:temporary("a", n), p:temporary("b", n)
    local x, y, r = p:temporary("x", n), p:temporary("y", n), p:temporary("r", n)
    p:fill(a, 1.0)
    p:fill(b, 2.0)
    p:call{ add, a, a, x, name = "left" }
    p:call{ mul, b, b, y, name = "right" }
    p:call{ add, x, y, r, name = "join" }
    local found, plan = marks(p)
    for _, unit in ipairs(plan.units) do
      if #unit.waits > 0 then assert.is_false(unit.programmatic, unit.name) end
    end
    for _, list in ipairs(plan.streams) do
      assert.is_false(plan.units[list[1]].programmatic)
    end
    assert.is_false(found["left"] and found["right"] and found["join"])
  end)

  it("computes the same with PDL as each kernel launched alone #gpu", function()
    local device = gpurun.Device(0)
    device:set_current()
    local stream <close> = device:create_stream()
    local m = 65536
    local rng <close> = gpurun.default_rng(11)
    local a, b, c = rng:random(m, "float32"), rng:random(m, "float32"), rng:random(m, "float32")
    local r1, r2, r3 = gpurun.zeros(m), gpurun.zeros(m), gpurun.zeros(m)
    local sub = ew("float32 x, float32 y", "float32 r", "r = x - y", "sub")
    -- Alone, one launch at a time, the stream synchronized between them.
    local e1, e2, e3 = gpurun.zeros(m), gpurun.zeros(m), gpurun.zeros(m)
    add(stream, a, b, e1); stream:sync()
    mul(stream, e1, c, e2); stream:sync()
    sub(stream, e2, a, e3); stream:sync()
    local p <close> = gpurun.pipeline{ name = "pdl_chain", fuse = false }
    local v = p:buffers{ a = a, b = b, c = c, r1 = r1, r2 = r2, r3 = r3 }
    p:call(add, v.a, v.b, v.r1)
    p:call(mul, v.r1, v.c, v.r2)
    p:call(sub, v.r2, v.a, v.r3)
    local found = marks(p)
    assert.are.same({ add = false, mul = true, sub = true }, found)
    for round = 1, 2 do
      r1:fill(0.0, stream); r2:fill(0.0, stream); r3:fill(0.0, stream)
      if round == 1 then p:run(stream) else p:graph(stream) end
      stream:sync()
      assert.are.same(e1:to_table(stream), r1:to_table(stream))
      assert.are.same(e2:to_table(stream), r2:to_table(stream))
      assert.are.same(e3:to_table(stream), r3:to_table(stream))
    end
    -- Replayed back to back, each replay's first kernel after the last's.
    for _ = 1, 20 do p:graph(stream) end
    stream:sync()
    assert.are.same(e3:to_table(stream), r3:to_table(stream))
    -- An elementwise pipeline of several kernels launches its later ones so too.
    local pipe = gpurun.elementwise_pipeline("float32 a, float32 b, float32 c",
      { "float32 t1 = a + b", "float32 t2 = t1 * c", "float32 t3 = t2 - a" }, "t1, t2, t3", "pdl_pipe",
      { fuse = "never" })
    assert.are.equal(3, #pipe.kernels)
    local t1, t2, t3 = gpurun.zeros(m), gpurun.zeros(m), gpurun.zeros(m)
    pipe(stream, a, b, c, t1, t2, t3)
    stream:sync()
    assert.are.same(e1:to_table(stream), t1:to_table(stream))
    assert.are.same(e3:to_table(stream), t3:to_table(stream))
  end)
end)
