-- y = a*x + y on the GPU: a CUDA C kernel compiled at run time by NVRTC, its
-- launch captured once into a CUDA graph, the graph replayed, the result checked.
local gpurun = require("gpurun")
local device = gpurun.Device(0):set_current()
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)                 -- buffer work queues behind the kernels

local code <close> = gpurun.Program([[
extern "C" __global__ void axpy(float a, const float *x, float *y, size_t n) {
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}]], "c++", { arch = "sm_" .. device.arch }):compile("cubin")
local axpy <close> = code:get_kernel("axpy")

local n, replays = 1 << 20, 100
local x <close> = gpurun.full(n, 2.0, "float32")
local y <close> = gpurun.zeros(n, "float32")
local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
local graph <close> = require("gpurun.bench").capture(stream, function(builder)
  gpurun.launch(builder, config, axpy, 0.5, x, y, gpurun.u64(n))  -- recorded, not run
end)

local start = gpurun.perf_counter()
for _ = 1, replays do graph:launch(stream) end
stream:sync()
local us = (gpurun.perf_counter() - start) * 1e6 / replays
local wrong = gpurun.compare(y, replays * 0.5 * 2.0, 0, 0).mismatches  -- exact in float32
print(("axpy: %d elements, %d graph replays, %.2f us each, %d wrong"):format(n, replays, us, wrong))
os.exit(wrong == 0, true)
