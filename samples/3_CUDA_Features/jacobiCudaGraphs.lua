-- jacobiCudaGraphs.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/3_CUDA_Features/jacobiCudaGraphs. The Jacobi method on A x = b,
-- A 512 x 512 with 513 on the diagonal and 1 elsewhere, b all 1024, so x is
-- all ones. Each step is a graph of three nodes (zero the change, the Jacobi
-- kernel, copy the change to the host) that swaps x and x_new every time,
-- run until the summed change is at most 0.01, in one of three ways:
-- --gpumethod 0 sets the kernel node's arguments in the graph
-- (Graph:set_args), 1 captures the step again and updates the graph in place
-- (Graph:update), 2 launches without a graph. The final error sum |x - 1| must
-- be within 0.01 of the host's Jacobi method on the same system.
--
--   gpurun samples/3_CUDA_Features/jacobiCudaGraphs.lua [--gpumethod 0|1|2] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local N = 512 -- N_ROWS, given to the kernels as a define
local ROWS_PER_BLOCK = 8
local THREADS = 256
local THRESHOLD = 1.0e-2
local MAX_ITERATIONS = 4 * N * N

local KERNELS = [[
// ROWS_PER_BLOCK rows of A per block, one warp per row: each row's
// residual b[i] - A[i] x, then x_new = x + residual / A[i][i], and the block's
// summed |change| added to *change.
extern "C" __global__ void JacobiMethod(const float *A, const double *b, float conv_threshold,
                                        const double *x, double *x_new, double *change)
{
  __shared__ double x_shared[N_ROWS];
  __shared__ double residual[ROWS_PER_BLOCK];
  const int first = blockIdx.x * ROWS_PER_BLOCK;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int j = threadIdx.x; j < N_ROWS; j += blockDim.x)
    x_shared[j] = x[j];
  if (threadIdx.x < ROWS_PER_BLOCK)
    residual[threadIdx.x] = first + threadIdx.x < N_ROWS ? b[first + threadIdx.x] : 0.0;
  __syncthreads();
  for (int k = warp; k < ROWS_PER_BLOCK && first + k < N_ROWS; k += blockDim.x / 32) {
    const float *row = A + (size_t)(first + k) * N_ROWS;
    double dot = 0.0;
    for (int j = lane; j < N_ROWS; j += 32)
      dot += row[j] * x_shared[j];
    for (int offset = 16; offset > 0; offset /= 2)
      dot += __shfl_down_sync(0xffffffffu, dot, offset);
    if (lane == 0)
      residual[k] -= dot;
  }
  __syncthreads();
  if (warp == 0) {
    double moved = 0.0;
    const int i = first + lane;
    if (lane < ROWS_PER_BLOCK && i < N_ROWS) {
      const double dx = residual[lane] / A[(size_t)i * N_ROWS + i];
      x_new[i] = x_shared[i] + dx;
      moved = fabs(dx);
    }
    for (int offset = 16; offset > 0; offset /= 2)
      moved += __shfl_down_sync(0xffffffffu, moved, offset);
    if (lane == 0)
      atomicAdd(change, moved);
  }
}

// sum |x[i] - 1| into *error.
extern "C" __global__ void finalError(const double *x, double *error)
{
  double sum = 0.0;
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < N_ROWS; i += blockDim.x * gridDim.x)
    sum += fabs(x[i] - 1.0);
  for (int offset = 16; offset > 0; offset /= 2)
    sum += __shfl_down_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0)
    atomicAdd(error, sum);
}
]]

local cli = args.new("jacobiCudaGraphs.lua",
  "The Jacobi method with a graph updated each step: node arguments, graph update, or no graph.")
cli:converted_option("--gpumethod",
  "0: set the kernel node's arguments (Graph:set_args); 1: capture again and update the graph "
  .. "(Graph:update); 2: plain launches, no graph.", 0, function(text)
    local method = args.to_integer(text, 0)
    if method == nil or method > 2 then return nil, "expected 0, 1 or 2, got " .. text end
    return method
  end)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

-- The system: A has N + 1 on the diagonal and 1 elsewhere (row-major), b is
-- 2N everywhere, so every x[i] is 1.
local function linear_system()
  local A, b = {}, {}
  for i = 1, N do
    b[i] = 2.0 * N
    for j = 1, N do A[(i - 1) * N + j] = i == j and N + 1.0 or 1.0 end
  end
  return A, b
end

