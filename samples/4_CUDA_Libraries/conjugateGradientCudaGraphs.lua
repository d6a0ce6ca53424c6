-- conjugateGradientCudaGraphs.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/4_CUDA_Libraries/conjugateGradientCudaGraphs. Conjugate gradient
-- on A x = 1, A a random symmetric tridiagonal matrix of --n rows in CSR
-- form (10 plus a draw on the diagonal, a draw beside it): A p through
-- gpurun.spmv (cuSPARSE), dot products, axpy and scal through cuBLAS with
-- their scalars kept on the device, and one-thread kernels for the ratios.
-- The whole solve is one graph: the set-up, then a while node whose body
-- runs an iteration and a kernel that keeps the loop going while the
-- residual is above 1e-5, so the host waits once. --host-loop replays one
-- iteration's graph from the host instead and prints every residual, as
-- the original does. Both check max |A x - 1| on the host.
--
--   gpurun samples/4_CUDA_Libraries/conjugateGradientCudaGraphs.lua [--n N] [--host-loop] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local TOLERANCE = 1e-5
local MAX_ITERATIONS = 10000

local KERNELS = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void divide(const float *numerator, const float *denominator, float *out)
{
    *out = *numerator / *denominator;
}

extern "C" __global__ void negate(const float *a, float *out)
{
    *out = -*a;
}

// One more iteration done: go on while r.r is above tol^2 and iterations remain.
extern "C" __global__ void decide(cudaGraphConditionalHandle condition, const float *r1,
                                  float tol2, unsigned int *iterations, unsigned int max_iterations)
{
    unsigned int done = ++*iterations;
    cudaGraphSetConditional(condition, *r1 > tol2 && done < max_iterations ? 1u : 0u);
}
]]

local cli = args.new("conjugateGradientCudaGraphs.lua",
  "Conjugate gradient with cuSPARSE and cuBLAS captured into one graph with a device-side loop.")
