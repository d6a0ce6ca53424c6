-- graphMemoryNodes.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/3_CUDA_Features/graphMemoryNodes. Stream-ordered allocation and
-- graph memory nodes: input is squared, then negated, with the buffers
-- made and freed on two streams ordered by events; the same captured into
-- a graph (allocation and free nodes); the same as one builder's graph,
-- whose freed input leaves its address to the next allocation; and a
-- graph whose result outlives it, read by a kernel after the launch and
-- freed three ways: after a sync, in stream order (Buffer:close(stream))
-- and by a second graph made of its free node alone
-- (Buffer:close(builder)). Each result is checked on the host, the last
-- three on the device too.
--
--   gpurun samples/3_CUDA_Features/graphMemoryNodes.lua [--device ID] [--elements N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local THREADS = 512
local ALLOWABLE_VARIANCE = 1e-6

local KERNELS = [[
extern "C" __global__ void squareArray(const float *input, float *output, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) output[i] = input[i] * input[i];
}

extern "C" __global__ void negateArray(const float *input, float *output, int n)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) output[i] = input[i] * -1;
}

// Sets *failed when an element differs from the reference by more than
// the allowed relative variance.
extern "C" __global__ void validateGPU(const float *negSquare, const float *reference, int n,
                                       int *failed)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    float ref = reference[i], diff = negSquare[i] - ref;
    if ((diff * diff) / (ref * ref) > 1.e-6f) *failed = 1;
  }
}
]]

