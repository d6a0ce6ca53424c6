-- The timed loop: warm up, then time a step from a stream sync to a stream
-- sync, as the cuda.core samples do with time.perf_counter(); and the
-- benches' common options (--sizes, a list of counts, --reps and --seconds)
-- with bench.measure, which times a step for about --seconds per repetition.
--
--   local bench = require("gpurun.bench")
--   local result = bench.run(stream, function(s) graph:launch(s) end, { iters = 1000 })
--   --> { iters = 1000, seconds = 0.0040, us_per_iter = 4.02, runs = { 0.0040 } }

local gpurun = require("gpurun")
local cjson = require("cjson")
local with_range = require("gpurun.nvtx").with_range
local check_options = require("gpurun.options").check
local common = require("gpurun.common")
local quoted, to_integer = common.quoted, common.to_integer

local bench = {}

local DEFAULT_WARMUP = 5

-- The clock bench.time reads (specs put a clock of their own here, to time
-- stand-in steps exactly).
bench.clock = gpurun.perf_counter

-- Seconds for `iters` calls of step(stream), from a sync to a sync. The
-- step is called with the stream and must only enqueue work: the loop
-- itself allocates nothing and builds no strings, so what it measures is
-- the launch path and the GPU, not Lua.
function bench.time(stream, step, iters)
  local clock = bench.clock
  stream:sync()
  local start = clock()
  for _ = 1, iters do
    step(stream)
  end
  stream:sync()
  return clock() - start
end

-- Mean milliseconds of step(stream) over `runs` runs, each between two
-- timing events and waited for, as the cuda.core samples time a kernel:
-- every run's time is its own, with no launch queued behind it.
function bench.event_ms(stream, step, runs)
  local start <close> = gpurun.Event{ timing = true }
  local stop <close> = gpurun.Event{ timing = true }
  local total_ms = 0.0
  for _ = 1, runs do
    stream:record(start)
    step(stream)
    stream:record(stop)
    stop:sync()
    total_ms = total_ms + stop:elapsed_ms(start)
  end
  return total_ms / runs
end

