-- Device-side control: conditional nodes set by kernels (if, if/else,
-- switch, while, nested), K passes per graph, and launch attributes
-- (clusters, cooperative launches, programmatic dependent launch).
local gpurun = require("gpurun")
local bench = require("gpurun.bench")

-- Kernels that set conditions: <cuda_device_runtime_api.h> declares
-- cudaGraphConditionalHandle and cudaGraphSetConditional, and gpurun's
-- compiles find it in the CUDA include folder.
local SOURCE = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void set_condition(cudaGraphConditionalHandle condition, const int *flag)
{
    cudaGraphSetConditional(condition, (unsigned int)*flag);
}

extern "C" __global__ void add(int *x, int amount) { *x += amount; }

// One pass of a loop: counts down *left and keeps the loop going while
// anything is left.
extern "C" __global__ void count_down(cudaGraphConditionalHandle condition, int *left)
{
    int now = --*left;
    cudaGraphSetConditional(condition, now > 0 ? 1u : 0u);
}

extern "C" __global__ void cluster_shape(unsigned int *out)
{
    unsigned int rank, size;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(rank));
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(size));
    if (threadIdx.x == 0) out[blockIdx.x] = size * 100 + rank;
}

extern "C" __global__ void grid_sum(const float *in, float *out, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) atomicAdd(out, in[i]);
}

extern "C" __global__ void pdl_scale(const float *in, float *out, float factor, unsigned int n)
{
    cudaGridDependencySynchronize();
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i] * factor;
}
]]

local ONE = gpurun.LaunchConfig({ grid = 1, block = 1 })

