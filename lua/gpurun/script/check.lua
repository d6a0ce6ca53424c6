-- Result checks that say what went wrong: which check, how many elements,
-- the worst difference and where. An element passes when |actual -
-- expected| <= atol + rtol * |expected| (numpy.allclose; rtol and atol
-- default to 1e-5 and 1e-8, as its do); NaN on either side fails. The rule
-- is gpurun.compare's, which compares Lua sequences as it compares buffers.
--
--   local check = require("gpurun.check")
--   local checks = check.new("myscript.lua")
--   checks:buffers("graph replay", r3, expected, 1e-5, 1e-5)  -- device buffers (gpurun.compare)
--   if not checks:passed() then return 1 end

local gpurun = require("gpurun")

local check = {}

local DEFAULT_RTOL, DEFAULT_ATOL = 1e-5, 1e-8

local function kind(value)
  local mt = getmetatable(value)
  local name = type(mt) == "table" and rawget(mt, "__name")
  return type(name) == "string" and name or type(value)
end

local HERE = debug.getinfo(1, "S").source

-- Raises message at the first caller outside this file (the script's line).
local function raise(message)
  local level = 2
  while debug.getinfo(level, "S") and debug.getinfo(level, "S").source == HERE do
    level = level + 1
  end
  error(message, level)
end

-- Raises "bad argument #n to 'name' (expected, got <kind>)".
local function refuse(name, n, expected, value)
  raise(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, name, expected, kind(value)))
end

local function check_label(name, label)
  if type(label) ~= "string" then refuse(name, 1, "label string", label) end
end

local function is_nan(x)
  return x ~= x
end

-- rtol and atol at arguments n and n + 1, defaulted.
local function tolerances(name, n, rtol, atol)
  if rtol == nil then rtol = DEFAULT_RTOL end
  if atol == nil then atol = DEFAULT_ATOL end
  if type(rtol) ~= "number" or rtol < 0 or is_nan(rtol) then refuse(name, n, "non-negative rtol", rtol) end
  if type(atol) ~= "number" or atol < 0 or is_nan(atol) then refuse(name, n + 1, "non-negative atol", atol) end
  return rtol, atol
end

