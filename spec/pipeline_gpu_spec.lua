-- gpurun.pipeline on a GPU: declared pipelines of elementwise kernels
-- (fused), raw kernels (const read from their source), copies, fills, views
-- and host callbacks, run stage by stage and replayed as graphs, scalars set
-- in place, buffers pointed elsewhere, a change of plan, timings, a
-- pipeline over devices (one here), and memory pools and reductions where
-- gpurun has them. Every result is checked against the host.
local gpurun = require("gpurun")
local kernels = require("gpurun.samples.kernels")

local N = 4099 -- not a multiple of a vector: the tails run too

local function setup()
  local device = gpurun.Device(0)
  device:set_current()
  local stream = device:create_stream()
  return device, stream
end

local function host_values(n, f)
  local values = {}
  for i = 1, n do values[i] = f(i) end
  return values
end

local function close_enough(actual, expected, what)
  for i = 1, #expected do
    if math.abs(actual[i] - expected[i]) > 1e-5 * math.max(1, math.abs(expected[i])) then
      error(("%s: element %d is %s, expected %s"):format(what, i, tostring(actual[i]),
        tostring(expected[i])), 2)
    end
  end
end

local ew = gpurun.elementwise
local add = ew("float32 x, float32 y", "float32 r", "r = x + y", "gadd")
local mul = ew("float32 x, float32 y", "float32 r", "r = x * y", "gmul")
local sub = ew("float32 x, float32 y", "float32 r", "r = x - y", "gsub")
local scale = ew("float32 x, float32 alpha", "float32 r", "r = alpha * x", "gscale")

