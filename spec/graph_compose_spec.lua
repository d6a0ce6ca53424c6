-- Graphs made of graphs, and how they are built and changed: child graph
-- nodes (GraphBuilder:embed), capture modes (begin_building{ mode = }),
-- node priorities (LaunchConfig{ priority = }, complete{ use_node_priority
-- = true }), and the one line that says why Graph:update was refused.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")

local N = 4096

-- Kernels that set a condition and add to one int.
local CONTROL = [[
#include <cuda_device_runtime_api.h>
extern "C" __global__ void set_condition(cudaGraphConditionalHandle condition, const int *flag)
{
    cudaGraphSetConditional(condition, (unsigned int)*flag);
}
extern "C" __global__ void add(int *x, int amount) { *x += amount; }
]]

local DEVRT = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/lib64/libcudadevrt.a"
local SCHEDULER = [[
#include <cuda_device_runtime_api.h>
extern "C" __global__ void schedule(cudaGraphExec_t graph, int *status)
{
    *status = cudaGraphLaunch(graph, cudaStreamGraphFireAndForget);
}
]]
local MARK = [[
extern "C" __global__ void mark(unsigned int *out, unsigned int value) { out[threadIdx.x] = value; }
]]

local function kinds_of(nodes)
  local kinds = {}
  for i, node in ipairs(nodes) do kinds[i] = node.kind end
  table.sort(kinds)
  return kinds
end

local function only_kind(nodes, kind)
  local found
  for _, node in ipairs(nodes) do
    if node.kind == kind then
      assert.is_nil(found, "more than one " .. kind .. " node")
      found = node
    end
  end
  return assert(found, "no " .. kind .. " node")
end

