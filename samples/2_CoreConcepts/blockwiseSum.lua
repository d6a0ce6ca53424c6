-- blockwiseSum.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- blockwiseSum (cuda.core). Thread and block indexing three ways: one
-- thread per element, a grid-stride loop over a fixed grid, and a partial
-- sum per block reduced in dynamic shared memory; each checked, then the
-- block sum timed with events over 100 launches.
--
--   gpurun samples/2_CoreConcepts/blockwiseSum.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local with_commas = require("gpurun.report").with_commas

local ELEMENTS = 1024 * 1024
local THREADS_PER_BLOCK = 256
local BLOCKS = 64 -- the fixed grid of the strided kernels; ELEMENTS is a multiple of it
local TIMED_LAUNCHES = 100

local KERNELS = [[
extern "C" __global__ void simple_indexing(const float *in, float *out, size_t n)
{
  const size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = 2.0f * in[i];
}

extern "C" __global__ void strided_loop(const float *in, float *out, size_t n)
{
  const size_t step = (size_t)gridDim.x * blockDim.x;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    out[i] = 2.0f * in[i];
}

extern "C" __global__ void block_partial_sum(const float *in, float *block_sums, size_t n)
{
  extern __shared__ float partial[];
  const size_t step = (size_t)gridDim.x * blockDim.x;
  float sum = 0.0f;
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += step)
    sum += in[i];
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  if (threadIdx.x == 0)
    block_sums[blockIdx.x] = partial[0];
}
]]

local cli = args.new("blockwiseSum.lua",
  "Thread indexing, grid-stride loops and a block-wise sum in shared memory.")
cli:parse(arg)

local device = cli:open_device(0)
print("Device: " .. device.name)
print("Compute Capability: sm_" .. device.arch)
print(("Array size: %s elements\n"):format(with_commas(ELEMENTS)))

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local program <close> = gpurun.Program(KERNELS, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local simple_indexing = code:get_kernel("simple_indexing")
local strided_loop = code:get_kernel("strided_loop")
local block_partial_sum = code:get_kernel("block_partial_sum")

local values, doubled = {}, {}
for i = 1, ELEMENTS do
  values[i] = i - 1
  doubled[i] = 2 * (i - 1)
end
local input <close> = gpurun.array(values, "float32")
local expected <close> = gpurun.array(doubled, "float32")
local output <close> = gpurun.zeros(ELEMENTS, "float32")
local n = gpurun.u64(ELEMENTS)
local checks = check.new(cli.name)

local function verdict(label, actual, wanted)
  print(checks:buffers(label, actual, wanted) and "Test PASSED" or "Test FAILED")
end

-- One thread per element.
gpurun.launch(stream, gpurun.LaunchConfig{ grid = (ELEMENTS + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK,
                                           block = THREADS_PER_BLOCK }, simple_indexing, input, output, n)
stream:sync()
io.write("Simple indexing: ")
verdict("simple indexing", output, expected)

-- A fixed grid, each thread striding over several elements.
output:fill(0)
gpurun.launch(stream, gpurun.LaunchConfig{ grid = BLOCKS, block = THREADS_PER_BLOCK }, strided_loop,
              input, output, n)
stream:sync()
io.write("Strided loop:    ")
verdict("strided loop", output, expected)

-- A sum per block over ones: each block adds ELEMENTS / BLOCKS of them.
local ones <close> = gpurun.full(ELEMENTS, 1.0, "float32")
local block_sums <close> = gpurun.zeros(BLOCKS, "float32")
local sum_config = gpurun.LaunchConfig{ grid = BLOCKS, block = THREADS_PER_BLOCK,
                                        shmem_size = THREADS_PER_BLOCK * 4 }
gpurun.launch(stream, sum_config, block_partial_sum, ones, block_sums, n)
stream:sync()
io.write("Block-wise sum:  ")
verdict("block-wise sum", block_sums, ELEMENTS / BLOCKS)

stream:sync()
local start = stream:record()
for _ = 1, TIMED_LAUNCHES do
  gpurun.launch(stream, sum_config, block_partial_sum, ones, block_sums, n)
end
local stop = stream:record()
stop:sync()
local ms = stop:elapsed_ms(start) / TIMED_LAUNCHES
print(("\nKernel time: %.3f ms, Bandwidth: %.1f GB/s"):format(ms, ELEMENTS * 4 / (ms * 1e6)))

if not checks:passed() then
  print("\nSome tests failed")
  os.exit(1, true)
end
print("\nDone")
