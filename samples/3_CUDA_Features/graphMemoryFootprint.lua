-- graphMemoryFootprint.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/3_CUDA_Features/graphMemoryFootprint. How much device memory
-- graphs with allocation nodes hold (Device:graph_memory().used), in four
-- cases: one graph that frees a 64 MiB buffer before allocating another
-- (the second may take the first's address), eight graphs replayed one
-- after another on a stream (they share physical memory, each at an address
-- of its own), the same eight on eight streams at once (each needs its own),
-- and eight graphs that never free their buffer (nothing is shared until
-- the buffers are closed and the memory trimmed). Buffers made on a
-- capturing builder are gpurun's allocation nodes; closing one there is a
-- free node. As in the C++ sample, the graphs' addresses must all differ.
--
--   gpurun samples/3_CUDA_Features/graphMemoryFootprint.lua [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

local BYTES = 64 * 1024 * 1024
local GRAPHS = 8
local THREADS = 512
local KERNEL_US = 5 -- how long each thread of the graphs' kernel runs
local RULE = string.rep("=", 32)

local KERNEL = [[
// Runs for at least `clocks` clock ticks and does nothing else.
extern "C" __global__ void clockBlock(long long clocks)
{
  const unsigned int start = (unsigned int)clock();
  long long elapsed = 0;
  while (elapsed < clocks)
    elapsed = (unsigned int)clock() - start; /* modulo 2^32, as the counter wraps */
}
]]

local cli = args.new("graphMemoryFootprint.lua",
  "The device memory graphs with allocation nodes hold: reuse, concurrency, unfreed buffers.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

local device = require("gpurun.samples.cuda_device").open(cli, options.device)
local major, minor = gpurun.driver_version()
print(("Driver version is: %d.%d"):format(major, minor))
if major < 11 or (major == 11 and minor < 4) then
  print("Waiving execution as driver does not support Graph Memory Nodes")
  os.exit(0, true)
end
if device:get_attribute("memory_pools_supported") == 0 then
  print("Waiving execution as device does not support Memory Pools")
  os.exit(0, true)
end
print("Running sample.")

local program <close> = gpurun.Program(KERNEL, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local clock_block = code:get_kernel("clockBlock")
local elements = BYTES // 4
local block_config = gpurun.LaunchConfig{ grid = elements // THREADS, block = THREADS }
local clocks = gpurun.i64(math.floor(KERNEL_US / 1000 * device:get_attribute("clock_rate")))
local checks = check.new(cli.name)

local function print_footprint()
  print(("    FOOTPRINT: %d bytes"):format(device:graph_memory().used))
end

local function cleanup()
  device:trim_graph_memory()
  print("\nCleaning up example by trimming device memory.")
  print_footprint()
  print()
end

-- A graph of what capture(builder) captures, on `stream`.
local function build(stream, capture)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  local result = capture(builder)
  builder:end_building()
  return builder:complete(), result
end

-- A graph that allocates BYTES, runs the clock kernel and frees them;
-- also returns the allocation's address.
local function alloc_free_graph(stream)
  return build(stream, function(builder)
    local buffer = gpurun.empty(elements, "float32", { stream = builder })
    gpurun.launch(builder, block_config, clock_block, clocks)
    local address = buffer.ptr
    buffer:close()
    return address
  end)
end

local function virtual_address_reuse()
  print(RULE)
  print("Running virtual address reuse example.")
  print("Sequential allocations & frees within a single graph enable CUDA to reuse virtual addresses.\n")
  local stream <close> = device:create_stream()
  local graph <close>, shared = build(stream, function(builder)
    local a = gpurun.empty(elements, "float32", { stream = builder })
    local a_address = a.ptr
    a:close()
    local b = gpurun.empty(elements, "float32", { stream = builder })
    local b_address = b.ptr
    b:close()
    return a_address == b_address
  end)
  print(shared and "Check confirms that d_a and d_b share a virtual address."
        or "Check shows that d_a and d_b DO NOT share a virtual address.")
  graph:launch(stream)
  stream:sync()
  print_footprint()
end

-- Whether the addresses are all different, saying which are not.
local function all_different(addresses)
  local differ = true
  for i = 1, #addresses do
    for j = i + 1, #addresses do
      if addresses[i] == addresses[j] then
        differ = false
        print(("Error: Graph exec %d and %d have the same virtual address!"):format(i - 1, j - 1))
      end
    end
  end
  return differ
end

local function physical_memory_reuse_single_stream()
  print(RULE)
  print("Running physical memory reuse example.")
  print("CUDA reuses the same physical memory for allocations from separate graphs when the "
        .. "allocation lifetimes don't overlap.\n")
  local stream <close> = device:create_stream()
  local graphs, addresses = {}, {}
  for i = 1, GRAPHS do graphs[i], addresses[i] = alloc_free_graph(stream) end
  print("Creating the graph execs does not reserve any physical memory.")
  print_footprint()
  graphs[1]:launch(stream)
  print("\nThe first graph launched reserves the memory it needs.")
  print_footprint()
  graphs[1]:launch(stream)
  print("A subsequent launch of the same graph in the same stream reuses the same physical memory. "
        .. "Thus the memory footprint does not grow here.")
  print_footprint()
  print("\nSubsequent launches of other graphs in the same stream also reuse the physical memory. "
        .. "Thus the memory footprint does not grow here.")
  for i = 2, GRAPHS do
    graphs[i]:launch(stream)
    io.write(("%02d: "):format(i - 1))
    print_footprint()
  end
  stream:sync()
  for _, graph in ipairs(graphs) do graph:close() end
  if checks:condition("every graph at its own address", all_different(addresses)) then
    print("\nCheck confirms all graphs use a different virtual address.")
  else
    print("\nAll graphs do NOT use different virtual addresses. Exiting test.")
    os.exit(1, true)
  end
end

local function simultaneous_streams()
  print(RULE)
  print("Running simultaneous streams example.")
  print("Graphs that can run concurrently need separate physical memory. In this example, each graph "
        .. "launched in a separate stream increases the total memory footprint.\n")
  print("When launching a new graph, CUDA may reuse physical memory from a graph whose execution has "
        .. "already finished -- even if the new graph is being launched in a different stream from the "
        .. "completed graph. Therefore, a kernel node is added to the graphs to increase runtime.\n")
  local streams, graphs = {}, {}
  for i = 1, GRAPHS do
    streams[i] = device:create_stream()
    graphs[i] = alloc_free_graph(streams[i])
  end
  print("Initial footprint:")
  print_footprint()
  print("\nEach graph launch in a separate stream grows the memory footprint:")
  for i = 2, GRAPHS do
    graphs[i]:launch(streams[i])
    io.write(("%02d: "):format(i - 1))
    print_footprint()
  end
  for i = 1, GRAPHS do
    streams[i]:sync()
    graphs[i]:close()
    streams[i]:close()
  end
end

local function unfreed_allocations()
  print(RULE)
  print("Running unfreed streams example.")
  print("CUDA cannot reuse physical memory from graphs which do not free their allocations.\n")
  local stream <close> = device:create_stream()
  local graphs, buffers = {}, {}
  for i = 1, GRAPHS do
    graphs[i], buffers[i] = build(stream, function(builder)
      return gpurun.empty(elements, "float32", { stream = builder }) -- open at the end: the graph's
    end)
  end
  print("Despite being launched in the same stream, each graph launch grows the memory footprint. "
        .. "Since the allocation is not freed, CUDA keeps the memory valid for use.")
  for i = 1, GRAPHS do
    graphs[i]:launch(stream)
    io.write(("%02d: "):format(i - 1))
    print_footprint()
  end
  stream:sync()
  device:trim_graph_memory()
  print("\nTrimming does not impact the memory footprint since the un-freed allocations are still "
        .. "holding onto the memory.")
  print_footprint()
  for _, buffer in ipairs(buffers) do buffer:close() end
  stream:sync()
  print("\nFreeing the allocations does not shrink the footprint.")
  print_footprint()
  device:trim_graph_memory()
  print("\nSince the allocations are now freed, trimming does reduce the footprint even when the "
        .. "graph execs are not yet destroyed.")
  print_footprint()
  for _, graph in ipairs(graphs) do graph:close() end
end

virtual_address_reuse()
cleanup()
physical_memory_reuse_single_stream()
cleanup()
simultaneous_streams()
cleanup()
unfreed_allocations()
cleanup()
print(RULE)
print("Sample complete.")