-- The summary compare_tables returns; `actual` is argument at of name. The
-- rule is gpurun.compare's, the one copy of it: the checks here only name
-- this module's functions in the errors.
local function compare(name, at, actual, expected, rtol, atol)
  local count = #actual
  local scalar = type(expected) == "number"
  if not scalar and #expected ~= count then
    raise(("bad argument #%d to '%s' (table of %d numbers expected, got %d)"):format(at + 1, name, count, #expected))
  end
  for i = 1, count do
    if type(actual[i]) ~= "number" then
      raise(("bad argument #%d to '%s' (element %d is %s, not a number)"):format(at, name, i, kind(actual[i])))
    elseif not scalar and type(expected[i]) ~= "number" then
      raise(("bad argument #%d to '%s' (element %d is %s, not a number)")
        :format(at + 1, name, i, kind(expected[i])))
    end
  end
  local summary = gpurun.compare(actual, expected, rtol, atol)
  summary.rtol, summary.atol = nil, nil
  return summary
end

-- Compares two Lua arrays of numbers, or an array and one number, as
-- gpurun.compare compares buffers, and returns the same summary:
-- { count, mismatches, nan, worst_index, worst_actual, worst_expected,
--   worst_abs_diff }. nan counts results that are NaN where the expected
-- value is not. The worst element is the mismatch furthest past its
-- tolerance, or when all pass the largest difference; worst_index is
-- 1-based, nil when there are no elements.
function check.compare_tables(actual, expected, rtol, atol)
  local name = "check.compare_tables"
  if type(actual) ~= "table" then refuse(name, 1, "table of numbers", actual) end
  if type(expected) ~= "table" and type(expected) ~= "number" then
    refuse(name, 2, "table of numbers or number", expected)
  end
  rtol, atol = tolerances(name, 3, rtol, atol)
  return compare(name, 1, actual, expected, rtol, atol)
end

local function number_text(x)
  if is_nan(x) then
    return "nan"
  end
  return string.format("%.9g", x)
end

-- nil when the summary shows no mismatch; otherwise one line naming the
-- check, the count, the tolerance and the worst element.
function check.describe(label, summary, rtol, atol)
  if summary.mismatches == 0 then
    return nil
  end
  local parts = {
    string.format("%s: %d of %d elements differ (rtol=%g, atol=%g)",
                  label, summary.mismatches, summary.count, rtol, atol),
  }
  local nan = summary.nan
  if type(nan) == "number" and nan > 0 then
    parts[#parts + 1] = string.format(", %d of them NaN", nan)
  elseif nan == true then
    parts[#parts + 1] = ", some of them NaN"
  end
  if summary.worst_index then
    parts[#parts + 1] = string.format("; worst |difference| %s at index %d: got %s, expected %s",
                                      number_text(summary.worst_abs_diff), summary.worst_index,
                                      number_text(summary.worst_actual),
                                      number_text(summary.worst_expected))
  end
  return table.concat(parts)
end

local function buffers(name, label, actual, expected, rtol, atol)
  check_label(name, label)
  if kind(actual) ~= "gpurun.Buffer" then refuse(name, 2, "gpurun.Buffer", actual) end
  if kind(expected) ~= "gpurun.Buffer" and type(expected) ~= "number" then
    refuse(name, 3, "gpurun.Buffer or number", expected)
  end
  rtol, atol = tolerances(name, 4, rtol, atol)
  local summary = gpurun.compare(actual, expected, rtol, atol)
  local message = check.describe(label, summary, rtol, atol)
  return message == nil, message
end

local function tables(name, label, actual, expected, rtol, atol)
  check_label(name, label)
  if type(actual) ~= "table" then refuse(name, 2, "table of numbers", actual) end
  if type(expected) ~= "table" and type(expected) ~= "number" then
    refuse(name, 3, "table of numbers or number", expected)
  end
  rtol, atol = tolerances(name, 4, rtol, atol)
  if type(expected) == "table" and #expected ~= #actual then
    return false, string.format("%s: got %d elements, expected %d", label, #actual, #expected)
  end
  local message = check.describe(label, compare(name, 2, actual, expected, rtol, atol), rtol, atol)
  return message == nil, message
end

local function number(name, label, actual, expected, rtol, atol)
  check_label(name, label)
  if type(actual) ~= "number" then refuse(name, 2, "number", actual) end
  if type(expected) ~= "number" then refuse(name, 3, "number", expected) end
  rtol, atol = tolerances(name, 4, rtol, atol)
  local summary = compare(name, 2, { actual }, expected, rtol, atol)
  if summary.mismatches == 0 then return true end
  return false, string.format("%s: got %s, expected %s (|difference| %s, rtol=%g, atol=%g)", label,
    number_text(actual), number_text(expected), number_text(math.abs(actual - expected)), rtol, atol)
end

local function condition(name, label, ok, detail)
  check_label(name, label)
  if detail ~= nil and type(detail) ~= "string" then refuse(name, 3, "detail string or nil", detail) end
  if ok then return true end
  return false, label .. ": " .. (detail or "the condition does not hold")
end

-- Device buffer `actual` against a buffer or a number. -> passed, message
function check.buffers(label, actual, expected, rtol, atol)
  return buffers("check.buffers", label, actual, expected, rtol, atol)
end

-- Lua array `actual` against an array or a number. -> passed, message
function check.tables(label, actual, expected, rtol, atol)
  return tables("check.tables", label, actual, expected, rtol, atol)
end

-- One number against another, by the same rule. -> passed, message
function check.number(label, actual, expected, rtol, atol)
  return number("check.number", label, actual, expected, rtol, atol)
end

-- Passes when ok is truthy; detail (a string) says what went wrong when
-- it is not. -> passed, message
function check.condition(label, ok, detail)
  return condition("check.condition", label, ok, detail)
end

-- A list of named checks for one script run.
local Checks = {}
Checks.__index = Checks

-- name prefixes the failure lines; write (default: to stderr) receives them.
-- A failed check writes "myscript.lua: check failed: <what>". Arguments of
-- the wrong kind raise an error naming the function and the argument.
--
--   checks:tables("host reference", out:to_table(), reference, 1e-5, 1e-5)
--   checks:number("mean", mean, 0.5, 0, 1e-3)              -- one number
--   checks:condition("graph replayed", ok, err)             -- anything else
function check.new(name, write)
  return setmetatable({
    name = name,
    write = write or function(text)
      io.stderr:write(text)
      io.stderr:flush()
    end,
    outcomes = {},
  }, Checks)
end

function Checks:record(label, passed, message)
  self.outcomes[#self.outcomes + 1] = { label = label, passed = passed }
  if not passed then
    self.write(string.format("%s: check failed: %s\n", self.name, message))
  end
  return passed
end

function Checks:buffers(label, actual, expected, rtol, atol)
  return self:record(label, buffers("checks:buffers", label, actual, expected, rtol, atol))
end

function Checks:tables(label, actual, expected, rtol, atol)
  return self:record(label, tables("checks:tables", label, actual, expected, rtol, atol))
end

function Checks:number(label, actual, expected, rtol, atol)
  return self:record(label, number("checks:number", label, actual, expected, rtol, atol))
end

function Checks:condition(label, ok, detail)
  return self:record(label, condition("checks:condition", label, ok, detail))
end

-- True when every recorded check passed (and at least one ran).
function Checks:passed()
  if #self.outcomes == 0 then
    return false
  end
  for _, outcome in ipairs(self.outcomes) do
    if not outcome.passed then
      return false
    end
  end
  return true
end

-- { [label] = passed } for reports.
function Checks:results()
  local results = {}
  for _, outcome in ipairs(self.outcomes) do
    results[outcome.label] = outcome.passed
  end
  return results
end

return check
