-- bench/managed_memory.lua: one kernel (y = 2x + y, float32) over device
-- buffers, managed buffers prefetched to the device, managed buffers whose
-- pages are prefetched to the host before each run (untimed), and mapped
-- pinned memory read over the bus; ms per kernel between two events
-- (medians of --reps means of --runs) and each path's ratio to device
-- memory. Targets: prefetched managed within 3% of device memory, and
-- ahead of managed memory without a prefetch.
--
--   build/gpurun bench/managed_memory.lua [--sizes 16777216] [--reps 5] [--runs 5] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local cjson = require("cjson")

local cli = args.new("managed_memory.lua",
  "A kernel over device, prefetched managed, unprefetched managed and mapped pinned memory.")
bench.sizes_option(cli, "Comma-separated element counts (float32).", "16777216")
cli:integer_option("--reps", "Repetitions per path and size (the median is reported).", 5)
cli:integer_option("--runs", "Kernels timed per repetition (their mean is one repetition).", 5)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)

local device = cli:open_device(0)
local stream <close> = device:create_stream()
local code <close> = gpurun.Program([[
extern "C" __global__ void axpy(const float *x, float *y, size_t n)
{
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    y[i] = 2.0f * x[i] + y[i];
}
]], "c++", { std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
local axpy = code:get_kernel("axpy")
local start <close> = gpurun.Event{ timing = true }
local stop <close> = gpurun.Event{ timing = true }

-- The mean of `runs` kernels, each between two events; before(each) runs
-- untimed, its work waited for.
local function time_kernel(config, x, y, n, before)
  local total_ms = 0.0
  for _ = 1, options.runs do
    if before then
      before()
      stream:sync()
    end
    stream:record(start)
    gpurun.launch(stream, config, axpy, x, y, gpurun.u64(n))
    stream:record(stop)
    stop:sync()
    total_ms = total_ms + stop:elapsed_ms(start)
  end
  return total_ms / options.runs
end

-- Each path: its two arrays of n elements, and what runs before each kernel.
local PATHS = {
  { name = "device", make = function(n) return gpurun.zeros(n, "float32"), gpurun.zeros(n, "float32") end },
  { name = "managed, prefetched", make = function(n)
      local x, y = gpurun.managed(n, "float32"), gpurun.managed(n, "float32")
      x:fill(1.0)
      y:fill(0.0)
      x:prefetch(device, stream)
      y:prefetch(device, stream)
      return x, y
    end },
  { name = "managed, on the host", make = function(n)
      local x, y = gpurun.managed(n, "float32"), gpurun.managed(n, "float32")
      x:fill(1.0)
      y:fill(0.0)
      return x, y, function()
        x:prefetch("host", stream)
        y:prefetch("host", stream)
      end
    end },
  { name = "mapped pinned", make = function(n)
      local x = gpurun.pinned(n, "float32", { mapped = true })
      local y = gpurun.pinned(n, "float32", { mapped = true })
      x:fill(1.0)
      y:fill(0.0)
      return x, y
    end },
}

local results = { device = device.name, unit = "ms per kernel", reps = options.reps, runs = options.runs,
                  sizes = {} }
for _, n in ipairs(options.sizes) do
  local config = gpurun.LaunchConfig{ grid = math.min((n + 255) // 256, 1 << 20), block = 256 }
  local row = { elements = n }
  for _, path in ipairs(PATHS) do
    local x, y, before = path.make(n)
    stream:sync()
    local reps = {}
    for rep = 1, options.reps do reps[rep] = time_kernel(config, x, y, n, before) end
    row[path.name] = bench.median(reps)
    x:close()
    y:close()
  end
  results.sizes[#results.sizes + 1] = row
end

if options.json then
  print(cjson.encode(results))
else
  print(("y = 2x + y over float32 on %s, ms per kernel (medians of %d x %d), ratio to device memory")
    :format(device.name, options.reps, options.runs))
  print(("%-12s %-22s %12s %8s"):format("elements", "memory", "ms", "ratio"))
  for _, row in ipairs(results.sizes) do
    for _, path in ipairs(PATHS) do
      print(("%-12d %-22s %12.4f %8.3f"):format(row.elements, path.name, row[path.name],
        row[path.name] / row.device))
    end
  end
end
