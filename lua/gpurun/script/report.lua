-- A script's report: text lines as the pipeline runs, or with --json the
-- same figures as one JSON object on stdout at the end.
--
--   local report = require("gpurun.report")
--   local out = report.new{ json = options.json }
--   out:device(device, options.device)    -- "Device: ..." / "Compute Capability: ..."
--   out:timing("individual", "\nIndividual launches: ", result)
--   out:speedup("Graph speedup: ", individual, graph)
--   return out:finish(checks)             -- writes the JSON; 0 or 1 for os.exit

local cjson = require("cjson")
local breakdown = require("gpurun.script.breakdown")
local check_options = require("gpurun.options").check

local report = {}

local EXIT_SUCCESS = 0
local EXIT_FAILURE = 1

-- "<label>1000 iters in 0.0118s  (11.82 us/iter)": the sample's line, with the
-- label printed as given so each script keeps its own alignment.
function report.timing_line(label, result)
  return string.format("%s%d iters in %.4fs  (%.2f us/iter)",
                       label, result.iters, result.seconds, result.us_per_iter)
end

-- How many times faster `faster` ran than `base`; nil when it was too fast
-- to measure.
function report.speedup(base, faster)
  if faster.seconds > 0 then
    return base.seconds / faster.seconds
  end
  return nil
end

-- 1048576 -> "1,048,576": digits in groups of three, as Python's "{:,}"
-- writes an integer (the cuda.core samples print counts so).
function report.with_commas(n)
  local sign, digits = tostring(n):match("^(-?)(.*)$")
  return sign .. (digits:reverse():gsub("(%d%d%d)", "%1,"):reverse():gsub("^,", ""))
end

local Report = {}
Report.__index = Report

-- options: json (boolean), write (default io.write; receives whole lines).
function report.new(options)
  options = check_options("report.new", options, { "json", "write" }) or {}
  return setmetatable({
    json = options.json and true or false,
    write = options.write or io.write,
    figures = {},
  }, Report)
end

-- A text line (text mode only; a leading "\n" gives the blank line above it):
-- out:say("\nDone").
function Report:say(text)
  if not self.json then
    self.write(text .. "\n")
  end
end

-- A figure for the JSON object (ignored in text mode): out:field("elements", n).
function Report:field(key, value)
  self.figures[key] = value
end

-- The device lines of the cuda.core samples' print_gpu_info.
function Report:device(device, id)
  local cc = device.compute_capability
  local capability = string.format("%d.%d", cc.major, cc.minor)
  self:field("device", device.name)
  self:field("device_id", id)
  self:field("compute_capability", capability)
  self:say("Device: " .. device.name)
  self:say("Compute Capability: " .. capability)
end

-- A result of bench.run under `key` in JSON, as report.timing_line in text.
function Report:timing(key, label, result)
  self:field(key, {
    iters = result.iters,
    seconds = result.seconds,
    us_per_iter = result.us_per_iter,
  })
  self:say(report.timing_line(label, result))
end

-- "<label>2.94x", and "speedup" in JSON; nothing when it cannot be measured.
function Report:speedup(label, base, faster)
  local ratio = report.speedup(base, faster)
  if ratio then
    self:field("speedup", ratio)
    self:say(string.format("%s%.2fx", label, ratio))
  end
end

-- The text of a breakdown (gpurun.breakdown.measure's result) against the
-- timed loop of the same launches (bench.run's result), one line a stage,
-- then the busy time, the wall time and the launch overhead per iteration.
function report.breakdown_lines(result, timing)
  local overhead = breakdown.overhead(result, timing)
  local width = #"stage"
  for _, stage in ipairs(result.stages) do
    width = math.max(width, #stage.name)
  end
  local lines = {
    string.format("Where the time goes (individual launches; %d launches per stage, "
                  .. "apart from the timed loop):", result.iters),
    string.format("  %-" .. width .. "s  %13s  %17s", "stage", "GPU us/launch",
                  "CPU enqueue us"),
  }
  for _, stage in ipairs(result.stages) do
    lines[#lines + 1] = string.format("  %-" .. width .. "s  %13.2f  %17.2f", stage.name,
                                      stage.gpu_us, stage.enqueue_us)
  end
  lines[#lines + 1] = string.format("GPU busy per iteration:  %8.2f us", overhead.gpu_us_per_iter)
  lines[#lines + 1] = string.format("Wall time per iteration: %8.2f us", overhead.wall_us_per_iter)
  local share = overhead.overhead_fraction
  lines[#lines + 1] = string.format("Launch overhead:         %8.2f us%s",
                                    overhead.launch_overhead_us, share and string.format(
                                      " (%.0f%% of the wall time)", share * 100) or "")
  return lines
end

-- A breakdown under "breakdown" in JSON, as report.breakdown_lines in text:
-- where the time goes, out:breakdown(result, individual).
function Report:breakdown(result, timing)
  local overhead = breakdown.overhead(result, timing)
  local stages = {}
  for i, stage in ipairs(result.stages) do
    stages[i] = { name = stage.name, gpu_us = stage.gpu_us, enqueue_us = stage.enqueue_us }
  end
  self:field("breakdown", {
    launches_per_stage = result.iters,
    stages = stages,
    gpu_us_per_iter = overhead.gpu_us_per_iter,
    wall_us_per_iter = overhead.wall_us_per_iter,
    launch_overhead_us = overhead.launch_overhead_us,
    overhead_fraction = overhead.overhead_fraction,
  })
  for _, line in ipairs(report.breakdown_lines(result, timing)) do
    self:say(line)
  end
end

-- Ends the report: in JSON mode writes the object with "checks_passed" and
-- "checks" ({ [label] = passed }) from a gpurun.check list. Returns the
-- script's exit code: 0 when every check passed, else 1.
function Report:finish(checks)
  local passed = checks:passed()
  if self.json then
    self.figures.checks_passed = passed
    self.figures.checks = checks:results()
    self.write(cjson.encode(self.figures) .. "\n")
  end
  return passed and EXIT_SUCCESS or EXIT_FAILURE
end

return report
