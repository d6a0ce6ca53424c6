-- A pipeline swept over sizes: every path timed at every size, a table
-- printed as it goes, the crossover marked (the first size at which the
-- graph's advantage falls below 5% after being above it), the figures
-- written as JSON and CSV after every size (so nothing measured is lost,
-- even to Ctrl-C) and drawn by gnuplot at the end. This file is the entry:
-- the command line, the two standard paths and sweep.main. The work is in
-- script/sweep/: sizes.lua (parsing, stepping and checking sizes),
-- measure.lua (timing every path at every size into a results table) and
-- present.lua (the table, the summary line, JSON and CSV).

local gpurun = require("gpurun")
local bench = require("gpurun.script.bench")
local check = require("gpurun.script.check")
local progress = require("gpurun.script.progress")
local shell = require("gpurun.script.shell")
local plot = require("gpurun.script.plot")
local sizes = require("gpurun.script.sweep.sizes")
local measure = require("gpurun.script.sweep.measure")
local present = require("gpurun.script.sweep.present")
local check_options = require("gpurun.options").check

local sweep = {}

-- The public names of the three parts, which gpurun.sweep gives too.
local EXPORTS = {
  [sizes] = { "parse_size", "size_text", "sizes", "range_problem", "parse_range", "format_bytes",
              "memory_problem" },
  [measure] = { "THRESHOLD", "new_results", "record", "find_crossover" },
  [present] = { "json_text", "csv_text", "table_header", "table_row", "summary" },
}
for part, names in pairs(EXPORTS) do
  for _, key in ipairs(names) do
    sweep[key] = part[key]
  end
end

sweep.DEFAULT_REPEATS = 5

local EXIT_SUCCESS, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130

-- A path is { name, label, prepare = function(size) -> step(stream) } and
-- optionally iterations_per_step (a step that runs K iterations of the
-- pipeline, as a graph of K captures does): the sweep runs iters // K steps
-- and divides by the iterations. Adding a path to a sweep is adding one
-- such table to `paths`: its column, its speedup, its line in the picture
-- and its fields in the files follow.
--
-- The two paths every launch pipeline has: size.pipeline launched as it
-- is, and captured once into a graph that is replayed.
sweep.INDIVIDUAL = {
  name = "individual",
  label = "individual launches",
  prepare = function(size)
    return size.pipeline
  end,
}

sweep.GRAPH = {
  name = "graph",
  label = "graph replay",
  prepare = function(size)
    local graph = size:own(bench.capture(size.stream, size.pipeline))
    return function(stream)
      graph:launch(stream)
    end
  end,
}

---------------------------------------------------------------------------
-- the command line

-- Adds --from, --to, --step, --repeats, --json FILE, --csv FILE, --plot
-- FILE. defaults: { from =, to = } as size text ("2^10").
function sweep.add_options(cli, defaults)
  defaults = check_options("sweep.add_options", defaults, { "from", "to" }) or {}
  cli:converted_option("--from", "Smallest size in elements (N or 2^K).", defaults.from,
                       sizes.parse_size):argname("<N|2^K>")
  cli:converted_option("--to", "Largest size in elements (N or 2^K).", defaults.to,
                       sizes.parse_size):argname("<N|2^K>")
  cli:integer_option("--step", "Factor from one size to the next.", 2, 2):argname("<FACTOR>")
  cli:integer_option("--repeats", "Timed loops per path and size; the median counts.",
                     sweep.DEFAULT_REPEATS):argname("<N>")
  cli.parser:option("--json", "Write the figures as JSON to FILE ('-': to stdout, instead of "
                              .. "the table)."):argname("<FILE>")
  cli.parser:option("--csv", "Write the figures as CSV to FILE."):argname("<FILE>")
  cli.parser:option("--plot", "Draw the figures with gnuplot into FILE.png or FILE.svg.")
    :argname("<FILE>")
  return cli
end

-- The files a run writes must be writable before it measures anything.
local function writable_problem(flag, path)
  local ok, why = shell.writable(path)
  if not ok then
    return string.format("%s: cannot write %s: %s", flag, path, why)
  end
  return nil
end

-- What sweep.main needs from the options, checked; a usage error (exit 2)
-- otherwise. raw: iters, repeats (default 5), json ("-" for stdout), csv,
-- plot, and either sizes (a list) or from, to and step.
function sweep.settings(cli, raw)
  local list = raw.sizes
  if list == nil then
    local problem = sizes.range_problem(raw.from, raw.to)
    if problem then
      cli:usage_error(problem)
    end
    list = sizes.sizes(raw.from, raw.to, raw.step or 2)
  end
  local settings = {
    sizes = list,
    iters = raw.iters,
    repeats = raw.repeats or sweep.DEFAULT_REPEATS,
    json_stdout = raw.json == "-",
    json = raw.json ~= "-" and raw.json or nil,
    csv = raw.csv,
    plot = raw.plot,
  }
  local problem = settings.json and writable_problem("--json", settings.json)
    or settings.csv and writable_problem("--csv", settings.csv)
  if not problem and settings.plot then
    local files, why = plot.files(settings.plot)
    problem = not files and ("--plot: " .. why)
      or writable_problem("--plot", files.picture)
      or writable_problem("--plot", files.data)
  end
  if problem then
    cli:usage_error(problem)
  end
  return settings
end

-- "driver 580.159, CUDA 13.0" from gpurun.driver_version()'s two numbers
-- and /proc/driver/nvidia/version's text (nil when unreadable).
function sweep.driver_text(major, minor, version_text)
  local module = version_text and version_text:match("Module.-%s(%d+%.%d+[%.%d]*)")
  if module then
    return string.format("driver %s, CUDA %d.%d", module, major, minor)
  end
  return string.format("CUDA %d.%d driver", major, minor)
end

-- The context sweep.main runs in, for a device and its stream.
function sweep.context(device, stream, name)
  local file = io.open("/proc/driver/nvidia/version", "r")
  local version_text = file and file:read("a")
  if file then
    file:close()
  end
  local major, minor = gpurun.driver_version()
  return {
    name = name,
    stream = stream,
    device_name = device.name,
    driver = sweep.driver_text(major, minor, version_text),
    mem_info = gpurun.mem_info,
  }
end

-- A pipeline description says what to time; the sweep does the rest:
--
--   local pipeline = {
--     name = "add -> mul -> sub",
--     bytes_per_element = 24,        -- device memory per element, checked before allocating
--     setup = function(size) ... end, -- allocate for size.elements (size:own(x) closes x
--                                     -- after the size), set size.pipeline(target)
--     reset = function(size, path) ... end,  -- optional: before each path (poison outputs)
--     check = function(size, path, label) return check.buffers(label, ...) end, -- optional
--     paths = { sweep.INDIVIDUAL, sweep.GRAPH },
--     baseline = "individual",       -- default: the first path; speedups are against it
--     crossover = "graph",           -- default: the second path
--   }
--   os.exit(sweep.main(pipeline, settings, context))
--
-- Runs the sweep and everything around it; returns the exit code: 0, 1
-- (a run error, a failed check, a picture not drawn), 2 (sizes past the
-- device's memory, refused before anything is allocated), 130 (Ctrl-C).
-- settings: from sweep.settings. context: name (for messages), stream,
-- device_name, driver, mem_info (-> free, total bytes), and for tests write
-- (stdout), write_error (stderr), progress (true/false: force the line on
-- or off), gnuplot (the command).
function sweep.main(pipeline, settings, context)
  local write = context.write or function(text)
    io.write(text)
    io.stdout:flush()
  end
  local write_error = context.write_error or function(text)
    io.stderr:write(text)
    io.stderr:flush()
  end
  local name = context.name or "sweep"
  local text_mode = not settings.json_stdout

  local largest = settings.sizes[#settings.sizes]
  local problem = largest and sizes.memory_problem(pipeline, largest, context.mem_info())
  if problem then
    write_error(string.format("%s: error: %s\n", name, problem))
    return EXIT_USAGE
  end

  local results = measure.new_results(pipeline, settings, context)
  local items = measure.progress_sizes(pipeline, settings)
  local enabled = context.progress
  if enabled == nil then
    enabled = text_mode and progress.is_terminal(io.stderr)
  end
  local line = progress.new{ label = name, total = #items, sizes = items,
                             enabled = enabled and #items > 0, write = write_error }
  local checks = check.new(name, function(text)
    line:clear()
    write_error(text)
  end)
  local function say(text)
    if text_mode then
      line:clear()
      write(text .. "\n")
    end
  end

  say(string.format("%s on %s (%s), %d iters, median of %d repeats, us per iteration",
                    pipeline.name, results.device or "?", results.driver or "?",
                    settings.iters, settings.repeats))
  say(present.table_header(results))
  local ok, failure = pcall(measure.run_sizes, pipeline, settings, context, results, line, checks,
    function(row)
      results.crossover = measure.find_crossover(results)
      say(present.table_row(results, row))
      local _, problems = present.write_files(results, settings)
      if #problems > 0 then
        error(problems[1], 0)
      end
    end)
  line:close()

  local last = results.rows[#results.rows]
  local partial = not ok and last ~= nil
  if last and next(last.us_per_iter) == nil then
    results.rows[#results.rows] = nil
    partial = false
  end
  results.complete = ok
  results.interrupted = not ok and measure.is_interrupt(failure)
  results.crossover = measure.find_crossover(results)
  if partial then
    say(present.table_row(results, last) .. "  (size not finished)")
  end

  local written, problems = present.write_files(results, settings)
  if settings.json_stdout then
    write(present.json_text(results))
  end
  local summary = present.summary(results)
  if summary then
    say("\n" .. summary)
  end
  if settings.plot and #results.rows > 0 then
    local drawn, why = plot.render(results, settings.plot, { gnuplot = context.gnuplot })
    if drawn then
      written[#written + 1] = settings.plot
      say("Plot: " .. settings.plot)
    else
      problems[#problems + 1] = why
    end
  end

  for _, message in ipairs(problems) do
    write_error(string.format("%s: %s\n", name, message))
  end
  if results.interrupted then
    write_error(string.format("%s: interrupted after %d of %d sizes%s\n", name, #results.rows,
                              #settings.sizes, #written > 0 and ("; wrote " ..
                              table.concat(written, ", ")) or ""))
    return EXIT_INTERRUPTED
  end
  if not ok then
    write_error(string.format("%s: %s\n", name, tostring(failure)))
    return EXIT_FAILURE
  end
  for _, passed in pairs(checks:results()) do
    if not passed then
      return EXIT_FAILURE
    end
  end
  return #problems > 0 and EXIT_FAILURE or EXIT_SUCCESS
end

return sweep
