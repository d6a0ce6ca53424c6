-- parallelHistogram.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- parallelHistogram (cuda.core). A 256-bin histogram of 10 million random
-- bytes two ways: every thread adding to the global bins with atomics, and
-- each block counting into its own bins in shared memory first, then adding
-- those to the global ones. Both are checked against the counts on the host,
-- then timed with events over 100 runs (a fill and a launch each).
--
--   gpurun samples/2_CoreConcepts/parallelHistogram.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local report = require("gpurun.report")

local BINS = 256
local ELEMENTS = 10000000
local BLOCK = 256
local MAX_GRID = 1024
local TIMED_RUNS = 100
local RULE = string.rep("=", 60)

local KERNELS = [=[
extern "C" __global__ void histogram_global(const unsigned char *data, unsigned int *bins, int n)
{
  const int step = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    atomicAdd(&bins[data[i]], 1u);
}

extern "C" __global__ void histogram_privatized(const unsigned char *data, unsigned int *bins, int n)
{
  __shared__ unsigned int block_bins[256];
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    block_bins[b] = 0;
  __syncthreads();
  const int step = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    atomicAdd(&block_bins[data[i]], 1u);
  __syncthreads();
  for (int b = threadIdx.x; b < 256; b += blockDim.x)
    if (block_bins[b] != 0)
      atomicAdd(&bins[b], block_bins[b]);
}
]=]

local cli = args.new("parallelHistogram.lua",
  "A histogram with global atomics and with per-block bins in shared memory.")
cli:parse(arg)

local device = cli:open_device(0)
print(RULE)
print("Parallel Histogram with Atomics (gpurun)")
print(RULE)
print()
report.new():device(device, 0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)

print("\nCompiling CUDA kernels with gpurun.Program...")
local arch = "sm_" .. device.arch
local program <close> = gpurun.Program(KERNELS, "c++", gpurun.ProgramOptions{ arch = arch })
local code <close> = program:compile("cubin")
local kernels = { global = code:get_kernel("histogram_global"),
                  privatized = code:get_kernel("histogram_privatized") }
print("  Compiled for architecture: " .. arch)

print("\nGenerating 10,000,000 random values on GPU...")
local rng <close> = gpurun.default_rng(0)
local data <close> = rng:integers(ELEMENTS, 0, BINS, "uint8")
local bins <close> = gpurun.zeros(BINS, "uint32")
local expected = {}
for b = 1, BINS do expected[b] = 0 end
for _, value in ipairs(data:to_table()) do
  expected[value + 1] = expected[value + 1] + 1
end

local config = gpurun.LaunchConfig{ grid = math.min((ELEMENTS + BLOCK - 1) // BLOCK, MAX_GRID), block = BLOCK }
local function histogram(kind)
  bins:fill(0)
  gpurun.launch(stream, config, kernels[kind], data, bins, ELEMENTS)
end

print("\nVerifying correctness...")
local checks = check.new(cli.name)
for _, kind in ipairs{ "global", "privatized" } do
  histogram(kind)
  stream:sync()
  local label = kind == "global" and "Global atomics:    " or "Privatized atomics:"
  local ok = checks:tables(kind .. " atomics", bins:to_table(), expected, 0, 0)
  print(("  %s %s"):format(label, ok and "PASSED" or "FAILED"))
end
if not checks:passed() then
  os.exit(1, true)
end

print(("\nBenchmarking (%d iterations)..."):format(TIMED_RUNS))
local start, stop = gpurun.Event{ timing = true }, gpurun.Event{ timing = true }
local ms = {}
for _, kind in ipairs{ "global", "privatized" } do
  stream:record(start)
  for _ = 1, TIMED_RUNS do histogram(kind) end
  stream:record(stop)
  stop:sync()
  ms[kind] = stop:elapsed_ms(start) / TIMED_RUNS
end
print(("  Global atomics:     %.3f ms"):format(ms.global))
print(("  Privatized atomics: %.3f ms"):format(ms.privatized))
print(("  Speedup:            %.1fx"):format(ms.global / ms.privatized))
print("\nTest PASSED")
