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
// The C++ sample's split of the work, so that both time the same device
// work: ROWS_PER_BLOCK rows per block, one after another, each row's dot
// product spread over all the block's threads (warp sums, added into the
// row's residual in shared memory); then one thread per row moves x_new[i]
// by residual / A[i][i], and the rows' |change| is added to *change.
extern "C" __global__ void JacobiMethod(const float *A, const double *b, float conv_threshold,
                                        const double *x, double *x_new, double *change)
{
  __shared__ double x_shared[N_ROWS];
  __shared__ double residual[ROWS_PER_BLOCK];
  const int first = blockIdx.x * ROWS_PER_BLOCK;
  for (int j = threadIdx.x; j < N_ROWS; j += blockDim.x)
    x_shared[j] = x[j];
  if (threadIdx.x < ROWS_PER_BLOCK && first + threadIdx.x < N_ROWS)
    residual[threadIdx.x] = b[first + threadIdx.x];
  __syncthreads();
  for (int k = 0; k < ROWS_PER_BLOCK && first + k < N_ROWS; k++) {
    const float *row = A + (size_t)(first + k) * N_ROWS;
    double dot = 0.0;
    for (int j = threadIdx.x; j < N_ROWS; j += blockDim.x)
      dot += row[j] * x_shared[j];
    for (int offset = 16; offset > 0; offset /= 2)
      dot += __shfl_down_sync(0xffffffffu, dot, offset);
    if (threadIdx.x % 32 == 0)
      atomicAdd(&residual[k], -dot);
  }
  __syncthreads();
  if (threadIdx.x < ROWS_PER_BLOCK) {
    const int i = first + threadIdx.x;
    double moved = 0.0;
    if (i < N_ROWS) {
      const double dx = residual[threadIdx.x] / A[(size_t)i * N_ROWS + i];
      x_new[i] = x_shared[i] + dx;
      moved = fabs(dx);
    }
    for (int offset = ROWS_PER_BLOCK / 2; offset > 0; offset /= 2)
      moved += __shfl_down_sync((1u << ROWS_PER_BLOCK) - 1, moved, offset, ROWS_PER_BLOCK);
    if (threadIdx.x == 0)
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
-- As in the C++ sample: A and b staged in pinned memory, uploaded and x and
-- x_new zeroed on the stream, not waited for; the timer starts with them in
-- flight, as the original's does.
local A_host <close> = gpurun.pinned(N * N, "float32"):copy_from(A_values)
local b_host <close> = gpurun.pinned(N, "float64"):copy_from(b_values)
local A <close> = gpurun.empty(N * N, "float32")
local b <close> = gpurun.empty(N, "float64")
local x <close> = gpurun.empty(N, "float64")
local x_new <close> = gpurun.empty(N, "float64")
A:copy_from(A_host, stream)
b:copy_from(b_host, stream)
x:fill(0, stream)
x_new:fill(0, stream)
local host_change <close> = gpurun.pinned(1, "float64")
local threshold = gpurun.f32(THRESHOLD) -- the kernel's float, rounded once
local step_config = gpurun.LaunchConfig{ grid = N // ROWS_PER_BLOCK + 2, block = THREADS }
local error_config = gpurun.LaunchConfig{ grid = N // THREADS + 1, block = THREADS }

-- The GPU time holds what the C++ sample's timer holds: the change's
-- allocation, the graph's making, every step and the final error.
local gpu_start = gpurun.perf_counter()
local change <close> = gpurun.empty(1, "float64")
-- Even steps read x and write x_new, odd steps the other way round: one
-- launch checked and packed once for each.
local forward = jacobi:bind(step_config, A, b, threshold, x, x_new, change)
local backward = jacobi:bind(step_config, A, b, threshold, x_new, x, change)

-- One step on a stream or a builder: the change zeroed, the kernel, the
-- change copied to the host.
local function step(target, plan)
  change:fill(0, target)
  plan:launch(target)
  change:copy_to(host_change, target)
end

local function capture(plan)
  local builder = stream:create_graph_builder()
  builder:begin_building()
  step(builder, plan)
  builder:end_building()
  return builder
end

-- The three ways to run step k (from 0) and wait for it; a method with a
-- graph keeps it in `graph`.
local graph, kernel_node
local methods = {
  [0] = function(k)
    if not graph then
      local builder <close> = capture(forward)
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
    local builder <close> = capture(k % 2 == 0 and forward or backward)
    if graph then graph:update(builder) else graph = builder:complete() end
    graph:launch(stream)
    -- The capture's graph is destroyed while the step runs, not after it.
    builder:close()
    stream:sync()
  end,
  -- No stream sync: reading host_change waits for the copy queued into it.
  [2] = function(k)
    step(stream, k % 2 == 0 and forward or backward)
  end,
}

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
