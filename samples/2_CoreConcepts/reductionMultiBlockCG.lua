-- reductionMultiBlockCG.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- reductionMultiBlockCG (cuda.core). A whole sum in one kernel: every block
-- reduces its grid-stride share into a partial sum, the grid waits for all of
-- them at a cooperative-groups grid.sync(), and block 0 adds the partial sums.
-- That needs a cooperative launch (LaunchConfig{ is_cooperative = true }) with
-- every block resident at once, so the grid is sized from the kernel's
-- occupancy. Timed with events, checked against the sum on the host.
--
--   gpurun samples/2_CoreConcepts/reductionMultiBlockCG.lua [--n N] [--threads T] [--maxblocks B]
--       [--iterations K] [--cuda-include-dir DIRS]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local quoted = require("gpurun.quoted")
local with_commas = require("gpurun.report").with_commas

local RULE = string.rep("=", 70)
local MAX_ELEMENTS = 2147483647 -- the kernel's unsigned int index, a grid's stride past n
local CUDA_INCLUDE = (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/include"

local KERNEL = [[
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Adds the block's partial[] (blockDim.x values, a power of 2) into
// partial[0], halving the active threads each step.
__device__ void block_tree_sum(float *partial, cg::thread_block block)
{
  const unsigned int t = threadIdx.x;
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      partial[t] += partial[t + half];
    cg::sync(block);
  }
}

extern "C" __global__ void reduceSinglePassMultiBlockCG(const float *__restrict__ in,
                                                        float *__restrict__ out, unsigned int n)
{
  extern __shared__ float partial[];
  cg::thread_block block = cg::this_thread_block();
  cg::grid_group grid = cg::this_grid();
  const unsigned int t = threadIdx.x;

  float sum = 0.0f;
  for (unsigned int i = grid.thread_rank(); i < n; i += grid.size())
    sum += in[i];
  partial[t] = sum;
  cg::sync(block);
  block_tree_sum(partial, block);
  if (t == 0)
    out[blockIdx.x] = partial[0];

  grid.sync(); /* every block's partial sum is in out[] from here on */

  if (blockIdx.x == 0) {
    float total = 0.0f; /* threads past the partial sums add nothing */
    for (unsigned int b = t; b < gridDim.x; b += blockDim.x)
      total += out[b];
    partial[t] = total;
    cg::sync(block);
    block_tree_sum(partial, block);
    if (t == 0)
      out[0] = partial[0];
  }
}
]]

local cli = args.new("reductionMultiBlockCG.lua",
  "Single-pass multi-block reduction with a cooperative-groups grid sync.")
cli:integer_option("--n", "Number of elements to reduce.", 1 << 25, 1)
cli:integer_option("--threads", "Threads per block, a power of 2 in [1, 1024] (default: the device's maximum).")
cli:integer_option("--maxblocks", "Most blocks to launch (default: as many as can be resident at once).")
cli:integer_option("--iterations", "Number of timed iterations.", 100, 1)
cli:converted_option("--cuda-include-dir",
  "Where NVRTC finds cooperative_groups.h and CCCL, folders separated by ':'.",
  CUDA_INCLUDE .. "/cccl:" .. CUDA_INCLUDE, function(text)
    if not text:find("[^:]") then return nil, "expected folders separated by ':', got " .. quoted(text) end
    return text
  end)
local options = cli:parse(arg)
local threads = options.threads
require("gpurun.samples.tree_reduction").check_threads(cli, threads)
if options.n > MAX_ELEMENTS then
  cli:usage_error(("--n must be at most %d, got %d"):format(MAX_ELEMENTS, options.n))
end

local device = cli:open_device(0)
local n = options.n
local cc = device.compute_capability
print("\n" .. RULE)
print("Single-Pass Multi-Block Reduction with Cooperative Groups")
print(RULE)
print("\nDemonstrates: Multi-stage reduction in a single kernel using grid.sync()")
print("\nDevice Information:")
print("  Name: " .. device.name)
print(("  Compute Capability: sm_%d.%d"):format(cc.major, cc.minor))
threads = threads or math.min(device.max_threads_per_block, 1024)
print("\nReduction Configuration:")
print(("  Number of elements: %s"):format(with_commas(n)))
print(("  Data size: %.2f MB"):format(n * 4 / (1024 * 1024)))

