-- launchConfigTuning.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- launchConfigTuning (cuda.core). Which block size is fastest: a
-- memory-bound vector add over 10M elements and a shared-memory block
-- reduction over 16M, each timed with events at 32 to 1024 threads per
-- block, the fastest and slowest named. Plain device buffers stand in for
-- the original's managed memory; both kernels' results are checked.
--
--   gpurun samples/2_CoreConcepts/launchConfigTuning.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local report = require("gpurun.report")

local BLOCK_SIZES = { 32, 64, 128, 256, 512, 1024 }
local ADD_ELEMENTS, ADD_ITERATIONS = 10000000, 100
local SUM_ELEMENTS, SUM_ITERATIONS = 16777216, 50
local RULE, THIN_RULE = string.rep("=", 60), string.rep("-", 60)

local VECTOR_ADD = [[
extern "C" __global__ void vector_add(const float *__restrict__ a, const float *__restrict__ b,
                                      float *__restrict__ c, int n)
{
  const int step = blockDim.x * gridDim.x;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    c[i] = a[i] + b[i];
}
]]
-- reduce_sum, the reduction tree (lua/gpurun/samples/kernels/reduce_sum.cu).
local REDUCE_SUM = require("gpurun.samples.kernels").source("reduce_sum")

local cli = args.new("launchConfigTuning.lua",
  "Times two kernels at every block size from 32 to 1024 threads and names the fastest.")
cli:parse(arg)

local function banner(title)
  print("\n" .. RULE)
  print(title)
  print(RULE)
end

local device = cli:open_device(0)
print(RULE)
print("Launch Configuration Tuning (gpurun)")
print("Finding the Best Block Size for Your Kernel")
print(RULE)
print()
report.new():device(device, 0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local checks = check.new(cli.name)

print("\nCompiling CUDA kernels with gpurun.Program...")
local arch = "sm_" .. device.arch
local options = gpurun.ProgramOptions{ arch = arch }
print("  Target architecture: " .. arch)
local add_code <close> = gpurun.Program(VECTOR_ADD, "c++", options):compile("cubin")
local vector_add = add_code:get_kernel("vector_add")
print("  ✓ vector_add kernel compiled")
local sum_code <close> = gpurun.Program(REDUCE_SUM, "c++", options):compile("cubin")
local reduce_sum = sum_code:get_kernel("reduce_sum")
print("  ✓ reduce_sum kernel compiled")

-- Milliseconds per launch of kernel(arguments...) over n elements at
-- `block` threads per block, after one launch that is not timed.
local function time_launches(kernel, n, block, iterations, shmem_size, ...)
  local config = gpurun.LaunchConfig{ grid = (n + block - 1) // block, block = block, shmem_size = shmem_size }
  gpurun.launch(stream, config, kernel, ...)
  stream:sync()
  local start = stream:record()
  for _ = 1, iterations do
    gpurun.launch(stream, config, kernel, ...)
  end
  local stop = stream:record()
  stop:sync()
  return stop:elapsed_ms(start) / iterations
end

-- Prints one line per block size and returns the fastest and slowest.
local function sweep(measure, n)
  print("\nTesting thread configurations: [" .. table.concat(BLOCK_SIZES, ", ") .. "]")
  print(THIN_RULE)
  local best, worst
  for _, block in ipairs(BLOCK_SIZES) do
    local ms = measure(block)
    print(("Block Size: %4d | Blocks: %6d | Time: %.4f ms"):format(block, (n + block - 1) // block, ms))
    if not best or ms < best.ms then best = { block = block, ms = ms } end
    if not worst or ms > worst.ms then worst = { block = block, ms = ms } end
  end
  print(THIN_RULE)
  return best, worst
end

banner("VECTOR ADDITION - Launch Configuration Tuning")
print("\nProblem size: 10,000,000 elements")
print("Kernel: vector_add (C = A + B)")
local rng <close> = gpurun.default_rng(0)
local a <close> = rng:random(ADD_ELEMENTS, "float32")
local b <close> = rng:random(ADD_ELEMENTS, "float32")
local c <close> = gpurun.empty(ADD_ELEMENTS, "float32")
local best, worst = sweep(function(block)
  return time_launches(vector_add, ADD_ELEMENTS, block, ADD_ITERATIONS, 0, a, b, c, ADD_ELEMENTS)
end, ADD_ELEMENTS)
print(("\n✓ OPTIMAL: block_size=%d (%.4f ms)"):format(best.block, best.ms))
print(("✗ WORST:   block_size=%d (%.4f ms)"):format(worst.block, worst.ms))
print(("  Speedup: %.2fx"):format(worst.ms / best.ms))
local function host_sums()
  local a_values, b_values, sums = a:to_table(), b:to_table(), {}
  for i = 1, ADD_ELEMENTS do sums[i] = a_values[i] + b_values[i] end
  return gpurun.array(sums, "float32")
end
local expected_sums <close> = host_sums()
if checks:buffers("vector_add", c, expected_sums) then
  print("\n✓ Results verified correct!")
else
  print("\n✗ Results are wrong")
end

banner("REDUCTION - Launch Configuration Tuning")
print("\nProblem size: 16,777,216 elements")
print("Kernel: reduce_sum (parallel reduction)")
print("Note: Reduction uses shared memory - more sensitive to block size!")
local input <close> = rng:random(SUM_ELEMENTS, "float32")
local total = 0.0
for _, value in ipairs(input:to_table()) do total = total + value end
best, worst = sweep(function(block)
  local partial <close> = gpurun.empty((SUM_ELEMENTS + block - 1) // block, "float32")
  local ms = time_launches(reduce_sum, SUM_ELEMENTS, block, SUM_ITERATIONS, block * 4, input, partial, SUM_ELEMENTS)
  local sum = 0.0
  for _, value in ipairs(partial:to_table()) do sum = sum + value end
  checks:number(("reduce_sum at %d threads per block"):format(block), sum, total, 1e-5, 1e-8)
  return ms
end, SUM_ELEMENTS)
print(("\n✓ OPTIMAL: block_size=%d"):format(best.block))
print(("  Speedup over worst: %.2fx"):format(worst.ms / best.ms))

banner("SAMPLE COMPLETE")
print("\nKey Takeaway: The optimal thread configuration depends on your")
print("specific kernel characteristics. Always benchmark to find the best!")
print()
os.exit(checks:passed() and 0 or 1, true)