describe("graphs of graphs", function()
  local device, kernel, stream, config
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    config = gpurun.LaunchConfig({ grid = (N + 255) // 256, block = 256 })
  end)
  after_each(function()
    collectgarbage()
    stream:close()
  end)

  local function all(buffer, value) return gpurun.allclose(buffer, value, 0, 0) end

  -- A built builder of two launches: x = 3 * (2 * x + 1).
  local function child_builder(x)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, kernel("scale_shift"), x, 2, 1, N)
    gpurun.launch(builder, config, kernel("scale_shift"), x, 3, 0, N)
    return builder:end_building()
  end

  it("embeds a completed graph, which replays as a child node and keeps what it uses #gpu", function()
    local y, out = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local z = gpurun.full(N, 1, "float32") -- only the child uses it
    local weak = setmetatable({ z = z }, { __mode = "v" })
    local builder <close> = stream:create_graph_builder()
    do
      local made = child_builder(z)
      local child = made:complete()
      builder:begin_building()
      y:fill(5, builder)
      assert.are.equal(builder, builder:embed(child))
      gpurun.launch(builder, config, kernel("vec_add"), y, y, out, gpurun.u64(N))
      builder:end_building()
      child:close()
      made:close()
    end
    z = nil -- luacheck: ignore 311 (the parent's capture alone must keep it)
    collectgarbage()
    collectgarbage()
    assert.is_not_nil(weak.z, "the capture keeps the child's buffer")
    local graph <close> = builder:complete()
    assert.are.equal(3, graph.node_count)
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(weak.z, 9))
    assert.is_true(all(out, 10))
    assert.has_error(function() weak.z:close() end,
      "gpurun.Buffer is used by 2 graph(s) or graph builder(s); close them first")

    local nodes = graph:nodes()
    assert.are.same({ "graph", "kernel", "memset" }, kinds_of(nodes))
    local child = only_kind(nodes, "graph")
    assert.are.same({ only_kind(nodes, "memset").index }, child.dependencies)
    assert.are.same({ child.index }, only_kind(nodes, "kernel").dependencies)
    assert.are.equal(2, #child.nodes)
    local first, second = child.nodes[1], child.nodes[2]
    if #first.dependencies > 0 then first, second = second, first end
    assert.are.equal("scale_shift", first.name)
    assert.are.equal("scale_shift", second.name)
    assert.are.same({}, first.dependencies)
    assert.are.same({ first.index }, second.dependencies)
    local dot = graph:to_dot()
    assert.truthy(dot:find("subgraph cluster_n" .. child.index .. " {", 1, true), dot)
    assert.truthy(dot:find(("n%d_%d -> n%d_%d;"):format(child.index, first.index, child.index, second.index),
      1, true), dot)
  end)

  it("embeds what a builder built, and the builder may build anew #gpu", function()
    local x = gpurun.full(N, 1, "float32")
    local made <close> = child_builder(x)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    builder:embed(made)
    builder:embed(made) -- twice: two child nodes, one after the other
    builder:end_building()
    made:begin_building() -- the copies are the parent's
    made:end_building()
    local graph <close> = builder:complete()
    local nodes = graph:nodes()
    assert.are.same({ "graph", "graph" }, kinds_of(nodes))
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 3 * (2 * 9 + 1)))
  end)

  it("embeds a graph in a conditional body, which runs it when the condition is set #gpu", function()
    local code = gpurun.Program(CONTROL, "c++", gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch }))
      :compile("cubin")
    local one = gpurun.LaunchConfig({ grid = 1, block = 1 })
    local x, flag = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local made <close> = stream:create_graph_builder()
    made:begin_building()
    gpurun.launch(made, one, code:get_kernel("add"), x, 5)
    made:end_building()
    local child <close> = made:complete()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local condition = builder:create_condition()
    gpurun.launch(builder, one, code:get_kernel("set_condition"), condition, flag)
    local body = builder:if_then(condition)
    body:begin_building()
    assert.are.equal(body, body:embed(child))
    body:end_building()
    builder:end_building()
    local graph <close> = builder:complete()
    graph:launch(stream)
    stream:sync()
    assert.are.equal(0, x:get(1, stream))
    flag:fill(1, stream)
    graph:launch(stream)
    stream:sync()
    assert.are.equal(5, x:get(1, stream))
  end)

  it("refuses to embed what a child node cannot hold, and the capture ends #gpu", function()
    local made <close> = stream:create_graph_builder()
    made:begin_building()
    gpurun.empty(16, "float32", { stream = made }) -- an allocation node
    made:end_building()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok, err = pcall(builder.embed, builder, made)
    assert.is_false(ok)
    assert.truthy(err:find("a graph without memory allocation or free nodes expected", 1, true), err)
    assert.are.equal("abandoned", builder.state)
    builder:begin_building()
    ok, err = pcall(builder.embed, builder, builder)
    assert.is_false(ok)
    assert.truthy(err:find("which cannot contain itself", 1, true), err)
    assert.are.equal("abandoned", builder.state)
  end)

  it("updates a graph with a child node from a capture of the same shape #gpu", function()
    local x, y = gpurun.full(N, 1, "float32"), gpurun.full(N, 1, "float32")
    local function parent(target, factor)
      local made = stream:create_graph_builder()
      made:begin_building()
      gpurun.launch(made, config, kernel("scale_shift"), target, factor, 0, N)
      made:end_building()
      local builder = stream:create_graph_builder()
      builder:begin_building()
      gpurun.launch(builder, config, kernel("scale_shift"), target, 1, 1, N) -- target + 1
      builder:embed(made)
      builder:end_building()
      made:close()
      return builder
    end
    local first = parent(x, 2)
    local graph <close> = first:complete()
    first:close()
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 4))
    local second <close> = parent(y, 3)
    assert.are.equal(graph, graph:update(second))
    graph:launch(stream)
    stream:sync()
    assert.is_true(all(x, 4))
    assert.is_true(all(y, 6))
  end)
end)