cli:integer_option("--n", "Rows of the tridiagonal matrix.", 1048576, 2)
cli:flag("--host-loop", "Replay one iteration's graph from the host, printing each residual.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

-- The sample's matrix: row i holds A[i][i-1] (row i-1's last value, so A
-- is symmetric), 10 + a draw, and a draw for A[i][i+1].
local function tridiagonal(n)
  local draws = gpurun.default_rng(1):random_table(2 * n)
  local offsets, cols, values = { 0 }, {}, {}
  for i = 0, n - 1 do
    if i > 0 then
      cols[#cols + 1], values[#values + 1] = i - 1, draws[2 * i]
    end
    cols[#cols + 1], values[#values + 1] = i, draws[2 * i + 1] + 10
    if i < n - 1 then
      cols[#cols + 1], values[#values + 1] = i + 1, draws[2 * i + 2]
    end
    offsets[#offsets + 1] = #values
  end
  return offsets, cols, values
end

local device = require("gpurun.samples.cuda_device").open(cli, options.device)
print(("> GPU device has %d Multi-Processors, SM %d.%d compute capabilities\n"):format(
  device.multiprocessor_count, device.compute_capability.major, device.compute_capability.minor))

local n = options.n
local offsets, cols, values = tridiagonal(n)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local code <close> = gpurun.Program(KERNELS, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
local divide, negate, decide = code:get_kernel("divide"), code:get_kernel("negate"),
  code:get_kernel("decide")
local one = gpurun.LaunchConfig{ grid = 1, block = 1 }

local A <close> = gpurun.csr(gpurun.array(offsets, "int32"), gpurun.array(cols, "int32"),
                             gpurun.array(values, "float32"), n, n)
local x <close> = gpurun.empty(n, "float32")
local r <close> = gpurun.empty(n, "float32")
local p <close> = gpurun.empty(n, "float32")
local Ax <close> = gpurun.empty(n, "float32")
-- The scalars, on the device: r.r now (r1) and before (r0), p.Ax, a, -a, b.
local r1 <close> = gpurun.empty(1, "float32")
local r0 <close> = gpurun.empty(1, "float32")
local dot <close> = gpurun.empty(1, "float32")
local a <close> = gpurun.empty(1, "float32")
local na <close> = gpurun.empty(1, "float32")
local b <close> = gpurun.empty(1, "float32")
local iterations <close> = gpurun.empty(1, "uint32")
local host_r1 <close> = gpurun.pinned(1, "float32")

-- x = 0, r = 1 - A x, r1 = r.r; p = 0 and r0 = 1, so that the first
-- iteration's p = (r1 / r0) p + r is the original's p = r.
local function set_up(target)
  local on = { stream = target }
  x:fill(0, target)
  r:fill(1, target)
  gpurun.spmv(A, x, Ax, on)
  gpurun.axpy(-1, Ax, r, on)
  gpurun.dot(r, r, { out = r1, stream = target })
  p:fill(0, target)
  r0:fill(1, target)
  iterations:fill(0, target)
end

-- One iteration, as the original's graph holds it.
local function iterate(target)
  local on = { stream = target }
  gpurun.launch(target, one, divide, r1, r0, b)
  gpurun.scal(b, p, on)
  gpurun.axpy(1, r, p, on)
  gpurun.spmv(A, p, Ax, on)
  gpurun.dot(p, Ax, { out = dot, stream = target })
  gpurun.launch(target, one, divide, r1, dot, a)
  gpurun.axpy(a, p, x, on)
  gpurun.launch(target, one, negate, a, na)
  gpurun.axpy(na, Ax, r, on)
  r0:copy_from(r1, target)
  gpurun.dot(r, r, { out = r1, stream = target })
end

local function capture(build)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  build(builder)
  builder:end_building()
  return builder:complete()
end

local count, residual
local start = gpurun.perf_counter()
if options.host_loop then
  set_up(stream)
  local graph <close> = capture(function(builder)
    iterate(builder)
    r1:copy_to(host_r1, builder)
  end)
  count = 0
  repeat
    graph:launch(stream)
    stream:sync()
    count = count + 1
    residual = host_r1:get(1)
    print(("iteration = %3d, residual = %e"):format(count, math.sqrt(residual)))
  until residual <= TOLERANCE * TOLERANCE or count >= MAX_ITERATIONS
else
  local graph <close> = capture(function(builder)
    set_up(builder)
    local again = builder:create_condition(1)
    local body = builder:while_loop(again)
    body:begin_building()
    iterate(body)
    gpurun.launch(body, one, decide, again, r1, gpurun.f32(TOLERANCE * TOLERANCE), iterations,
                  MAX_ITERATIONS)
    body:end_building()
  end)
  graph:launch(stream)
  stream:sync()
  count, residual = iterations:get(1), r1:get(1)
  print(("iteration = %3d, residual = %e"):format(count, math.sqrt(residual)))
end
local ms = (gpurun.perf_counter() - start) * 1000
print(("%s: %d iterations in %.3f ms, %.2f us per iteration"):format(
  options.host_loop and "host loop of one-iteration graphs" or "one graph with a while node",
  count, ms, ms * 1000 / count))

-- max |A x - 1| on the host, from the CSR parts (the values as the device
-- holds them, rounded to float32).
local solution, stored = x:to_table(), A.values:to_table()
local err = 0.0
for i = 1, n do
  local sum = 0.0
  for j = offsets[i] + 1, offsets[i + 1] do sum = sum + stored[j] * solution[cols[j] + 1] end
  err = math.max(err, math.abs(sum - 1))
end
print(("Test Summary:  Error amount = %f"):format(err))
local passed = count < MAX_ITERATIONS and err < 1e-3
print("&&&& conjugateGradientCudaGraphs " .. (passed and "PASSED" or "FAILED"))
os.exit(passed and 0 or 1, true)
