-- Memory pools and stream-ordered buffers (types/memory_pool.c, types/buffer/memory.c),
-- allocation and free nodes in graphs (types/graph.c), and the pipelines
-- that use them. Every buffer a spec reads was filled first, so that
-- compute-sanitizer's initcheck has nothing to report.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")

local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error")
  return tostring(err)
end

describe("gpurun.MemoryPool without a GPU", function()
  it("checks its options before it needs a device", function()
    assert.matches("option 'max_size' must be a non%-negative integer number of bytes",
                   error_of(gpurun.MemoryPool, { max_size = -1 }))
    assert.matches("unknown option 'nope' %(known: device, release_threshold, max_size, ipc%)",
                   error_of(gpurun.MemoryPool, { nope = 1 }))
    assert.matches("option 'release_threshold' must be a non%-negative integer number of bytes or math.huge",
                   error_of(gpurun.MemoryPool, { release_threshold = 0.5 }))
  end)

  it("checks the constructors' { pool =, stream = } before it needs a device", function()
    assert.matches("bad argument #3 to 'gpurun.empty' %(option 'pool' must be a gpurun.MemoryPool, got number%)",
                   error_of(gpurun.empty, 16, "float32", { pool = 1 }))
    assert.matches("bad argument #4 to 'gpurun.full' %(unknown option 'streams' %(known: pool, stream%)%)",
                   error_of(gpurun.full, 16, 0, "float32", { streams = 1 }))
    assert.matches("option 'stream' must be a gpurun.Stream or a gpurun.GraphBuilder, got table",
                   error_of(gpurun.zeros, 16, nil, { stream = {} }))
  end)

  it("is in the API docs, with the guide", function()
    local api = assert(io.open("docs/api.md")):read("a")
    assert.truthy(api:find("## Memory pools", 1, true))
    assert.truthy(api:find("docs/memory.md", 1, true))
    local guide = assert(io.open("docs/memory.md")):read("a")
    for _, name in ipairs({ "gpurun.MemoryPool", "Device:memory_pool", "auto_free_on_launch",
        "Device:graph_memory", "bench/alloc_compare.sh" }) do
      assert(guide:find(name, 1, true), "docs/memory.md does not mention " .. name)
    end
  end)
end)

