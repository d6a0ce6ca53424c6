-- Device-side graph launch: graphs completed with { device_launch = true },
-- a scheduler kernel linked against the toolkit's libcudadevrt.a that
-- launches one of them from the device, and scripts/device_launch.lua.
-- Compiling and linking the scheduler needs no GPU (NVRTC and nvJitLink);
-- the launches do (#gpu).
local gpurun = require("gpurun")
local process = require("spec.support.process")

local DEVRT = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/lib64/libcudadevrt.a"
local function have_devrt()
  local file = io.open(DEVRT, "rb")
  if file then file:close() end
  return file ~= nil
end

local SCHEDULER = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void schedule(const unsigned int *flag, cudaGraphExec_t if_zero,
                                    cudaGraphExec_t otherwise, int tail, int *status)
{
    cudaGraphExec_t chosen = *flag == 0 ? if_zero : otherwise;
    *status = cudaGraphLaunch(chosen, tail ? cudaStreamGraphTailLaunch
                                           : cudaStreamGraphFireAndForget);
}
]]

local MARK = [[
extern "C" __global__ void mark(unsigned int *out, unsigned int value) { out[threadIdx.x] = value; }
]]

local function linked_scheduler(arch, lto)
  local program = gpurun.Program(SCHEDULER, "c++", { arch = arch, relocatable_device_code = true })
  local code = program:compile(lto and "ltoir" or "cubin", { name = "schedule.cu" })
  local devrt = gpurun.ObjectCode.from_library({ path = DEVRT })
  local linker = gpurun.Linker(code, devrt, gpurun.LinkerOptions{ arch = arch, link_time_optimization = lto })
  return linker:link("cubin"), code
end

local MARKER = "__CNPRT_VERSION_NUMBER__" -- the device runtime's version, which its library defines

describe("a scheduler kernel linked against libcudadevrt.a", function()
  it("links with nvJitLink, without a GPU, from a cubin and from LTO-IR", function()
    if not have_devrt() then pending("no " .. DEVRT) return end
    for _, lto in ipairs({ false, true }) do
      local linked, code = linked_scheduler("sm_90", lto)
      assert.are.equal("cubin", linked.code_type)
      assert.truthy(linked.code:find(".text.schedule", 1, true))
      assert.truthy(linked.code:find(MARKER, 1, true), "the device runtime is linked in")
      if not lto then
        local bare = gpurun.Linker(code, gpurun.LinkerOptions{ arch = "sm_90" }):link("cubin")
        assert.falsy(bare.code:find(MARKER, 1, true))
      end
    end
  end)

  it("calls cudaGraphLaunch, which the device runtime resolves", function()
    local ptx = gpurun.Program(SCHEDULER, "c++", { arch = "sm_90", relocatable_device_code = true })
      :compile("ptx")
    assert.truthy(ptx.code:find(".extern .func  (.param .b32 func_retval0) cudaGraphLaunch", 1, true))
  end)
end)

