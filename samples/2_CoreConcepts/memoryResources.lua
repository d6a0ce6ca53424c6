-- memoryResources.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- memoryResources (cuda.core). The memory a script can hand a kernel, each
-- checked end to end with one scale-and-bias kernel: device memory from the
-- device's pool staged through pinned host memory (host -> device -> kernel
-- -> host), managed memory whose kernel writes the host reads with no copy,
-- and a buffer from a memory pool made for the purpose.
--
--   gpurun samples/2_CoreConcepts/memoryResources.lua [--elements N] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local KERNEL = [[
extern "C" __global__
void scale_and_bias(float* data, size_t N, float scale, float bias) {
    const unsigned int tid = threadIdx.x + blockIdx.x * blockDim.x;
    const unsigned int stride = blockDim.x * gridDim.x;
    for (size_t i = tid; i < N; i += stride) {
        data[i] = data[i] * scale + bias;
    }
}
]]

local cli = args.new("memoryResources.lua", "Demonstrate cuda.core memory resources (Buffer + MR)")
cli:integer_option("--elements", "Number of float32 elements per buffer (default: 65536)", 1 << 16, 1)
cli:integer_option("--device", "CUDA device id", 0, 0)
local options = cli:parse(arg)

local device = cli:open_device(options.device)
print("Device: " .. device.name)
local capability = device.compute_capability
print(("Compute Capability: %d.%d"):format(capability.major, capability.minor))
local stream <close> = device:create_stream()

local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("scale_and_bias")

local size = options.elements
local config = gpurun.LaunchConfig{ grid = (size + 255) // 256, block = 256 }

-- 0, 1, ..., size - 1, as NumPy's arange.
local arange = {}
for i = 1, size do arange[i] = i - 1 end

-- NumPy's allclose with its default tolerances; a mismatch ends the run as
-- the original's failed assert does.
local function assert_close(values, scale, bias, what)
  for i = 1, size do
    local expected = arange[i] * scale + bias
    if math.abs(values[i] - expected) > 1e-8 + 1e-5 * math.abs(expected) then
      io.stderr:write(("AssertionError: %s (element %d: %s, expected %s)\n"):format(what, i,
        values[i], expected))
      os.exit(1, true)
    end
  end
end

print("\n[1] DeviceMemoryResource + PinnedMemoryResource (staging)")
do
  local pinned_in <close> = gpurun.pinned(size, "float32")
  local pinned_out <close> = gpurun.pinned(size, "float32")
  local device_buffer <close> = gpurun.empty(size, "float32",
    { pool = device:memory_pool(), stream = stream })
  pinned_in:copy_from(arange)
  device_buffer:copy_from(pinned_in, stream)
  gpurun.launch(stream, config, kernel, device_buffer, gpurun.u64(size), 3.0, -0.5)
  device_buffer:copy_to(pinned_out, stream)
  stream:sync()
  assert_close(pinned_out:to_table(), 3.0, -0.5, "H2D -> kernel -> D2H mismatch")
  print("  Pinned staging, device kernel, and copy_to verified")
end

print("\n[2] ManagedMemoryResource (unified memory)")
do
  local managed <close> = gpurun.managed(size, "float32")
  managed:copy_from(arange)
  device:sync()
  gpurun.launch(stream, config, kernel, managed, gpurun.u64(size), 0.5, 10.0)
  stream:sync()
  -- No copy to a device buffer and back: the host reads the memory the kernel wrote.
  assert_close(managed:to_table(), 0.5, 10.0, "Managed memory result mismatch")
  print("  GPU writes observed directly through the host-visible mapping")
end

print("\n[3] Explicit DeviceMemoryResource")
do
  local pool <close> = gpurun.MemoryPool{}
  local buffer <close> = gpurun.empty(size, "float32", { pool = pool, stream = stream })
  buffer:copy_from(arange, stream)
  device:sync()
  gpurun.launch(stream, config, kernel, buffer, gpurun.u64(size), 1.0, 100.0)
  stream:sync()
  assert_close(buffer:to_table(), 1.0, 100.0, "Explicit device pool result mismatch")
  print("  Explicit DeviceMemoryResource allocation verified")
end

print("\nDone")
