-- simpleCudaGraphs.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/3_CUDA_Features/simpleCudaGraphs. One graph, built twice: a copy
-- of 16M floats from pinned memory and two fills on three branches, a
-- two-kernel sum in double precision, the result copied back and printed
-- by a host node. The C++ sample adds the nodes one by one, then captures
-- three streams joined by events; gpurun builds graphs by capture only, so
-- the first is a capture forked and joined (builder:split, gpurun.join),
-- the second one whose branches meet at recorded events. Each graph is
-- completed twice (the second Graph stands for the C++ sample's clone) and
-- each replayed 3 times; every sum the host node sees is checked against
-- the host's.
--
--   gpurun samples/3_CUDA_Features/simpleCudaGraphs.lua [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local ELEMENTS = 1 << 24
local BLOCKS = 512
local THREADS = 512 -- the kernels' __launch_bounds__ and shared arrays, given as a define
local REPLAYS = 3

local KERNELS = [[
// The sum of one double per thread, in a block of THREADS threads.
__device__ double block_sum(double value)
{
  __shared__ double partial[THREADS];
  partial[threadIdx.x] = value;
  __syncthreads();
  for (unsigned int half = THREADS / 2; half > 0; half /= 2) {
    if (threadIdx.x < half)
      partial[threadIdx.x] += partial[threadIdx.x + half];
    __syncthreads();
  }
  return partial[0];
}

extern "C" __global__ void __launch_bounds__(THREADS) reduce(const float *in, double *partial, size_t n)
{
  double sum = 0.0;
  for (size_t i = (size_t)blockIdx.x * THREADS + threadIdx.x; i < n; i += (size_t)gridDim.x * THREADS)
    sum += in[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    partial[blockIdx.x] = sum;
}

extern "C" __global__ void __launch_bounds__(THREADS) reduceFinal(const double *partial, double *result, size_t n)
{
  double sum = 0.0;
  for (size_t i = threadIdx.x; i < n; i += THREADS)
    sum += partial[i];
  sum = block_sum(sum);
  if (threadIdx.x == 0)
    result[0] = sum;
}
]]

local cli = args.new("simpleCudaGraphs.lua",
  "A graph of copies, fills, two kernels and a host node, built two ways and replayed.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

local device = require("gpurun.samples.cuda_device").open(cli, options.device)
print(("%d elements"):format(ELEMENTS))
print(("threads per block  = %d"):format(THREADS))
print(("Graph Launch iterations = %d"):format(REPLAYS))

local program <close> = gpurun.Program(KERNELS, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch,
  defines = { THREADS = THREADS } })
local code <close> = program:compile("cubin")
local reduce, reduce_final = code:get_kernel("reduce"), code:get_kernel("reduceFinal")

-- The input in pinned memory, and its sum on the host.
local function pinned_input()
  local values = gpurun.default_rng(0):random_table(ELEMENTS, "float32")
  local sum = 0.0
  for i = 1, ELEMENTS do sum = sum + values[i] end
  local pinned = gpurun.pinned(ELEMENTS, "float32")
  pinned:copy_from(values)
  return pinned, sum
end
local host_input <close>, expected = pinned_input()
local input <close> = gpurun.empty(ELEMENTS, "float32")
local partial <close> = gpurun.empty(BLOCKS, "float64")
local result <close> = gpurun.empty(1, "float64")
local host_result <close> = gpurun.pinned(1, "float64")
local reduce_config = gpurun.LaunchConfig{ grid = BLOCKS, block = THREADS }
local final_config = gpurun.LaunchConfig{ grid = 1, block = THREADS }
local checks = check.new(cli.name)

-- The host node: prints the sum the graph copied back, as the C++
-- sample's callback does, and keeps it for the check.
local function host_node(name)
  return gpurun.HostCallback(function()
    local sum = host_result:get(1)
    print(("[%s] Host callback final reduced sum = %f"):format(name, sum))
    checks:number(name .. " replay's sum", sum, expected, 1e-9, 0)
  end)
end

-- Forks and a join: the copy and the partial sums' fill on two branches
-- before the first kernel, the result's fill on a third before the second.
local function build_forked(builder, callback)
  local main, partial_branch, result_branch = builder:split(3)
  input:copy_from(host_input, main)
  partial:fill(0, partial_branch)
  result:fill(0, result_branch)
  main:wait(partial_branch)
  gpurun.launch(main, reduce_config, reduce, input, partial, gpurun.u64(ELEMENTS))
  gpurun.join(main, partial_branch, result_branch)
  gpurun.launch(main, final_config, reduce_final, partial, result, gpurun.u64(BLOCKS))
  result:copy_to(host_result, main)
  callback:launch(main)
end

-- The same work, the branches meeting at events they record.
local function build_with_events(builder, callback)
  local first, second, third = builder:split(3)
  input:copy_from(host_input, first)
  partial:fill(0, second)
  local partial_filled = second:record()
  result:fill(0, third)
  local result_filled = third:record()
  first:wait(partial_filled)
  gpurun.launch(first, reduce_config, reduce, input, partial, gpurun.u64(ELEMENTS))
  first:wait(result_filled)
  gpurun.launch(first, final_config, reduce_final, partial, result, gpurun.u64(BLOCKS))
  result:copy_to(host_result, first)
  callback:launch(first)
  gpurun.join(first, second, third)
end

local function run(name, description, build)
  local stream <close> = device:create_stream()
  local callback <close> = host_node(name)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  build(builder, callback)
  print(("\nNum of nodes in the graph %s = %d"):format(description, builder.node_count))
  builder:end_building()
  local graph <close> = builder:complete()
  local second <close> = builder:complete() -- a copy of the same captured graph
  for _ = 1, REPLAYS do graph:launch(stream) end
  stream:sync()
  print("Cloned Graph Output.. ")
  for _ = 1, REPLAYS do second:launch(stream) end
  stream:sync()
end

run("cudaGraphsManual", "built with forks and a join", build_forked)
run("cudaGraphsUsingStreamCapture", "built with events between its branches", build_with_events)
if not checks:passed() then
  os.exit(1, true)
end
print(("\nTest PASSED: all %d replays' sums match the host's"):format(4 * REPLAYS))
