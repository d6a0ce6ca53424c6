-- reduction.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- reduction (cuda.core). A two-stage sum without atomics: each block loads
-- two elements per thread, reduces them in shared memory by a tree with
-- sequential addressing and writes one partial sum (stage 1, on the GPU,
-- timed with events); the host adds the partial sums (stage 2). The result
-- is checked against a compensated (Kahan) sum on the host.
--
--   gpurun samples/2_CoreConcepts/reduction.lua [--n N] [--threads T]
--                                               [--type int|float|double] [--iterations K]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local quoted = require("gpurun.quoted")
local with_commas = require("gpurun.report").with_commas

local RULE = string.rep("=", 70)
local MAX_ELEMENTS = 2147483647 -- the kernel indexes with unsigned int, two blocks' worth past n

-- Per --type: the element dtype, how its results print, the check's tolerances.
local TYPES = {
  int = { dtype = "int32", c_type = "int", rtol = 0, atol = 0 },
  float = { dtype = "float32", c_type = "float", digits = 8, rtol = 1e-5, atol = 1e-8 },
  double = { dtype = "float64", c_type = "double", digits = 12, rtol = 1e-8, atol = 1e-12 },
}

local KERNEL = [[
template <typename T>
__global__ void blockReduceKernel(const T *__restrict__ in, T *__restrict__ block_sums, unsigned int n)
{
  extern __shared__ __align__(8) unsigned char shared_bytes[];
  T *partial = reinterpret_cast<T *>(shared_bytes);
  const unsigned int t = threadIdx.x;
  const unsigned int i = blockIdx.x * (2 * blockDim.x) + t;
  T sum = 0;
  if (i < n)
    sum += in[i];
  if (i + blockDim.x < n)
    sum += in[i + blockDim.x];
  partial[t] = sum;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (t < half)
      partial[t] += partial[t + half];
    __syncthreads();
  }
  if (t == 0)
    block_sums[blockIdx.x] = partial[0];
}
]]

local function type_name(text)
  if TYPES[text] then return text end
  return nil, "expected int, float or double, got " .. quoted(text)
end

local cli = args.new("reduction.lua", "Two-stage reduction with shared memory.")
cli:integer_option("--n", "Number of elements to reduce.", 1 << 24, 1)
cli:integer_option("--threads", "Threads per block, a power of 2 in [1, 1024].", 256, 1)
cli:converted_option("--type", "Data type for the reduction: int, float or double.", "float", type_name)
cli:integer_option("--iterations", "Number of timed iterations.", 100, 1)
local options = cli:parse(arg)
local threads = options.threads
require("gpurun.samples.tree_reduction").check_threads(cli, threads)
if options.n > MAX_ELEMENTS then
  cli:usage_error(("--n must be at most %d, got %d"):format(MAX_ELEMENTS, options.n))
end

-- The sum of a sequence by Kahan's compensated summation.
local function kahan_sum(values)
  local sum, compensation = 0.0, 0.0
  for i = 1, #values do
    local y = values[i] - compensation
    local t = sum + y
    compensation = (t - sum) - y
    sum = t
  end
  return sum
end

local device = cli:open_device(0)
local n, datatype = options.n, options.type
local kind = TYPES[datatype]
local itemsize = gpurun.dtypes[kind.dtype].size
local blocks = (n + 2 * threads - 1) // (2 * threads)
local cc = device.compute_capability

print("\n" .. RULE)
print("Fast Array Sum using Shared Memory - Two-Stage Reduction")
print(RULE)
print("\nDemonstrates: Efficient parallel reduction using shared memory")
print("\nDevice Information:")
print("  Name: " .. device.name)
print(("  Compute Capability: sm_%d.%d"):format(cc.major, cc.minor))
print("\nConfiguration:")
print(("  Array size: %s elements"):format(with_commas(n)))
print("  Data type: " .. datatype)
print(("  Memory: %.2f MB"):format(n * itemsize / (1024 * 1024)))
print(("  Threads per block: %d"):format(threads))
print("\nTwo-Stage Reduction Strategy:")
print("  Stage 1: GPU block reduction")
print(("    - Number of blocks: %d"):format(blocks))
print(("    - Elements per block: %d"):format(2 * threads))
print(("    - Output: %d partial sums"):format(blocks))
print("  Stage 2: CPU final reduction")
print(("    - Combine %d partial sums → 1 final result"):format(blocks))

