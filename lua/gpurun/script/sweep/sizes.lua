-- A sweep's sizes: parsed from the command line ("4096", "2^12",
-- "64:4096"), written back ("2^12"), stepped through, and checked against
-- the device's free memory before anything is allocated.
local args = require("gpurun.script.args")
local quoted = require("gpurun.common").quoted

local sizes = {}

local MAX_POWER = 40

-- "4096" or "2^12" -> 4096; or nil and why.
function sizes.parse_size(text)
  local power = type(text) == "string" and text:match("^%s*2%^(%d+)%s*$")
  if power then
    local exponent = math.tointeger(tonumber(power))
    if exponent == nil or exponent > MAX_POWER then
      return nil, ("expected a size up to 2^%d, got %s"):format(MAX_POWER, quoted(text))
    end
    return 1 << exponent
  end
  local value = args.to_integer(text)
  if value == nil then
    return nil, "expected a positive integer or 2^K, got " .. quoted(text)
  end
  return value
end

-- 4096 -> "2^12"; a size that is no power of two as its digits.
function sizes.size_text(elements)
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
function sizes.sizes(from, to, factor)
  local list = {}
  local size = from
  while size <= to do
    list[#list + 1] = size
    if size > to // factor then
      break
    end
    size = size * factor
  end
  return list
end

-- nil, or why from..to is no range.
function sizes.range_problem(from, to, from_name, to_name)
  if from > to then
    return string.format("%s %s is above %s %s", from_name or "--from", sizes.size_text(from),
                         to_name or "--to", sizes.size_text(to))
  end
  return nil
end

-- "64:4096" -> 64, 4096; or nil and why.
function sizes.parse_range(text)
  local from_text, to_text
  if type(text) == "string" then from_text, to_text = text:match("^([^:]+):([^:]+)$") end
  if not from_text then
    return nil, "expected FROM:TO, got " .. quoted(text)
  end
  local from, from_problem = sizes.parse_size(from_text)
  local to, to_problem = sizes.parse_size(to_text)
  local problem = from_problem or to_problem or sizes.range_problem(from, to, "FROM", "TO")
  if problem then
    return nil, problem
  end
  return from, to
end

function sizes.format_bytes(bytes)
  local units = { { 2 ^ 40, "TiB" }, { 2 ^ 30, "GiB" }, { 2 ^ 20, "MiB" }, { 2 ^ 10, "KiB" } }
  for _, unit in ipairs(units) do
    if bytes >= unit[1] then
      return string.format("%.2f %s", bytes / unit[1], unit[2])
    end
  end
  return string.format("%d bytes", bytes)
end

-- nil, or why `elements` do not fit the device's free memory.
function sizes.memory_problem(pipeline, elements, free, total)
  local per_element = pipeline.bytes_per_element
  local needed = elements * per_element
  if needed > free then
    return string.format("%s elements need %s (%d bytes per element); the device has %s free "
                         .. "of %s", sizes.size_text(elements), sizes.format_bytes(needed),
                         per_element, sizes.format_bytes(free), sizes.format_bytes(total))
  end
  return nil
end

return sizes