describe("gpurun.MemoryPool", function()
  local device, kernel, stream, other
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    other = device:create_stream()
  end)
  after_each(function()
    gpurun.set_current_stream(nil)
    stream:close()
    other:close()
  end)

  local MiB = 1 << 20

  local function config(n)
    return gpurun.LaunchConfig({ grid = (n + 255) // 256, block = 256 })
  end

  it("makes buffers in stream order and reports what it uses and holds #gpu", function()
    local pool <close> = gpurun.MemoryPool({ max_size = 64 * MiB })
    assert.is_false(pool.is_default)
    assert.are.equal(64 * MiB, pool.max_size)
    assert.are.equal(math.huge, pool.release_threshold)
    assert.are.equal(0, pool.used)
    local buffer = gpurun.full(MiB, 7, "uint8", { pool = pool, stream = stream })
    assert.are.equal(pool, buffer.pool)
    assert.are.equal(1, pool.buffers)
    stream:sync()
    assert.is_true(pool.used >= MiB)
    assert.is_true(pool.reserved >= pool.used)
    assert.are.equal(7, buffer:get(MiB, stream))
    buffer:close()
    stream:sync()
    assert.are.equal(0, pool.used)
    assert.are.equal(0, pool.buffers)
    assert.is_true(pool.used_high >= MiB)
    assert.is_true(pool.reserved > 0) -- kept: the threshold keeps all
    pool:reset_peaks()
    assert.are.equal(0, pool.used_high)
    pool:trim(0)
    stream:sync()
    assert.are.equal(0, pool.reserved)
  end)

  it("gives the device's default pool as one object, its release threshold raised #gpu", function()
    local pool = device:memory_pool()
    assert.are.equal(pool, device:memory_pool())
    assert.is_true(pool.is_default)
    assert.are.equal(device.id, pool.device)
    assert.is_true(pool.release_threshold > 0)
    local buffer <close> = gpurun.zeros(16, "float32", { stream = stream })
    assert.are.equal(pool, buffer.pool)
    assert.matches("gpurun.MemoryPool%(device %d+, default%)", tostring(pool))
  end)

  it("fills every constructor's buffer on its stream #gpu", function()
    local pool <close> = gpurun.MemoryPool()
    local on = { pool = pool, stream = stream }
    local zeros <close> = gpurun.zeros(5, "int32", on)
    local full <close> = gpurun.full(5, 3, "int32", on)
    local array <close> = gpurun.array({ 1, 2, 3 }, "float64", on)
    local rng <close> = gpurun.default_rng(1)
    local random <close> = rng:random(4, "float32", on)
    local integers <close> = rng:integers(4, 0, 10, "int32", on)
    assert.are.same({ 0, 0, 0, 0, 0 }, zeros:to_table(stream))
    assert.are.same({ 3, 3, 3, 3, 3 }, full:to_table(stream))
    assert.are.same({ 1, 2, 3 }, array:to_table(stream))
    assert.are.same(gpurun.default_rng(1):random_table(4, "float32"), random:to_table(stream))
    for _, value in ipairs(integers:to_table(stream)) do assert.is_true(value >= 0 and value < 10) end
    assert.are.equal(5, pool.buffers)
  end)

  it("takes the current stream when none is given, and refuses without one #gpu", function()
    local pool <close> = gpurun.MemoryPool()
    assert.matches("a buffer from a memory pool is allocated in order on a stream",
                   error_of(gpurun.empty, 16, "float32", { pool = pool }))
    gpurun.set_current_stream(stream)
    local buffer <close> = gpurun.zeros(16, "float32", { pool = pool })
    assert.are.equal(0, buffer:get(16))
  end)

  it("frees after the work of the streams that used the buffer, without waiting #gpu", function()
    local busy_code <close> = gpurun.Program(require("gpurun.samples.kernels").source("busy"), "c++",
      gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })):compile("cubin")
    local busy <close> = busy_code:get_kernel("busy")
    -- About half a second of one SM's clock (the clock rate is in kHz).
    local cycles = gpurun.i64(device:get_attribute(13) * 500)
    local buffer = gpurun.empty(MiB, "float32", { stream = stream })
    stream:sync()
    gpurun.launch(other, gpurun.LaunchConfig({ grid = 1, block = 1 }), busy, cycles)
    buffer:fill(1, other) -- used on `other`, behind the busy kernel
    buffer:close()
    -- The free waits on `stream` for `other`; the host did not (had it
    -- waited, the busy kernel would be done).
    assert.is_false(other:query())
    assert.is_false(stream:query())
    other:sync()
    stream:sync()
  end)

  it("makes and frees 10,000 buffers while another stream stays busy #gpu", function()
    local busy_code <close> = gpurun.Program(require("gpurun.samples.kernels").source("busy"), "c++",
      gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })):compile("cubin")
    local busy <close> = busy_code:get_kernel("busy")
    local pool <close> = gpurun.MemoryPool()
    local warm = gpurun.empty(MiB, "float32", { pool = pool, stream = stream })
    warm:close()
    stream:sync()
    -- Garbage from earlier specs holds plain buffers, whose cuMemFree would
    -- wait for the device if the collector freed them during the loop.
    collectgarbage("collect")
    gpurun.launch(other, gpurun.LaunchConfig({ grid = 1, block = 1 }), busy,
                  gpurun.i64(device:get_attribute(13) * 2000)) -- about 2 s
    local on = { pool = pool, stream = stream }
    for _ = 1, 10000 do
      local buffer = gpurun.empty(MiB // 4, "float32", on)
      buffer:close()
    end
    -- Had one allocation or free waited for the device, the busy kernel
    -- would be done.
    assert.is_false(other:query())
    other:sync()
    stream:sync()
  end)

  it("refuses to close while buffers from it are open, naming how many #gpu", function()
    local pool = gpurun.MemoryPool()
    local a = gpurun.zeros(16, "float32", { pool = pool, stream = stream })
    local b = gpurun.zeros(16, "float32", { pool = pool, stream = stream })
    assert.matches("MemoryPool:close: gpurun.MemoryPool%(device %d+%) has 2 buffer%(s%) from it still open",
                   error_of(pool.close, pool))
    assert.are.equal(0, a:get(1, stream)) -- nothing lost
    a:close()
    b:close()
    pool:close()
    assert.are.equal("gpurun.MemoryPool(closed)", tostring(pool))
    assert.matches("attempt to use a closed gpurun.MemoryPool", error_of(function() return pool.used end))
  end)

  it("runs out of memory past max_size, showing the pool as tostring does, the size and what is left #gpu", function()
    -- The driver rounds a maximum up to its granularity (32 MiB on an H200).
    local pool <close> = gpurun.MemoryPool({ max_size = 64 * MiB })
    local kept <close> = gpurun.full(MiB // 4, 2, "float32", { pool = pool, stream = stream })
    local full = error_of(gpurun.empty, 32 * MiB, "float32", { pool = pool, stream = stream })
    assert.matches("gpurun.MemoryPool%(device %d+, max 64.00 MiB%): out of memory allocating 128.00 MiB for "
                   .. "33554432 float32 elements: [%d.]+ [KM]iB of its 64.00 MiB maximum left", full)
    -- A pool has no name: docs/memory.md says the message shows tostring(pool).
    assert.truthy(full:find(tostring(pool) .. ": out of memory", 1, true), full)
    -- Inside a capture: the capture ends, and what was computed stays.
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local message = error_of(gpurun.empty, 32 * MiB, "float32", { pool = pool, stream = builder })
    assert.matches("out of memory allocating 128.00 MiB for 33554432 float32 elements in the graph being built", message)
    assert.are.equal("abandoned", builder.state)
    assert.are.equal(2, kept:get(MiB // 4, stream))
  end)

  it("makes, queries and trims pools while another stream captures, keeping the capture #gpu", function()
    local n = 256
    local a <close> = gpurun.full(n, 1, "float32")
    local out <close> = gpurun.zeros(n, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config(n), kernel("vec_add"), a, a, out, gpurun.u64(n))
    local pool = gpurun.MemoryPool({ max_size = 8 * MiB })
    local used, reserved = pool.used, pool.reserved
    assert.are.equal(0, used + reserved)
    pool:trim(0)
    pool:reset_peaks()
    local default = device:memory_pool()
    assert.is_true(default.reserved >= 0)
    assert.is_true(device:graph_memory().used >= 0)
    local side = gpurun.zeros(16, "float32", { pool = pool, stream = other })
    side:close()
    pool:close()
    assert.are.equal("building", builder.state)
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 2))
  end)

  it("keeps a graph's temporary inside it: allocation and free nodes, replayed #gpu", function()
    local n = 4096
    local a <close> = gpurun.full(n, 1.5, "float32")
    local out <close> = gpurun.zeros(n, "float32")
    local pool <close> = gpurun.MemoryPool()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local temporary = gpurun.empty(n, "float32", { pool = pool, stream = builder })
    gpurun.launch(builder, config(n), kernel("vec_add"), a, a, temporary, gpurun.u64(n))
    gpurun.launch(builder, config(n), kernel("vec_add"), temporary, a, out, gpurun.u64(n))
    assert.are.equal(1, pool.buffers)
    temporary:close()
    assert.are.equal(0, pool.buffers)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.is_true(graph.has_memory_nodes)
    assert.are.equal("idle", builder.state) -- the Graph took the builder's graph
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do
      kinds[node.kind] = (kinds[node.kind] or 0) + 1
      if node.kind == "mem_alloc" then assert.is_true(node.bytes >= n * 4) end
      if node.kind ~= "kernel" then assert.is_true(node.address > 0) end
    end
    assert.are.same({ kernel = 2, mem_alloc = 1, mem_free = 1 }, kinds)
    assert.truthy(graph:to_dot():find("mem_alloc", 1, true))
    device:reset_graph_memory_peaks()
    for _ = 1, 10 do graph:launch(stream) end
    stream:sync()
    assert.is_true(gpurun.allclose(out, 4.5))
    assert.is_true(device:graph_memory().used_high >= n * 4)
    device:trim_graph_memory()
  end)

  it("makes a graph's buffer at each launch, at one address, and refuses a second launch #gpu", function()
    local n = 1024
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local made = gpurun.empty(n, "float32", { stream = builder })
    made:fill(2.5, builder)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.is_false(graph.auto_free_on_launch)
    assert.matches("belongs to a graph that has not been launched yet", error_of(made.to_table, made, stream))
    local address = made.ptr
    graph:launch(stream)
    assert.are.equal(2.5, made:get(n, stream))
    assert.are.equal(address, made.ptr)
    assert.matches("Graph:launch: 1 buffer%(s%) this graph allocated at its last launch %(4.00 KiB%) are still open",
                   error_of(graph.launch, graph, stream))
    made:close()
    for _ = 1, 3 do graph:launch(stream) end -- the graph frees what nobody holds
    stream:sync()
  end)

  it("frees the last launch's buffer first with auto_free_on_launch #gpu", function()
    local n = 1024
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local made = gpurun.empty(n, "int32", { stream = builder })
    made:fill(9, builder)
    builder:end_building()
    local graph = builder:complete({ auto_free_on_launch = true })
    assert.is_true(graph.auto_free_on_launch)
    for _ = 1, 5 do graph:launch(stream) end
    assert.are.equal(9, made:get(1, stream))
    graph:close() -- the buffer keeps the last launch's memory
    assert.are.equal(9, made:get(n, stream))
    made:close()
    stream:sync()
  end)

  it("closes what an abandoned capture made #gpu", function()
    local pool <close> = gpurun.MemoryPool()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local made = gpurun.empty(16, "float32", { pool = pool, stream = builder })
    local view = made:view(1, 4)
    assert.are.equal(1, pool.buffers)
    pcall(gpurun.launch, builder) -- an argument error ends the capture
    assert.are.equal("abandoned", builder.state)
    assert.are.equal("gpurun.Buffer(closed)", tostring(made))
    assert.are.equal("gpurun.Buffer(closed)", tostring(view))
    assert.are.equal(0, pool.buffers)
  end)

  it("refuses what cannot be a memory node: a body, a captured stream, a copy of host data #gpu", function()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    assert.matches("the stream is being captured by a GraphBuilder: pass the builder as the stream",
                   error_of(gpurun.empty, 16, "float32", { stream = stream }))
    builder:begin_building()
    assert.matches("option 'stream' cannot be a GraphBuilder here",
                   error_of(gpurun.array, { 1, 2 }, "float32", { stream = builder }))
    builder:begin_building()
    local condition = builder:create_condition(0)
    local body = builder:if_then(condition)
    body:begin_building()
    assert.matches("a conditional body's graph cannot allocate memory",
                   error_of(gpurun.empty, 16, "float32", { stream = body }))
  end)

  it("waits for a graph's replays before freeing a buffer it used #gpu", function()
    local n = 4096
    local pool <close> = gpurun.MemoryPool()
    local input = gpurun.full(n, 1, "float32", { pool = pool, stream = stream })
    local out <close> = gpurun.zeros(n, "float32")
    stream:sync()
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config(n), kernel("vec_add"), input, input, out, gpurun.u64(n))
    builder:end_building()
    local graph = builder:complete()
    builder:close() -- the graph alone keeps the buffer now
    for _ = 1, 20 do graph:launch(other) end
    assert.matches("gpurun.Buffer is used by 1 graph%(s%)", error_of(input.close, input))
    graph:close()
    input:close() -- after the replays on `other`
    other:sync()
    stream:sync()
    assert.is_true(gpurun.allclose(out, 2))
  end)

  it("runs an unfused pipeline with its intermediates made inside the graph #gpu", function()
    local n = 1 << 16
    local pipe = gpurun.elementwise_pipeline("float32 a, float32 b, float32 c",
      { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }, "r3", "temps",
      { fuse = "never" })
    local a <close> = gpurun.full(n, 1, "float32")
    local b <close> = gpurun.full(n, 2, "float32")
    local c <close> = gpurun.full(n, 3, "float32")
    local r3 <close> = gpurun.zeros(n, "float32")
    pipe:prepare(a, b, c, r3)
    pipe(stream, a, b, c, r3) -- on a stream: temporaries from the default pool
    stream:sync()
    assert.is_true(gpurun.allclose(r3, 8))
    r3:fill(0, stream)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    pipe(builder, a, b, c, r3)
    builder:end_building()
    local graph <close> = builder:complete()
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[node.kind] = (kinds[node.kind] or 0) + 1 end
    assert.are.same({ kernel = 3, mem_alloc = 2, mem_free = 2 }, kinds)
    for _ = 1, 5 do graph:launch(stream) end
    stream:sync()
    assert.is_true(gpurun.allclose(r3, 8))
    local plans <close> = pipe:bind(a, b, c, r3) -- made up front for the plans
    r3:fill(0, stream)
    stream:sync()
    plans:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(r3, 8))
  end)

  it("frees on the stream close is given, after the work of the streams that used the buffer #gpu", function()
    local n = 4096
    local pool <close> = gpurun.MemoryPool()
    local third <close> = device:create_stream()
    local input = gpurun.full(n, 1, "float32", { pool = pool, stream = stream })
    local out <close> = gpurun.zeros(n, "float32")
    stream:sync()
    gpurun.launch(other, config(n), kernel("vec_add"), input, input, out, gpurun.u64(n))
    input:close(third) -- on `third`, after the kernel on `other`
    assert.are.equal(0, pool.buffers)
    input:close(third) -- closing again does nothing
    third:sync()
    other:sync()
    assert.is_true(gpurun.allclose(out, 2))
    local plain <close> = gpurun.zeros(n, "float32") -- cuMemAlloc's: freed at once
    plain:close(third)
    assert.are.equal("gpurun.Buffer(closed)", tostring(plain))
  end)

  it("refuses a close on what is not a stream, or on a stream that cannot free it #gpu", function()
    local pool <close> = gpurun.MemoryPool()
    local buffer <close> = gpurun.zeros(16, "float32", { pool = pool, stream = stream })
    assert.matches("bad argument #1 to 'Buffer:close' %(expected a gpurun.Stream or a building gpurun.GraphBuilder, got number%)",
                   error_of(buffer.close, buffer, 5))
    local gone = device:create_stream()
    gone:close()
    assert.matches("attempt to use a closed gpurun.Stream", error_of(buffer.close, buffer, gone))
    local builder <close> = stream:create_graph_builder()
    assert.matches("GraphBuilder is not building", error_of(buffer.close, buffer, builder))
    builder:begin_building()
    assert.matches("the stream is being captured by a GraphBuilder: pass its GraphBuilder instead",
                   error_of(buffer.close, buffer, stream))
    assert.are.equal("abandoned", builder.state) -- refusals end the capture
    builder:begin_building()
    assert.matches("Buffer:close: a graph frees only memory that a graph allocated, and this "
                   .. "buffer's memory is a pool's: close it with a Stream, or with none",
                   error_of(buffer.close, buffer, builder))
    assert.are.equal("abandoned", builder.state)
    builder:begin_building()
    local made = gpurun.empty(16, "float32", { stream = builder })
    assert.matches("Buffer:close: the buffer is an allocation of a capture in progress",
                   error_of(made.close, made, other))
    assert.are.equal(1, pool.buffers) -- every refusal left the buffer open
    buffer:close(other)
  end)

  -- The allocating graph and a graph made of the free node alone, as
  -- NVIDIA's graphMemoryNodes sample frees d_negSquare in a graph of its own.
  local function allocating_graph(n, value, options)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local made = gpurun.empty(n, "float32", { stream = builder })
    made:fill(value, builder)
    builder:end_building()
    local graph = builder:complete(options)
    builder:close()
    return graph, made
  end

  it("frees one graph's allocation in another graph's free node, the two launched in turns #gpu", function()
    local n = 1 << 16
    local used = device:graph_memory().used
    local allocating <close>, made = allocating_graph(n, 2.5)
    allocating:launch(stream)
    assert.are.equal(2.5, made:get(n, stream)) -- the buffer has the launch's memory
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    made:close(builder)
    builder:end_building()
    local freeing <close> = builder:complete()
    assert.are.equal("gpurun.Buffer(closed)", tostring(made))
    assert.is_true(freeing.has_memory_nodes)
    local kinds = {}
    for _, node in ipairs(freeing:nodes()) do kinds[#kinds + 1] = node.kind end
    assert.are.same({ "mem_free" }, kinds)
    assert.matches("Graph:launch: 1 allocation%(s%) of this graph's last launch are freed by another graph "
                   .. "%(Buffer:close on a GraphBuilder%), not launched since: launch that graph first",
                   error_of(allocating.launch, allocating, stream))
    for _ = 1, 3 do
      freeing:launch(stream)
      assert.matches("Graph:launch: this graph frees 1 allocation%(s%) of another graph %(Buffer:close on a "
                     .. "GraphBuilder%), which that graph has not made again since: launch the graph that "
                     .. "allocates first", error_of(freeing.launch, freeing, stream))
      allocating:launch(stream)
    end
    freeing:close() -- the last launch's memory goes now, and the graph frees its own from here
    for _ = 1, 3 do allocating:launch(stream) end
    stream:sync()
    assert.are.equal(used, device:graph_memory().used)
  end)

  it("gives the free back when the capture of the free node is dropped #gpu", function()
    local used = device:graph_memory().used
    local allocating <close>, made = allocating_graph(1024, 1)
    allocating:launch(stream)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    made:close(builder)
    pcall(gpurun.launch, builder) -- an argument error ends the capture
    assert.are.equal("abandoned", builder.state)
    for _ = 1, 3 do allocating:launch(stream) end -- it frees what it makes itself again
    stream:sync()
    assert.are.equal(used, device:graph_memory().used)
  end)

  it("refuses a free node of memory its graph frees at each launch, or another capture's #gpu", function()
    local auto <close>, made = allocating_graph(16, 1, { auto_free_on_launch = true })
    auto:launch(stream)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    assert.matches("Buffer:close: its graph was completed with auto_free_on_launch and frees it at its next "
                   .. "launch itself", error_of(made.close, made, builder))
    made:close(stream)
    local first <close> = stream:create_graph_builder()
    local second <close> = other:create_graph_builder()
    first:begin_building()
    second:begin_building()
    local temporary = gpurun.empty(16, "float32", { stream = first })
    assert.matches("Buffer:close: the buffer is an allocation of another capture in progress: close it "
                   .. "on a builder of that capture", error_of(temporary.close, temporary, second))
    first:begin_building()
    local inside = gpurun.empty(16, "float32", { stream = first })
    local body = first:if_then(first:create_condition(0))
    body:begin_building()
    assert.matches("Buffer:close: a conditional body's graph cannot free memory", error_of(inside.close, inside, body))
    stream:sync()
  end)

  it("refuses a stream of another device #gpu #multigpu", function()
    local pool <close> = gpurun.MemoryPool({ device = 0 })
    local second = gpurun.Device(1)
    second:set_current()
    local foreign <close> = second:create_stream()
    device:set_current()
    assert.matches("gpurun.MemoryPool%(device 0%) cannot allocate 64 bytes for 16 float32 elements on a "
                   .. "stream of device 1: its memory lives on device 0",
                   error_of(gpurun.empty, 16, "float32", { pool = pool, stream = foreign }))
  end)
end)

