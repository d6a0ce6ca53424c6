-- A sweep's presenting: the table printed a row per size, the line after
-- it, and the JSON and CSV files, all from the results table that
-- script/sweep/measure.lua fills (the picture is script/plot.lua's).
local cjson = require("cjson")
local plot = require("gpurun.script.plot")
local shell = require("gpurun.script.shell")
local size_text = require("gpurun.script.sweep.sizes").size_text

local present = {}

local label_of = plot.label_of

-- One object with every figure (the JSON file's contents).
function present.json_text(results)
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
function present.csv_text(results)
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

-- Writes the JSON and CSV files settings asks for; -> the paths written,
-- the problems (one line each).
function present.write_files(results, settings)
  local written, problems = {}, {}
  for _, item in ipairs{ { settings.json, present.json_text }, { settings.csv, present.csv_text } } do
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

function present.table_header(results)
  local parts = { string.format("%" .. ELEMENTS_WIDTH .. "s", "elements") }
  for _, column in ipairs(columns(results)) do
    parts[#parts + 1] = string.format("%" .. column.width .. "s", column.title)
  end
  return table.concat(parts, "  ")
end

function present.table_row(results, row)
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
function present.summary(results)
  local name, threshold = results.crossover_path, results.threshold
  if name == nil then
    return nil
  end
  local path, base = label_of(results, name), label_of(results, results.baseline)
  local advantage = string.format("%.0f%%", (threshold - 1) * 100)
  local crossover = results.crossover
  if crossover then
    return string.format("Crossover: %s's advantage over %s falls below %s at %s (%d elements): "
                         .. "%.2fx", path, base, advantage, size_text(crossover.elements),
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

return present
