-- vectorAdd.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- vectorAdd (cuda.core). The first kernel: C = A + B over float32 vectors,
-- from a C++ template instantiated by name at compile time (NVRTC name
-- expressions), launched once with one thread per element and checked
-- against the sum on the host.
--
--   gpurun samples/1_GettingStarted/vectorAdd.lua [--elements N] [--device ID] [--no-verify]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local INT_MAX = 2147483647
local THREADS_PER_BLOCK = 256

local KERNEL = [[
template <typename T>
__global__ void vectorAdd(const T *a, const T *b, T *sum, int count)
{
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < count)
    sum[i] = a[i] + b[i];
}
]]

local cli = args.new("vectorAdd.lua", "Vector addition, C = A + B, with a kernel compiled at run time.")
cli:integer_option("--elements", "Number of elements in each vector.", 50000, 1)
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--no-verify", "Skip the check of the result.")
local options = cli:parse(arg)
if options.elements > INT_MAX then
  cli:usage_error(("--elements must fit the kernel's int, got %d"):format(options.elements))
end

local device = cli:open_device(options.device)
print("[Vector addition using gpurun]")
print("Device: " .. device.name)
print("Compute Capability: sm_" .. device.arch)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)

print("Compiling kernel 'vectorAdd<float>'...")
local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin", { name_expressions = { "vectorAdd<float>" } })
local vector_add = code:get_kernel("vectorAdd<float>")
print("Kernel compiled successfully")

local n = options.elements
print(("[Vector addition of %d elements]"):format(n))
local rng <close> = gpurun.default_rng(0)
local a <close> = rng:random(n, "float32")
local b <close> = rng:random(n, "float32")
local c <close> = gpurun.empty(n, "float32")

local blocks = (n + THREADS_PER_BLOCK - 1) // THREADS_PER_BLOCK
print(("CUDA kernel launch with %d blocks of %d threads"):format(blocks, THREADS_PER_BLOCK))
gpurun.launch(stream, gpurun.LaunchConfig{ grid = blocks, block = THREADS_PER_BLOCK },
              vector_add, a, b, c, n)
stream:sync()

if not options.no_verify then
  print("Verifying result...")
  local a_values, b_values = a:to_table(), b:to_table()
  local sums = {}
  for i = 1, n do sums[i] = a_values[i] + b_values[i] end
  local expected <close> = gpurun.array(sums, "float32")
  local checks = check.new(cli.name)
  if not checks:buffers("C = A + B", c, expected) then
    print("Test FAILED")
    os.exit(1, true)
  end
  print("Test PASSED")
end
print("\nDone")
