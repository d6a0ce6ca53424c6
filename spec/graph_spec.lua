-- gpurun.Graph: capture and replay, what a graph keeps alive, and changing a
-- graph without building a new one (update, set_args, set_config,
-- set_enabled), its nodes and its picture.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local kernels = require("spec.support.kernels")
local files = require("spec.support.files")
local node_named = require("spec.support.graph_nodes").node_named
local device_memory = require("spec.support.device_memory")

local N = 4096

describe("GraphBuilder and Graph", function()
  local device, kernel, stream
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    gpurun.set_current_stream(stream)
  end)
  after_each(function()
    gpurun.set_current_stream(nil)
    stream:close()
  end)

  local function capture(n, a, b, out)
    local config = gpurun.LaunchConfig({ grid = (n + 255) // 256, block = 256 })
    local builder = stream:create_graph_builder()
    assert.are.equal("idle", builder.state)
    builder:begin_building()
    assert.are.equal("building", builder.state)
    gpurun.launch(builder, config, kernel("vec_add"), a, b, out, gpurun.u64(n))
    gpurun.launch(builder, config, kernel("vec_mul"), out, b, out, gpurun.u64(n))
    builder:end_building()
    assert.are.equal("built", builder.state)
    local graph = builder:complete()
    builder:close()
    return graph
  end

  it("replays a captured pipeline and sees new buffer contents #gpu", function()
    local n = 5000
    local a, b, out = gpurun.full(n, 1, "float32"), gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32")
    local graph <close> = capture(n, a, b, out)
    assert.are.equal(2, graph.node_count)
    graph:upload(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 0, 0, 0)) -- capturing launches nothing
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 6, 0, 0))
    a:fill(3)
    b:fill(4)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 28, 0, 0))
  end)

  it("keeps captured buffers alive through collectgarbage #gpu", function()
    local n = 1 << 16
    local graph = capture(n, gpurun.full(n, 1, "float32"), gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32"))
    collectgarbage("collect")
    collectgarbage("collect")
    local filler = {}
    for i = 1, 20 do filler[i] = gpurun.full(n, 99, "float32") end -- would reuse freed memory
    graph:launch(stream)
    stream:sync()
    for i = 1, 20 do assert.is_true(gpurun.allclose(filler[i], 99, 0, 0)); filler[i]:close() end
    graph:close()
    collectgarbage("collect")
  end)

  it("refuses to close a buffer or object code a graph uses #gpu", function()
    local n = 256
    local a, b, out = gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32")
    local graph = capture(n, a, b, out)
    local ok, err = pcall(a.close, a)
    assert.is_false(ok)
    assert.matches("used by 1 graph", err)
    graph:launch(stream)
    stream:sync()
    graph:close()
    graph:close()
    a:close()
    assert.has_error(function() graph:launch(stream) end, "attempt to use a closed gpurun.Graph")
  end)

  it("ends the capture cleanly when a launch error is raised while building #gpu", function()
    local a = gpurun.zeros(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok, err = pcall(gpurun.launch, builder, config, kernel("vec_add"), a, a, a)
    assert.is_false(ok)
    assert.matches("takes 4 parameters", err)
    assert.are.equal("abandoned", builder.state)
    assert.has_error(function() builder:end_building() end)
    -- the stream is usable again
    gpurun.launch(stream, config, kernel("vec_add"), a, a, a, gpurun.u64(16))
    stream:sync()
    -- and the builder can start over
    builder:begin_building()
    gpurun.launch(builder, config, kernel("vec_add"), a, a, a, gpurun.u64(16))
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
  end)

  it("ends the capture when the stream is synchronized while building #gpu", function()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    assert.has_error(function() stream:sync() end)
    stream:sync()
  end)

  it("ends the capture when an unsafe call fails while building #gpu", function()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok = pcall(gpurun.empty, 1024, "float32") -- allocation is not allowed while capturing
    if not ok then
      assert.are.equal("abandoned", builder.state)
    else
      builder:end_building()
    end
    stream:sync()
  end)

  it("captures plan launches #gpu", function()
    local n = 512
    local a, out = gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32")
    local plan = kernel("vec_mul"):bind(gpurun.LaunchConfig({ grid = 2, block = 256 }), a, a, out, gpurun.u64(n))
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    plan:launch(builder)
    builder:end_building()
    local graph <close> = builder:complete()
    plan:close()
    plan = nil -- luacheck: ignore 311 (the graph alone must keep its arguments)
    collectgarbage("collect")
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 4, 0, 0))
  end)

  it("refuses launches and completes in the wrong state #gpu", function()
    local builder <close> = stream:create_graph_builder()
    local a = gpurun.zeros(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    assert.has_error(function() gpurun.launch(builder, config, kernel("vec_add"), a, a, a, 16) end,
      "GraphBuilder is not building (it is idle): call begin_building() first")
    assert.has_error(function() builder:complete() end)
    assert.has_error(function() builder:end_building() end)
    builder:begin_building()
    assert.has_error(function() builder:begin_building() end, "GraphBuilder:begin_building: already building")
    builder:close()
    builder:close()
    assert.has_error(function() builder:begin_building() end, "attempt to use a closed gpurun.GraphBuilder")
    stream:sync()
  end)

  it("leaves free device memory where it started after 1,000 graph build/close cycles #gpu", function()
    local n = 4096
    local a, b, out = gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32")
    local graph = capture(n, a, b, out)
    graph:close()
    device:sync()
    -- What a graph's leak costs is the driver's to say: 4 MiB over 1,000 is
    -- a few KiB each, which another process's noise can pass.
    device_memory.settles("1,000 graphs built, launched and closed", 8 << 20, function()
      for _ = 1, 1000 do
        local g = capture(n, a, b, out)
        g:launch(stream)
        g:close()
      end
      stream:sync()
      collectgarbage("collect")
    end)
  end)
end)

describe("Graph: update, nodes, set_args and its picture", function()
  local device, kernel, stream, config
  before_each(function()
    local _
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
    new = nil -- luacheck: ignore 311 (the graph alone must keep it)
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

  it("sets a kernel node's arguments without making Lua garbage once it keeps them #gpu", function()
    local scale = kernel("scale_shift")
    local x = gpurun.full(N, 1, "float32")
    local y = gpurun.full(N, 1, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, scale, x, 2, 0, N)
    builder:end_building()
    local graph <close> = builder:complete()
    local node = node_named(graph, "scale_shift").index
    -- Both buffers kept, and the method lookups settled, before the count.
    assert.are.equal(0, expect.bytes_allocated(function()
      graph:set_args(node, y, 1, 0, N)
      graph:set_args(node, x, 1, 0, N)
    end))
  end)

  it("sets one argument of a kernel node, the others as the node has them #gpu", function()
    local scale = kernel("scale_shift")
    local x = gpurun.full(N, 1, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, scale, x, 2, 0, N)
    builder:end_building()
    local graph <close> = builder:complete()
    local node = node_named(graph, "scale_shift")
    assert.are.equal(graph, graph:set_arg(node.index, 2, 5)) -- x = 5 * x + 0
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 5))
    local y = gpurun.full(N, 2, "float32")
    graph:set_arg(node.index, 1, y) -- now y; the graph keeps it
    graph:set_arg(node.index, 3, 1) -- y = 5 * y + 1
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 5))
    assert.is_true(all(y, 11))
    assert.has_error(function() y:close() end)
    local ok, err = pcall(graph.set_arg, graph, node.index, 2, "two")
    assert.is_false(ok)
    assert.truthy(err:find("kernel 'scale_shift' parameter 2", 1, true), err)
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