local cli = args.new("graphMemoryNodes.lua",
  "Graph memory nodes: buffers made and freed in streams, in captured graphs, and freed outside them.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:integer_option("--elements", "Elements of each array.", 8000000, 1)
local options = cli:parse(arg)

local device = require("gpurun.samples.cuda_device").open(cli, options.device)
local major, minor = gpurun.driver_version()
print(("Driver version is: %d.%d"):format(major, minor))
if device:get_attribute("memory_pools_supported") == 0 then
  print("Waiving execution as device does not support Memory Pools")
  os.exit(0, true)
end
print("Setting up sample.")

local n = options.elements
local program <close> = gpurun.Program(KERNELS, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local square_array, negate_array = code:get_kernel("squareArray"), code:get_kernel("negateArray")
local validate_gpu = code:get_kernel("validateGPU")
local config = gpurun.LaunchConfig{ grid = (n + THREADS - 1) // THREADS, block = THREADS }
local count = gpurun.i32(n)

-- The host arrays, page-locked so that graphs copy them; the input drawn
-- on the host, the reference -input^2 computed there and put on the device.
local host = { input = gpurun.pinned(n, "float32"), square = gpurun.pinned(n, "float32"),
               neg_square = gpurun.pinned(n, "float32") }
do
  local rng <close> = gpurun.default_rng(os.time())
  local drawn <close> = rng:random(n, "float32")
  drawn:copy_to(host.input)
end
local reference = gpurun.empty(n, "float32")
do
  local expected <close> = gpurun.pinned(n, "float32")
  local input = host.input
  for i = 1, n do
    local x = input[i]
    expected[i] = -(x * x)
  end
  reference:copy_from(expected)
end
local failed = gpurun.managed(1, "int32")
failed:fill(0)
local stream <close> = device:create_stream()
local checks = check.new(cli.name)
print("Setup complete.\n")

-- Fills the host's results with values no result has (they are all <= 0).
local function reset_outputs()
  host.square:fill(1)
  host.neg_square:fill(1)
end

local function validate_host()
  local input, neg_square = host.input, host.neg_square
  local wrong = 0
  for i = 1, n do
    local x = input[i]
    local ref = -(x * x)
    local diff = neg_square[i] - ref
    if (diff * diff) / (ref * ref) > ALLOWABLE_VARIANCE then wrong = wrong + 1 end
  end
  return wrong
end

-- Prints the verdict of what validate_host found (wrong elements) and of
-- the device's flag, and clears the flag.
local function report(label, wrong)
  local flagged = failed[1] ~= 0
  failed:fill(0)
  local detail = ("%d of %d elements differ on the host%s"):format(wrong, n,
    flagged and ", and the device found a difference" or "")
  local passed = checks:condition(label, wrong == 0 and not flagged, detail)
  print(passed and "Validation PASSED!\n" or "Validation FAILURE!\n")
end

-- The negated squares on s1 and s2 (two Streams, or two builders of one
-- capture): input and square made on s1, square copied to the host on
-- s2, input freed so that neg_square may take its address, square freed
-- on s2 after both its readers. keep: neg_square is not freed but
-- returned, with whether it took input's address.
local function negate_squares(s1, s2, keep)
  local input = gpurun.empty(n, "float32", { stream = s1 })
  local square = gpurun.empty(n, "float32", { stream = s1 })
  input:copy_from(host.input, s1)
  gpurun.launch(s1, config, square_array, input, square, count)
  s2:wait(s1:record())
  square:copy_to(host.square, s2)
  local input_address = input.ptr
  input:close(s1)
  local neg_square = gpurun.empty(n, "float32", { stream = s1 })
  local shared = neg_square.ptr == input_address
  gpurun.launch(s1, config, negate_array, square, neg_square, count)
  s2:wait(s1:record())
  neg_square:copy_to(host.neg_square, s1)
  square:close(s2)
  if not keep then neg_square:close(s1) end
  return keep and neg_square or nil, shared
end

-- A graph of negate_squares, s2 a fork of the builder, joined at the end.
local function capture_negate_squares(keep)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  local main, side = builder:split(2)
  local neg_square, shared = negate_squares(main, side, keep)
  gpurun.join(main, side)
  builder:end_building()
  return builder:complete(), neg_square, shared
end

-- One part: what runs it (it returns when the host may read the results),
-- then the check of those results.
local function part(what, run)
  print(("Running negateSquares %s."):format(what))
  run()
  print(("Validating negateSquares %s..."):format(what))
  report("negateSquares " .. what, validate_host())
  reset_outputs()
end

-- A part whose graph keeps d_negSquare: the device checks it after the
-- launch, then free(neg_square) lets it go.
local function freed(where, free)
  part("with d_negSquare freed " .. where, function()
    local graph, neg_square, shared = capture_negate_squares(true)
    if shared then print("Check verified that d_negSquare and d_input share a virtual address.") end
    graph:launch(stream)
    gpurun.launch(stream, config, validate_gpu, neg_square, reference, count, failed)
    free(neg_square)
    stream:sync()
    graph:close()
  end)
end

part("in a stream", function()
  local second <close> = device:create_stream()
  negate_squares(stream, second)
  stream:wait(second)
  stream:sync()
end)

part("in a stream-captured graph", function()
  local graph <close> = capture_negate_squares(false)
  graph:launch(stream)
  stream:sync()
end)

part("in a graph built on one builder", function()
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  local _, shared = negate_squares(builder, builder)
  builder:end_building()
  if shared then print("Check verified that d_negSquare and d_input share a virtual address.") end
  local graph <close> = builder:complete()
  graph:launch(stream)
  stream:sync()
end)

freed("outside the stream", function(neg_square)
  stream:sync() -- the free then waits for nothing: the kernels are done
  neg_square:close()
end)

freed("outside the graph", function(neg_square)
  neg_square:close(stream) -- in stream order, after the device's check
end)

freed("in a different graph", function(neg_square)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  neg_square:close(builder) -- the free graph's one node
  builder:end_building()
  local free_graph <close> = builder:complete()
  free_graph:launch(stream)
end)

print("Cleaning up sample.")
reference:close()
failed:close()
for _, array in pairs(host) do array:close() end
print("Cleanup complete. Exiting sample.")
if not checks:passed() then os.exit(1, true) end
