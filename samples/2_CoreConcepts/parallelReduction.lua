-- parallelReduction.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- parallelReduction (cuda.core and cuda.compute). Sums 2^20 float32 values
-- two ways: a hand-written reduction tree (grid-stride loads, sequential
-- addressing in shared memory) launched stage after stage until one value
-- is left, and gpurun.sum, the library's reduction, where the original calls
-- cuda.compute.reduce_into. Each is timed with events over 10 runs and
-- checked against the sum on the host.
--
--   gpurun samples/2_CoreConcepts/parallelReduction.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local report = require("gpurun.report")
local with_commas = report.with_commas

local ELEMENTS = 1 << 20
local BLOCK = 256
local RUNS = 10
local RULE = string.rep("=", 70)

-- reduce_sum, the reduction tree (lua/gpurun/samples/kernels/reduce_sum.cu).
local KERNEL = require("gpurun.samples.kernels").source("reduce_sum")

local cli = args.new("parallelReduction.lua",
  "Parallel reduction: a hand-written reduction tree against gpurun.sum.")
cli:parse(arg)

local function banner(title)
  print("\n" .. RULE)
  print(title)
  print(RULE)
end

-- The mean time of `run` on the stream over RUNS runs, each between two
-- events and waited for, after one run that is not timed.
local function time_runs(stream, run)
  run()
  stream:sync()
  return bench.event_ms(stream, run, RUNS)
end

local device = cli:open_device(0)
print(RULE)
print("Parallel Reduction - Efficient GPU Array Summation")
print(RULE)
print()
report.new():device(device, 0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)

local rng <close> = gpurun.default_rng(0)
local input <close> = rng:random(ELEMENTS, "float32")
local expected = 0.0
for _, value in ipairs(input:to_table()) do expected = expected + value end
print(("\nArray size: %s elements (%.1f MB)"):format(with_commas(ELEMENTS), ELEMENTS * 4 / 1e6))
print(("Expected sum: %.6f"):format(expected))

print("\nCompiling custom CUDA kernel...")
local program <close> = gpurun.Program(KERNEL, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local reduce_sum = code:get_kernel("reduce_sum")

-- The stages of the tree: each launch leaves one partial sum per block,
-- until one value is left. Buffers and configs are made once, before timing.
local stages, buffers = {}, {}
local n, from = ELEMENTS, input
while n > 1 do
  local blocks = (n + BLOCK - 1) // BLOCK
  local into = gpurun.empty(blocks, "float32")
  buffers[#buffers + 1] = into
  stages[#stages + 1] = { config = gpurun.LaunchConfig{ grid = blocks, block = BLOCK, shmem_size = BLOCK * 4 },
                          from = from, into = into, n = n }
  n, from = blocks, into
end
local tree_result = buffers[#buffers]
local function reduce_tree()
  for _, stage in ipairs(stages) do
    gpurun.launch(stream, stage.config, reduce_sum, stage.from, stage.into, stage.n)
  end
end

banner("PART 1: Custom Kernel (Educational)")
local tree_ms = time_runs(stream, reduce_tree)
local tree_sum = tree_result:get(1)
print(("\nReduction tree kernel:  %14.2f"):format(tree_sum))
print(("Expected:               %14.2f"):format(expected))
print(("Time:                   %14.3f ms"):format(tree_ms))

banner("PART 2: gpurun.sum (Production)")
local library_result <close> = gpurun.empty(1, "float32")
local library_ms = time_runs(stream, function() gpurun.sum(stream, input, library_result) end)
local library_sum = library_result:get(1)
print(("\ngpurun.sum result:      %14.2f"):format(library_sum))
print(("Expected:               %14.2f"):format(expected))
print(("Time:                   %14.3f ms"):format(library_ms))

for _, buffer in ipairs(buffers) do buffer:close() end
local checks = check.new(cli.name)
checks:number("reduction tree", tree_sum, expected, 1e-5, 1e-8)
checks:number("gpurun.sum", library_sum, expected, 1e-5, 1e-8)
if not checks:passed() then
  print("\nTest FAILED - Error too large!")
  os.exit(1, true)
end
print("\nTest PASSED!")
