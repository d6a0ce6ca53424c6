-- gpurun.pipeline's declaration and plan, with no GPU: temporaries and
-- views stand for buffers, elementwise kernels for stages. What the plan
-- infers (edges and their hazards, streams and waits, fusion groups,
-- temporaries, warnings), the refusals, explain() and to_dot(), and the
-- fused kernels' CUDA C compiled by NVRTC.
local gpurun = require("gpurun")
local access = require("gpurun.pipeline.access")

local N = 4096

local function ew(op, name, ins, outs)
  return gpurun.elementwise(ins or "float32 a, float32 b", outs or "float32 r", op, name)
end

local add = ew("r = a + b", "add")
local mul = ew("r = a * b", "mul")
local sub = ew("r = a - b", "sub")
local scale = ew("y = alpha * x", "scale", "float32 x, float32 alpha", "float32 y")
local twice = ew("y = x; y *= 2.0f", "twice", "float32 x", "float32 y") -- not one expression

local function names(p, list)
  local out = {}
  for i, index in ipairs(list) do out[i] = p.stages[index].name end
  return table.concat(out, ",")
end

local function edge_set(plan)
  local set = {}
  for _, e in ipairs(plan.edges) do
    set[#set + 1] = ("%s>%s:%s:%s"):format(plan.stages[e.from].name, plan.stages[e.to].name, e.data, e.hazard)
  end
  table.sort(set)
  return table.concat(set, " ")
end

-- The sample's chain and a second branch, joined: the declaration of
-- scripts/pipeline.lua without buffers.
local function sample(options)
  local p = gpurun.pipeline(options or { name = "sample" })
  local a, b, c, d = p:temporary("a", N), p:temporary("b", N), p:temporary("c", N), p:temporary("d", N)
  p:fill(a, 1.0):fill(b, 2.0):fill(c, 3.0):fill(d, 4.0)
  local r1, r2, r3 = p:temporary("r1", N), p:temporary("r2", N), p:temporary("r3", N)
  local y, z = p:temporary("y", N), p:temporary("z", N)
  p:call(add, a, b, r1)
  p:call(mul, r1, c, r2)
  p:call(sub, r2, a, r3)
  p:call(scale, d, p:scalar("alpha", 0.5), y)
  p:call(twice, y, z)
  return p
end

describe("gpurun.pipeline plans", function()
  it("orders stages by read-after-write, write-after-read and write-after-write", function()
    local p = gpurun.pipeline{ name = "hazards", fuse = false }
    local x, y = p:temporary("x", N), p:temporary("y", N)
    p:fill(x, 1.0, { name = "w1" })
    p:call{ twice, x, y, name = "r1" }     -- RAW on x
    p:fill(x, 2.0, { name = "w2" })        -- WAR on x (after r1), WAW (after w1)
    p:call{ twice, x, y, name = "r2" }     -- RAW on x, WAW on y
    local plan = p:plan()
    assert.are.equal("r1>r2:y:WAW r1>w2:x:WAR w1>r1:x:RAW w2>r2:x:RAW", edge_set(plan))
    -- w1 -> w2 (WAW) is implied by w1 -> r1 -> w2: the frontier leaves it out.
    for _, e in ipairs(plan.edges) do
      assert.is_true(e.from < e.to)
      assert.are.equal(({ RAW = "read after write", WAR = "write after read", WAW = "write after write" })[e.hazard], e.why)
    end
  end)

  it("orders overlapping views of one buffer, and leaves disjoint views apart", function()
    local p = gpurun.pipeline{ name = "views", fuse = false }
    local base = p:temporary("base", 100)
    local left, right = p:view("left", base, 1, 50), p:view("right", base, 51, 50)
    local middle = p:view("middle", base, 40, 20)
    p:fill(left, 1.0, { name = "fill_left" })
    p:fill(right, 2.0, { name = "fill_right" })
    p:fill(middle, 3.0, { name = "fill_middle" })
    local plan = p:plan()
    assert.are.equal("fill_left>fill_middle:middle:WAW fill_right>fill_middle:middle:WAW", edge_set(plan))
    assert.are.equal(2, #plan.streams) -- the two halves side by side
    -- A view of a view is a view of the base.
    local inner = p:view("inner", middle, 2, 5)
    p:fill(inner, 4.0, { name = "fill_inner" })
    plan = p:plan()
    local found = false
    for _, e in ipairs(plan.edges) do
      if plan.stages[e.to].name == "fill_inner" then
        found = true
        assert.are.equal("fill_middle", plan.stages[e.from].name)
      end
    end
    assert.is_true(found)
  end)

  it("puts independent branches on their own streams, with the waits the join needs", function()
    local p = sample()
    local plan = p:plan()
    assert.are.equal(#plan.stages, 9)
    local joins = 0
    for _, unit in ipairs(plan.units) do
      for _, w in ipairs(unit.waits) do
        joins = joins + 1
        assert.are_not.equal(plan.units[w].stream, unit.stream)
      end
    end
    assert.is_true(#plan.streams >= 2)
    assert.is_true(joins >= 1)
  end)

  it("fuses the add -> mul -> sub chain into one kernel, its intermediates in registers", function()
    local plan = sample():plan()
    assert.are.equal(1, #plan.groups)
    local group = plan.groups[1]
    assert.are.equal("add,mul,sub", names(plan, group.stages))
    assert.are.same({ "r1", "r2" }, group.in_registers)
    assert.are.same({ "r3" }, group.written)
    assert.are.equal("sample_add_mul_sub", group.kernel)
    local where = {}
    for _, t in ipairs(plan.temporaries) do where[t.name] = t.where end
    assert.are.equal("registers", where.r1)
    assert.are.equal("registers", where.r2)
    assert.are.equal("pool", where.r3)
    assert.are.equal("pool", where.y)
    -- scale is not fused with twice: twice is not one `y = expression`.
    assert.matches("not one `y = expression`", plan.stages[9].not_fused, 1, true)
  end)

  it("writes fused kernels NVRTC compiles", function()
    local plan = sample():plan{ sources = true }
    local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" }
    for _, group in ipairs(plan.groups) do
      local program <close> = gpurun.Program(group.source, "c++", options)
      local code <close> = program:compile("ptx")
      assert.truthy(code.code:find(group.kernel .. "_scalar", 1, true))
    end
  end)

  it("keeps a fused value in memory when another stage reads it", function()
    local p = gpurun.pipeline{ name = "kept" }
    local a, b = p:temporary("a", N), p:temporary("b", N)
    p:fill(a, 1.0):fill(b, 2.0)
    local r1, r2, r3 = p:temporary("r1", N), p:temporary("r2", N), p:temporary("r3", N)
    p:call(add, a, b, r1)
    p:call(mul, r1, b, r2)
    p:call(twice, r1, r3) -- reads r1 too, and is not fused
    local plan = p:plan()
    assert.are.equal(1, #plan.groups)
    assert.are.same({}, plan.groups[1].in_registers)
    assert.are.same({ "r1", "r2" }, plan.groups[1].written)
  end)

  it("writes a data twice in a fused group as two versions, the last one stored", function()
    local p = gpurun.pipeline{ name = "versions" }
    local a = p:temporary("a", N)
    p:fill(a, 1.0)
    local x = p:temporary("x", N)
    p:call(add, a, a, x)
    p:call(mul, x, x, x) -- in place
    p:call(add, x, a, x)
    p:call(twice, x, p:temporary("out", N))
    local plan = p:plan{ sources = true }
    assert.are.equal(1, #plan.groups)
    local source = plan.groups[1].source
    assert.truthy(source:find("x_3", 1, true), source)
    assert.truthy(source:find("x_4", 1, true), source)
    local program <close> = gpurun.Program(source, "c++", gpurun.ProgramOptions{ std = "c++17", arch = "sm_90" })
    program:compile("ptx"):close()
  end)

  it("does not fuse what would form a cycle, or stages of other sizes", function()
    local p = gpurun.pipeline{ name = "cycle" }
    local a, b = p:temporary("a", N), p:temporary("b", N)
    p:fill(a, 1.0):fill(b, 1.0)
    local r1, r2, r3 = p:temporary("r1", N), p:temporary("r2", N), p:temporary("r3", N)
    p:call(add, a, b, r1)          -- 3
    p:copy(r2, r1)                 -- 4: reads r1
    p:call(mul, r1, r2, r3)        -- 5: reads r1 and r2 (which follows 3): no fusion with 3
    local plan = p:plan()
    assert.are.equal(0, #plan.groups)
    local q = gpurun.pipeline{ name = "sizes" }
    local small, big = q:temporary("small", 16), q:temporary("big", N)
    local s2 = q:temporary("s2", 16)
    q:fill(small, 1.0):fill(big, 1.0)
    q:call(add, small, small, s2)
    q:call(twice, s2, q:temporary("s3", 16))
    assert.are.equal(0, #q:plan().groups)
  end)

  it("reports what nothing wrote and the host never filled, or refuses it when strict", function()
    local p = gpurun.pipeline{ name = "unwritten" }
    local t, out = p:temporary("t", N), p:temporary("out", N)
    p:call(twice, t, out)
    p:temporary("unused", 4)
    local warnings = p:plan().warnings
    assert.are.equal(2, #warnings)
    assert.matches("stage 'twice' reads 't', which no earlier stage writes and the host never filled", warnings[1], 1, true)
    assert.matches("temporary 'unused' is declared but no stage uses it", warnings[2], 1, true)
    local strict = gpurun.pipeline{ name = "strict", strict = true }
    strict:call(twice, strict:temporary("t", N), strict:temporary("out", N))
    local ok, err = pcall(strict.plan, strict)
    assert.is_false(ok)
    assert.matches("pipeline 'strict': stage 'twice' reads 't', which no earlier stage writes and "
                   .. "the host never filled (strict)", err, 1, true)
  end)

  it("takes declared reads and writes over the inferred ones, and adds others", function()
    local p = gpurun.pipeline{ name = "declared", fuse = false }
    local x, y, z = p:temporary("x", N), p:temporary("y", N), p:temporary("z", N)
    p:fill(x, 1.0):fill(z, 0.0)
    p:call{ twice, x, y, writes = { z } }  -- it also writes z (say, through an index it holds)
    p:call{ twice, z, x, name = "after" }
    local plan = p:plan()
    local found = false
    for _, e in ipairs(plan.edges) do
      if plan.stages[e.from].name == "twice" and plan.stages[e.to].name == "after" then
        found = true -- through x (WAR) and z (RAW): one edge, its first cause named
      end
    end
    assert.is_true(found)
    assert.are.same({ "x" }, plan.stages[3].reads)
    assert.are.same({ "y", "z" }, plan.stages[3].writes)
  end)

  it("refuses a declared write to what the code only reads", function()
    local p = gpurun.pipeline{ name = "const" }
    local x, y = p:temporary("x", N), p:temporary("y", N)
    local ok, err = pcall(p.call, p, { twice, x, y, writes = { x } })
    assert.is_false(ok)
    assert.matches("pipeline 'const': stage 'twice' declares a write to 'x', but its code only "
                   .. "reads it (input x)", err, 1, true)
  end)

  it("makes a host callback without reads or writes a barrier", function()
    local p = gpurun.pipeline{ name = "barrier", fuse = false }
    local x, y = p:temporary("x", N), p:temporary("y", N)
    p:fill(x, 1.0, { name = "fx" }):fill(y, 1.0, { name = "fy" })
    p:host(function() end, { name = "log" })
    p:fill(x, 2.0, { name = "after" })
    local plan = p:plan()
    local into, out = {}, {}
    for _, e in ipairs(plan.edges) do
      if plan.stages[e.to].name == "log" then into[#into + 1] = plan.stages[e.from].name end
      if plan.stages[e.from].name == "log" then out[#out + 1] = plan.stages[e.to].name end
    end
    table.sort(into)
    assert.are.same({ "fx", "fy" }, into)
    assert.are.same({ "after" }, out)
    local q = gpurun.pipeline{ name = "host_data", fuse = false }
    local state = q:buffer("state", {})
    local t = q:temporary("t", N)
    q:fill(t, 1.0, { name = "ft" })
    q:host(function() end, { name = "h", writes = { state } })
    assert.are.equal(0, #q:plan().edges) -- nothing in common
  end)

  it("plans a cuBLAS product as a stage: a and b read, out written, read too where beta is not 0", function()
    local p = gpurun.pipeline{ name = "mm" }
    local x, w = p:temporary("x", 64 * 32), p:temporary("w", 32 * 16)
    local h, y = p:temporary("h", 64 * 16), p:temporary("y", 64 * 16)
    p:fill(x, 1.0, { name = "fx" }):fill(w, 1.0, { name = "fw" }):fill(h, 0.0, { name = "fh" })
    p:matmul({ buffer = x, rows = 64, cols = 32 }, { buffer = w, rows = 32, cols = 16 },
             { buffer = h, rows = 64, cols = 16 }, { beta = 1, name = "gemm" })
    p:call(scale, h, p:scalar("alpha", 2.0), y)
    local plan = p:plan()
    assert.are.equal("fh>gemm:h:RAW fw>gemm:w:RAW fx>gemm:x:RAW gemm>scale:h:RAW", edge_set(plan))
    local gemm = plan.stages[4]
    assert.are.equal("matmul", gemm.kind)
    assert.are.same({ "x", "w", "h" }, { gemm.reads[1], gemm.reads[2], gemm.reads[3] })
    assert.truthy(p:explain():find("gemm             matmul reads x, w, h; writes h", 1, true))
    -- beta 0: out is only written, so the fill before it is overwritten, not waited for
    local q = gpurun.pipeline{ name = "mm0" }
    local a, c = q:temporary("a", 16), q:temporary("c", 16)
    q:fill(a, 1.0, { name = "fa" }):fill(c, 5.0, { name = "fc" })
    q:matmul({ buffer = a, rows = 4, cols = 4 }, { buffer = a, rows = 4, cols = 4 },
             { buffer = c, rows = 4, cols = 4, batch = 1 }, { transa = true, name = "gemm" })
    assert.are.equal("fa>gemm:a:RAW fc>gemm:c:WAW", edge_set(q:plan()))
  end)

  it("plans a product with an epilogue: its bias is read, checked as declared", function()
    local p = gpurun.pipeline{ name = "mmlt" }
    local x, w = p:temporary("x", 8 * 4), p:temporary("w", 4 * 6)
    local bias, h = p:temporary("bias", 6), p:temporary("h", 8 * 6)
    p:fill(x, 1.0, { name = "fx" }):fill(w, 1.0, { name = "fw" }):fill(bias, 0.5, { name = "fb" })
    p:matmul({ buffer = x, rows = 8, cols = 4 }, { buffer = w, rows = 4, cols = 6 },
             { buffer = h, rows = 8, cols = 6 }, { epilogue = "gelu_bias", bias = bias, name = "gemm" })
    assert.are.equal("fb>gemm:bias:RAW fw>gemm:w:RAW fx>gemm:x:RAW", edge_set(p:plan()))
    assert.truthy(p:explain():find("gemm             matmul reads x, w, bias; writes h", 1, true))
    local short = p:temporary("short", 5)
    local ok, message = pcall(p.matmul, p, { buffer = x, rows = 8, cols = 4 },
      { buffer = w, rows = 4, cols = 6 }, { buffer = h, rows = 8, cols = 6 },
      { epilogue = "relu_bias", bias = short })
    assert.is_false(ok)
    assert.truthy(message:find("pipeline 'mmlt': stage 'matmul h = x w': options.bias has 5 elements "
                               .. "but out has 6 cols: one per column is needed", 1, true), message)
  end)

  it("refuses a cuBLAS product across devices, and shapes that do not fit", function()
    local p = gpurun.pipeline{ name = "mmsplit", devices = { 0, 1 } }
    local x = p:temporary("x", 16)
    p:matmul({ buffer = x, rows = 4, cols = 4 }, { buffer = x, rows = 4, cols = 4 },
             { buffer = p:temporary("y", 16), rows = 4, cols = 4 })
    local ok, message = pcall(p.run, p) -- slicing comes before the stream
    assert.is_false(ok)
    assert.truthy(message:find("stage 'matmul y = x x' (a matmul stage) does not work element by element", 1,
                               true))
    local q = gpurun.pipeline{ name = "mmbad" }
    local a = q:temporary("a", 24)
    ok, message = pcall(q.matmul, q, { buffer = a, rows = 4, cols = 6 }, { buffer = a, rows = 4, cols = 6 },
                        { buffer = a, rows = 4, cols = 6 }, { transb = true })
    assert.is_false(ok)
    assert.truthy(message:find("pipeline 'mmbad': stage 'matmul a = a a': n does not fit: out has 6 cols, "
                               .. "transposed b gives 4", 1, true), message)
  end)

  it("plans a sort as a stage: keys in place read and written, or read into out", function()
    local p = gpurun.pipeline{ name = "srt" }
    local k, v = p:temporary("k", 64, "uint32"), p:temporary("v", 64, "float32")
    local ks, vs = p:temporary("ks", 64, "uint32"), p:temporary("vs", 64, "float32")
    p:fill(k, 3, { name = "fk" }):fill(v, 1.0, { name = "fv" })
    p:sort(k, { values = v, name = "inplace" })
    p:sort(k, { out = ks, values = v, values_out = vs, descending = true, name = "into" })
    p:fill(k, 0, { name = "reset" })
    local plan = p:plan()
    assert.are.equal("fk>inplace:k:RAW fv>inplace:v:RAW inplace>into:k:RAW into>reset:k:WAR",
                     edge_set(plan))
    assert.are.equal("sort", plan.stages[3].kind)
    assert.truthy(p:explain():find("4 into             sort   reads k, v; writes ks, vs", 1, true), p:explain())
    -- out may be the keys themselves (in place), as gpurun.sort allows
    local q = gpurun.pipeline{ name = "srt1" }
    local a = q:temporary("a", 8, "int64")
    q:sort(a, { out = a })
    assert.are.equal("sort", q:plan().stages[1].kind)
  end)

  it("refuses sorts whose data does not fit, as gpurun.sort would", function()
    local p = gpurun.pipeline{ name = "srtbad" }
    local k, v = p:temporary("k", 8, "float32"), p:temporary("v", 6, "int32")
    local o = p:temporary("o", 8, "int32")
    local cases = {
      { { values = v }, "stage 'sort k': options.values has 6 elements, but keys has 8" },
      { { out = o }, "stage 'sort k': options.out must have the keys' dtype float32, got int32" },
      { { values_out = o }, "stage 'sort k': options.values_out needs options.values" },
      { { values = k }, "stage 'sort k': keys and values are the same data ('k')" },
      { { descending = 1 }, "stage 'sort k': options.descending must be a boolean, got number" },
      { { segments = p:temporary("f", 3, "float32") }, "options.segments must be int32, uint32, int64 or uint64 offsets" },
      { { stream = 1 }, "pipeline 'srtbad': sort: unknown option 'stream'" },
      { { values = p:temporary("c", 8, "complex64") },
        "stage 'sort k': options.values has dtype complex64; sorts take real dtypes, not complex ones" },
    }
    for _, case in ipairs(cases) do
      local ok, message = pcall(p.sort, p, k, case[1])
      assert.is_false(ok)
      assert.truthy(message:find(case[2], 1, true), message)
    end
    local ok, message = pcall(p.sort, p, p:temporary("z", 8, "complex128"))
    assert.is_false(ok)
    assert.truthy(message:find("stage 'sort z': keys has dtype complex128; sorts take real dtypes, not "
                               .. "complex ones", 1, true), message)
    p:buffers{ state = {} }
    ok, message = pcall(p.sort, p, "state")
    assert.is_false(ok)
    assert.truthy(message:find("stage 'sort state': keys ('state') is host memory; gpurun.sort takes device "
                               .. "buffers", 1, true), message)
    ok, message = pcall(p.sort, p, "nothing")
    assert.is_false(ok)
    assert.truthy(message:find("sort keys: a declared buffer, temporary or view", 1, true), message)
  end)

  it("plans FFTs as stages: input read, output written, in place read and written", function()
    local p = gpurun.pipeline{ name = "ffts" }
    local r, s = p:temporary("r", 64, "float32"), p:temporary("s", 64, "float32")
    local h = p:temporary("h", 33, "complex64")
    local x, y = p:temporary("x", 4 * 16, "complex64"), p:temporary("y", 4 * 16, "complex64")
    p:fill(r, 1.0, { name = "fr" })
    p:fft(r, h, { kind = "r2c", name = "rfft" })
    p:call(scale, r, p:scalar("alpha", 2.0), s)                 -- reads r beside rfft
    p:fft(x, y, { shape = { 4, 4 }, batch = 4, name = "fwd" })
    p:fft(y, y, { shape = 16, batch = 4, direction = "inverse", name = "inv" })
    p:fft(h, r, { kind = "c2r", name = "back" })                -- after rfft and scale read r
    local plan = p:plan()
    -- back writes r after rfft and scale read it (and reads h after rfft wrote it)
    assert.are.equal("fr>rfft:r:RAW fr>scale:r:RAW fwd>inv:y:RAW rfft>back:r:WAR scale>back:r:WAR", edge_set(plan))
    local kinds = {}
    for i, stage in ipairs(plan.stages) do kinds[i] = stage.kind end
    assert.are.same({ "fill", "fft", "call", "fft", "fft", "fft" }, kinds)
    local text = p:explain()
    assert.truthy(text:find("rfft             fft    reads r; writes h", 1, true), text)
    assert.truthy(text:find("inv              fft    reads y; writes y", 1, true), text)
    -- cuFFT's c2r may overwrite its input: h is written too
    assert.truthy(text:find("back             fft    reads h; writes r, h", 1, true), text)
    -- the default shape: the whole input, over the batch
    local q = gpurun.pipeline{ name = "fft1" }
    local a, b = q:temporary("a", 12, "complex128"), q:temporary("b", 12, "complex128")
    q:fft(a, b, { batch = 3 })
    assert.are.equal("fft", q:plan().stages[1].kind)
    assert.has_error(function() q:fft(a, b, { batch = 5 }) end,
      "pipeline 'fft1': stage 'fft b = a': input has 12 elements; the c2c plan of shape (2,) and batch 5 reads 10")
  end)

  it("refuses FFTs whose data does not fit, as gpurun.fft would", function()
    local p = gpurun.pipeline{ name = "fftbad" }
    local x, y = p:temporary("x", 16, "complex64"), p:temporary("y", 16, "complex64")
    local r, d = p:temporary("r", 16, "float32"), p:temporary("d", 16, "complex128")
    local cases = {
      { x, r, nil, "stage 'fft r = x': output has dtype float32; the c2c plan's output is complex64" },
      { x, d, nil, "stage 'fft d = x': output has dtype complex128; the c2c plan's output is complex64" },
      { r, r, { kind = "r2c" }, "stage 'fft r = r': output has dtype float32; the r2c plan's output is complex64" },
      { r, x, { kind = "r2c" }, "stage 'fft x = r': output has 16 elements; the r2c plan of shape (16,) writes 9 "
        .. "(its last dimension 16 // 2 + 1 = 9)" },
      { x, y, { kind = "c2r", shape = 30 }, "stage 'fft y = x': output has dtype complex64; the c2r plan's output is "
        .. "float32" },
      { x, x, { kind = "c2c", shape = { 4, 5 } }, "stage 'fft x = x': input has 16 elements; the c2c plan of shape "
        .. "(4, 5) reads 20" },
      { x, y, { direction = "sideways" }, "options.direction must be 'forward' or 'inverse', got 'sideways'" },
      { x, y, { shape = "16" }, "options.shape must be a positive integer or a sequence of 1 to 3, got string" },
      { x, y, { stream = 1 }, "pipeline 'fftbad': fft: unknown option 'stream'" },
    }
    for _, case in ipairs(cases) do
      local ok, message = pcall(p.fft, p, case[1], case[2], case[3])
      assert.is_false(ok)
      assert.truthy(message:find(case[4], 1, true), message)
    end
    p:buffers{ state = {} }
    local ok, message = pcall(p.fft, p, "state", y)
    assert.is_false(ok)
    assert.truthy(message:find("stage 'fft y = state': input ('state') is host memory; gpurun.fft takes device "
                               .. "buffers", 1, true), message)
  end)

  it("plans a sparse product as a stage: A's parts and x read, y written, read too where beta is not 0", function()
    local p = gpurun.pipeline{ name = "spmvs" }
    local offsets, indices = p:temporary("offsets", 5, "int32"), p:temporary("indices", 10, "int32")
    local values, x = p:temporary("values", 10, "float32"), p:temporary("x", 4, "float32")
    local y, z = p:temporary("y", 4, "float32"), p:temporary("z", 4, "float32")
    local A = { row_offsets = offsets, col_indices = indices, values = values, rows = 4, cols = 4 }
    p:fill(x, 1.0, { name = "fx" }):fill(y, 0.5, { name = "fy" })
    p:call{ scale, values, p:scalar("alpha", 2.0), values, name = "scale_values" }
    p:spmv(A, x, y, { alpha = 2, beta = 1, name = "mv" })
    p:spmv(A, y, z, { transpose = true, name = "mvt" })
    p:fill(values, 0.0, { name = "reset" })
    local plan = p:plan()
    assert.are.equal("fx>mv:x:RAW fy>mv:y:RAW mv>mvt:y:RAW mv>reset:values:WAR mvt>reset:values:WAR "
                     .. "scale_values>mv:values:RAW scale_values>mvt:values:RAW", edge_set(plan))
    local text = p:explain()
    assert.truthy(text:find("mv               spmv   reads offsets, indices, values, x, y; writes y", 1, true), text)
    assert.truthy(text:find("mvt              spmv   reads offsets, indices, values, y; writes z", 1, true), text)
    -- beta 0: y is only written, so a fill before it is overwritten, not waited for
    local q = gpurun.pipeline{ name = "spmv0" }
    local qx, qy = q:temporary("x", 4), q:temporary("y", 4)
    q:fill(qy, 1.0, { name = "fy" })
    q:spmv({ row_offsets = q:temporary("o", 5, "int32"), col_indices = q:temporary("c", 4, "int32"),
             values = q:temporary("v", 4), rows = 4, cols = 4 }, qx, qy, { name = "mv" })
    assert.are.equal("fy>mv:y:WAW", edge_set(q:plan()))
  end)

  it("refuses sparse products whose data does not fit, as gpurun.csr and gpurun.spmv would", function()
    local p = gpurun.pipeline{ name = "spbad" }
    local o, c, v = p:temporary("o", 5, "int32"), p:temporary("c", 8, "int32"), p:temporary("v", 8)
    local x, y, x3 = p:temporary("x", 4), p:temporary("y", 4), p:temporary("x3", 3)
    local function A(rows, cols, parts)
      parts = parts or {}
      return { row_offsets = parts.o or o, col_indices = parts.c or c, values = parts.v or v, rows = rows, cols = cols }
    end
    local cases = {
      { A(3, 4), x, y, nil, "A: row_offsets must hold rows + 1 = 4 offsets, got 5" },
      { A(4, 4, { c = p:temporary("c7", 7, "int32") }), x, y, nil, "A: nnz does not fit: 7 col_indices but 8 values" },
      { A(4, 3), x, y, nil, "x must hold 3 elements (the cols of A), got 4" },
      { A(4, 3), x3, y, { transpose = true }, "x must hold 4 elements (the rows of A), got 3" },
      { A(4, 4, { v = p:temporary("v64", 8, "float64") }), x, y, nil, "x has dtype float32 but A float64" },
      { A(4, 4), x, x, nil, "x and y are the same data ('x')" },
      { A(4, 4), x, y, { beta = true }, "options.beta must be a number, got boolean" },
      { A(4, 4), x, y, { alpha = -1e39 }, "options.alpha -1e+39 is out of range for float32 (the compute dtype)" },
      { A(1 << 31, 4), x, y, nil, "A.rows must be 1..2147483647 (int32 indices), got 2147483648" },
      { A(4, 4.5), x, y, nil, "A.cols must be an integer, got 4.5" },
      { "o", x, y, nil, "A must be a gpurun.CsrMatrix or a table" },
      { A(4, 4), x, y, { stream = 1 }, "pipeline 'spbad': spmv: unknown option 'stream'" },
    }
    for _, case in ipairs(cases) do
      local ok, message = pcall(p.spmv, p, case[1], case[2], case[3], case[4])
      assert.is_false(ok)
      assert.truthy(message:find(case[5], 1, true), message)
    end
  end)

  it("explains the plan and draws it", function()
    local p = sample()
    local text = p:explain()
    for _, part in ipairs({ "pipeline 'sample': 9 stages", "edges:", "add -> mul  r1: read after write (RAW)",
        "streams:", "stream 1:", "fusion groups:", "one kernel 'sample_add_mul_sub', writes r3; r1, r2 in registers",
        "temporaries:", "r1: 4096 x float32 (16.0 KiB), in registers (fused: never made)", "not fusable" }) do
      assert.truthy(text:find(part, 1, true), part .. "\n" .. text)
    end
    local dot = p:to_dot{ title = "the sample" }
    assert.truthy(dot:find('digraph "sample" {', 1, true))
    assert.truthy(dot:find('label="the sample"', 1, true))
    assert.truthy(dot:find("subgraph cluster_stream_2", 1, true))
    assert.truthy(dot:find("peripheries=2", 1, true)) -- the fused unit
    assert.truthy(dot:find("RAW", 1, true))
    assert.truthy(dot:match("}\n$"))
  end)

  it("orders two calls of one reduction kernel object, whose temporaries are its own", function()
    -- gpurun.reduction's kernels keep temporaries per object (kind "reduction kernel").
    local rsum = setmetatable({ kind = "reduction kernel", name = "rsum", params = {
      { name = "x", type = "float32" },
      { name = "total", type = "float32", output = true, result = true } } }, {})
    local p = gpurun.pipeline{ name = "two_sums" }
    local a, b = p:temporary("a", N), p:temporary("b", N)
    local s1, s2 = p:temporary("s1", 1), p:temporary("s2", 1)
    p:fill(a, 1.0):fill(b, 2.0)
    p:call{ rsum, a, s1, name = "sum a" }
    p:call{ rsum, b, s2, name = "sum b" }
    assert.matches("sum a>sum b:state of 'rsum':WAW", edge_set(p:plan()), 1, true)
    -- Two kernels of their own run side by side.
    local other = setmetatable({ kind = "reduction kernel", name = "rsum2", params = rsum.params }, {})
    local q = gpurun.pipeline{ name = "two_kernels" }
    local c, d = q:temporary("c", N), q:temporary("d", N)
    q:fill(c, 1.0):fill(d, 2.0)
    q:call(rsum, c, q:temporary("t1", 1))
    q:call(other, d, q:temporary("t2", 1))
    assert.are.equal(2, #q:plan().streams)
  end)

  it("plans again after a new stage, and caches the plan until then", function()
    local p = sample()
    local schedule = require("gpurun.pipeline.schedule")
    local first = schedule.of(p)
    assert.are.equal(first, schedule.of(p))
    p:fill(p:temporary("late", 4), 0.0)
    assert.are_not.equal(first, schedule.of(p))
  end)

  it("plans 1,000 stages in well under a second", function()
    local p = gpurun.pipeline{ name = "big", fuse = true }
    local data = {}
    for i = 1, 32 do
      data[i] = p:temporary("t" .. i, 256)
      p:fill(data[i], 0.0)
    end
    local random = math.random
    math.randomseed(7)
    for _ = 1, 1000 - 32 do
      local a, b, r = data[random(32)], data[random(32)], data[random(32)]
      p:call(random(2) == 1 and add or sub, a, b, r)
    end
    local started = os.clock() -- CPU time: a loaded machine does not stretch it
    local plan = p:plan()
    local seconds = os.clock() - started
    assert.are.equal(1000, #plan.stages)
    assert.is_true(seconds < 1, ("%.3f s"):format(seconds))
  end)
end)

describe("gpurun.pipeline refuses", function()
  local function refuses(expected, f, ...)
    local ok, err = pcall(f, ...)
    assert.is_false(ok)
    assert.matches(expected, err, 1, true)
    -- At the caller's line, not inside gpurun.
    assert.is_nil(tostring(err):find("gpurun/pipeline/", 1, true), err)
  end

  it("bad declarations, naming the pipeline and the stage", function()
    local p = gpurun.pipeline{ name = "bad" }
    local x = p:temporary("x", N)
    refuses("pipeline 'bad': temporary: the name 'x' is taken already", p.temporary, p, "x", 4)
    refuses("pipeline 'bad': temporary 'y': the count must be an integer from 1 to 2^40, got 0", p.temporary, p, "y", 0)
    refuses("pipeline 'bad': temporary 'y': unknown dtype complex32", p.temporary, p, "y", 4, "complex32")
    refuses("pipeline 'bad': scalar 's': a number expected, got string", p.scalar, p, "s", "1")
    refuses("pipeline 'bad': view 'v': first must be an element of 'x' (1 to 4096), got 0", p.view, p, "v", x, 0)
    refuses("pipeline 'bad': view 'v': count must be from 1 to 96, got 100", p.view, p, "v", x, 4001, 100)
    refuses("pipeline 'bad': stage 'twice': 'twice' takes 2 arguments (x, y), got 1", p.call, p, twice, x)
    refuses("pipeline 'bad': stage 'twice': argument 2 (y), 'nope', names no declared data or scalar", p.call, p, twice, x, "nope")
    refuses("pipeline 'bad': stage 'twice': output y must be data", p.call, p, twice, x, 5)
    refuses("pipeline 'bad': call: a kernel object with params", p.call, p, 5)
    refuses("pipeline 'bad': launch: a gpurun.Kernel expected first, got number", p.launch, p, 5)
    refuses("pipeline 'bad': fill destination: a declared buffer, temporary or view", p.fill, p, "nope", 1)
    refuses("pipeline 'bad': stage 'fill x': the fill value must be a number, got string", p.fill, p, x, "1")
    refuses("pipeline 'bad': host: a function expected, got number", p.host, p, 5)
    refuses("pipeline 'bad': stage 'copy x <- s8': 'x' is 4096 x float32 and 's8' 8 x float32 (a copy "
            .. "takes two of one size and dtype", p.copy, p, x, p:temporary("s8", 8))
    refuses("pipeline 'bad': call: unknown option 'nope' (known: name, reads, writes)", p.call, p,
            { twice, x, x, nope = 1 })
    local i = p:temporary("i", N, "int32")
    refuses("pipeline 'bad': stage 'twice': x is float32, but 'i' is int32", p.call, p, twice, i, x)
    local small = p:temporary("small", 8)
    refuses("pipeline 'bad': stage 'twice': 'small' has 8 elements, but the kernel's other buffers 4096", p.call, p, twice, x, small)
    refuses("pipeline 'bad' has no stages", p.plan, p)
    local other = gpurun.pipeline{ name = "other" }
    refuses("pipeline 'other': 'x' belongs to another pipeline", other.fill, other, x, 1)
    refuses("pipeline 'bad': to_dot: options must be a table", p.to_dot, p, 5)
  end)

  it("at declaration what running would refuse, so the plan never shows it as fine", function()
    local p = gpurun.pipeline{ name = "early" }
    local x, y = p:temporary("x", N), p:temporary("y", N)
    local i8, i32 = p:temporary("i8", N, "int8"), p:temporary("i32", N, "int32")
    local scaled = gpurun.elementwise("float32 a, float32 s", "float32 r", "r = a * s", "scaled")
    p:fill(x, 1.0)
    local before = p:explain()
    for _, value in ipairs({ print, coroutine.create(function() end), io.stdout, {}, true }) do
      refuses("pipeline 'early': stage 'scaled': argument 2 (float32 s): a gpurun.Buffer, a gpurun scalar "
              .. "or a number expected, got", p.call, p, scaled, x, value, y)
    end
    refuses("pipeline 'early': stage 'scaled': argument 2 (float32 s): a gpurun.Buffer, a gpurun scalar "
            .. "or a number expected, got nil", p.call, p, scaled, x, nil, y)
    refuses("pipeline 'early': stage 'scaled': argument 2 (float32 s): 1e+300 out of range for float32",
            p.call, p, scaled, x, 1e300, y)
    refuses("pipeline 'early': stage 'fill i8': the fill value for 'i8': 1000 out of range for int8",
            p.fill, p, i8, 1000)
    refuses("pipeline 'early': stage 'fill i32': the fill value for 'i32': integer expected for int32",
            p.fill, p, i32, 0 / 0)
    refuses("pipeline 'early': scalar 's': 1e+300 out of range for float32", p.scalar, p, "s", 1e300, "float32")
    local big = p:scalar("big", 1e300)
    refuses("pipeline 'early': stage 'scaled': argument 2 (float32 s): scalar 'big': 1e+300 out of range",
            p.call, p, scaled, x, big, y)
    assert.are.equal(before, p:explain())
    assert.are.equal(1, #p:plan().stages)
    p:call(scaled, x, 0.5, y) -- what a launch takes, it takes
    assert.are.equal(2, #p:plan().stages)
  end)

  it("a table that only names itself a gpurun.Buffer, and a dtype that cannot be shown, "
     .. "naming the argument", function()
    local p = gpurun.pipeline{ name = "liars" }
    local t = p:temporary("t", N)
    local fake = setmetatable({}, { __name = "gpurun.Buffer" })
    local NAMED = "a gpurun.Buffer expected, got table named gpurun.Buffer (its ptr is nil)"
    refuses("pipeline 'liars': buffer 'b': " .. NAMED, p.buffer, p, "b", fake)
    refuses("pipeline 'liars': stage 'twice': argument 1 (x): " .. NAMED, p.call, p, twice, fake, t)
    refuses("pipeline 'liars': fill destination: " .. NAMED, p.fill, p, fake, 1)
    refuses("pipeline 'liars': copy source: " .. NAMED, p.copy, p, t, fake)
    refuses("pipeline 'liars': view 'v': " .. NAMED, p.view, p, "v", fake, 1)
    local lying = setmetatable({}, { __tostring = function() return {} end })
    refuses("pipeline 'liars': temporary 'd': a dtype name (one of float32,", p.temporary, p, "d", 4, lying)
    refuses("pipeline 'liars': scalar 's': a dtype name (one of float32,", p.scalar, p, "s", 1, lying)
    refuses("gpurun.pipeline: options must be a plain table (no metatable), got a table with a metatable",
            gpurun.pipeline, setmetatable({}, {}))
  end)

  it("a method called on what is not a pipeline (p.fill(x) for p:fill(x)), naming the method", function()
    local p = sample()
    local raising = setmetatable({}, { __index = function() error("indexed") end, __name = "gpurun.Buffer" })
    for _, name in ipairs({ "buffer", "temporary", "call", "fill", "plan", "explain", "run", "set", "close" }) do
      refuses(("pipeline method '%s': a pipeline expected as self (p:%s(...)), got table"):format(name, name),
              p[name], {}, "x")
      refuses(("pipeline method '%s': a pipeline expected as self (p:%s(...)), got table named gpurun.Buffer")
              :format(name, name), p[name], raising)
      refuses(("pipeline method '%s': a pipeline expected as self (p:%s(...)), got nil"):format(name, name),
              p[name])
    end
    local split = gpurun.pipeline{ name = "split", devices = { 0, 1 } }
    refuses("pipeline method 'run': a pipeline expected as self (p:run(...)), got table", split.run, {})
  end)

  it("bad runs, without a GPU", function()
    local p = sample()
    refuses("pipeline 'sample': run: a gpurun.Stream expected, got nil", p.run, p, nil)
    refuses("pipeline 'sample': set: 'nope' names no scalar or data of this pipeline", p.set, p, "nope", 1)
    refuses("pipeline 'sample': set: scalar 'alpha' takes a number, got string", p.set, p, "alpha", "x")
    refuses("pipeline 'sample': set: 'a' is a temporary; it takes no buffer (the pipeline makes it)", p.set, p, "a", 1)
    refuses("pipeline 'sample': timings: no timed run", p.timings, p)
  end)
end)

describe("gpurun.pipeline over devices", function()
  it("explains how it splits, and refuses what does not split, before using a GPU", function()
    local p = gpurun.pipeline{ name = "split", devices = { 0, 1 } }
    local a, t = p:temporary("a", 9), p:temporary("t", 9)
    p:fill(a, 1.0)
    p:call(twice, a, t)
    local text = p:explain()
    assert.truthy(text:find("devices: split over 2 devices (0, 1)", 1, true), text)
    assert.truthy(text:find("device 0: elements 1..5", 1, true), text)
    assert.truthy(text:find("device 1: elements 6..9", 1, true), text)
    local function refused(q, expected)
      local ok, err = pcall(q.run, q)
      assert.is_false(ok)
      assert.matches(expected, err, 1, true)
    end
    local host = gpurun.pipeline{ name = "h", devices = { 0 } }
    host:host(function() end)
    refused(host, "stage 'host' (a host callback) does not work element by element")
    local sizes = gpurun.pipeline{ name = "s", devices = { 0 } }
    sizes:fill(sizes:temporary("x", 4), 0.0)
    sizes:fill(sizes:temporary("y", 8), 0.0)
    refused(sizes, "'y' has 8 elements, others 4")
    local views = gpurun.pipeline{ name = "v", devices = { 0 } }
    views:fill(views:view("half", views:temporary("x", 8), 1, 4), 0.0)
    refused(views, "'half' is a view")
    -- An elementwise pipeline holding a reduction kernel reduces over all of N.
    local reducing = setmetatable({ name = "rpipe", kernels = { { kind = "reduction kernel" } },
      outputs = { "s" }, describe = function() return "" end, params = {
        { name = "x", type = "float32" }, { name = "s", type = "float32", output = true } } }, {})
    local reduced = gpurun.pipeline{ name = "r", devices = { 0 } }
    reduced:call(reducing, reduced:temporary("x", 4), reduced:temporary("s", 4))
    refused(reduced, "stage 'rpipe' (a kernel object that is not elementwise) does not work element by element")
    local ok, err = pcall(p.run, p, "stream")
    assert.is_false(ok)
    assert.matches("pipeline 'split' over devices: run and graph take no stream", err, 1, true)
  end)
end)

describe("gpurun.pipeline.access", function()
  local SOURCE = [[
// a comment naming scale(float *in)
extern "C" __global__ void scale(const float *in, float *out, float alpha, size_t n) {}
template <typename T> __global__ void __launch_bounds__(256)
  tk(T const *__restrict__ x, T *const y, const T **z, std::pair<int, int> p) {}
extern "C" __global__ void none(void) {}
__device__ void scale_helper(float *out) {}
]]

  it("reads which pointers a kernel's declaration takes as const", function()
    local params = assert(access.declaration(SOURCE, "scale"))
    assert.are.equal(4, #params)
    assert.are.same({ true, true }, { params[1].pointer, params[1].const })
    assert.are.same({ true, false }, { params[2].pointer, params[2].const })
    assert.are.same({ false, false }, { params[3].pointer, params[3].const })
    local t = assert(access.declaration(SOURCE, "tk<float>"))
    assert.are.equal(4, #t)
    assert.is_true(t[1].const)       -- T const *
    assert.is_false(t[2].const)      -- T *const: the pointer is const, not what it points at
    assert.is_false(t[3].const)      -- a pointer to pointers
    assert.is_false(t[4].pointer)    -- the comma inside <> does not split
    assert.are.same({}, assert(access.declaration(SOURCE, "none")))
    local missing, why = access.declaration(SOURCE, "scale_helper")
    assert.is_nil(missing)
    assert.matches("no __global__ declaration of 'scale_helper'", why, 1, true)
    assert.is_nil((access.declaration(nil, "scale")))
  end)

  it("turns them into accesses, and says how", function()
    local params = access.declaration(SOURCE, "scale")
    local result = access.raw(params, { 1, 2 })
    assert.are.equal("r", result[1].mode)
    assert.matches("const in the source: const float *in", result[1].how, 1, true)
    assert.are.equal("rw", result[2].mode)
    assert.is_true(result[2].maybe_read)
    local unknown = access.raw(nil, { 1 }, "its source is not known")
    assert.are.equal("rw", unknown[1].mode)
    assert.matches("unknown (its source is not known): read and written", unknown[1].how, 1, true)
  end)

  it("finds the one expression of a fusable elementwise kernel", function()
    assert.are.equal("a + b", access.fusable(add).expression)
    assert.is_nil((access.fusable(twice)))
    assert.is_nil((access.fusable(ew("r = a; s = b", "two", "float32 a, float32 b", "float32 r, float32 s"))))
    assert.is_nil((access.fusable(ew("r += a", "acc", "float32 a", "float32 r"))))
    assert.are.equal("X + Y * c.a - d->b", access.rename("a + b * c.a - d->b", { a = "X", b = "Y" }))
  end)
end)

describe("bench/pipeline_compare.lua", function()
  local process = require("spec.support.process")

  it("refuses a count below one before touching the GPU", function()
    for _, case in ipairs({ { "--instances 0", "%-%-instances: expected a positive integer" },
                            { "--repeats 0", "%-%-repeats: expected a positive integer" },
                            { "--stages 0", "%-%-stages: expected a positive integer" },
                            { "--instances 1.5", "%-%-instances: expected a positive integer, got '1%.5'" },
                            { "--cycles -5", "%-%-cycles: expected a non%-negative integer, got '%-5'" } }) do
      local result = process.gpurun("bench/pipeline_compare.lua --plan-only " .. case[1])
      assert.are_not.equal(0, result.code, case[1])
      assert.matches(case[2], result.stderr, nil, case[1])
    end
  end)

  it("plans without a GPU with --plan-only", function()
    local result = process.gpurun("bench/pipeline_compare.lua --plan-only --stages 60 --repeats 1 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    assert.are.equal(3, #report.rows)
    for _, row in ipairs(report.rows) do
      assert.matches("^plan_", row.key)
      assert.is_true(row.declared > 0)
    end
  end)
end)
