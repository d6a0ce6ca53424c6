-- kernelNsysProfile.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- kernelNsysProfile (cuda.core). Three template kernels (vector add, SAXPY,
-- sqrt(x^2 + 1) + sin(x)) compiled by name and launched inside named NVTX
-- ranges, for Nsight Systems to show (nsys profile gpurun ...), then checked
-- against the same operations on the host. The two standard normal input
-- arrays are drawn on the GPU, by gpurun.device_rng where the original
-- calls CuPy's generator.
--
--   gpurun samples/1_GettingStarted/kernelNsysProfile.lua [-n N | --array-size N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local nvtx = require("gpurun.nvtx")
local with_commas = require("gpurun.report").with_commas

local ALPHA = 2.5
local BLOCK = 256
local KERNELS = [[
template <typename T>
__global__ void vector_add(const T *a, const T *b, T *c, size_t n)
{
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    c[i] = a[i] + b[i];
}

template <typename T>
__global__ void saxpy(const T alpha, const T *x, T *y, size_t n)
{
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    y[i] = alpha * x[i] + y[i];
}

template <typename T>
__global__ void vector_transform(const T *a, T *b, size_t n)
{
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    b[i] = sqrt(a[i] * a[i] + T(1.0)) + sin(a[i]);
}
]]
local NAMES = { "vector_add<float>", "saxpy<float>", "vector_transform<float>" }

local cli = args.new("kernelNsysProfile.lua", "Custom CUDA C++ kernels in NVTX ranges, for Nsight Systems.")
cli:integer_option("-n --array-size", "Array size.", 50000, 1)
local options = cli:parse(arg)
local n = options.array_size

-- The mean and the standard deviation of a sequence.
local function moments(values)
  local sum, squares = 0.0, 0.0
  for i = 1, #values do sum = sum + values[i] end
  local mean = sum / #values
  for i = 1, #values do squares = squares + (values[i] - mean) ^ 2 end
  return mean, math.sqrt(squares / #values)
end

local device = nvtx.with_range("Device Initialization", function()
  local opened = cli:open_device(0)
  print()
  print("Device: " .. opened.name)
  print("Compute Capability: sm_" .. opened.arch)
  print()
  opened:sync()
  return opened
end)
print("Profiling gpurun Custom Kernels")
print(("Array size: %s\n"):format(with_commas(n)))

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local rng <close> = gpurun.device_rng(42)
local a <close> = gpurun.empty(n, "float32")
local b <close> = gpurun.empty(n, "float32")
local a_values, b_values
nvtx.with_range("Create GPU Arrays", function()
  rng:normal(a, 0, 1)
  rng:normal(b, 0, 1)
  device:sync()
  a_values, b_values = a:to_table(), b:to_table()
  local a_mean, a_std = moments(a_values)
  local b_mean, b_std = moments(b_values)
  print("Phase 1: Created arrays on GPU with gpurun.device_rng")
  print(("  Array shape: (%d,)"):format(n))
  print("  Array dtype: float32")
  print(("  Array a - Mean: %.4f, Std: %.4f"):format(a_mean, a_std))
  print(("  Array b - Mean: %.4f, Std: %.4f\n"):format(b_mean, b_std))
end)

local c <close> = gpurun.empty(n, "float32")
local y <close> = gpurun.empty(n, "float32")
local transformed <close> = gpurun.empty(n, "float32")
nvtx.with_range("gpurun Custom Kernels", function()
  print("Phase 2: gpurun custom CUDA C++ kernels on GPU")
  local program <close> = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local code <close> = nvtx.with_range("Compile Kernels", program.compile, program, "cubin",
                                       { name_expressions = NAMES })
  print("Compiled custom CUDA C++ kernels")
  local config = gpurun.LaunchConfig{ grid = (n + BLOCK - 1) // BLOCK, block = BLOCK }
  local size = gpurun.u64(n)
  nvtx.with_range("Vector Add (gpurun)", function()
    gpurun.launch(stream, config, code:get_kernel("vector_add<float>"), a, b, c, size)
    stream:sync()
  end)
  nvtx.with_range("SAXPY (gpurun)", function()
    y:copy_from(b, stream)
    gpurun.launch(stream, config, code:get_kernel("saxpy<float>"), ALPHA, a, y, size)
    stream:sync()
  end)
  nvtx.with_range("Vector Transform (gpurun)", function()
    gpurun.launch(stream, config, code:get_kernel("vector_transform<float>"), a, transformed, size)
    stream:sync()
  end)
  print("Vector Addition (custom kernel)")
  print("SAXPY (custom kernel)")
  print("Vector Transform (custom kernel)\n")
end)

local reference = nvtx.with_range("Generate Reference Results", function()
  print("Phase 3: Generate reference results for verification")
  local sums, saxpys, transforms = {}, {}, {}
  for i = 1, n do
    local x = a_values[i]
    sums[i] = x + b_values[i]
    saxpys[i] = ALPHA * x + b_values[i]
    transforms[i] = math.sqrt(x * x + 1.0) + math.sin(x)
  end
  print("Reference results generated (on the host)\n")
  return { add = sums, saxpy = saxpys, transform = transforms }
end)

local passed = nvtx.with_range("Verification", function()
  print("Phase 4: Verify kernel correctness")
  print("  Validating gpurun kernels:")
  local checks = check.new(cli.name)
  for _, case in ipairs{ { "    Vector Add: ", "vector add", c, reference.add },
                         { "    SAXPY:      ", "SAXPY", y, reference.saxpy },
                         { "    Transform:  ", "transform", transformed, reference.transform } } do
    io.write(case[1])
    print(checks:tables(case[2], case[3]:to_table(), case[4], 1e-5, 1e-6) and "Test PASSED" or "Test FAILED")
  end
  return checks:passed()
end)
if not passed then
  print("\n  ERROR: Kernel verification failed!")
  os.exit(1, true)
end
print()
device:sync()
print("The sample is complete PASSED!")