describe("device-side graph launch", function()
  local device, stream, arch

  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
    arch = "sm_" .. device.arch
  end)

  after_each(function()
    collectgarbage()
    stream:close()
  end)

  -- A graph of one kernel writing `value` into `out`.
  local function marking_builder(mark, out, value)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, gpurun.LaunchConfig{ grid = 1, block = 32 }, mark, out, value)
    return builder:end_building()
  end

  local function kernels()
    local mark = gpurun.Program(MARK, "c++", { arch = arch }):compile("cubin"):get_kernel("mark")
    local schedule = linked_scheduler(arch, false):get_kernel("schedule")
    return mark, schedule
  end

  local function scheduler_graph(schedule, flag, if_zero, otherwise, tail, status)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, gpurun.LaunchConfig{ grid = 1, block = 1 }, schedule, flag, if_zero,
      otherwise, tail, status)
    return builder:end_building():complete(), builder
  end

  it("completes a graph for device launch, which the host launches too #gpu", function()
    local mark = gpurun.Program(MARK, "c++", { arch = arch }):compile("cubin"):get_kernel("mark")
    local out = gpurun.zeros(32, "uint32")
    local builder = marking_builder(mark, out, 5)
    local graph = builder:complete({ device_launch = true })
    assert.is_true(graph.device_launch)
    assert.is_false(builder:complete().device_launch)
    graph:launch(stream)
    stream:sync()
    assert.are.same(5, out:to_table()[32])
  end)

  it("lets a kernel pick the graph from device data, fire-and-forget and tail #gpu", function()
    if not have_devrt() then pending("no " .. DEVRT) return end
    local mark, schedule = kernels()
    local out, flag, status = gpurun.zeros(32, "uint32"), gpurun.zeros(1, "uint32"), gpurun.zeros(1, "int32")
    local if_zero = marking_builder(mark, out, 17):complete({ device_launch = true, upload_stream = stream })
    local otherwise = marking_builder(mark, out, 42):complete({ device_launch = true })
    otherwise:upload(stream)
    for tail = 0, 1 do
      local scheduler = scheduler_graph(schedule, flag, if_zero, otherwise, tail, status)
      for value = 0, 1 do
        out:fill(0, stream)
        status:fill(-1, stream)
        flag:fill(value, stream)
        scheduler:launch(stream)
        stream:sync()
        assert.are.equal(0, status:get(1), "cudaGraphLaunch's cudaError_t")
        assert.is_true(gpurun.allclose(out, value == 0 and 17 or 42, 0, 0), ("tail %d, flag %d"):format(tail, value))
      end
    end
  end)

  it("keeps the graphs a scheduler launches, until the scheduler's graph is closed #gpu", function()
    if not have_devrt() then pending("no " .. DEVRT) return end
    local mark, schedule = kernels()
    local out, flag, status = gpurun.zeros(32, "uint32"), gpurun.zeros(1, "uint32"), gpurun.zeros(1, "int32")
    local scheduler, builder
    do -- the graphs go out of scope here: the scheduler's graph keeps them
      local if_zero = marking_builder(mark, out, 17):complete({ device_launch = true, upload_stream = stream })
      local otherwise = marking_builder(mark, out, 42):complete({ device_launch = true, upload_stream = stream })
      scheduler, builder = scheduler_graph(schedule, flag, if_zero, otherwise, 0, status)
      assert.has_error(function() if_zero:close() end,
        "cannot close a gpurun.Graph while 2 graph(s) or graph builder(s) launch it from the device: close them first")
    end
    builder:close()
    collectgarbage()
    collectgarbage()
    flag:fill(1, stream)
    scheduler:launch(stream)
    stream:sync()
    assert.are.equal(0, status:get(1))
    assert.is_true(gpurun.allclose(out, 42, 0, 0))
    scheduler:close()
  end)

  it("needs the graph uploaded again after a node changes #gpu", function()
    if not have_devrt() then pending("no " .. DEVRT) return end
    local mark, schedule = kernels()
    local out, flag, status = gpurun.zeros(32, "uint32"), gpurun.zeros(1, "uint32"), gpurun.zeros(1, "int32")
    local graph = marking_builder(mark, out, 17):complete({ device_launch = true, upload_stream = stream })
    graph:set_arg(1, 2, 99)
    local ok, message = pcall(scheduler_graph, schedule, flag, graph, graph, 0, status)
    assert.is_false(ok)
    assert.matches("the gpurun.Graph is not on the device yet: upload it first", message, 1, true)
    graph:upload(stream)
    local scheduler = scheduler_graph(schedule, flag, graph, graph, 0, status)
    scheduler:launch(stream)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 99, 0, 0))
  end)

  it("refuses what a graph for device launch cannot hold, naming it #gpu", function()
    local out = gpurun.zeros(32, "uint32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local temporary = gpurun.empty(32, "uint32", { stream = builder })
    temporary:fill(1, builder)
    out:copy_from(temporary, builder)
    temporary:close()
    builder:end_building()
    assert.has_error(function() builder:complete({ device_launch = true }) end,
      "GraphBuilder:complete: a graph for device launch cannot allocate or free memory: make its "
      .. "buffers before the capture, not on the builder")
  end)
end)

describe("scripts/device_launch.lua", function()
  it("finds /usr/local/cuda's libcudadevrt.a with CUDA_HOME unset or wrong", function()
    local file = io.open("/usr/local/cuda/lib64/libcudadevrt.a", "rb")
    if not file then pending("no /usr/local/cuda/lib64/libcudadevrt.a") return end
    file:close()
    local bin = process.quote(process.gpurun_bin())
    for _, env in ipairs({ "env -u CUDA_HOME ", "CUDA_HOME=/nonexistent " }) do
      local result = process.run(env .. bin .. " scripts/device_launch.lua --rounds 1")
      assert.is_nil(result.stderr:find("not found", 1, true), env .. result.stderr)
      assert.are_not.equal(2, result.code, env .. result.stderr)
    end
  end)

  for _, extra in ipairs({ "", " --tail" }) do
    it("checks which graph ran for each flag value" .. extra .. " #gpu", function()
      if not have_devrt() then pending("no " .. DEVRT) return end
      local result = process.gpurun("scripts/device_launch.lua --rounds 2" .. extra)
      assert.are.equal(0, result.code, result.stdout .. result.stderr)
      assert.matches("flag 0 ran the graph writing 17, flag 1 the one writing 42", result.stdout, 1, true)
      assert.matches("\nDone\n", result.stdout, 1, true)
    end)
  end
end)
