-- Kernels shared by the GPU specs, compiled once per process for the current
-- device (the kernel cache makes later processes cheap).
local gpurun = require("gpurun")

local kernels = {}

kernels.SOURCE = [[
extern "C" __global__ void vec_add(const float *a, const float *b, float *out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    out[i] = a[i] + b[i];
}
extern "C" __global__ void vec_mul(const float *a, const float *b, float *out, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)blockDim.x * gridDim.x)
    out[i] = a[i] * b[i];
}
extern "C" __global__ void scale_shift(float *x, float scale, int shift, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] = x[i] * scale + (float)shift;
}
extern "C" __global__ void fill_double(double *x, double value, long long n) {
  long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
  if (i < n) x[i] = value;
}
extern "C" __global__ void byte_flag(unsigned char *out, bool flag, char delta) {
  out[0] = (unsigned char)(flag ? 1 : 0) + delta;
}
extern "C" __global__ void write_index_2d(int *out, int width, int height) {
  int x = blockIdx.x * blockDim.x + threadIdx.x;
  int y = blockIdx.y * blockDim.y + threadIdx.y;
  if (x < width && y < height) out[y * width + x] = y * 1000 + x;
}
extern "C" __global__ void uses_shared(float *out) {
  extern __shared__ float scratch[];
  scratch[threadIdx.x] = threadIdx.x;
  __syncthreads();
  out[threadIdx.x] = scratch[blockDim.x - 1 - threadIdx.x];
}
extern "C" __global__ void out_of_bounds(float *x) {
  x[(size_t)1 << 40] = 1.0f;
}
extern "C" __global__ void traps() { __trap(); }
extern "C" __global__ void __launch_bounds__(64) bounded(float *x) { x[threadIdx.x] = 1.0f; }
]]

local device, module

-- setup() -> device, the ObjectCode, and a function kernel(name).
function kernels.setup()
  if not device then
    device = gpurun.Device(0)
    device:set_current()
    local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
    module = gpurun.Program(kernels.SOURCE, "c++", options):compile("cubin")
  end
  device:set_current()
  return device, module, function(name) return module:get_kernel(name) end
end

return kernels
