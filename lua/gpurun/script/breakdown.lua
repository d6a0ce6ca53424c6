-- Where the time of individual launches goes: for each stage of a pipeline
-- (one kernel launch), its GPU time and its enqueue time, each from a pass
-- of its own after the timed loop so the headline timing is not disturbed.
-- The launch overhead of an iteration is then its wall time (bench.run)
-- less the GPU's busy time (the stages' GPU times added up).
--
--   local breakdown = require("gpurun.breakdown")
--   local result = breakdown.measure(stream, stages, { iters = 1000, device = device })
--   local overhead = breakdown.overhead(result, individual)   -- individual: bench.run's result

local gpurun = require("gpurun")
local median = require("gpurun.script.bench").median
local check_options = require("gpurun.options").check

local breakdown = {}

-- Iterations queued behind one hold: with three stages, 32 iterations are
-- 96 launches and 128 events, well inside a stream's queue.
local BATCH = 32
local FIRST_HOLD_S = 0.002
local HOLD_TRIES = 6

local HOLD_SOURCE = [[
extern "C" __global__ void gpurun_hold(unsigned long long ns)
{
    unsigned long long start, now;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    do {
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
    } while (now - start < ns);
}
]]

-- hold(stream, seconds): one thread spinning on the GPU's clock for that
-- long. Compiled for `device` (through the kernel cache).
function breakdown.hold_kernel(device)
  local program <close> = gpurun.Program(HOLD_SOURCE, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local module = program:compile("cubin")
  local kernel = module:get_kernel("gpurun_hold")
  local config = gpurun.LaunchConfig{ grid = 1, block = 1 }
  local function hold(stream, seconds)
    gpurun.launch(stream, config, kernel, gpurun.u64(math.ceil(seconds * 1e9)))
  end
  local function close()
    kernel:close()
    module:close()
  end
  return hold, close
end

local function check_stages(stages)
  if type(stages) ~= "table" or #stages == 0 then
    error("breakdown.measure: stages must be a non-empty list of { name =, run = }", 3)
  end
  for i, stage in ipairs(stages) do
    if type(stage.name) ~= "string" or type(stage.run) ~= "function" then
      error(("breakdown.measure: stage %d needs a name (string) and run (function)"):format(i), 3)
    end
  end
end

-- GPU pass: mean seconds of each stage per launch, from `batches` batches:
-- events recorded before and after each kernel; a short kernel holding the
-- stream first lets the CPU queue a whole batch before the GPU starts on
-- it, so the GPU never waits for the next launch and the events time the
-- kernels alone.
local function gpu_pass(stream, stages, batches, hold, clock)
  local count = #stages
  local events = {} -- events[i][s]: after stage s of iteration i; [0] before the first
  for i = 1, BATCH do
    events[i] = {}
    for s = 0, count do
      events[i][s] = stream:record()
    end
  end
  local totals = {}
  for s = 1, count do
    totals[s] = 0
  end
  local hold_s = FIRST_HOLD_S
  local batch = 0
  local tries = 0
  while batch < batches do
    hold(stream, hold_s)
    local started = clock()
    for i = 1, BATCH do
      local row = events[i]
      stream:record(row[0])
      for s = 1, count do
        stages[s].run(stream)
        stream:record(row[s])
      end
    end
    local enqueue_s = clock() - started
    stream:sync()
    if enqueue_s < hold_s / 2 then
      batch, tries = batch + 1, 0
      for i = 1, BATCH do
        local row = events[i]
        for s = 1, count do
          totals[s] = totals[s] + row[s]:elapsed_ms(row[s - 1]) / 1e3
        end
      end
    else -- the GPU may have caught up with the CPU: redo with a longer hold
      tries = tries + 1
      if tries > HOLD_TRIES then
        error(("breakdown.measure: queueing %d iterations took %.3f s, more than a %.3f s hold "
               .. "could cover"):format(BATCH, enqueue_s, hold_s), 0)
      end
      hold_s = 4 * enqueue_s
    end
  end
  for i = 1, BATCH do
    for s = 0, count do
      events[i][s]:close()
    end
  end
  local launches = batches * BATCH
  for s = 1, count do
    totals[s] = totals[s] / launches
  end
  return totals
end

-- Enqueue pass: every launch's CPU seconds, per stage: the CPU's time for
-- the launch call, gpurun.perf_counter() around it, the stream
-- synchronized after every batch so that a full launch queue never blocks
-- the call.
local function enqueue_pass(stream, stages, batches, clock)
  local count = #stages
  local samples = {}
  for s = 1, count do
    samples[s] = {}
    for k = 1, batches * BATCH do
      samples[s][k] = 0 -- the slots exist before the pass: storing allocates nothing
    end
  end
  local k = 0
  for _ = 1, batches do
    for _ = 1, BATCH do
      k = k + 1
      local before = clock()
      for s = 1, count do
        stages[s].run(stream)
        local after = clock()
        samples[s][k] = after - before
        before = after
      end
    end
    stream:sync()
  end
  return samples
end

-- breakdown.measure(stream, stages, options)
--   stages  { { name = "vec_add", run = function(target) launch(target, ...) end }, ... }
--   -->     { iters, batch, gpu_us_per_iter, stages = { { name, gpu_us, enqueue_us }, ... } }
-- options: iters (launches measured per stage, rounded up to whole batches
-- of 32; default 1000), device (for the hold kernel) or hold (a function
-- hold(stream, seconds), for tests), clock (default gpurun.perf_counter).
--
-- gpu_us is the mean over the launches measured (the events' 0.5 us
-- resolution averages out; means add up to the busy time); enqueue_us is
-- the median, which ignores the odd preempted call. Both include one clock
-- or event call's cost (tens of nanoseconds).
function breakdown.measure(stream, stages, options)
  options = check_options("breakdown.measure", options,
    { "iters", "device", "hold", "clock" }) or {}
  check_stages(stages)
  local iters = options.iters or 1000
  if math.type(iters) ~= "integer" or iters < 1 then
    error("breakdown.measure: options.iters must be a positive integer, got " .. tostring(iters), 2)
  end
  local clock = options.clock or gpurun.perf_counter
  local hold, close_hold = options.hold, nil
  if hold == nil then
    if options.device == nil then
      error("breakdown.measure: options.device (or options.hold) is required", 2)
    end
    hold, close_hold = breakdown.hold_kernel(options.device)
  end
  local batches = (iters + BATCH - 1) // BATCH
  local ok, gpu = pcall(gpu_pass, stream, stages, batches, hold, clock)
  if not ok then
    pcall(stream.sync, stream) -- no hold kernel left running when it is unloaded
  end
  if close_hold then
    close_hold()
  end
  if not ok then
    error(gpu, 0)
  end
  local samples = enqueue_pass(stream, stages, batches, clock)
  local result = { iters = batches * BATCH, batch = BATCH, stages = {}, gpu_us_per_iter = 0 }
  for s, stage in ipairs(stages) do
    local gpu_us = gpu[s] * 1e6
    result.stages[s] = { name = stage.name, gpu_us = gpu_us, enqueue_us = median(samples[s]) * 1e6 }
    result.gpu_us_per_iter = result.gpu_us_per_iter + gpu_us
  end
  return result
end

-- The launch overhead from a breakdown and bench.run's result for the same
-- pipeline: { wall_us_per_iter, gpu_us_per_iter, launch_overhead_us,
-- overhead_fraction } (the fraction of the wall time).
function breakdown.overhead(result, timing)
  local wall = timing.us_per_iter
  local overhead = wall - result.gpu_us_per_iter
  return {
    wall_us_per_iter = wall,
    gpu_us_per_iter = result.gpu_us_per_iter,
    launch_overhead_us = overhead,
    overhead_fraction = wall > 0 and overhead / wall or nil,
  }
end

return breakdown
