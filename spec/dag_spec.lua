-- Graphs as DAGs: ordering across streams, captures that fork and join,
-- fills and copies as nodes, updates in place, changes node by node, and
-- the graph's picture.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")
local files = require("spec.support.files")

local N = 4096

-- A kernel that keeps the GPU busy, so that work queued behind it shows
-- whether another stream really waited for it.
local busy_kernel
local function busy()
  if not busy_kernel then
    local device = gpurun.Device(0)
    local source = require("gpurun.samples.kernels").source("busy")
    busy_kernel = gpurun.Program(source, "c++", gpurun.ProgramOptions({ arch = "sm_" .. device.arch }))
      :compile("cubin"):get_kernel("busy")
  end
  return busy_kernel
end
local ONE = gpurun.LaunchConfig({ grid = 1, block = 1 })
local BUSY_CYCLES = 40 * 1000 * 1000 -- about 20 ms at 2 GHz

local function same_set(expected, actual)
  table.sort(expected)
  table.sort(actual)
  assert.are.same(expected, actual)
end

-- The node graph:nodes() lists for the kernel `name` (the only one).
local function node_named(graph, name)
  for _, node in ipairs(graph:nodes()) do
    if node.name == name then return node end
  end
  error("no node named " .. name)
end

describe("graphs as DAGs", function()
  local device, kernel, stream, config
  before_each(function()
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    config = gpurun.LaunchConfig({ grid = (N + 255) // 256, block = 256 })
  end)
  after_each(function()
    stream:close()
  end)

  local function all(buffer, value)
    return gpurun.allclose(buffer, value, 0, 0)
  end

  it("orders work on one stream after an event or another stream #gpu", function()
    local other <close> = device:create_stream()
    local source, target = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    stream:sync()
    gpurun.launch(stream, ONE, busy(), BUSY_CYCLES)
    source:fill(5, stream)
    local event = stream:record()
    assert.are.equal(other, other:wait(event))
    source:copy_to(target, other)
    other:sync()
    assert.is_true(all(target, 5))

    gpurun.launch(stream, ONE, busy(), BUSY_CYCLES)
    source:fill(7, stream)
    other:wait(stream)
    source:copy_to(target, other)
    other:sync()
    assert.is_true(all(target, 7))
    stream:sync()
  end)

  it("captures two branches side by side and joins them #gpu", function()
    local a, b = gpurun.full(N, 2, "float32"), gpurun.full(N, 3, "float32")
    local x, y, out = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local n = gpurun.u64(N)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local left, right = builder:split(2)
    assert.are.equal(builder, left)
    assert.are.equal("fork", right.kind)
    assert.is_false(builder.is_join_required)
    assert.is_true(right.is_join_required)
    gpurun.launch(left, config, kernel("vec_add"), a, b, x, n)
    gpurun.launch(right, config, kernel("vec_mul"), a, b, y, n)
    assert.are.equal(builder, gpurun.join(right, left))
    assert.are.equal("joined", right.state)
    assert.is_false(right.is_join_required)
    gpurun.launch(builder, config, kernel("vec_add"), x, y, out, n)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.are.equal(3, graph.node_count)
    local last = graph:nodes()[#graph:nodes()]
    local add, mul
    for _, node in ipairs(graph:nodes()) do
      if #node.dependencies == 2 then last = node
      elseif node.name == "vec_mul" then mul = node
      else add = node end
    end
    assert.are.equal("vec_add", last.name)
    same_set({ add.index, mul.index }, last.dependencies)
    assert.are.same({}, add.dependencies)
    assert.are.same({}, mul.dependencies)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(out, 11))
  end)

  it("orders builders of one capture through events and waits #gpu", function()
    local a, x, out = gpurun.full(N, 4, "float32"), gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local n = gpurun.u64(N)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local _, right = builder:split(2)
    gpurun.launch(right, config, kernel("vec_add"), a, a, x, n) -- x = 8
    local done = right:record()
    builder:wait(done)
    gpurun.launch(builder, config, kernel("vec_mul"), x, a, out, n) -- out = 32
    gpurun.join(builder, right)
    builder:end_building()
    local graph <close> = builder:complete()
    local mul = node_named(graph, "vec_mul")
    assert.are.same({ node_named(graph, "vec_add").index }, mul.dependencies)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(out, 32))
    -- An event recorded in a capture is for that capture only.
    stream:sync()
    assert.has_error(function() stream:wait(done) end,
      "bad argument #1 to 'Stream:wait' (the event was recorded during a graph capture: wait for it on a GraphBuilder of that capture)")
  end)

  it("refuses to end a capture whose forks were not joined, and every stream still works #gpu", function()
    local a, out = gpurun.full(N, 1, "float32"), gpurun.zeros(N, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local _, right = builder:split(2)
    gpurun.launch(right, config, kernel("vec_add"), a, a, out, gpurun.u64(N))
    local ok, err = pcall(builder.end_building, builder)
    assert.is_false(ok)
    assert.matches("1 builder%(s%) split from this one were not joined back", err)
    assert.are.equal("abandoned", builder.state)
    assert.are.equal("abandoned", right.state)
    assert.has_error(function() gpurun.launch(right, config, kernel("vec_add"), a, a, out, gpurun.u64(N)) end,
      "GraphBuilder is not building (it is abandoned): call begin_building() first")
    -- The streams run work again, and the builder captures anew.
    gpurun.launch(stream, config, kernel("vec_add"), a, a, out, gpurun.u64(N))
    stream:sync()
    assert.is_true(all(out, 2))
    builder:begin_building()
    gpurun.launch(builder, config, kernel("vec_mul"), out, out, out, gpurun.u64(N))
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(out, 4))
    right:close()
    builder:close()
  end)

  it("captures fills and copies as memset and memcpy nodes #gpu", function()
    local a = gpurun.full(N, 3, "float32")
    local copy, out = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local bytes = gpurun.zeros(N, "uint8")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    out:fill(0, builder)
    bytes:fill(9, builder)
    copy:copy_from(a, builder)
    gpurun.launch(builder, config, kernel("vec_add"), copy, a, out, gpurun.u64(N))
    out:copy_to(copy, builder)
    builder:end_building()
    local graph <close> = builder:complete()
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[#kinds + 1] = node.kind end
    same_set({ "memset", "memset", "memcpy", "kernel", "memcpy" }, kinds)
    stream:sync()
    assert.is_true(all(copy, 0)) -- capturing runs nothing
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(out, 6))
    assert.is_true(all(copy, 6))
    assert.is_true(gpurun.allclose(bytes, 9, 0, 0))
  end)

  it("refuses what cannot be a graph node, saying why #gpu", function()
    local buffer = gpurun.zeros(16, "float32")
    local wide = gpurun.zeros(16, "float64")
    for _, call in ipairs({
      { function(b) buffer:copy_from({ 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16 }, b) end,
        "Buffer:copy_from: a copy to or from Lua values cannot be a graph node" },
      { function(b) buffer:to_table(b) end, "Buffer:to_table: a copy to or from Lua values cannot be a graph node" },
      { function() buffer:fill(1, stream) end, "the stream is being captured by a GraphBuilder" },
      { function(b) wide:fill(1.5, b) end, "the two halves of this 8-byte value differ" },
    }) do
      local builder <close> = stream:create_graph_builder()
      builder:begin_building()
      local ok, err = pcall(call[1], builder)
      assert.is_false(ok)
      assert.truthy(err:find(call[2], 1, true), err)
      assert.are.equal("abandoned", builder.state)
    end
    -- A uniform 8-byte value is a memset of words.
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    wide:fill(0, builder)
    builder:end_building()
    local graph <close> = builder:complete()
    wide:fill(2.5, stream)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(wide, 0, 0, 0))
  end)

  it("updates a graph in place from a new capture, and refuses a changed topology #gpu", function()
    local scale = kernel("scale_shift")
    local x = gpurun.full(N, 1, "float32")
    local other = gpurun.full(N, 1, "float32")
    local function capture(target, factor, extra)
      local builder = stream:create_graph_builder()
      builder:begin_building()
      gpurun.launch(builder, config, scale, target, factor, 1, N)
      if extra then gpurun.launch(builder, config, scale, target, factor, 1, N) end
      builder:end_building()
      return builder
    end
    local first = capture(x, 2)
    local graph <close> = first:complete()
    first:close()
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 3))

    local second <close> = capture(other, 10)
    assert.are.equal(graph, graph:update(second))
    second:close()
    collectgarbage()
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 3))       -- untouched now
    assert.is_true(all(other, 11))  -- the new capture's buffer and scalar

    local longer <close> = capture(x, 5, true)
    local ok, err = pcall(graph.update, graph, longer)
    assert.is_false(ok)
    assert.matches("the builder's graph cannot update this one: .*; the graph replays as before", err)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(other, 111))
  end)

  it("keeps what an updated graph uses and lets go of what it no longer does #gpu", function()
    local scale = kernel("scale_shift")
    local old = gpurun.full(N, 1, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, scale, old, 2, 0, N)
    builder:end_building()
    local graph <close> = builder:complete()
    builder:close()
    assert.has_error(function() old:close() end,
      "gpurun.Buffer is used by 1 graph(s) or graph builder(s); close them first")
    local new = gpurun.full(N, 1, "float32")
    builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, scale, new, 3, 0, N)
    builder:end_building()
    graph:update(builder)
    builder:close()
    old:close() -- the graph no longer holds it
    local weak = setmetatable({ new }, { __mode = "v" })
    new = nil
    collectgarbage()
    collectgarbage()
    assert.is_not_nil(weak[1])
    for _ = 1, 8 do gpurun.full(N, 7, "float32") end
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(weak[1], 3, 0, 0))
  end)

  it("changes one kernel node's arguments, configuration and whether it runs #gpu", function()
    local scale = kernel("scale_shift")
    local x = gpurun.full(N, 1, "float32")
    local y = gpurun.full(N, 1, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    y:fill(4, builder)
    gpurun.launch(builder, config, scale, x, 2, 0, N)
    builder:end_building()
    local graph <close> = builder:complete()
    local node = node_named(graph, "scale_shift")
    local fill_node = 3 - node.index
    assert.are.equal("memset", graph:nodes()[fill_node].kind)
    assert.are.same({ fill_node }, node.dependencies)
    assert.are.equal(scale, node.kernel)
    assert.are.same(config.grid, node.grid)
    assert.are.same(config.block, node.block)
    assert.are.equal(0, node.shmem_size)
    assert.is_true(node.enabled)

    -- The scale node scales y now (the graph keeps y from here on).
    assert.are.equal(graph, graph:set_args(node.index, y, 3, 1, N))
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 1))
    assert.is_true(all(y, 13))
    assert.are.equal(graph, graph:set_enabled(fill_node, false))
    assert.is_false(graph:nodes()[fill_node].enabled)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(y, 40))
    graph:set_enabled(fill_node, true)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(y, 13))

    -- Half the threads: only the first half of x is scaled.
    graph:set_args(node.index, x, 2, 0, N)
    local half = gpurun.LaunchConfig({ grid = (N // 2 + 255) // 256, block = 256 })
    assert.are.equal(graph, graph:set_config(node.index, half))
    graph:launch(stream)
    stream:sync()
    local values = x:to_table(stream)
    assert.are.equal(2, values[1])
    assert.are.equal(1, values[N])
    assert.are.same(half.grid, graph:nodes()[node.index].grid)

    -- Wrong arguments leave the node as it was.
    assert.has_error(function() graph:set_args(node.index, x, 2, 0) end,
      "kernel 'scale_shift' takes 4 parameters, got 3")
    local ok, err = pcall(graph.set_args, graph, node.index, x, "two", 0, N)
    assert.is_false(ok)
    assert.truthy(err:find("kernel 'scale_shift' parameter 2", 1, true), err)
    assert.has_error(function() graph:set_args(fill_node, x) end,
      ("bad argument #1 to 'Graph:set_args' (a kernel node of a gpurun.Kernel expected: node %d is not one (see graph:nodes()))")
        :format(fill_node))
    assert.has_error(function() graph:set_enabled(99, true) end,
      "bad argument #1 to 'Graph:set_enabled' (node index 99 out of range (1..2))")
    graph:launch(stream)
    stream:sync()
    values = x:to_table(stream)
    assert.are.equal(4, values[1])
    assert.are.equal(1, values[N])
  end)

  it("draws the graph with kernel names on its nodes #gpu", function()
    local a, x, y = gpurun.full(N, 1, "float32"), gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local _, right = builder:split(2)
    gpurun.launch(builder, config, kernel("vec_add"), a, a, x, gpurun.u64(N))
    y:copy_from(a, right)
    gpurun.join(builder, right)
    gpurun.launch(builder, config, kernel("vec_mul"), x, y, x, gpurun.u64(N))
    builder:end_building()
    local graph <close> = builder:complete()
    local dot = graph:to_dot({ title = "a test" })
    assert.matches('^digraph "gpurun_graph" {', dot)
    assert.truthy(dot:find("vec_add", 1, true))
    assert.truthy(dot:find("vec_mul", 1, true))
    assert.truthy(dot:find("memcpy", 1, true))
    assert.truthy(dot:find('label="a test"', 1, true))
    local arrows = 0
    for _ in dot:gmatch("n%d+ %-> n%d+;") do arrows = arrows + 1 end
    assert.are.equal(2, arrows)

    local folder = files.temporary_folder()
    local path = folder .. "/driver.dot"
    builder:debug_dot_print(path, { verbose = true })
    local text = files.read(path)
    files.remove_folder(folder)
    assert.matches("^digraph", text)
    assert.truthy(text:find("vec_add", 1, true))
  end)
end)
