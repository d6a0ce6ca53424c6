-- Testing your own kernels with busted: assertions on buffers, and the #gpu
-- rule. Load it as busted's helper, so the rule is in place before any spec
-- is registered:
--
--   busted --lua=gpurun --helper=gpurun.testing            (gpurun runs the specs)
--   busted --lua=lua5.4 --helper=gpurun.testing            (lua5.4 and gpurun.so)
--
-- and `require("gpurun.testing")` in a spec file for the assertions alone.
local gpurun = require("gpurun")
local check = require("gpurun.script.check")

local testing = {}

-- The #gpu rule: on a machine without a usable GPU every `it` whose name
-- holds #gpu is left out (#multigpu: with fewer than two devices), and when
-- the run ends one line says how many and why. Put the tag on `it` blocks,
-- not on `describe`.
--
-- The rule's state lives in the registry, not in this module: busted
-- insulates spec files, dropping modules they load, and the rule must be
-- installed once per run however often this file is loaded.
local REGISTRY_KEY = "gpurun.testing: the #gpu rule"

local function new_rule()
  local device_count = gpurun.device_count()
  return {
    installed = false,
    device_count = device_count,
    available = device_count > 0,
    reason = device_count == 0
      and (gpurun.driver_error() or "the CUDA driver reports no device") or nil,
    excluded = 0,
    multi_available = device_count >= 2,
    multi_reason = ("%d CUDA device(s) visible, these need 2 or more"):format(device_count),
    multi_excluded = 0,
    -- An output handler that writes the counts itself sets this false.
    report = true,
  }
end

local registry = debug.getregistry()
registry[REGISTRY_KEY] = registry[REGISTRY_KEY] or new_rule()
local rule = registry[REGISTRY_KEY]

-- { device_count, available, reason, excluded, multi_available,
-- multi_reason, multi_excluded, report }: what the #gpu rule found and did.
testing.gpu = rule

function testing.has_tag(name, tag)
  return type(name) == "string" and name:find(tag, 1, true) ~= nil
end