print("\nCompiling CUDA kernel...")
local include_paths = {}
for folder in options.cuda_include_dir:gmatch("[^:]+") do include_paths[#include_paths + 1] = folder end
local program <close> = gpurun.Program(KERNEL, "c++", gpurun.ProgramOptions{ std = "c++17",
  arch = "sm_" .. device.arch, include_paths = include_paths })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("reduceSinglePassMultiBlockCG")
print("  Kernel compiled successfully")

-- A cooperative grid must be resident all at once: the blocks that fit on
-- one multiprocessor (with this block's shared memory) times their count.
local shmem_size = threads * 4
local resident = kernel:occupancy{ block = threads, shmem_size = shmem_size }.max_active_blocks_per_multiprocessor
  * device.multiprocessor_count
local max_blocks = math.min(options.maxblocks or resident, device:get_attribute("max_grid_dim_x"))
local blocks = math.min(max_blocks, (n + threads - 1) // threads)
print("\nLaunch Configuration:")
print(("  Threads per block: %d"):format(threads))
print(("  Number of blocks: %d"):format(blocks))
print(("  Total threads: %s"):format(with_commas(blocks * threads)))
print(("  Shared memory per block: %d bytes"):format(shmem_size))
print("  Launch mode: Cooperative (grid-wide sync enabled)")

print("\n> Generating random input data...")
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local function random_input()
  local rng <close> = gpurun.default_rng(42)
  local values = rng:random_table(n, "float32") -- exact in float32, and so are 256 times them
  for i = 1, n do values[i] = values[i] * 256 end
  return gpurun.array(values, "float32"), values
end
local input <close>, values = random_input()
local out <close> = gpurun.empty(blocks, "float32")

print("> Computing reference result on CPU...")
local cpu_start = gpurun.perf_counter()
local cpu_result = 0.0
for i = 1, n do cpu_result = cpu_result + values[i] end
local cpu_time = gpurun.perf_counter() - cpu_start
print(("  CPU time: %.6f seconds"):format(cpu_time))

print("\n> Warming up GPU...")
local config = gpurun.LaunchConfig{ grid = blocks, block = threads, shmem_size = shmem_size, is_cooperative = true }
gpurun.launch(stream, config, kernel, input, out, n)
stream:sync()
print("  Warm-up successful")

print(("\n> Running benchmark (%d iterations)..."):format(options.iterations))
local gpu_ms = bench.event_ms(stream, function(s)
  gpurun.launch(s, config, kernel, input, out, n)
end, options.iterations)
local gpu_result = out:get(1)
local throughput = n * 4 / (gpu_ms / 1000) / 1e9

print("\n> Performance Results:")
print(("  Average GPU time: %.6f ms"):format(gpu_ms))
print(("  Throughput: %.2f GB/s"):format(throughput))
print(("  Speedup vs CPU: %.2fx"):format(cpu_time / (gpu_ms / 1000)))

print("\n> Validating results...")
local checks = check.new(cli.name)
local success = checks:number("sum", gpu_result, cpu_result, 1e-5, 1e-5)
print(success and "Test PASSED" or "Test FAILED")

print("\n" .. RULE)
print("Summary")
print(RULE)
print("\nSingle-kernel two-stage reduction:")
print(("  Stage 1: %d blocks -> %d partial sums"):format(blocks, blocks))
print("  grid.sync() <- all blocks wait for each other")
print("  Stage 2: Block 0 -> 1 final result")
print(("  Total: 1 kernel launch, %.2f GB/s"):format(throughput))
print("\nComparison:")
print("  • Traditional: 2 kernel launches or kernel + CPU")
print("  • This sample: 1 kernel with grid.sync() between stages")
print("  • Benefit: no launch between the stages")
print()
print(RULE)
print(success and "Single-Pass Multi-Block Reduction completed successfully!"
      or "Single-Pass Multi-Block Reduction FAILED!")
print(RULE .. "\n")
os.exit(success and 0 or 1, true)
