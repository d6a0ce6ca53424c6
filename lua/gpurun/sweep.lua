-- A pipeline swept over sizes: every path timed at every size, a table
-- printed as it goes, the crossover marked (the first size at which the
-- graph's advantage falls below 5% after being above it), the figures
-- written as JSON and CSV after every size (so nothing measured is lost,
-- even to Ctrl-C) and drawn by gnuplot at the end.
--
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
-- A path is { name, label, prepare = function(size) -> step(stream) } and
-- optionally iterations_per_step (a step that runs K iterations of the
-- pipeline, as a graph of K captures does): the sweep runs iters // K steps
-- and divides by the iterations. Adding a path to a sweep is adding one
-- such table to `paths`: its column, its speedup, its line in the picture
-- and its fields in the files follow.

local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local progress = require("gpurun.progress")
local shell = require("gpurun.shell")
local plot = require("gpurun.plot")
local with_range = require("gpurun.nvtx").with_range
local cjson = require("cjson")

local sweep = {}

sweep.THRESHOLD = 1.05 -- the graph's advantage the crossover is about: 5%
sweep.DEFAULT_REPEATS = 5

local EXIT_SUCCESS, EXIT_FAILURE, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
local MAX_POWER = 40
local WARMUP = 5

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
-- sizes

-- "4096" or "2^12" -> 4096; or nil and why.
function sweep.parse_size(text)
  local power = type(text) == "string" and text:match("^%s*2%^(%d+)%s*$")
  if power then
    local exponent = math.tointeger(tonumber(power))
    if exponent == nil or exponent > MAX_POWER then
      return nil, string.format("expected a size up to 2^%d, got '%s'", MAX_POWER, text)
    end
    return 1 << exponent
  end
  local value = args.to_integer(text)
  if value == nil then
    return nil, string.format("expected a positive integer or 2^K, got '%s'", tostring(text))
  end
  return value
end

-- 4096 -> "2^12"; a size that is no power of two as its digits.
function sweep.size_text(elements)
  if elements > 0 and elements & (elements - 1) == 0 then
    local exponent = 0
    while (1 << exponent) < elements do
      exponent = exponent + 1
    end
    return "2^" .. exponent
  end
  return string.format("%d", elements)
end

-- from, from * factor, ... up to and including to when reached.
function sweep.sizes(from, to, factor)
  local sizes = {}
  local size = from
  while size <= to do
    sizes[#sizes + 1] = size
    if size > to // factor then
      break
    end
    size = size * factor
  end
  return sizes
end

-- nil, or why from..to is no range.
function sweep.range_problem(from, to, from_name, to_name)
  if from > to then
    return string.format("%s %s is above %s %s", from_name or "--from", sweep.size_text(from),
                         to_name or "--to", sweep.size_text(to))
  end
  return nil
end

-- "64:4096" -> 64, 4096; or nil and why.
function sweep.parse_range(text)
  local from_text, to_text = tostring(text):match("^([^:]+):([^:]+)$")
  if not from_text then
    return nil, string.format("expected FROM:TO, got '%s'", tostring(text))
  end
  local from, from_problem = sweep.parse_size(from_text)
  local to, to_problem = sweep.parse_size(to_text)
  local problem = from_problem or to_problem or sweep.range_problem(from, to, "FROM", "TO")
  if problem then
    return nil, problem
  end
  return from, to
end

function sweep.format_bytes(bytes)
  local units = { { 2 ^ 40, "TiB" }, { 2 ^ 30, "GiB" }, { 2 ^ 20, "MiB" }, { 2 ^ 10, "KiB" } }
  for _, unit in ipairs(units) do
    if bytes >= unit[1] then
      return string.format("%.2f %s", bytes / unit[1], unit[2])
    end
  end
  return string.format("%d bytes", bytes)
end

-- nil, or why `elements` do not fit the device's free memory.
function sweep.memory_problem(pipeline, elements, free, total)
  local per_element = pipeline.bytes_per_element
  local needed = elements * per_element
  if needed > free then
    return string.format("%s elements need %s (%d bytes per element); the device has %s free "
                         .. "of %s", sweep.size_text(elements), sweep.format_bytes(needed),
                         per_element, sweep.format_bytes(free), sweep.format_bytes(total))
  end
  return nil
end

---------------------------------------------------------------------------
-- the command line

-- Adds --from, --to, --step, --repeats, --json FILE, --csv FILE, --plot
-- FILE. defaults: { from =, to = } as size text ("2^10").
function sweep.add_options(cli, defaults)
  defaults = require("gpurun.options").check("sweep.add_options", defaults, { "from", "to" }) or {}
  cli:converted_option("--from", "Smallest size in elements (N or 2^K).", defaults.from,
                       sweep.parse_size):argname("<N|2^K>")
  cli:converted_option("--to", "Largest size in elements (N or 2^K).", defaults.to,
                       sweep.parse_size):argname("<N|2^K>")
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
  local sizes = raw.sizes
  if sizes == nil then
    local problem = sweep.range_problem(raw.from, raw.to)
    if problem then
      cli:usage_error(problem)
    end
    sizes = sweep.sizes(raw.from, raw.to, raw.step or 2)
  end
  local settings = {
    sizes = sizes,
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
  local gpurun = require("gpurun")
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

---------------------------------------------------------------------------
-- results

function sweep.new_results(pipeline, settings, context)
  local paths = {}
  for i, path in ipairs(pipeline.paths) do
    paths[i] = { name = path.name, label = path.label or path.name }
  end
  local baseline = pipeline.baseline or paths[1].name
  local labels = {}
  for _, path in ipairs(paths) do
    labels[#labels + 1] = path.label
  end
  return {
    pipeline = pipeline.name,
    title = string.format("%s: %s on %s (%s)", pipeline.name, table.concat(labels, " vs "),
                          context.device_name or "?", context.driver or "?"),
    x_label = pipeline.x_label or "elements",
    device = context.device_name,
    driver = context.driver,
    iters = settings.iters,
    repeats = settings.repeats,
    paths = paths,
    baseline = baseline,
    crossover_path = pipeline.crossover or (paths[2] and paths[2].name),
    threshold = sweep.THRESHOLD,
    sizes = settings.sizes,
    rows = {},
    complete = false,
    interrupted = false,
  }
end

-- Sets a path's figure in a row and the speedups that follow from it.
function sweep.record(results, row, path_name, us_per_iter, passed)
  row.us_per_iter[path_name] = us_per_iter
  row.checks[path_name] = passed
  local base = row.us_per_iter[results.baseline]
  if base then
    for name, us in pairs(row.us_per_iter) do
      if name ~= results.baseline and us > 0 then
        row.speedup[name] = base / us
      end
    end
  end
end

-- The first row at which the crossover path's speedup is below the
-- threshold after a row at or above it; nil when there is none (yet).
function sweep.find_crossover(results)
  local name, threshold = results.crossover_path, results.threshold
  local was_ahead = false
  for _, row in ipairs(results.rows) do
    local speedup = row.speedup[name]
    if speedup then
      if speedup >= threshold then
        was_ahead = true
      elseif was_ahead then
        return { elements = row.elements, speedup = speedup }
      end
    end
  end
  return nil
end

local label_of = plot.label_of

-- One object with every figure (the JSON file's contents).
function sweep.json_text(results)
  local rows = {}
  for i, row in ipairs(results.rows) do
    rows[i] = {
      elements = row.elements,
      us_per_iter = row.us_per_iter,
      speedup = row.speedup, -- {} encodes as an object
      checks = row.checks,
    }
  end
  return cjson.encode({
    pipeline = results.pipeline,
    device = results.device,
    driver = results.driver,
    iters = results.iters,
    repeats = results.repeats,
    paths = results.paths,
    baseline = results.baseline,
    crossover_path = results.crossover_path,
    threshold = results.threshold,
    crossover = results.crossover or cjson.null,
    sizes = results.sizes,
    rows = rows,
    complete = results.complete,
    interrupted = results.interrupted,
  }) .. "\n"
end

-- plot.figure_table as CSV, an empty field where a figure is missing, and
-- whether the size's checks passed.
function sweep.csv_text(results)
  local header, rows = plot.figure_table(results, "")
  header[#header + 1] = "checks_passed"
  local lines = { table.concat(header, ",") }
  for i, fields in ipairs(rows) do
    local passed = true
    for _, outcome in pairs(results.rows[i].checks) do
      passed = passed and outcome
    end
    fields[#fields + 1] = tostring(passed)
    lines[#lines + 1] = table.concat(fields, ",")
  end
  return table.concat(lines, "\n") .. "\n"
end

---------------------------------------------------------------------------
-- the table

local ELEMENTS_WIDTH = 12

local function columns(results)
  local list = {}
  for _, path in ipairs(results.paths) do
    local title = path.name .. " us"
    list[#list + 1] = { title = title, width = math.max(#title, 10), path = path.name, key = "us" }
  end
  for _, path in ipairs(plot.compared_paths(results)) do
    local title = path.name .. " speedup"
    list[#list + 1] = { title = title, width = math.max(#title, 10), path = path.name, key = "x" }
  end
  return list
end

function sweep.table_header(results)
  local parts = { string.format("%" .. ELEMENTS_WIDTH .. "s", "elements") }
  for _, column in ipairs(columns(results)) do
    parts[#parts + 1] = string.format("%" .. column.width .. "s", column.title)
  end
  return table.concat(parts, "  ")
end

function sweep.table_row(results, row)
  local parts = { string.format("%" .. ELEMENTS_WIDTH .. "d", row.elements) }
  for _, column in ipairs(columns(results)) do
    local text = "-"
    if column.key == "us" and row.us_per_iter[column.path] then
      text = string.format("%.2f", row.us_per_iter[column.path])
    elseif column.key == "x" and row.speedup[column.path] then
      text = string.format("%.2fx", row.speedup[column.path])
    end
    parts[#parts + 1] = string.format("%" .. column.width .. "s", text)
  end
  local line = table.concat(parts, "  ")
  local crossover = results.crossover
  if crossover and crossover.elements == row.elements then
    line = line .. string.format("  <- crossover: %s under %.2fx", label_of(results,
                                 results.crossover_path), results.threshold)
  end
  local failed = {}
  for _, path in ipairs(results.paths) do
    if row.checks[path.name] == false then
      failed[#failed + 1] = path.name
    end
  end
  if #failed > 0 then
    line = line .. "  (check failed: " .. table.concat(failed, ", ") .. ")"
  end
  return line
end

-- The line after the table: where the crossover is, or that there is none.
function sweep.summary(results)
  local name, threshold = results.crossover_path, results.threshold
  if name == nil then
    return nil
  end
  local path, base = label_of(results, name), label_of(results, results.baseline)
  local advantage = string.format("%.0f%%", (threshold - 1) * 100)
  local crossover = results.crossover
  if crossover then
    return string.format("Crossover: %s's advantage over %s falls below %s at %s (%d elements): "
                         .. "%.2fx", path, base, advantage, sweep.size_text(crossover.elements),
                         crossover.elements, crossover.speedup)
  end
  local ahead, behind = 0, 0
  for _, row in ipairs(results.rows) do
    local speedup = row.speedup[name]
    if speedup then
      if speedup >= threshold then ahead = ahead + 1 else behind = behind + 1 end
    end
  end
  if ahead + behind == 0 then
    return nil
  elseif behind == 0 then
    return string.format("No crossover: %s stays %s or more ahead of %s at every size", path,
                         advantage, base)
  end
  return string.format("No crossover: %s is never %s ahead of %s before it falls behind",
                       path, advantage, base)
end

---------------------------------------------------------------------------
-- measuring

-- One size's objects: whatever setup and the paths make with size:own(x),
-- closed in reverse order (a graph before the buffers it uses) when the
-- size is done, on every path out.
local Size = {}
Size.__index = Size

function Size:own(object)
  self.owned[#self.owned + 1] = object
  return object
end

local function is_interrupt(why)
  return tostring(why):find("interrupted!", 1, true) ~= nil
end

-- Everything is closed even when something fails; then the first failure
-- is raised, or a Ctrl-C that landed here, which must not be lost.
function Size.__close(size)
  local raised
  local function attempt(operation, ...)
    local ok, why = pcall(operation, ...)
    if not ok and (raised == nil or is_interrupt(why)) then
      raised = why
    end
  end
  attempt(size.stream.sync, size.stream) -- nothing in flight on what is freed
  for i = #size.owned, 1, -1 do
    attempt(size.owned[i].close, size.owned[i])
  end
  size.owned = {}
  if raised then
    error(raised, 0)
  end
end

local function new_size(elements, stream)
  return setmetatable({ elements = elements, stream = stream, owned = {} }, Size)
end

local function measure_size(pipeline, settings, stream, results, row, line, checks)
  local size <close> = new_size(row.elements, stream)
  pipeline.setup(size)
  for _, path in ipairs(pipeline.paths) do
    local stage = sweep.size_text(row.elements) .. " " .. path.name
    line:begin(stage)
    local step = path.prepare(size)
    if pipeline.reset then
      pipeline.reset(size, path)
    end
    local per_step = path.iterations_per_step or 1
    local steps = math.max(1, settings.iters // per_step)
    local timing = bench.run(size.stream, step, { iters = steps, warmup = WARMUP,
                                                  repeats = settings.repeats, name = stage,
                                                  progress = line })
    local passed = true
    if pipeline.check then
      local label = string.format("%s at %s elements", path.label or path.name,
                                  sweep.size_text(row.elements))
      passed = checks:record(label, pipeline.check(size, path, label))
    end
    sweep.record(results, row, path.name, timing.seconds * 1e6 / (steps * per_step), passed)
    line:finish_item()
  end
end

local function measure_all(pipeline, settings, context, results, line, checks, after_size)
  for _, elements in ipairs(settings.sizes) do
    local problem = sweep.memory_problem(pipeline, elements, context.mem_info())
    if problem then
      error(problem, 0)
    end
    local row = { elements = elements, us_per_iter = {}, speedup = {}, checks = {} }
    results.rows[#results.rows + 1] = row
    with_range("sweep " .. sweep.size_text(elements), measure_size, pipeline, settings,
               context.stream, results, row, line, checks)
    after_size(row)
  end
end

-- Writes the JSON and CSV files asked for; -> the paths written, the
-- problems (one line each).
local function write_files(results, settings)
  local written, problems = {}, {}
  for _, item in ipairs{ { settings.json, sweep.json_text }, { settings.csv, sweep.csv_text } } do
    if item[1] then
      local ok, why = shell.write_file(item[1], item[2](results))
      if ok then
        written[#written + 1] = item[1]
      else
        problems[#problems + 1] = string.format("cannot write %s: %s", item[1], why)
      end
    end
  end
  return written, problems
end

local function progress_items(pipeline, settings)
  local sizes = {}
  for _, elements in ipairs(settings.sizes) do
    for _ = 1, #pipeline.paths do
      sizes[#sizes + 1] = elements
    end
  end
  return sizes
end

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
  local problem = largest and sweep.memory_problem(pipeline, largest, context.mem_info())
  if problem then
    write_error(string.format("%s: error: %s\n", name, problem))
    return EXIT_USAGE
  end

  local results = sweep.new_results(pipeline, settings, context)
  local sizes = progress_items(pipeline, settings)
  local enabled = context.progress
  if enabled == nil then
    enabled = text_mode and progress.is_terminal(io.stderr)
  end
  local line = progress.new{ label = name, total = #sizes, sizes = sizes,
                             enabled = enabled and #sizes > 0, write = write_error }
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
  say(sweep.table_header(results))
  local ok, failure = pcall(measure_all, pipeline, settings, context, results, line, checks,
    function(row)
      results.crossover = sweep.find_crossover(results)
      say(sweep.table_row(results, row))
      local _, problems = write_files(results, settings)
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
  results.interrupted = not ok and is_interrupt(failure)
  results.crossover = sweep.find_crossover(results)
  if partial then
    say(sweep.table_row(results, last) .. "  (size not finished)")
  end

  local written, problems = write_files(results, settings)
  if settings.json_stdout then
    write(sweep.json_text(results))
  end
  local summary = sweep.summary(results)
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