describe("capture modes", function()
  local device, kernel, stream, config
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    config = gpurun.LaunchConfig({ grid = (N + 255) // 256, block = 256 })
  end)
  after_each(function() stream:close() end)

  it("captures in each mode, and an error still ends the capture #gpu", function()
    local x = gpurun.full(N, 1, "float32")
    local expected = 1
    for _, mode in ipairs({ { mode = "global" }, { mode = "relaxed" }, { mode = "thread_local" }, "relaxed" }) do
      local builder <close> = stream:create_graph_builder()
      assert.are.equal(builder, builder:begin_building(mode))
      gpurun.launch(builder, config, kernel("scale_shift"), x, 2, 0, N)
      builder:end_building()
      local graph <close> = builder:complete()
      graph:launch(stream)
      stream:sync()
      expected = expected * 2
      assert.is_true(gpurun.allclose(x, expected, 0, 0))
      -- The capture rule: an error while building ends the capture.
      builder:begin_building(mode)
      local ok, err = pcall(gpurun.launch, builder, config, kernel("scale_shift"), x, 2, 0)
      assert.is_false(ok)
      assert.truthy(err:find("takes 4 parameters, got 3", 1, true), err)
      assert.are.equal("abandoned", builder.state)
      gpurun.launch(stream, config, kernel("scale_shift"), x, 1, 0, N)
      stream:sync()
    end
  end)

  it("lets a relaxed capture's thread allocate, outside the graph #gpu", function()
    local x = gpurun.full(N, 1, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building({ mode = "relaxed" })
    gpurun.launch(builder, config, kernel("scale_shift"), x, 2, 0, N)
    local plain = gpurun.empty(16, "float32") -- cuMemAlloc: refused in the other modes
    plain:close()
    gpurun.launch(builder, config, kernel("scale_shift"), x, 3, 0, N)
    builder:end_building()
    local graph <close> = builder:complete()
    assert.are.equal(2, graph.node_count)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(x, 6, 0, 0))
  end)

  it("captures a conditional body in its origin's mode #gpu", function()
    local builder <close> = stream:create_graph_builder()
    builder:begin_building("relaxed")
    local body = builder:if_then(builder:create_condition())
    body:begin_building()
    local plain = gpurun.empty(16, "float32") -- allowed: the body is relaxed too
    plain:close()
    body:end_building()
    builder:end_building()
    assert.are.equal("built", builder.state)
  end)
end)

describe("node priorities", function()
  local device, kernel, stream
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
  end)
  after_each(function() stream:close() end)

  it("captures each launch's priority and replays a graph completed to use them #gpu", function()
    local range = device.stream_priority_range
    local grid = (N + 255) // 256
    local high = gpurun.LaunchConfig({ grid = grid, block = 256, priority = range.greatest })
    local low = gpurun.LaunchConfig({ grid = grid, block = 256, priority = range.least })
    assert.are.equal(range.greatest, high.priority)
    assert.is_nil(gpurun.LaunchConfig({ grid = 1, block = 1 }).priority)
    local x, y = gpurun.full(N, 1, "float32"), gpurun.full(N, 1, "float32")
    gpurun.launch(stream, high, kernel("scale_shift"), x, 1, 1, N) -- a plain launch takes it too
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, high, kernel("scale_shift"), x, 2, 0, N)
    gpurun.launch(builder, low, kernel("scale_shift"), y, 3, 0, N)
    builder:end_building()
    local graph <close> = builder:complete({ use_node_priority = true })
    assert.is_true(graph.use_node_priority)
    assert.is_false(builder:complete().use_node_priority)
    local priorities = {}
    for _, node in ipairs(graph:nodes()) do priorities[#priorities + 1] = node.priority end
    table.sort(priorities)
    assert.are.same({ range.greatest, range.least }, priorities)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(x, 4, 0, 0))
    assert.is_true(gpurun.allclose(y, 3, 0, 0))
    if range.greatest ~= range.least then
      assert.truthy(graph:to_dot():find("priority " .. range.greatest, 1, true))
    end
  end)
end)