describe("bench/alloc_compare.lua", function()
  local process = require("spec.support.process")

  it("refuses a bad option before touching the GPU", function()
    local result = process.gpurun("bench/alloc_compare.lua --pairs 0")
    assert.are.equal(2, result.code)
    assert.matches("alloc_compare.lua: error: %-%-pairs: expected a positive integer, got '0'", result.stderr)
  end)

  it("measures gpurun's side, the pipeline step and the loop that never syncs #gpu", function()
    local result = process.gpurun("bench/alloc_compare.lua --sizes 4096,1048576 --pairs 20 --reps 2 "
      .. "--iters 20 --large-step-mib 8 --json")
    assert.are.equal(0, result.code, result.stderr)
    local report = require("cjson").decode(result.stdout)
    for _, path in ipairs({ "gpurun cuMemAlloc", "gpurun default pool", "gpurun own pool" }) do
      assert.is_true(report.gpurun.results[path].sizes["4096"].us_per_pair > 0, path)
    end
    assert.truthy(report.c.missing)
    assert.are.equal(2, report.pipeline.in_step.alloc_nodes)
    assert.are.equal(2, report.pipeline.in_step.free_nodes)
    assert.are.equal(2 << 20, report.pipeline.up_front.launched_peak)
    assert.are.equal(8, report.pipeline_large.temporary_mib)
    assert.are.equal(2, report.pipeline_large.in_step.alloc_nodes)
    assert.are.equal(16 << 20, report.pipeline_large.up_front.launched_peak)
    assert.is_true(report.no_sync.busy_stream_still_running)
  end)
end)
