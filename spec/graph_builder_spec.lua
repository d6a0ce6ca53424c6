-- gpurun.GraphBuilder as a DAG: captures that fork (split) and join, order
-- through events and waits, and fills and copies as nodes.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")
local node_named = require("spec.support.graph_nodes").node_named

local N = 4096

local function same_set(expected, actual)
  table.sort(expected)
  table.sort(actual)
  assert.are.same(expected, actual)
end

describe("GraphBuilder: split, join, events and nodes", function()
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

  it("counts the nodes captured so far, so that a launch's nodes are known #gpu", function()
    local a = gpurun.full(N, 2, "float32")
    local builder <close> = stream:create_graph_builder()
    assert.are.equal(0, builder.node_count)
    builder:begin_building()
    assert.are.equal(0, builder.node_count)
    local left, right = builder:split(2)
    gpurun.launch(left, config, kernel("vec_add"), a, a, a, gpurun.u64(N))
    local before = builder.node_count
    gpurun.launch(right, config, kernel("vec_mul"), a, a, a, gpurun.u64(N))
    assert.are.equal(before + 1, builder.node_count) -- a fork's nodes are the origin's graph's
    assert.are.equal(builder.node_count, right.node_count)
    gpurun.join(left, right)
    builder:end_building()
    assert.are.equal(0, builder.node_count) -- not building
    local graph <close> = builder:complete()
    assert.are.equal(2, graph.node_count)
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

  it("orders a builder after another by waiting on it, which joins nothing #gpu", function()
    local a, x, out = gpurun.full(N, 4, "float32"), gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local n = gpurun.u64(N)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local _, right = builder:split(2)
    gpurun.launch(right, config, kernel("vec_add"), a, a, x, n) -- x = 8
    builder:wait(right)
    assert.are.equal("building", right.state)
    assert.is_true(right.is_join_required)
    gpurun.launch(builder, config, kernel("vec_mul"), x, a, out, n) -- out = 32
    gpurun.join(builder, right)
    assert.are.equal("joined", right.state)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.are.same({ node_named(graph, "vec_add").index }, node_named(graph, "vec_mul").dependencies)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(out, 32))
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

  it("keeps capturing when the collector unloads code or destroys a stream or a graph mid-capture #gpu", function()
    -- A finalizer runs wherever the collector steps, inside a capture too;
    -- the driver counts an unload and a stream's destruction as unsafe
    -- there, and refusing them would end the capture.
    local options = gpurun.ProgramOptions{ arch = "sm_" .. device.arch }
    local x = gpurun.full(N, 1, "float32")
    local n = gpurun.u64(N)
    local add = kernel("vec_add")
    do -- made, used and dropped before the capture
      local code = gpurun.Program(kernels.SOURCE, "c++", options):compile("cubin")
      code:get_kernel("vec_add")
      device:create_stream()
      -- A built builder and a completed graph, as capture_rule_spec's
      -- Graph:to_dot row leaves them for the row after it.
      local other = stream:create_graph_builder()
      other:begin_building()
      other:end_building()
      local built = stream:create_graph_builder()
      built:begin_building()
      gpurun.launch(built, config, add, x, x, x, n)
      built:end_building()
      built:complete()
    end
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    collectgarbage("collect") -- the code, the stream and the graphs go now, mid-capture
    collectgarbage("collect")
    gpurun.launch(builder, config, add, x, x, x, n)
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 2))
  end)

  it("keeps capturing when the collector frees buffers while a capture begins #gpu", function()
    -- begin_building's own allocations (the registry growing for the
    -- builder's reference) can step the collector and run a buffer's
    -- finalizer: a cuMemFree there, before the capture is listed and frees
    -- are deferred, would invalidate it. A collector that steps at every
    -- allocation, dropped buffers before each begin, and builders kept, so
    -- that the registry keeps growing.
    local pause = collectgarbage("setpause", 0)
    local stepmul = collectgarbage("setstepmul", 1000)
    local mode = collectgarbage("incremental", 0, 1000, 0)
    local builders = {}
    local ok, err = pcall(function()
      for i = 1, 400 do
        for _ = 1, 3 do gpurun.zeros(16, "float32") end
        local builder = stream:create_graph_builder()
        builders[i] = builder
        builder:begin_building()
        builder:end_building()
      end
    end)
    collectgarbage("incremental", pause, stepmul, 13) -- 13: Lua's own step size
    if mode ~= "incremental" then collectgarbage(mode) end
    for _, builder in ipairs(builders) do builder:close() end
    assert.is_true(ok, tostring(err))
    assert.are.equal(400, #builders)
  end)

end)
