-- simpleZeroCopy.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- simpleZeroCopy (cuda.core). Zero-copy vector addition: three vectors in
-- mapped pinned host memory (gpurun.pinned with { mapped = true }), which a
-- grid-stride kernel reads and writes directly over the bus with no copy to
-- or from device memory; the host then checks c = a + b in the same memory.
--
--   gpurun samples/2_CoreConcepts/simpleZeroCopy.lua [--num_elements N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local grouped = require("gpurun.samples.digits").grouped

local INT_MAX = 2147483647
local BLOCK_SIZE = 256
local RULE = string.rep("=", 70)

local KERNEL = [[
extern "C" __global__
void vectorAddGPU(float* c, const float* a, const float* b, int N) {
    size_t tid = blockIdx.x * blockDim.x + threadIdx.x;
    size_t stride = gridDim.x * blockDim.x;

    for (size_t i = tid; i < N; i += stride) {
        c[i] = a[i] + b[i];
    }
}
]]

local cli = args.new("simpleZeroCopy.lua", "Demonstrate zero-copy memory access with CUDA")
cli:integer_option("--num_elements", "Number of elements in vectors (default: 1048576)", 1048576, 1)
local options = cli:parse(arg)
if options.num_elements > INT_MAX then
  cli:usage_error(("--num_elements must fit the kernel's int, got %d"):format(options.num_elements))
end

local n = options.num_elements
local device = cli:open_device(0)
print("\n" .. RULE)
print("simpleZeroCopy - CUDA Python Sample")
print(RULE)

local capability = device.compute_capability
print("\nDevice Information:")
print("  Name: " .. device.name)
print(("  Compute Capability: %d.%d"):format(capability.major, capability.minor))
local stream <close> = device:create_stream()

print("\n> Memory: mapped pinned host (cuMemHostAlloc + cuMemHostGetDevicePointer)")

print("\nCompiling CUDA kernel...")
local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("vectorAddGPU")
print("  Kernel compiled successfully")

local bytes_total = n * 4
print("\nAllocating memory:")
print(("  Vector size: %s elements"):format(grouped(n)))
print(("  Memory per vector: %.2f MB"):format(bytes_total / (1024 * 1024)))
print(("  Total memory: %.2f MB"):format(3 * bytes_total / (1024 * 1024)))

print("\n> Allocating mapped pinned host memory...")
local a <close> = gpurun.pinned(n, "float32", { mapped = true })
local b <close> = gpurun.pinned(n, "float32", { mapped = true })
local c <close> = gpurun.pinned(n, "float32", { mapped = true })
print("  Mapped host memory allocated successfully")

print("\n> Initializing vectors on host...")
local rng <close> = gpurun.default_rng(42)
local a_values = rng:random_table(n, "float32")
local b_values = rng:random_table(n, "float32")
a:copy_from(a_values)
b:copy_from(b_values)
c:fill(0)

print("> Computing reference result on CPU...")
local reference = {}
for i = 1, n do reference[i] = a_values[i] + b_values[i] end

print("\n> Launching vectorAddGPU kernel...")
print("  Note: GPU accesses host memory directly (zero-copy)")
local config = gpurun.LaunchConfig{ grid = (n + BLOCK_SIZE - 1) // BLOCK_SIZE, block = BLOCK_SIZE }
-- The mapped buffers pass as their device addresses (c.device_ptr), not as host ones.
gpurun.launch(stream, config, kernel, c, a, b, gpurun.i32(n))
stream:sync()
print("  Kernel execution complete")

print("\n> Checking results from vectorAddGPU()...")
print(("  Comparing %s elements..."):format(grouped(n)))
-- c is the same memory the kernel wrote: no copy back is needed.
local results = c:to_table()
local close, max_error, error_sq, reference_sq = true, 0, 0, 0
for i = 1, n do
  local difference = math.abs(results[i] - reference[i])
  if difference > 1e-6 + 1e-5 * math.abs(reference[i]) then close = false end
  if difference > max_error then max_error = difference end
  error_sq = error_sq + difference * difference
  reference_sq = reference_sq + reference[i] * reference[i]
end
if close then
  print(("  Relative error: %.6e"):format(math.sqrt(error_sq) / math.sqrt(reference_sq)))
  print("  Validation PASSED")
else
  print(("  Max error: %s"):format(max_error))
  print("  Validation FAILED")
end

print("\n" .. RULE)
print(close and "simpleZeroCopy completed successfully!" or "simpleZeroCopy FAILED!")
print(RULE .. "\n")
if not close then os.exit(1, true) end