-- Jacobi on the host until the summed change is at most THRESHOLD; returns
-- the iterations and sum |x - 1|. A's rows are ones plus N on the diagonal,
-- so A x is sum(x) + N x[i]: the host does O(N) work a step where the C++
-- sample's loop does O(N^2) (its time is not the C++ sample's CPU time).
local function jacobi_on_host(b)
  local x, x_new = {}, {}
  for i = 1, N do x[i], x_new[i] = 0.0, 0.0 end
  local k = 0
  while k < MAX_ITERATIONS do
    k = k + 1
    local total = 0.0
    for j = 1, N do total = total + x[j] end
    local change = 0.0
    for i = 1, N do
      local dx = (b[i] - (total + N * x[i])) / (N + 1.0)
      x_new[i] = x_new[i] + dx
      change = change + math.abs(dx)
    end
    for i = 1, N do x[i] = x_new[i] end
    if change <= THRESHOLD then break end
  end
  local error = 0.0
  for i = 1, N do error = error + math.abs(x[i] - 1.0) end
  return k, error
end

local device = require("gpurun.samples.cuda_device").open(cli, options.device)
local A_values, b_values = linear_system()

local cpu_start = gpurun.perf_counter()
local cpu_iterations, cpu_error = jacobi_on_host(b_values)
local cpu_ms = (gpurun.perf_counter() - cpu_start) * 1000
print(("CPU iterations : %d"):format(cpu_iterations))
print(("CPU error : %.3e"):format(cpu_error))
print(("CPU Processing time: %f (ms)"):format(cpu_ms))

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local program <close> = gpurun.Program(KERNELS, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch,
  defines = { N_ROWS = N, ROWS_PER_BLOCK = ROWS_PER_BLOCK } })
local code <close> = program:compile("cubin")
local jacobi, final_error = code:get_kernel("JacobiMethod"), code:get_kernel("finalError")
local A <close> = gpurun.array(A_values, "float32")
local b <close> = gpurun.array(b_values, "float64")
local x <close> = gpurun.zeros(N, "float64")
local x_new <close> = gpurun.zeros(N, "float64")
local change <close> = gpurun.empty(1, "float64")
local host_change <close> = gpurun.pinned(1, "float64")
local threshold = gpurun.f32(THRESHOLD) -- the kernel's float, rounded once
local step_config = gpurun.LaunchConfig{ grid = N // ROWS_PER_BLOCK + 2, block = THREADS }
local error_config = gpurun.LaunchConfig{ grid = N // THREADS + 1, block = THREADS }
stream:sync()

-- One step from `from` into `to` on a stream or a builder: the change zeroed,
-- the kernel, the change copied to the host.
local function step(target, from, to)
  change:fill(0, target)
  gpurun.launch(target, step_config, jacobi, A, b, threshold, from, to, change)
  change:copy_to(host_change, target)
end

local function capture(from, to)
  local builder = stream:create_graph_builder()
  builder:begin_building()
  step(builder, from, to)
  builder:end_building()
  return builder
end

-- The three ways to run step k (from 0) and wait for it; a method with a
-- graph keeps it in `graph`.
local graph, kernel_node
local methods = {
  [0] = function(k)
    if not graph then
      local builder <close> = capture(x, x_new)
      graph = builder:complete()
      for _, node in ipairs(graph:nodes()) do
        if node.kind == "kernel" then kernel_node = node.index end
      end
    end
    if k % 2 == 0 then
      graph:set_args(kernel_node, A, b, threshold, x, x_new, change)
    else
      graph:set_args(kernel_node, A, b, threshold, x_new, x, change)
    end
    graph:launch(stream)
    stream:sync()
  end,
  [1] = function(k)
    local builder <close> = k % 2 == 0 and capture(x, x_new) or capture(x_new, x)
    if graph then graph:update(builder) else graph = builder:complete() end
    graph:launch(stream)
    stream:sync()
  end,
  [2] = function(k)
    if k % 2 == 0 then step(stream, x, x_new) else step(stream, x_new, x) end
    stream:sync()
  end,
}

local gpu_start = gpurun.perf_counter()
local run_step = methods[options.gpumethod]
local gpu_error
for k = 0, MAX_ITERATIONS - 1 do
  run_step(k)
  if host_change:get(1) <= THRESHOLD then
    change:fill(0)
    gpurun.launch(stream, error_config, final_error, k % 2 == 0 and x_new or x, change)
    gpu_error = change:get(1)
    print(("GPU iterations : %d"):format(k + 1))
    print(("GPU error : %.3e"):format(gpu_error))
    break
  end
end
print(("GPU Processing time: %f (ms)"):format((gpurun.perf_counter() - gpu_start) * 1000))
if graph then graph:close() end

local passed = gpu_error ~= nil and math.abs(cpu_error - gpu_error) < THRESHOLD
print("&&&& jacobiCudaGraphs " .. (passed and "PASSED" or "FAILED"))
os.exit(passed and 0 or 1, true)