describe("device-side control", function()
  local device, code, stream
  local function kernel(name) return code:get_kernel(name) end
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    if not code then
      code = gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch }))
        :compile("cubin")
    end
    stream = device:create_stream()
  end)
  after_each(function() stream:close() end)

  local function value(buffer) return buffer:get(1, stream) end

  -- graph(function(builder) ... end) -> a completed graph.
  local function graph_of(pipeline)
    return bench.capture(stream, pipeline)
  end

  local function graph_launch(graph)
    graph:launch(stream)
    stream:sync()
  end

  it("runs an if node's body only when a kernel sets its condition #gpu", function()
    local x, flag = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local condition
    local graph <close> = graph_of(function(builder)
      condition = builder:create_condition()
      assert.are.equal(0, condition.default)
      assert.are.equal("integer", math.type(condition.handle))
      gpurun.launch(builder, ONE, kernel("set_condition"), condition, flag)
      local body = builder:if_then(condition)
      assert.are.equal("body", body.kind)
      assert.are.equal("idle", body.state)
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 5)
      body:end_building()
      gpurun.launch(builder, ONE, kernel("add"), x, 100)
    end)
    assert.truthy(tostring(condition):find("gpurun.Condition", 1, true))
    graph_launch(graph)
    assert.are.equal(100, value(x))
    flag:fill(1, stream)
    graph_launch(graph)
    assert.are.equal(205, value(x))
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[#kinds + 1] = node.kind end
    assert.are.same({ "kernel", "conditional", "kernel" }, kinds)
    assert.truthy(graph:to_dot():find("conditional", 1, true))
  end)

  it("runs the else body of an if/else node, and the chosen case of a switch #gpu", function()
    local x, flag = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local graph <close> = graph_of(function(builder)
      local condition = builder:create_condition(0)
      gpurun.launch(builder, ONE, kernel("set_condition"), condition, flag)
      local yes, no = builder:if_else(condition)
      yes:begin_building()
      gpurun.launch(yes, ONE, kernel("add"), x, 1)
      yes:end_building()
      no:begin_building()
      gpurun.launch(no, ONE, kernel("add"), x, 10)
      no:end_building()
    end)
    graph_launch(graph)
    assert.are.equal(10, value(x))
    flag:fill(7, stream)
    graph_launch(graph)
    assert.are.equal(11, value(x))

    local y = gpurun.zeros(1, "int32")
    local switch <close> = graph_of(function(builder)
      local condition = builder:create_condition(0)
      gpurun.launch(builder, ONE, kernel("set_condition"), condition, flag)
      local cases = table.pack(builder:switch(condition, 3))
      assert.are.equal(3, cases.n)
      for i = 1, 3 do
        cases[i]:begin_building()
        gpurun.launch(cases[i], ONE, kernel("add"), y, math.tointeger(10 ^ (i - 1)))
        cases[i]:end_building()
      end
    end)
    for _, case in ipairs({ { 0, 1 }, { 2, 101 }, { 1, 111 }, { 3, 111 }, { 99, 111 } }) do
      flag:fill(case[1], stream)
      graph_launch(switch)
      assert.are.equal(case[2], value(y))
    end
  end)

  it("loops a while node until a kernel in its body clears the condition #gpu", function()
    local x, left = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local graph <close> = graph_of(function(builder)
      local again = builder:create_condition(1)
      local body = builder:while_loop(again)
      body:begin_building()
      gpurun.launch(body, ONE, kernel("add"), x, 1)
      gpurun.launch(body, ONE, kernel("count_down"), again, left)
      body:end_building()
    end)
    assert.is_true(graph.has_loop)
    for _, passes in ipairs({ 5, 1, 1000 }) do
      x:fill(0, stream)
      left:fill(passes, stream)
      graph_launch(graph)
      assert.are.equal(passes, value(x))
      assert.are.equal(0, value(left))
    end
  end)

  it("nests conditionals: an if inside a while body, with the body's own condition #gpu", function()
    local odd, all, left = gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32"), gpurun.zeros(1, "int32")
    local NEST = [[
#include <cuda_device_runtime_api.h>
extern "C" __global__ void is_odd(cudaGraphConditionalHandle condition, const int *left)
{
    cudaGraphSetConditional(condition, (unsigned int)(*left & 1));
}
]]
    local nest_code <close> = gpurun.Program(NEST, "c++", gpurun.ProgramOptions({ arch = "sm_" .. device.arch }))
      :compile("cubin")
    local is_odd = nest_code:get_kernel("is_odd")
    local graph <close> = graph_of(function(builder)
      local again = builder:create_condition(1)
      local body = builder:while_loop(again)
      body:begin_building()
      local when_odd = body:create_condition(0)
      gpurun.launch(body, ONE, is_odd, when_odd, left)
      local inner = body:if_then(when_odd)
      inner:begin_building()
      gpurun.launch(inner, ONE, kernel("add"), odd, 1)
      inner:end_building()
      gpurun.launch(body, ONE, kernel("add"), all, 1)
      gpurun.launch(body, ONE, kernel("count_down"), again, left)
      body:end_building()
    end)
    left:fill(9, stream)
    graph_launch(graph)
    assert.are.equal(9, value(all))
    assert.are.equal(5, value(odd)) -- 9, 7, 5, 3, 1
  end)

  it("refuses conditions outside their graph and bodies captured too late #gpu", function()
    local flag = gpurun.zeros(1, "int32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local condition = builder:create_condition(0)
    local body = builder:if_then(condition)
    builder:end_building()
    local ok, err = pcall(body.begin_building, body)
    assert.is_false(ok)
    assert.truthy(err:find("the graph this body belongs to is no longer being built (it is built)", 1, true), err)
    -- Launched outside its capture.
    ok, err = pcall(gpurun.launch, stream, ONE, kernel("set_condition"), condition, flag)
    assert.is_false(ok)
    assert.truthy(err:find("a gpurun.Condition is set by kernels of the graph it was made for", 1, true), err)
    -- In another capture.
    local other <close> = stream:create_graph_builder()
    other:begin_building()
    ok, err = pcall(gpurun.launch, other, ONE, kernel("set_condition"), condition, flag)
    assert.is_false(ok)
    assert.truthy(err:find("a gpurun.Condition is set by kernels of the graph it was made for", 1, true), err)
    assert.are.equal("abandoned", other.state)
    other:begin_building()
    ok, err = pcall(other.while_loop, other, condition)
    assert.is_false(ok)
    assert.truthy(err:find("a condition of this capture expected", 1, true), err)
    -- A condition of the outer graph cannot drive a node in a body.
    local outer <close> = stream:create_graph_builder()
    outer:begin_building()
    local again = outer:create_condition(1)
    local loop = outer:while_loop(again)
    loop:begin_building()
    ok, err = pcall(loop.if_then, loop, again)
    assert.is_false(ok)
    assert.truthy(err:find("a condition made on this builder (or one split from it) expected", 1, true), err)
    assert.are.equal("abandoned", outer.state)
    -- Ending with a body still building.
    local third <close> = stream:create_graph_builder()
    third:begin_building()
    local open = third:if_then(third:create_condition())
    open:begin_building()
    ok, err = pcall(third.end_building, third)
    assert.is_false(ok)
    assert.truthy(err:find("1 conditional body builder(s) are still building", 1, true), err)
    -- Streams still work.
    gpurun.launch(stream, ONE, kernel("add"), flag, 3)
    assert.are.equal(3, value(flag))
  end)

  it("captures K passes of a pipeline into one graph #gpu", function()
    local x = gpurun.zeros(1, "int32")
    local graph <close> = bench.capture(stream, function(builder)
      gpurun.launch(builder, ONE, kernel("add"), x, 1)
    end, { iterations = 10 })
    assert.are.equal(10, graph.node_count)
    graph_launch(graph)
    assert.are.equal(10, value(x))
    assert.has_error(function() bench.capture(stream, function() end, { iterations = 0 }) end,
      "bench.capture: options.iterations must be a positive integer, got 0")
  end)

  it("launches thread block clusters, and refuses clusters the device cannot run #gpu", function()
    local blocks = 8
    local out = gpurun.zeros(blocks, "uint32")
    local config = gpurun.LaunchConfig({ grid = blocks // 2, cluster = 2, block = 32 })
    assert.are.same({ 2, 1, 1 }, config.cluster)
    gpurun.launch(stream, config, kernel("cluster_shape"), out)
    local values = out:to_table(stream)
    for i = 1, blocks do assert.are.equal(200 + (i - 1) % 2, values[i]) end
    -- In a graph too.
    out:fill(0, stream)
    local graph <close> = bench.capture(stream, function(builder)
      gpurun.launch(builder, config, kernel("cluster_shape"), out)
    end)
    graph_launch(graph)
    assert.are.equal(201, out:get(2, stream))
    -- 16 blocks per cluster need the non-portable size: refused here.
    local too_big = gpurun.LaunchConfig({ grid = 1, cluster = 16, block = 1024 })
    local ok, err = pcall(gpurun.launch, stream, too_big, kernel("cluster_shape"), out)
    assert.is_false(ok)
    assert.truthy(err:find("kernel 'cluster_shape': a cluster of 16 x 1 x 1 blocks of 1024 threads cannot run on this device", 1, true), err)
  end)

  it("launches cooperative grids up to what can be resident at once #gpu", function()
    local n = 1 << 16
    local input = gpurun.full(n, 1, "float32")
    local sum = gpurun.zeros(1, "float32")
    local config = gpurun.LaunchConfig({ grid = n // 256, block = 256, is_cooperative = true })
    assert.is_true(config.is_cooperative)
    gpurun.launch(stream, config, kernel("grid_sum"), input, sum, n)
    assert.are.equal(n, value(sum))
    local sms = device:get_attribute(16) -- CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    local huge = gpurun.LaunchConfig({ grid = sms * 64, block = 1024, is_cooperative = true })
    local ok, err = pcall(gpurun.launch, stream, huge, kernel("grid_sum"), input, sum, n)
    assert.is_false(ok)
    assert.truthy(err:find("is more than can be resident at once", 1, true), err)
  end)

  it("overlaps dependent kernels with programmatic stream serialization #gpu", function()
    local n = 1 << 20
    local a, b, c = gpurun.full(n, 2, "float32"), gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32")
    local config = gpurun.LaunchConfig({ grid = n // 256, block = 256,
      programmatic_stream_serialization = true })
    assert.is_true(config.programmatic_stream_serialization)
    for _ = 1, 3 do
      gpurun.launch(stream, config, kernel("pdl_scale"), a, b, 3, n)
      gpurun.launch(stream, config, kernel("pdl_scale"), b, c, 5, n)
    end
    stream:sync()
    assert.is_true(gpurun.allclose(c, 30, 0, 0))
    c:fill(0, stream)
    local graph <close> = bench.capture(stream, function(builder)
      gpurun.launch(builder, config, kernel("pdl_scale"), a, b, 7, n)
      gpurun.launch(builder, config, kernel("pdl_scale"), b, c, 2, n)
    end)
    graph_launch(graph)
    assert.is_true(gpurun.allclose(c, 28, 0, 0))
    -- A node's attributes are fixed when it is captured.
    local node = graph:nodes()[1]
    local ok, err = pcall(graph.set_config, graph, node.index, config)
    assert.is_false(ok)
    assert.truthy(err:find("a LaunchConfig without launch attributes (cluster, cooperative, programmatic, priority) expected", 1, true), err)
  end)
end)

describe("device-side control without a GPU", function()
  it("compiles kernels that set conditions and wait for the grid before them", function()
    local code = gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions({ std = "c++17", arch = "sm_90" }))
      :compile("ptx")
    local ptx = code.code
    for _, name in ipairs({ "set_condition", "count_down", "cluster_shape", "pdl_scale" }) do
      assert.truthy(ptx:find(".entry " .. name, 1, true), name)
    end
    -- cudaGraphSetConditional is a call into the device runtime the driver links.
    assert.truthy(ptx:find("cudaGraphSetConditional", 1, true))
    assert.truthy(ptx:find("griddepcontrol.wait", 1, true))
  end)

  it("reads launch attributes into a LaunchConfig, with cuda.core's names", function()
    local plain = gpurun.LaunchConfig({ grid = 4, block = 64 })
    assert.is_nil(plain.cluster)
    assert.is_false(plain.is_cooperative)
    assert.is_false(plain.programmatic_stream_serialization)
    local config = gpurun.LaunchConfig({ grid = { 3, 2 }, block = 128, cluster = { 2, 2 },
      cooperative_launch = true, programmatic_stream_serialization = true })
    assert.are.same({ 2, 2, 1 }, config.cluster)
    assert.are.same({ 3, 2, 1 }, config.grid) -- clusters, as cuda.core counts them
    assert.is_true(config.is_cooperative)
    assert.is_true(config.cooperative_launch)
    assert.is_true(config.programmatic_stream_serialization)
    for _, case in ipairs({
      { { grid = 1, block = 1, cluster = { 4, 4, 2 } }, "LaunchConfig: a cluster of 4 x 4 x 2 = 32 blocks; at most 16 (8 is the portable size)" },
      { { grid = { 1, 65535 }, block = 1, cluster = { 1, 2 } }, "LaunchConfig: grid.y of 65535 clusters of 2 blocks is 131070 blocks, more than 65535" },
      { { grid = 1, block = 1, cluster = 0 }, "cluster" },
      { { grid = 1, block = 1, clusters = 2 }, "bad argument #1 to 'gpurun.LaunchConfig' (unknown option 'clusters' (known: grid, block, shmem_size, cluster, is_cooperative, cooperative_launch, programmatic_stream_serialization, priority))" },
    }) do
      local ok, err = pcall(gpurun.LaunchConfig, case[1])
      assert.is_false(ok)
      assert.truthy(err:find(case[2], 1, true), err)
    end
  end)
end)