-- The median of a list of numbers (the mean of the middle two for an even
-- count); the list is left as it was.
function bench.median(values)
  assert(#values > 0, "bench.median: empty list")
  local sorted = table.move(values, 1, #values, 1, {})
  table.sort(sorted)
  local middle = #sorted // 2
  if #sorted % 2 == 1 then
    return sorted[middle + 1]
  end
  return (sorted[middle] + sorted[middle + 1]) / 2
end

-- options: iters (required, > 0), warmup (default 5 calls, 0 for none),
-- repeats (default 1: timed loops to run; the result is their median),
-- per_step (default 1: pipeline iterations one call of step does, as a
-- graph of K passes does; us_per_iter is per pipeline iteration), name
-- (default "bench.run": the NVTX ranges' prefix), progress (a
-- gpurun.progress line, told after each repeat).
-- Returns { iters, seconds, us_per_iter, min_seconds, runs = { seconds... },
-- per_step }: iters counts calls of step.
--
-- Every phase is an NVTX range, so that Nsight Systems shows it by name:
-- "<name>: warmup" and "<name>: timed" (one per repeat) for bench.run,
-- "bench.capture: capture", ": complete" and ": upload" for bench.capture.
-- The ranges open before the first sync and close after the last, outside
-- the timed interval.
local RUN_OPTIONS = { "iters", "warmup", "repeats", "per_step", "name", "progress" }

function bench.run(stream, step, options)
  if options == nil then error("bench.run: options with iters are required", 2) end
  check_options("bench.run", options, RUN_OPTIONS)
  local iters = options.iters
  local warmup = options.warmup or DEFAULT_WARMUP
  local repeats = options.repeats or 1
  local name = options.name or "bench.run"
  local progress = options.progress
  local per_step = options.per_step or 1
  if math.type(per_step) ~= "integer" or per_step < 1 then
    error("bench.run: options.per_step must be a positive integer, got " .. tostring(per_step), 2)
  end
  if math.type(iters) ~= "integer" or iters < 1 then
    error("bench.run: options.iters must be a positive integer, got " .. tostring(iters), 2)
  end
  if math.type(warmup) ~= "integer" or warmup < 0 then
    error("bench.run: options.warmup must be a non-negative integer, got " .. tostring(warmup), 2)
  end
  if math.type(repeats) ~= "integer" or repeats < 1 then
    error("bench.run: options.repeats must be a positive integer, got " .. tostring(repeats), 2)
  end
  if warmup > 0 then
    with_range(name .. ": warmup", bench.time, stream, step, warmup)
  end
  local timed = name .. ": timed"
  local runs = {}
  for r = 1, repeats do
    runs[r] = with_range(timed, bench.time, stream, step, iters)
    if progress then
      progress:substep(r, repeats)
    end
  end
  local seconds = bench.median(runs)
  return {
    iters = iters,
    seconds = seconds,
    us_per_iter = seconds * 1e6 / (iters * per_step),
    min_seconds = math.min(table.unpack(runs)),
    runs = runs,
    per_step = per_step,
  }
end

-- capture(stream, pipeline [, { iterations = K, auto_free_on_launch = false }])
-- -> graph: pipeline(builder) captured K times (default 1) on stream's graph
-- builder, completed and uploaded: one graph:launch then runs K passes,
-- which spreads the graph's launch cost over K iterations. The builder is
-- closed on every path, so an error in the pipeline leaves the stream
-- usable. A pipeline may make temporaries on the builder
-- (gpurun.empty(n, dtype, { stream = builder }) ... t:close()): allocation
-- and free nodes, made and freed inside every replay; auto_free_on_launch
-- goes to builder:complete for buffers the graph makes and keeps.
local function capture_into(builder, pipeline, iterations)
  builder:begin_building()
  for _ = 1, iterations do
    pipeline(builder)
  end
  builder:end_building()
end

function bench.capture(stream, pipeline, options)
  check_options("bench.capture", options, { "iterations", "auto_free_on_launch" })
  local iterations = options and options.iterations or 1
  if math.type(iterations) ~= "integer" or iterations < 1 then
    error("bench.capture: options.iterations must be a positive integer, got "
          .. tostring(iterations), 2)
  end
  local auto_free = options and options.auto_free_on_launch or false
  if type(auto_free) ~= "boolean" then
    error("bench.capture: options.auto_free_on_launch must be a boolean, got " .. tostring(auto_free), 2)
  end
  local builder <close> = stream:create_graph_builder()
  with_range("bench.capture: capture", capture_into, builder, pipeline, iterations)
  local graph = with_range("bench.capture: complete", builder.complete, builder,
                           { auto_free_on_launch = auto_free })
  with_range("bench.capture: upload", graph.upload, graph, stream)
  return graph
end

-- graph_peak(device, graph, stream) -> bytes: the most memory the device's
-- graphs held for their allocation nodes during one launch of graph on
-- stream (Device:graph_memory().used_high, its peaks reset first).
function bench.graph_peak(device, graph, stream)
  stream:sync()
  device:reset_graph_memory_peaks()
  graph:launch(stream)
  stream:sync()
  return device:graph_memory().used_high
end

-- measure's iterations per repetition: enough for about options.seconds,
-- from the probe's per-iteration time, within these bounds.
local MIN_ITERS, MAX_ITERS = 10, 5000
-- The probe's per-iteration time is taken as at least this (seconds).
local SHORTEST_ITER = 1e-7
local MEASURE_OPTIONS = { "seconds", "reps", "warmup", "name" }

-- measure(stream, step, { seconds =, reps = 1, warmup = 5, name = })
-- -> { us_per_iter, min_us, iters, reps }: a probe of MIN_ITERS calls after
-- `warmup`, then `reps` timed loops of as many calls as fill about
-- `seconds` (MIN_ITERS to MAX_ITERS: 0 or less gives MIN_ITERS); us_per_iter
-- is their median, min_us the fastest.
function bench.measure(stream, step, options)
  if options == nil then error("bench.measure: options with seconds are required", 2) end
  check_options("bench.measure", options, MEASURE_OPTIONS)
  local seconds, reps = options.seconds, options.reps or 1
  if math.type(seconds) == nil or seconds ~= seconds or math.abs(seconds) == math.huge then
    error("bench.measure: options.seconds must be a finite number, got " .. quoted(seconds), 2)
  end
  if math.type(reps) ~= "integer" or reps < 1 then
    error("bench.measure: options.reps must be a positive integer, got " .. quoted(reps), 2)
  end
  local warmup = options.warmup or DEFAULT_WARMUP
  local probe = bench.run(stream, step, { iters = MIN_ITERS, warmup = warmup, name = options.name })
  local per_iter = math.max(probe.seconds / MIN_ITERS, SHORTEST_ITER)
  local iters = math.max(MIN_ITERS, math.min(MAX_ITERS, math.ceil(seconds / per_iter)))
  local result = bench.run(stream, step, { iters = iters, warmup = 0, repeats = reps, name = options.name })
  return { us_per_iter = result.us_per_iter, iters = iters, reps = reps,
           min_us = result.min_seconds * 1e6 / iters }
end

-- "4096,65536" -> { 4096, 65536 }, or nil and why: every item a positive
-- integer by the rule gpurun.args reads counts with (common.to_integer:
-- "1e3", "0x10" and "2.0" are refused) and, with `multiple`, a multiple
-- of it.
local function check_multiple(where, multiple)
  if math.type(multiple) ~= "integer" or multiple < 1 then
    error(where .. ": the multiple must be a positive integer, got " .. quoted(multiple), 3)
  end
end

function bench.parse_sizes(text, multiple)
  multiple = multiple or 1
  check_multiple("bench.parse_sizes", multiple)
  if type(text) ~= "string" then
    return nil, "expected comma-separated positive integers, got " .. quoted(text)
  end
  local sizes = {}
  for item in (text .. ","):gmatch("([^,]*),") do
    local value, why = to_integer(item)
    if not value then
      return nil, why
    end
    if value % multiple ~= 0 then
      return nil, ("expected a multiple of %d, got %s"):format(multiple, quoted(item))
    end
    sizes[#sizes + 1] = value
  end
  return sizes
end

-- --sizes on a cli of gpurun.args: its value bench.parse_sizes's list, its
-- default given as text (shown so in --help).
function bench.sizes_option(cli, description, default, multiple)
  check_multiple("bench.sizes_option", multiple or 1)
  return cli:converted_option("--sizes", description, default,
                              function(text) return bench.parse_sizes(text, multiple) end)
end

-- What a bench that times with bench.measure takes, on a cli of
-- gpurun.args: --sizes (element counts), --reps and --seconds, each where
-- `defaults` gives its default.
local ADD_OPTIONS = { "sizes", "reps", "seconds" }

function bench.add_options(cli, defaults)
  defaults = check_options("bench.add_options", defaults, ADD_OPTIONS) or {}
  if defaults.sizes ~= nil then
    bench.sizes_option(cli, "Comma-separated element counts.", defaults.sizes)
  end
  if defaults.reps ~= nil then
    cli:integer_option("--reps", "Repetitions per path and size (the median is reported).", defaults.reps)
  end
  if defaults.seconds ~= nil then
    cli:number_option("--seconds", "About how long one repetition runs.", defaults.seconds)
  end
  return cli
end

-- A bench over --sizes, whole: measure(stream, n) for each size on a stream
-- of --device, then { device, reps, sizes = the results } as JSON (--json)
-- or print_table(device, results). Returns 0, the script's exit status.
function bench.over_sizes(cli, options, measure, print_table)
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  local results = {}
  for index, n in ipairs(options.sizes) do
    results[index] = measure(stream, n)
  end
  if options.json then
    print(cjson.encode{ device = device.name, reps = options.reps, sizes = results })
  else
    print_table(device, results)
  end
  return 0
end

-- bench.capture runs while a builder captures: its errors (and those of the
-- rest) end the capture as gpurun's own do.
return gpurun.guard(bench)