print("\nCompiling CUDA kernel...")
local kernel_name = ("blockReduceKernel<%s>"):format(kind.c_type)
local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin", { name_expressions = { kernel_name } })
local kernel = code:get_kernel(kernel_name)
print(("  Kernel '%s' compiled successfully"):format(kernel_name))

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
print("\n> Generating random input data...")
-- The input on the device, and its values on the host for the reference.
local function random_input()
  local rng <close> = gpurun.default_rng(42)
  if datatype == "int" then
    local input = rng:integers(n, 0, 256, kind.dtype)
    return input, input:to_table()
  end
  local values = rng:random_table(n, kind.dtype) -- exact in the dtype, and so are 256 times them
  for i = 1, n do values[i] = values[i] * 256 end
  return gpurun.array(values, kind.dtype), values
end
local input <close>, values = random_input()
local block_sums <close> = gpurun.empty(blocks, kind.dtype)

print("> Computing reference result on CPU...")
local cpu_start = gpurun.perf_counter()
local cpu_result = kahan_sum(values)
local cpu_time = gpurun.perf_counter() - cpu_start
print(("  CPU time: %.6f seconds"):format(cpu_time))

local config = gpurun.LaunchConfig{ grid = blocks, block = threads, shmem_size = threads * itemsize }
print("\n> Warming up GPU...")
gpurun.launch(stream, config, kernel, input, block_sums, n)
stream:sync()
print("  Warm-up completed")

print("\n> Benchmarking Stage 1 (GPU block reduction)...")
print(("  Running %d iterations..."):format(options.iterations))
local stage1_ms = bench.event_ms(stream, function(s)
  gpurun.launch(s, config, kernel, input, block_sums, n)
end, options.iterations)

print("\n> Running Stage 2 (CPU final reduction)...")
local partial_sums = block_sums:to_table()
local stage2_start = gpurun.perf_counter()
local gpu_result = 0
for i = 1, #partial_sums do gpu_result = gpu_result + partial_sums[i] end
local stage2_time = gpurun.perf_counter() - stage2_start
local total_time = stage1_ms / 1000 + stage2_time
local throughput = n * itemsize / (stage1_ms / 1000) / 1e9

print("\n" .. RULE)
print("Performance Results")
print(RULE)
print("\nStage 1 (GPU block reduction):")
print(("  Average time: %.6f ms"):format(stage1_ms))
print(("  Throughput: %.2f GB/s"):format(throughput))
print("\nStage 2 (CPU final reduction):")
print(("  Time: %.6f ms"):format(stage2_time * 1000))
print(("  (%d partial sums)"):format(blocks))
print(("\nTotal time: %.6f ms"):format(total_time * 1000))
print(("Speedup vs CPU: %.2fx"):format(cpu_time / total_time))

print("\n> Validating results...")
if datatype == "int" then
  print("  GPU result: " .. with_commas(gpu_result))
  print("  CPU result: " .. with_commas(math.tointeger(cpu_result)))
else
  print(("  GPU result: %." .. kind.digits .. "f"):format(gpu_result))
  print(("  CPU result: %." .. kind.digits .. "f"):format(cpu_result))
end
local checks = check.new(cli.name)
local success = checks:number("sum", gpu_result, cpu_result, kind.rtol, kind.atol * n)
print(success and "Test PASSED" or "Test FAILED")

print("\n" .. RULE)
print("Summary")
print(RULE)
print("Key optimizations:")
print(("  - Load 2 elements per thread: %s global reads (50%% savings)"):format(with_commas(n // 2)))
print("  - Shared memory for reduction: ~10-20x faster than global memory")
print(("  - Parallel block outputs: %d independent writes"):format(blocks))
print(("Result: %.2f GB/s throughput"):format(throughput))
print(RULE)
print(success and "Two-Stage Reduction completed successfully!" or "Two-Stage Reduction FAILED!")
print(RULE .. "\n")
os.exit(success and 0 or 1, true)
