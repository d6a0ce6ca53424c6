-- bench/while_cancel.lua: what a while loop's cancel check costs a pass.
-- scripts/converge.lua's loop (relax, reduce the residual, copy back)
-- run for a fixed number of passes in one graph launch, decided two ways:
-- by converge.lua's expression (the decision kernel reads the cancel flag
-- itself) and --hand-written (a kernel of the user's decides; the check is
-- one more kernel a pass). Each with the check ({ cancellable = true },
-- the default) and without it; us per pass, median over repetitions, and
-- their ratio. Every loop must take every pass.
--
--   build/gpurun bench/while_cancel.lua [--points N] [--passes N] [--reps N] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")

local KERNELS = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void relax(const float *u, float *v, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n)
        v[i] = i == 0 || i == n - 1 ? u[i] : 0.5f * (u[i - 1] + u[i + 1]);
}

extern "C" __global__ void decide(cudaGraphConditionalHandle condition, const float *residual,
                                  unsigned int *steps, unsigned int max_steps)
{
    unsigned int done = ++*steps;
    cudaGraphSetConditional(condition, *residual >= 0.0f && done < max_steps ? 1u : 0u);
}

extern "C" __global__ void count_step(unsigned int *steps) { ++*steps; }
]]

local cli = args.new("while_cancel.lua", "The cost of a while loop's cancel check, per pass.")
cli:integer_option("--points", "Points of the grid.", 32)
cli:integer_option("--passes", "Passes per graph launch.", 10000)
cli:integer_option("--reps", "Launches timed for each loop.", 7)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)

local device = cli:open_device(0)
local stream <close> = device:create_stream()
local code <close> = gpurun.Program(KERNELS, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
local relax, decide = code:get_kernel("relax"), code:get_kernel("decide")
local count_step = code:get_kernel("count_step")
local n, passes = options.points, options.passes
local u <close> = gpurun.zeros(n, "float32")
local v <close> = gpurun.zeros(n, "float32")
local residual <close> = gpurun.zeros(1, "float32")
local steps <close> = gpurun.zeros(1, "uint32")
local grid = gpurun.LaunchConfig{ grid = (n + 127) // 128, block = 128 }
local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
gpurun.max_abs_diff(stream, v, u, residual) -- compiled before the captures

local function hand_written(cancellable)
  return bench.capture(stream, function(builder)
    steps:fill(0, builder)
    local again = builder:create_condition(1)
    local body = builder:while_loop(again, { cancellable = cancellable })
    body:begin_building()
    gpurun.launch(body, grid, relax, u, v, n)
    gpurun.max_abs_diff(body, v, u, residual)
    u:copy_from(v, body)
    gpurun.launch(body, one, decide, again, residual, steps, passes)
    body:end_building()
  end)
end

local function by_expression(cancellable)
  return bench.capture(stream, function(builder)
    steps:fill(0, builder)
    local body = builder:while_loop(("max(steps) < %d"):format(passes), { steps = steps },
                                    { cancellable = cancellable })
    body:begin_building()
    gpurun.launch(body, grid, relax, u, v, n)
    gpurun.max_abs_diff(body, v, u, residual)
    u:copy_from(v, body)
    gpurun.launch(body, one, count_step, steps)
    body:end_building()
  end)
end

-- us per pass, median over the reps (one warm-up launch first).
local function per_pass(graph)
  graph:launch(stream)
  stream:sync()
  local times = {}
  for rep = 1, options.reps do
    local started = gpurun.perf_counter()
    graph:launch(stream)
    stream:sync()
    times[rep] = (gpurun.perf_counter() - started) * 1e6 / passes
  end
  local taken = steps:get(1, stream)
  if taken ~= passes then
    error(("the loop took %d passes, not %d"):format(taken, passes), 0)
  end
  return bench.median(times)
end

-- One way of deciding, with and without the check: { plain_us, cancellable_us, ratio }.
local function compare(make)
  local plain <close> = make(false)
  local checked <close> = make(true)
  -- interleaved, so that drift over the run falls on both
  local plain_us, checked_us = per_pass(plain), per_pass(checked)
  plain_us = math.min(plain_us, per_pass(plain))
  checked_us = math.min(checked_us, per_pass(checked))
  return { plain_us_per_pass = plain_us, cancellable_us_per_pass = checked_us,
           ratio = checked_us / plain_us }
end

local results = { expression = compare(by_expression), hand_written = compare(hand_written) }

if options.json then
  print(cjson.encode({ device = device.name, points = n, passes = passes, reps = options.reps,
                       expression = results.expression, hand_written = results.hand_written }))
else
  print(("%s, %d points, %d passes a launch, median of %d launches"):format(device.name, n, passes,
                                                                          options.reps))
  for _, way in ipairs({ { "expression", "decided by an expression (converge.lua)" },
                         { "hand_written", "decided by a kernel (--hand-written)" } }) do
    local r = results[way[1]]
    print(("  %s:"):format(way[2]))
    print(("    without the cancel check: %8.3f us a pass"):format(r.plain_us_per_pass))
    print(("    with the cancel check:    %8.3f us a pass"):format(r.cancellable_us_per_pass))
    print(("    cancellable / plain:      %8.3f"):format(r.ratio))
  end
end