describe("gpurun.pipeline on the GPU", function()
  it("runs the sample fused, stage by stage and as a graph #gpu", function()
    local _, stream = setup()
    local ha = host_values(N, function(i) return i % 17 * 0.25 end)
    local hb = host_values(N, function(i) return i % 5 - 2 end)
    local hc = host_values(N, function(i) return (i % 3) + 0.5 end)
    local a, b, c = gpurun.array(ha, "float32"), gpurun.array(hb, "float32"), gpurun.array(hc, "float32")
    local r3 = gpurun.zeros(N, "float32")
    local p <close> = gpurun.pipeline{ name = "sample" }
    local r1, r2 = p:temporary("r1", N), p:temporary("r2", N)
    p:call(add, a, b, r1):call(mul, r1, c, r2):call(sub, r2, a, r3)
    local plan = p:plan()
    assert.are.equal(1, #plan.groups)
    assert.are.equal(1, #plan.units)
    local expected = host_values(N, function(i) return (ha[i] + hb[i]) * hc[i] - ha[i] end)
    p:run(stream)
    close_enough(r3:to_table(stream), expected, "run")
    r3:fill(0.0, stream)
    local graph = p:graph(stream)
    close_enough(r3:to_table(stream), expected, "graph")
    assert.are.equal(1, graph.node_count) -- one fused kernel
    stream:close()
  end)

  it("infers raw kernels' reads from their source, builds dag.lua's DAG, sets and updates in place #gpu", function()
    local device, stream = setup()
    local code = gpurun.Program(kernels.source("dag"), "c++",
      gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
    local scale_k, shift, combine = code:get_kernel("scale"), code:get_kernel("shift"), code:get_kernel("combine")
    assert.truthy(scale_k.source:find("const float *in", 1, true))
    local ha = host_values(N, function(i) return i * 0.5 end)
    local hb = host_values(N, function(i) return 3 - i % 4 end)
    local a, b = gpurun.array(ha, "float32"), gpurun.array(hb, "float32")
    local b_copy, x, y, r = gpurun.empty(N), gpurun.empty(N), gpurun.empty(N), gpurun.empty(N)
    local config = gpurun.LaunchConfig{ grid = (N + 255) // 256, block = 256 }
    local p <close> = gpurun.pipeline{ name = "dag", quiet = true }
    p:buffers{ a = a, b = b }
    p:copy(b_copy, b)
    p:launch(shift, config, b_copy, y, 0.5, N)
    p:launch(scale_k, config, a, x, p:scalar("alpha", 2.0), N)
    p:launch(combine, config, x, y, r, N)
    local plan = p:plan()
    assert.are.equal(2, #plan.streams)
    assert.are.equal("r", plan.stages[3].accesses[1].mode)
    assert.truthy(plan.stages[3].accesses[1].how:find("const float *in", 1, true))
    local function expected(alpha, av)
      return host_values(N, function(i) return alpha * av[i] + (hb[i] + 0.5) end)
    end
    p:run(stream)
    close_enough(r:to_table(stream), expected(2.0, ha), "run")
    local graph = p:graph(stream)
    close_enough(r:to_table(stream), expected(2.0, ha), "graph")
    assert.are.equal(4, graph.node_count)
    p:set("alpha", 3.0)
    assert.are.equal(graph, p:graph(stream))
    close_enough(r:to_table(stream), expected(3.0, ha), "alpha set in place")
    assert.are.equal(1, p.captures)
    -- With a graph in hand, a replay on no stream is refused the same.
    local replayed, message = pcall(p.graph, p, nil)
    assert.is_false(replayed)
    assert.matches("pipeline '[%w_]+': graph: a gpurun.Stream expected, got nil", message)
    local halves = host_values(N, function(i) return ha[i] / 2 end)
    local a2 = gpurun.array(halves, "float32")
    p:set("a", a2)
    assert.are.equal(graph, p:graph(stream))
    close_enough(r:to_table(stream), expected(3.0, halves), "a pointed at another buffer")
    assert.are.equal(1, p.captures)
    assert.are.equal(1, p.updates)
    -- The plan changes: a new capture.
    p:fill(b_copy, 0.0, { name = "clear" })
    p:graph(stream)
    stream:sync()
    assert.are.equal(2, p.captures)
    -- Writing through a pointer to const is refused.
    local q = gpurun.pipeline{ name = "const" }
    local ok, err = pcall(q.launch, q, { scale_k, config, a, x, 2.0, N, writes = { a } })
    assert.is_false(ok)
    assert.matches("declares a write to 'in', but its code only reads it (const in the source: const float *in)",
      err, 1, true)
    stream:close()
  end)

  it("runs a cuBLAS product as a stage, stage by stage and in the graph #gpu", function()
    local _, stream = setup()
    local M, K, NN = 8, 5, 3
    local hx = host_values(M * K, function(i) return (i % 7) - 3 end)
    local hw = host_values(K * NN, function(i) return (i % 4) * 0.5 end)
    local x, w = gpurun.array(hx, "float32"), gpurun.array(hw, "float32")
    local out = gpurun.full(M * NN, 1, "float32")
    local y = gpurun.zeros(M * NN, "float32")
    local p <close> = gpurun.pipeline{ name = "gemm_stage" }
    local h = p:temporary("h", M * NN, "float32")
    p:copy(h, out)
    p:matmul({ buffer = x, rows = M, cols = K }, { buffer = w, rows = K, cols = NN },
             { buffer = h, rows = M, cols = NN }, { alpha = 2, beta = 1 })
    p:call(scale, h, p:scalar("alpha", -1.0), y)
    local expected = {}
    for i = 0, M - 1 do
      for j = 0, NN - 1 do
        local sum = 0
        for k = 0, K - 1 do sum = sum + hx[i * K + k + 1] * hw[k * NN + j + 1] end
        expected[i * NN + j + 1] = -(2 * sum + 1)
      end
    end
    p:run(stream)
    close_enough(y:to_table(stream), expected, "run")
    y:fill(0.0, stream)
    p:graph(stream)
    close_enough(y:to_table(stream), expected, "graph")
    x:copy_from(host_values(M * K, function(i) return hx[i] * 2 end), stream)
    p:graph(stream) -- the graph reads x's memory when it replays
    local twice = {}
    for i, v in ipairs(expected) do twice[i] = 2 * (v + 1) - 1 end
    close_enough(y:to_table(stream), twice, "graph replayed on new x")
    stream:close()
  end)

  it("runs a product with a relu_bias epilogue as a stage, and in the graph #gpu", function()
    local _, stream = setup()
    local M, K, NN = 6, 4, 5
    local hx = host_values(M * K, function(i) return (i % 5) - 2 end)
    local hw = host_values(K * NN, function(i) return (i % 3) - 1 end)
    local hb = host_values(NN, function(i) return i - 3 end)
    local x, w = gpurun.array(hx, "float32"), gpurun.array(hw, "float32")
    local bias, y = gpurun.array(hb, "float32"), gpurun.zeros(M * NN, "float32")
    local p <close> = gpurun.pipeline{ name = "gemm_relu_bias" }
    p:matmul({ buffer = x, rows = M, cols = K }, { buffer = w, rows = K, cols = NN },
             { buffer = y, rows = M, cols = NN }, { epilogue = "relu_bias", bias = bias })
    local expected = {}
    for i = 0, M - 1 do
      for j = 0, NN - 1 do
        local sum = hb[j + 1]
        for k = 0, K - 1 do sum = sum + hx[i * K + k + 1] * hw[k * NN + j + 1] end
        expected[i * NN + j + 1] = math.max(sum, 0)
      end
    end
    p:run(stream)
    close_enough(y:to_table(stream), expected, "run")
    y:fill(-1.0, stream)
    p:graph(stream)
    close_enough(y:to_table(stream), expected, "graph")
    stream:close()
  end)

  it("runs a sort as a stage, stage by stage and in the graph #gpu", function()
    local _, stream = setup()
    local n = 1000
    local hk = host_values(n, function(i) return (i * 7919) % 257 end)
    local keys_in = gpurun.array(hk, "uint32")
    local values_in = gpurun.array(host_values(n, function(i) return i end), "int32")
    local sorted_keys, sorted_values = gpurun.zeros(n, "uint32"), gpurun.zeros(n, "int32")
    local p <close> = gpurun.pipeline{ name = "sort_stage" }
    local k, v = p:temporary("k", n, "uint32"), p:temporary("v", n, "int32")
    p:copy(k, keys_in):copy(v, values_in)
    p:sort(k, { values = v, descending = true })
    p:copy(sorted_keys, k):copy(sorted_values, v)
    -- descending and stable: equal keys keep their first order
    local order = host_values(n, function(i) return i end)
    table.sort(order, function(x, y)
      if hk[x] ~= hk[y] then return hk[x] > hk[y] end
      return x < y
    end)
    local expected_keys = {}
    for i, at in ipairs(order) do expected_keys[i] = hk[at] end
    p:run(stream)
    assert.are.same(expected_keys, sorted_keys:to_table(stream))
    assert.are.same(order, sorted_values:to_table(stream))
    sorted_keys:fill(0, stream)
    sorted_values:fill(0, stream)
    p:graph(stream)
    assert.are.same(expected_keys, sorted_keys:to_table(stream))
    assert.are.same(order, sorted_values:to_table(stream))
    -- a graph first: the stage compiles its kernels before the capture
    local q <close> = gpurun.pipeline{ name = "sort_graph_first" }
    local small = gpurun.array({ 5, -2, 7, 0, -9 }, "int16")
    local tags = gpurun.array({ 1, 2, 3, 4, 5 }, "uint16")
    q:sort(small, { values = tags, descending = true })
    q:graph(stream)
    assert.are.same({ 7, 5, 0, -2, -9 }, small:to_table(stream))
    assert.are.same({ 3, 1, 4, 2, 5 }, tags:to_table(stream))
    stream:close()
  end)

  it("runs FFTs as stages, equal to gpurun.fft's own, stage by stage and in the graph #gpu", function()
    local _, stream = setup()
    local n = 64
    local x = gpurun.array(host_values(n, function(i) return { math.sin(i), (i % 5) - 2 } end), "complex64")
    local r = gpurun.array(host_values(n, function(i) return (i % 7) - 3 end), "float32")
    local y, back = gpurun.zeros(n, "complex64"), gpurun.zeros(n, "complex64")
    local h, h2 = gpurun.zeros(n // 2 + 1, "complex64"), gpurun.zeros(n // 2 + 1, "complex64")
    local r2 = gpurun.zeros(n, "float32")
    local p <close> = gpurun.pipeline{ name = "fft_stages" }
    p:fft(x, y, { name = "forward" })
    p:copy(back, y)
    p:fft(back, back, { direction = "inverse", name = "inverse" }) -- in place
    p:fft(r, h, { kind = "r2c", name = "real" })
    p:copy(h2, h)
    p:fft(h2, r2, { kind = "c2r", name = "back to real" })          -- overwrites h2, not h
    local on_stream = { stream = stream }
    local want_y = gpurun.fft.fft(x, on_stream):to_table(stream)
    local want_back = gpurun.fft.ifft(gpurun.fft.fft(x, on_stream), on_stream):to_table(stream)
    local want_h = gpurun.fft.rfft(r, on_stream):to_table(stream)
    local want_r2 = gpurun.fft.irfft(gpurun.fft.rfft(r, on_stream), on_stream):to_table(stream)
    -- |got - want| <= atol + 1e-4 |want| for every number (a pair's two)
    local function near(got, want, what, atol)
      for i = 1, #want do
        local g, w = got[i], want[i]
        if type(w) ~= "table" then g, w = { g }, { w } end
        for part = 1, #w do
          local off = math.abs(g[part] - w[part])
          if off > (atol or 1e-4) + 1e-4 * math.abs(w[part]) or off ~= off then
            error(("%s: element %d (part %d) is %s, expected %s"):format(what, i, part, tostring(g[part]),
              tostring(w[part])), 2)
          end
        end
      end
    end
    local function check(what)
      near(y:to_table(stream), want_y, what .. " forward")
      near(back:to_table(stream), want_back, what .. " inverse in place")
      near(h:to_table(stream), want_h, what .. " r2c")
      near(r2:to_table(stream), want_r2, what .. " c2r")
      -- unnormalised: back is n times x, r2 n times r
      near(back:to_table(stream), host_values(n, function(i) return { n * math.sin(i), n * ((i % 5) - 2) } end),
           what .. " inverse of forward", 1e-2)
      near(r2:to_table(stream), host_values(n, function(i) return n * ((i % 7) - 3) end), what .. " c2r of r2c", 1e-2)
    end
    p:run(stream)
    check("run")
    for _, buffer in ipairs{ y, back, h, h2, r2 } do buffer:fill(0, stream) end
    p:graph(stream)
    check("graph")
    for _, buffer in ipairs{ y, back, h, h2, r2 } do buffer:fill(0, stream) end
    p:graph(stream) -- a replay: the plans and buffers the graph keeps
    check("graph replayed")
    -- a graph first: the plan is made before the capture
    local q <close> = gpurun.pipeline{ name = "fft_graph_first" }
    local z = gpurun.zeros(n, "complex64")
    q:fft(x, z, { shape = { 8, 8 } })
    q:graph(stream)
    local want_2d <close> = gpurun.fft.plan({ 8, 8 }, on_stream)
    local direct = gpurun.zeros(n, "complex64")
    want_2d:execute(x, direct, on_stream)
    near(z:to_table(stream), direct:to_table(stream), "2-D, graph first")
    stream:close()
  end)

  it("runs sparse products as stages, equal to gpurun.spmv's own, stage by stage and in the graph #gpu", function()
    local _, stream = setup()
    -- [ 1 0 2 ]
    -- [ 0 3 0 ]
    -- [ 4 0 5 ]
    local offsets = gpurun.array({ 0, 2, 3, 5 }, "int32")
    local columns = gpurun.array({ 0, 2, 1, 0, 2 }, "int32")
    local values = gpurun.array({ 1, 2, 3, 4, 5 }, "float32")
    local A = gpurun.csr(offsets, columns, values, 3, 3)
    local x = gpurun.array({ 1, 2, 3 }, "float32")
    local y, z = gpurun.full(3, 1, "float32"), gpurun.zeros(3, "float32")
    local p <close> = gpurun.pipeline{ name = "spmv_stages" }
    local doubled = p:temporary("doubled", 5, "float32")
    p:call(scale, values, p:scalar("two", 2.0), doubled)
    p:spmv(A, x, y, { alpha = 2, beta = 1, name = "matrix" })                  -- y = 2 A x + y
    p:spmv({ row_offsets = offsets, col_indices = columns, values = doubled, rows = 3, cols = 3 }, y, z,
           { transpose = true, name = "parts" })                              -- z = (2 A)^T y
    -- the same calls made directly
    local y_direct, z_direct = gpurun.full(3, 1, "float32"), gpurun.zeros(3, "float32")
    gpurun.spmv(A, x, y_direct, { alpha = 2, beta = 1, stream = stream })
    local A2 = gpurun.csr(offsets, columns, gpurun.array({ 2, 4, 6, 8, 10 }, "float32"), 3, 3)
    gpurun.spmv(A2, y_direct, z_direct, { transpose = true, stream = stream })
    local want_y, want_z = y_direct:to_table(stream), z_direct:to_table(stream)
    assert.are.same({ 15, 13, 39 }, want_y)
    assert.are.same({ 342, 78, 450 }, want_z)
    local function check(what)
      assert.are.same(want_y, y:to_table(stream), what)
      assert.are.same(want_z, z:to_table(stream), what)
    end
    p:run(stream)
    check("run")
    y:fill(1, stream)
    z:fill(0, stream)
    p:graph(stream)
    check("graph")
    y:fill(1, stream)
    z:fill(-7, stream)
    p:graph(stream) -- a replay reads y's memory again: beta = 1 adds to what it holds
    check("graph replayed")
    -- a graph first: a new matrix's first product (its plan) is inside the capture
    local q <close> = gpurun.pipeline{ name = "spmv_graph_first" }
    local w = gpurun.zeros(3, "float32")
    q:spmv(gpurun.csr(offsets, columns, values, 3, 3), x, w)
    q:graph(stream)
    assert.are.same({ 7, 6, 19 }, w:to_table(stream))
    stream:close()
  end)

  it("sets a scalar of a fused group in place #gpu", function()
    local _, stream = setup()
    local hd = host_values(N, function(i) return i % 9 end)
    local d = gpurun.array(hd, "float32")
    local out = gpurun.zeros(N, "float32")
    local p <close> = gpurun.pipeline{ name = "scaled" }
    local y = p:temporary("y", N)
    p:call(scale, d, p:scalar("alpha", 0.5), y)
    p:call(add, y, d, out)
    assert.are.equal(1, #p:plan().groups)
    local graph = p:graph(stream)
    close_enough(out:to_table(stream), host_values(N, function(i) return 1.5 * hd[i] end), "graph")
    p:set("alpha", 2.0)
    assert.are.equal(graph, p:graph(stream))
    close_enough(out:to_table(stream), host_values(N, function(i) return 3 * hd[i] end), "set")
    assert.are.equal(1, p.captures)
    stream:close()
  end)

  it("runs a host callback at its point of the order, stage by stage and in the graph #gpu", function()
    local _, stream = setup()
    local src = gpurun.array(host_values(16, function(i) return i end), "float32")
    local pinned = gpurun.pinned(16, "float32")
    local seen = {}
    local p <close> = gpurun.pipeline{ name = "host" }
    local host = p:buffer("pinned", pinned)
    p:fill(src, 7.0)
    p:copy(host, src)
    p:host(function() seen[#seen + 1] = pinned:get(16) end, { name = "look", reads = { host } })
    p:fill(src, 9.0)
    p:run(stream)
    p:wait()
    assert.are.same({ 7 }, seen)
    p:graph(stream)
    p:wait()
    assert.are.same({ 7, 7 }, seen)
    assert.are.equal(9, src:get(1, stream))
    stream:close()
  end)

  it("orders overlapping views of real buffers #gpu", function()
    local _, stream = setup()
    local base = gpurun.zeros(100, "float32")
    local p <close> = gpurun.pipeline{ name = "views", fuse = false }
    local whole = p:buffer("base", base, { filled = false })
    local left, right = p:view("left", whole, 1, 50), p:view("right", whole, 51, 50)
    local middle = p:view("middle", whole, 40, 20)
    p:fill(left, 1.0):fill(right, 2.0):fill(middle, 3.0)
    for _ = 1, 20 do
      p:run(stream)
      local values = base:to_table(stream)
      assert.are.equal(1, values[39])
      assert.are.equal(3, values[40])
      assert.are.equal(3, values[59])
      assert.are.equal(2, values[60])
      base:fill(0.0, stream)
    end
    stream:close()
  end)

  it("times each unit with events, and marks them with NVTX ranges #gpu", function()
    local _, stream = setup()
    local a = gpurun.full(N, 1.0, "float32")
    local out = gpurun.zeros(N, "float32")
    for _, timing in ipairs({ true, "nvtx" }) do
      local p <close> = gpurun.pipeline{ name = "timed", timing = timing }
      local t = p:temporary("t", N)
      p:call(add, a, a, t)
      p:call{ ew("float32 x", "float32 y", "y = x; y += 1.0f", "gplus"), t, out }
      p:run(stream)
      if timing == true then
        local timings = p:timings()
        assert.are.equal(2, #timings)
        for _, entry in ipairs(timings) do
          assert.is_true(entry.ms >= 0)
          assert.is_true(entry.start_ms >= 0)
        end
        assert.is_true(require("gpurun.timeline").format(timings):find("#", 1, true) ~= nil)
      end
      assert.are.equal(3, out:to_table(stream)[N])
    end
    stream:close()
  end)

  it("splits over a list of devices, one here #gpu", function()
    setup()
    local ha = host_values(N, function(i) return i % 11 end)
    local a = gpurun.array(ha, "float32")
    local out = gpurun.zeros(N, "float32")
    local p <close> = gpurun.pipeline{ name = "split", devices = { 0 } }
    local t = p:temporary("t", N)
    p:call(add, a, a, t):call(mul, t, a, out)
    assert.truthy(p:explain():find("device 0: elements 1..4099", 1, true))
    p:run()
    p:wait()
    close_enough(out:to_table(), host_values(N, function(i) return 2 * ha[i] * ha[i] end), "run over devices")
    out:fill(0.0)
    local graphs = p:graph()
    p:wait()
    assert.are.equal(1, #graphs)
    close_enough(out:to_table(), host_values(N, function(i) return 2 * ha[i] * ha[i] end), "graphs over devices")
  end)

  it("takes temporaries from a memory pool: in stream order for a run, inside the graph for a replay #gpu", function()
    local device, stream = setup()
    local a = gpurun.full(N, 2.0, "float32")
    local out = gpurun.zeros(N, "float32")
    local pool <close> = gpurun.MemoryPool{ device = device.id }
    local p <close> = gpurun.pipeline{ name = "pooled", fuse = false, pool = pool, quiet = true }
    local t, ad = p:temporary("t", N), p:buffer("a", a)
    p:call(add, ad, ad, t):call(mul, t, ad, out)
    local where
    for _, temp in ipairs(p:plan().temporaries) do where = temp.where end
    assert.are.equal("pool", where)
    p:run(stream)
    assert.are.equal(8, out:to_table(stream)[N])
    assert.are.equal(0, pool.used)              -- freed after the run, in its order
    assert.is_true(pool.used_high >= 4 * N)     -- made from the pool given
    assert.are.equal(0, pool.buffers)
    out:fill(0.0, stream)
    local graph = p:graph(stream)
    assert.are.equal(8, out:to_table(stream)[N])
    assert.is_true(graph.has_memory_nodes)
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[node.kind] = true end
    assert.is_true(kinds.mem_alloc and kinds.mem_free)
    -- Replays make it anew; pointing a buffer elsewhere captures a new graph
    -- (a graph with memory nodes cannot be updated in place).
    out:fill(0.0, stream)
    p:graph(stream)
    assert.are.equal(8, out:to_table(stream)[N])
    local a2 = gpurun.full(N, 3.0, "float32")
    p:set("a", a2)
    p:graph(stream)
    assert.are.equal(18, out:to_table(stream)[N])
    assert.are.equal(2, p.captures)
    assert.are.equal(0, p.updates)
    stream:close()
  end)

  it("takes a reduction as a stage, where gpurun has them #gpu", function()
    if not gpurun.reduction then
      pending("gpurun.reduction is not in this gpurun")
      return
    end
    local _, stream = setup()
    local a = gpurun.full(N, 0.5, "float32")
    local total = gpurun.zeros(1, "float32")
    local p <close> = gpurun.pipeline{ name = "reduced" }
    local t = p:temporary("t", N)
    p:call(add, a, a, t)
    local sum = gpurun.reduction("float32 x", "float32 total", "x", "sum", nil, nil, "pipeline_sum")
    p:call(sum, t, total)
    p:call{ sum, a, p:temporary("total_a", 1), name = "sum a" } -- the same kernel: after the first
    assert.truthy(p:explain():find("state of 'pipeline_sum'", 1, true))
    p:graph(stream)
    assert.is_true(math.abs(total:to_table(stream)[1] - N) < 1e-2)
    stream:close()
  end)
end)
