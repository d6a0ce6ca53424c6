-- A sweep's measuring: for every size, the pipeline set up, every path
-- prepared and timed by bench.run, its check recorded, and the size's
-- objects closed (a graph before the buffers it uses) on every way out;
-- the figures go into a results table that script/sweep/present.lua
-- writes out.
local bench = require("gpurun.script.bench")
local sizes = require("gpurun.script.sweep.sizes")
local with_range = require("gpurun.nvtx").with_range

local measure = {}

measure.THRESHOLD = 1.05 -- the graph's advantage the crossover is about: 5%

local WARMUP = 5

function measure.new_results(pipeline, settings, context)
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
    threshold = measure.THRESHOLD,
    sizes = settings.sizes,
    rows = {},
    complete = false,
    interrupted = false,
  }
end

-- Sets a path's figure in a row and the speedups that follow from it.
function measure.record(results, row, path_name, us_per_iter, passed)
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
function measure.find_crossover(results)
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

function measure.is_interrupt(why)
  return tostring(why):find("interrupted!", 1, true) ~= nil
end

-- One size's objects: whatever setup and the paths make with size:own(x),
-- closed in reverse order (a graph before the buffers it uses) when the
-- size is done, on every path out.
local Size = {}
Size.__index = Size

function Size:own(object)
  self.owned[#self.owned + 1] = object
  return object
end

-- Everything is closed even when something fails; then the first failure
-- is raised, or a Ctrl-C that landed here, which must not be lost.
function Size.__close(size)
  local raised
  local function attempt(operation, ...)
    local ok, why = pcall(operation, ...)
    if not ok and (raised == nil or measure.is_interrupt(why)) then
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
    local stage = sizes.size_text(row.elements) .. " " .. path.name
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
                                  sizes.size_text(row.elements))
      passed = checks:record(label, pipeline.check(size, path, label))
    end
    measure.record(results, row, path.name, timing.seconds * 1e6 / (steps * per_step), passed)
    line:finish_item()
  end
end

-- Every size of settings.sizes in turn, a row each in results.rows, with
-- after_size(row) called once a row is complete. Raises on the first
-- error (the row being measured stays, possibly without figures).
function measure.run_sizes(pipeline, settings, context, results, line, checks, after_size)
  for _, elements in ipairs(settings.sizes) do
    local problem = sizes.memory_problem(pipeline, elements, context.mem_info())
    if problem then
      error(problem, 0)
    end
    local row = { elements = elements, us_per_iter = {}, speedup = {}, checks = {} }
    results.rows[#results.rows + 1] = row
    with_range("sweep " .. sizes.size_text(elements), measure_size, pipeline, settings,
               context.stream, results, row, line, checks)
    after_size(row)
  end
end

-- One size per timed item, for the progress line's estimate.
function measure.progress_sizes(pipeline, settings)
  local list = {}
  for _, elements in ipairs(settings.sizes) do
    for _ = 1, #pipeline.paths do
      list[#list + 1] = elements
    end
  end
  return list
end

return measure
