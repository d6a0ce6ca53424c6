-- bench/tensor_map_launch.lua: what passing a 128-byte TMA descriptor
-- (a gpurun.TensorMap for a __grid_constant__ CUtensorMap) costs a launch
-- against passing one pointer, from Lua (gpurun.launch) and from a
-- LaunchPlan, in us per launch (medians of --reps timed loops, the two
-- arguments interleaved), with the ratio; the kernels do no work.
--
--   build/gpurun bench/tensor_map_launch.lua [--reps 9] [--seconds 0.2] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local cjson = require("cjson")

local cli = args.new("tensor_map_launch.lua",
  "The launch cost of a 128-byte TensorMap argument against one pointer argument.")
cli:integer_option("--reps", "Timed loops per case (the median is printed).", 9)
cli:number_option("--seconds", "About how long each timed loop runs.", 0.2)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)
if options.seconds <= 0 then cli:usage_error("--seconds: expected a positive number") end

local device = cli:open_device(0)
local stream <close> = device:create_stream()
-- The descriptor's layout (NVRTC cannot include <cuda.h>); neither kernel
-- touches its argument unless told to by an impossible block index.
local code <close> = gpurun.Program([[
struct __align__(64) TensorMap { unsigned long long opaque[16]; };
extern "C" __global__ void one_pointer(float *x) { if (blockIdx.x == 12345) x[0] = 1.0f; }
extern "C" __global__ void one_map(const __grid_constant__ TensorMap map)
{
  if (blockIdx.x == 12345) asm volatile("prefetch.tensormap [%0];" :: "l"(&map));
}
]], "c++", { std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
local one_pointer, one_map = code:get_kernel("one_pointer"), code:get_kernel("one_map")
local buffer <close> = gpurun.zeros(4096, "float32")
local map <close> = buffer:as_tensor_map{ box_dim = { 32 } }
local config = gpurun.LaunchConfig{ grid = 1, block = 32 }
local pointer_plan <close> = one_pointer:bind(config, buffer)
local map_plan <close> = one_map:bind(config, map)

local cases = {
  { path = "gpurun.launch", argument = "pointer",
    step = function(s) gpurun.launch(s, config, one_pointer, buffer) end },
  { path = "gpurun.launch", argument = "tensor_map", step = function(s) gpurun.launch(s, config, one_map, map) end },
  { path = "LaunchPlan", argument = "pointer", step = function(s) pointer_plan:launch(s) end },
  { path = "LaunchPlan", argument = "tensor_map", step = function(s) map_plan:launch(s) end },
}
for _, case in ipairs(cases) do case.runs = {} end
for rep = 1, options.reps do
  for _, case in ipairs(cases) do
    case.runs[rep] = bench.measure(stream, case.step, { seconds = options.seconds, warmup = rep == 1 and 50 or 5 })
      .us_per_iter
  end
end

local results = { device = device.name, reps = options.reps, unit = "us per launch" }
for _, case in ipairs(cases) do
  local key = (case.path == "LaunchPlan" and "plan_" or "launch_") .. case.argument
  results[key] = bench.median(case.runs)
end
results.launch_ratio = results.launch_tensor_map / results.launch_pointer
results.plan_ratio = results.plan_tensor_map / results.plan_pointer

if options.json then
  print(cjson.encode(results))
else
  print(("TensorMap vs pointer argument on %s, us per launch, medians of %d loops"):format(device.name,
    options.reps))
  print(("%-14s %12s %12s %8s"):format("path", "one pointer", "TensorMap", "ratio"))
  print(("%-14s %12.3f %12.3f %8.3f"):format("gpurun.launch", results.launch_pointer,
    results.launch_tensor_map, results.launch_ratio))
  print(("%-14s %12.3f %12.3f %8.3f"):format("LaunchPlan", results.plan_pointer, results.plan_tensor_map,
    results.plan_ratio))
end