describe("Graph:update's refusals", function()
  local device, kernel, stream, config
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    config = gpurun.LaunchConfig({ grid = (N + 255) // 256, block = 256 })
  end)
  after_each(function()
    collectgarbage()
    stream:close()
  end)

  local function built(capture)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    capture(builder)
    return builder:end_building()
  end

  -- graph:update(builder)'s error, and that the graph still replays as before.
  local function refused(graph, builder, x, expected)
    local ok, err = pcall(graph.update, graph, builder)
    assert.is_false(ok)
    assert.is_nil(err:find("\n", 1, true), err)
    assert.truthy(err:find("Graph:update: the builder's graph cannot update this one: ", 1, true), err)
    assert.truthy(err:find("; the graph replays as before", 1, true), err)
    x:fill(1, stream)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(x, expected, 0, 0))
    return err
  end

  it("names a changed node count #gpu", function()
    local x = gpurun.zeros(N, "float32")
    local graph <close> = built(function(b) gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N) end):complete()
    local longer <close> = built(function(b)
      gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N)
      gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N)
    end)
    local err = refused(graph, longer, x, 2)
    assert.truthy(err:find("the node count 1 became 2 (the topology changed: "
      .. "CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED)", 1, true), err)
  end)

  it("names a node whose dependencies changed #gpu", function()
    local x, y = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    local graph <close> = built(function(b)
      gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N)
      gpurun.launch(b, config, kernel("scale_shift"), y, 2, 0, N)
    end):complete()
    local apart <close> = built(function(b)
      local _, side = b:split(2)
      gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N)
      gpurun.launch(side, config, kernel("scale_shift"), y, 2, 0, N)
      gpurun.join(b, side)
    end)
    local err = refused(graph, apart, x, 2)
    assert.truthy(err:find("CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED", 1, true), err)
    assert.matches("this one: node [12] %(kernel 'scale_shift'%): ", err)
  end)

  it("names a node whose kind changed #gpu", function()
    local x = gpurun.zeros(N, "float32")
    local graph <close> = built(function(b) gpurun.launch(b, config, kernel("scale_shift"), x, 2, 0, N) end):complete()
    local filling <close> = built(function(b) x:fill(0, b) end)
    local err = refused(graph, filling, x, 2)
    assert.truthy(err:find("this one: node 1: a kernel node ('scale_shift') became a memset node (a node's "
      .. "kind changed: CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED)", 1, true), err)
  end)

  it("names a node whose priority changed in a graph that uses node priorities #gpu", function()
    local range = device.stream_priority_range
    if range.greatest == range.least then pending("this device has one stream priority") return end
    local x = gpurun.zeros(N, "float32")
    local function at(priority)
      local with = gpurun.LaunchConfig({ grid = config.grid, block = config.block, priority = priority })
      return built(function(b) gpurun.launch(b, with, kernel("scale_shift"), x, 2, 0, N) end)
    end
    local first <close> = at(range.least)
    local graph <close> = first:complete({ use_node_priority = true })
    local second <close> = at(range.greatest)
    local err = refused(graph, second, x, 2)
    assert.truthy(err:find(("this one: node 1 (kernel 'scale_shift'): priority %d became %d ("):format(range.least,
      range.greatest), 1, true), err)
  end)

  it("names both kernels when a node's kernel cannot change to one that launches graphs #gpu", function()
    local file = io.open(DEVRT, "rb")
    if not file then pending("no " .. DEVRT) return end
    file:close()
    local arch = "sm_" .. device.arch
    local mark = gpurun.Program(MARK, "c++", { arch = arch }):compile("cubin"):get_kernel("mark")
    local code = gpurun.Program(SCHEDULER, "c++", { arch = arch, relocatable_device_code = true })
      :compile("cubin", { name = "schedule.cu" })
    local devrt = gpurun.ObjectCode.from_library({ path = DEVRT })
    local schedule = gpurun.Linker(code, devrt, gpurun.LinkerOptions{ arch = arch }):link("cubin")
      :get_kernel("schedule")
    local out, status = gpurun.zeros(32, "uint32"), gpurun.zeros(1, "int32")
    local one = gpurun.LaunchConfig({ grid = 1, block = 32 })
    local marking <close> = built(function(b) gpurun.launch(b, one, mark, out, 7) end)
    local target <close> = marking:complete({ device_launch = true, upload_stream = stream })
    local graph <close> = marking:complete()
    local scheduling <close> = built(function(b)
      gpurun.launch(b, gpurun.LaunchConfig({ grid = 1, block = 1 }), schedule, target, status)
    end)
    local ok, err = pcall(graph.update, graph, scheduling)
    assert.is_false(ok)
    assert.truthy(err:find("this one: node 1 (kernel 'schedule'): kernel 'mark' became 'schedule' (", 1, true),
      err)
    graph:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 7, 0, 0))
  end)
end)
