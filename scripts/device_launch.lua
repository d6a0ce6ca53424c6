-- device_launch.lua: a kernel chooses which graph runs next. Two small
-- graphs, each a kernel writing its own value, are completed for device
-- launch and uploaded; a scheduler kernel, compiled with relocatable device
-- code and linked against the toolkit's libcudadevrt.a, reads a flag from
-- device memory and launches one of them with cudaGraphLaunch. For each
-- flag value the script checks which graph wrote, and that the device-side
-- launch succeeded.
--
--   gpurun scripts/device_launch.lua [--rounds N] [--tail] [--cudadevrt PATH]
--                                    [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")

-- Each chosen graph runs one kernel: every thread writes the graph's value.
local MARK = [[
extern "C" __global__ void mark(unsigned int *out, unsigned int value)
{
    out[blockIdx.x * blockDim.x + threadIdx.x] = value;
}
]]

-- One thread launches the graph the flag picks, and writes back what
-- cudaGraphLaunch returned (cudaSuccess is 0).
local SCHEDULER = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void schedule(const unsigned int *flag, cudaGraphExec_t if_zero,
                                    cudaGraphExec_t otherwise, int tail, int *status)
{
    if (threadIdx.x != 0 || blockIdx.x != 0)
        return;
    cudaGraphExec_t chosen = *flag == 0 ? if_zero : otherwise;
    *status = cudaGraphLaunch(chosen, tail ? cudaStreamGraphTailLaunch
                                           : cudaStreamGraphFireAndForget);
}
]]

local VALUES = { [0] = 17, [1] = 42 } -- what the graph for each flag value writes
local THREADS = 64

local cli = args.new("device_launch.lua",
  "A kernel reads a flag on the device and launches one of two graphs.")
cli:integer_option("--rounds", "Times each flag value is tried.", 2)
cli:flag("--tail", "Launch the chosen graph as a tail launch (after the scheduler ends) "
  .. "instead of fire-and-forget.")
cli:converted_option("--cudadevrt", "The device runtime library to link the scheduler against "
  .. "(default: $CUDA_HOME/lib64/libcudadevrt.a, else /usr/local/cuda's).", nil,
  function(text) return text end)
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Write the figures as one JSON object to stdout instead of the text report.")
local options = cli:parse(arg)

local function readable(path)
  local file = io.open(path, "rb")
  if file then file:close() end
  return file ~= nil
end

-- The toolkit's libcudadevrt.a: --cudadevrt, else under $CUDA_HOME or
-- /usr/local/cuda.
local function cudadevrt_path()
  if options.cudadevrt then
    if not readable(options.cudadevrt) then
      cli:usage_error("--cudadevrt: cannot read " .. options.cudadevrt)
    end
    return options.cudadevrt
  end
  local tried, roots = {}, { "/usr/local/cuda" }
  if os.getenv("CUDA_HOME") then table.insert(roots, 1, os.getenv("CUDA_HOME")) end
  for _, root in ipairs(roots) do
    local path = root .. "/lib64/libcudadevrt.a"
    if readable(path) then return path end
    tried[#tried + 1] = path
  end
  cli:usage_error("libcudadevrt.a not found (tried " .. table.concat(tried, ", ")
    .. "): give --cudadevrt PATH")
end

local function main()
  local devrt = cudadevrt_path()
  local device, out, checks = cli:open_run(options)
  out:field("rounds", options.rounds)
  out:field("mode", options.tail and "tail" or "fire-and-forget")
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)
  local arch = "sm_" .. device.arch

  local mark_code <close> = gpurun.Program(MARK, "c++", { arch = arch }):compile("cubin")
  local mark <close> = mark_code:get_kernel("mark")
  local scheduler_code <close> = gpurun.Program(SCHEDULER, "c++",
    { arch = arch, relocatable_device_code = true }):compile("cubin", { name = "schedule.cu" })
  local runtime <close> = gpurun.ObjectCode.from_library({ path = devrt })
  local linker <close> = gpurun.Linker(scheduler_code, runtime, gpurun.LinkerOptions{ arch = arch })
  local linked <close> = linker:link("cubin")
  local schedule <close> = linked:get_kernel("schedule")

  local written <close> = gpurun.zeros(THREADS, "uint32")
  local flag <close> = gpurun.zeros(1, "uint32")
  local status <close> = gpurun.zeros(1, "int32")
  local threads = gpurun.LaunchConfig{ grid = 1, block = THREADS }
  local one = gpurun.LaunchConfig{ grid = 1, block = 1 }

  -- A graph of one kernel writing `value`, launchable from the device; the
  -- first is uploaded as it is completed, the second by upload().
  local function marking_graph(value, upload_now)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, threads, mark, written, value)
    builder:end_building()
    local graph = builder:complete{ device_launch = true, upload_stream = upload_now and stream or nil }
    if not upload_now then graph:upload(stream) end
    return graph
  end
  local if_zero <close> = marking_graph(VALUES[0], true)
  local otherwise <close> = marking_graph(VALUES[1], false)

  -- The scheduler runs in a graph of its own: a kernel launches graphs only
  -- from there. That graph keeps the two it launches.
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  gpurun.launch(builder, one, schedule, flag, if_zero, otherwise, options.tail and 1 or 0, status)
  builder:end_building()
  local scheduler <close> = builder:complete()

  for round = 1, options.rounds do
    for value = 0, 1 do
      written:fill(0)
      status:fill(-1)
      flag:fill(value)
      scheduler:launch(stream)
      stream:sync()
      local label = ("round %d, flag %d"):format(round, value)
      local launched = status:get(1)
      checks:condition(label .. ": cudaGraphLaunch on the device", launched == 0,
        ("it returned cudaError_t %d"):format(launched))
      checks:buffers(label .. ": the graph for flag " .. value .. " ran", written, VALUES[value], 0, 0)
    end
  end
  out:say(("\n%d rounds, %s launches: flag 0 ran the graph writing %d, flag 1 the one writing %d")
    :format(options.rounds, options.tail and "tail" or "fire-and-forget", VALUES[0], VALUES[1]))

  gpurun.set_current_stream(nil)
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