-- The lines that say what the rule left out, as the run's end writes them.
function testing.summary_lines()
  local lines = {}
  if rule.multi_excluded > 0 then
    lines[#lines + 1] = ("%d spec(s) tagged #multigpu excluded: %s")
      :format(rule.multi_excluded, rule.multi_reason)
  end
  if rule.excluded > 0 then
    lines[#lines + 1] = ("%d spec(s) tagged #gpu excluded: no usable CUDA GPU (%s)")
      :format(rule.excluded, rule.reason)
  elseif rule.available then
    lines[#lines + 1] = ("#gpu specs ran on %d CUDA device(s)"):format(rule.device_count)
  end
  return lines
end

-- Subscribes the rule's filters to busted's registrations: an `it` it
-- drops is counted, never run. Subscribed before busted's own filters
-- (--tags, --filter), which therefore run first: the counts are of the
-- specs those kept.
local function install(busted)
  rule.installed = true
  local function exclude(drops, counter)
    busted.subscribe({ "register", "it" }, function(name)
      if drops(name) then
        rule[counter] = rule[counter] + 1
        return nil, false
      end
      return nil, true
    end, { priority = 1 })
  end
  if not rule.available then
    busted.subscribe({ "register", "describe" }, function(name)
      if testing.has_tag(name, "#gpu") then
        error("tag #gpu belongs on `it` blocks, not on `describe` ('" .. name .. "'): "
          .. "put GPU set-up in lazy_setup or before_each", 0)
      end
      return nil, true
    end, { priority = 1 })
    -- A #multigpu spec is counted with the #multigpu ones, below.
    exclude(function(name)
      return testing.has_tag(name, "#gpu") and not testing.has_tag(name, "#multigpu")
    end, "excluded")
  end
  if not rule.multi_available then
    exclude(function(name) return testing.has_tag(name, "#multigpu") end, "multi_excluded")
  end
  busted.subscribe({ "suite", "end" }, function()
    if rule.report then
      for _, line in ipairs(testing.summary_lines()) do
        io.write(line, "\n")
      end
      io.flush()
    end
    return nil, true
  end)
end

-- What a value is (its metatable's __name, else its type), for the verdict
-- and its errors.
local function kind(value)
  local mt = getmetatable(value)
  local name = type(mt) == "table" and rawget(mt, "__name")
  return type(name) == "string" and name or type(value)
end

local function is_buffer(value) return kind(value) == "gpurun.Buffer" end
local function is_pinned(value) return kind(value) == "gpurun.PinnedBuffer" end

local HERE = debug.getinfo(1, "S").source

-- Raises message at the spec's line: the first caller outside this file
-- and luassert.
local function raise(message)
  local level = 2
  while true do
    local info = debug.getinfo(level, "S")
    if not info or (info.source ~= HERE and not info.source:find("/luassert/", 1, true)) then break end
    level = level + 1
  end
  error(message, level)
end

-- passed, message: actual against expected by gpurun.check's rule (on the
-- device through gpurun.compare when both are there, else on tables).
local function verdict(name, expected, actual, rtol, atol)
  local function refuse(n, wanted, value)
    raise(("bad argument #%d to '%s' (%s expected, got %s)"):format(n, name, wanted, kind(value)))
  end
  if not (is_buffer(actual) or is_pinned(actual) or type(actual) == "table") then
    refuse(2, "gpurun.Buffer, gpurun.PinnedBuffer or table of numbers", actual)
  end
  if not (is_buffer(expected) or is_pinned(expected) or type(expected) == "table"
          or type(expected) == "number") then
    refuse(1, "gpurun.Buffer, gpurun.PinnedBuffer, table of numbers or number", expected)
  end
  -- check's own refusals (an element that is no number) name the assertion.
  local function judged(ok, ...)
    if not ok then raise(name .. ": " .. tostring((...)):gsub("^[^:]*:%d+: ", "")) end
    return ...
  end
  if is_buffer(actual) and (is_buffer(expected) or type(expected) == "number") then
    if is_buffer(expected) and #expected ~= #actual then
      return false, ("%s: got %d elements, expected %d"):format(name, #actual, #expected)
    end
    return judged(pcall(check.buffers, name, actual, expected, rtol, atol))
  end
  local function host(value)
    return (is_buffer(value) or is_pinned(value)) and value:to_table() or value
  end
  return judged(pcall(check.tables, name, host(actual), host(expected), rtol, atol))
end

-- The assertions: the message is the verdict's line, not luassert's
-- rendering of the arguments (a buffer prints as its address).
--
--   assert.buffer_near(expected, actual [, rtol [, atol [, message]]])
--   assert.buffer_equal(expected, actual [, message])
--
-- actual is a gpurun.Buffer, a gpurun.PinnedBuffer or a table of numbers;
-- expected is one of those or a number. An element passes when
-- |actual - expected| <= atol + rtol * |expected| (rtol 1e-5 and atol 1e-8
-- by default; 0 and 0 for buffer_equal); NaN never passes. The verdict is
-- gpurun.check's, so a failure reads as its lines do: how many elements
-- differ, and the worst one, its index (from 1) and both values.
local function assertion(name, tolerances)
  return function(state, arguments)
    local expected, actual = arguments[1], arguments[2]
    local rtol, atol, message = tolerances(arguments)
    if message ~= nil then state.failure_message = message end
    local passed, why = verdict(name, expected, actual, rtol, atol)
    local text = passed
      and ("%s: every element within rtol=%g, atol=%g"):format(name, rtol or 1e-5, atol or 1e-8)
      or why
    arguments[1], arguments.n, arguments.nofmt = text, 1, { true }
    return passed
  end
end

local luassert = require("luassert")
local say = require("say")
say:set("assertion.buffer_near.positive", "Expected the elements to be near:\n%s")
say:set("assertion.buffer_near.negative", "Expected some element not to be near:\n%s")
say:set("assertion.buffer_equal.positive", "Expected the elements to be equal:\n%s")
say:set("assertion.buffer_equal.negative", "Expected some element to differ:\n%s")
luassert:register("assertion", "buffer_near", assertion("buffer_near", function(arguments)
  return arguments[3], arguments[4], arguments[5]
end), "assertion.buffer_near.positive", "assertion.buffer_near.negative")
luassert:register("assertion", "buffer_equal", assertion("buffer_equal", function(arguments)
  return 0, 0, arguments[3]
end), "assertion.buffer_equal.positive", "assertion.buffer_equal.negative")

-- Under busted (as its helper, or from a spec file), the #gpu rule.
local busted = package.loaded.busted
if busted and not rule.installed then
  install(busted)
end

return testing
