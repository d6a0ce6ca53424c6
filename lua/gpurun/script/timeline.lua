-- A pipeline's timings (Pipeline:timings()) as a text timeline: one row per
-- unit, a bar from its start to its end on a common scale, its stream and
-- its time, so that units of two streams that overlap show side by side.
-- A graph's profile (Graph:profile()) draws the same way: one row per node,
-- in microseconds, '*' in the stream column on the critical path.
--
--   local timeline = require("gpurun.timeline")
--   print(timeline.format(p:timings()))
--   print(timeline.format(graph:profile(stream)))
local timeline = {}

local DEFAULT_WIDTH = 48

-- A graph profile's nodes as rows of the timeline.
local function profile_rows(result)
  local rows = {}
  for k, node in ipairs(result.nodes) do
    rows[k] = { name = ("%d %s"):format(node.index, node.name or node.kind),
                stream = node.critical and "*" or "", start_ms = node.start_us, ms = node.us }
  end
  return rows
end

-- format(timings [, width]) -> text. timings: { { name, stream, start_ms,
-- ms }... }, or a Graph:profile() result (its times in us); width: the
-- bar's columns for the whole span (default 48).
function timeline.format(timings, width)
  width = width or DEFAULT_WIDTH
  if type(timings) ~= "table" then
    error("timeline.format: a list of timings expected, got " .. type(timings), 2)
  end
  if math.type(width) ~= "integer" or width < 8 or width > 400 then
    error("timeline.format: width must be an integer from 8 to 400, got " .. tostring(width), 2)
  end
  local unit, column = "ms", "unit"
  if type(timings.nodes) == "table" and type(timings.critical_path) == "table" then
    timings, unit, column = profile_rows(timings), "us", "node"
  end
  local span, name_width = 0, 4
  for _, t in ipairs(timings) do
    span = math.max(span, t.start_ms + t.ms)
    name_width = math.max(name_width, #t.name)
  end
  name_width = math.min(name_width, 40)
  local lines = { ("%-" .. name_width .. "s  stream  %-" .. width .. "s  %9s"):format(column, "0 .. "
    .. ("%.3f %s"):format(span, unit), unit) }
  for _, t in ipairs(timings) do
    local from = span > 0 and math.floor(t.start_ms / span * width + 0.5) or 0
    local to = span > 0 and math.floor((t.start_ms + t.ms) / span * width + 0.5) or 0
    if to <= from then to = from + 1 end
    if to > width then to = width end
    local bar = string.rep(" ", from) .. string.rep("#", to - from) .. string.rep(" ", width - to)
    lines[#lines + 1] = ("%-" .. name_width .. "s  %6s  %s  %9.4f"):format(t.name:sub(1, name_width),
      t.stream, bar, t.ms)
  end
  return table.concat(lines, "\n")
end

return timeline
