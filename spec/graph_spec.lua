-- Graph capture and replay, and what a graph keeps alive.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")

describe("GraphBuilder and Graph", function()
  local device, kernel, stream
  before_each(function()
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
    plan = nil
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
    collectgarbage("collect")
    device:sync()
    local free_before = gpurun.mem_info()
    for _ = 1, 1000 do
      local g = capture(n, a, b, out)
      g:launch(stream)
      g:close()
    end
    stream:sync()
    collectgarbage("collect")
    local free_after = gpurun.mem_info()
    assert.is_true(math.abs(free_before - free_after) <= 4 << 20,
      ("free memory moved by %d bytes"):format(free_before - free_after))
  end)
end)
