-- gpurun.check: checks on Lua tables and device buffers, the number and
-- condition checks, the default tolerances, and arguments of the wrong kind
-- refused with a message of its own.
local gpurun = require("gpurun")
local check = require("gpurun.check")

local function recorder()
  local lines = {}
  return check.new("script.lua", function(text) lines[#lines + 1] = text end), lines
end

local expect = require("spec.support.expect")
local error_of = expect.error_of

describe("gpurun.check", function()
  it("checks one number against another by numpy's rule", function()
    local checks, lines = recorder()
    assert.is_true(checks:number("mean", 0.5000001, 0.5))
    assert.is_true(checks:number("sum", 10.2, 10, 0, 0.25))
    assert.is_false(checks:number("sum", 10.5, 10, 0, 0.25))
    assert.are.same({ "script.lua: check failed: sum: got 10.5, expected 10 (|difference| 0.5, rtol=0, atol=0.25)\n" },
      lines)
    assert.is_false(checks:number("nan", 0 / 0, 1))
    assert.are.same({ false, "x: got inf, expected 1 (|difference| inf, rtol=1e-05, atol=1e-08)" },
      { check.number("x", math.huge, 1) })
    assert.is_false(checks:passed())
  end)

  it("checks conditions, with a detail that says what went wrong", function()
    local checks, lines = recorder()
    assert.is_true(checks:condition("replayed", true))
    assert.is_true(checks:condition("found", "a value is truthy"))
    assert.is_false(checks:condition("converged", false, "residual 3.2e-2 after 100 iterations"))
    assert.is_false(checks:condition("opened", nil))
    assert.are.same({
      "script.lua: check failed: converged: residual 3.2e-2 after 100 iterations\n",
      "script.lua: check failed: opened: the condition does not hold\n",
    }, lines)
    assert.are.same({ replayed = true, found = true, converged = false, opened = false }, checks:results())
    assert.are.same({ true }, { check.condition("x", 1) })
  end)

  it("uses numpy's default tolerances when none are given", function()
    local checks = recorder()
    assert.is_true(checks:tables("close", { 1.000001, 2 }, { 1, 2 }))
    assert.is_false(checks:tables("far", { 1.0001 }, 1))
    assert.are.same({ true }, { check.tables("t", { 3 }, { 3 }) })
  end)

  it("refuses arguments of the wrong kind, naming the function and the argument", function()
    local checks = recorder()
    local cases = {
      { checks.tables, { checks, "label", 1.0, 1.0, 0, 0 },
        "bad argument #2 to 'checks:tables' (table of numbers expected, got number)" },
      { checks.tables, { checks, "label", { 1 }, "1" },
        "bad argument #3 to 'checks:tables' (table of numbers or number expected, got string)" },
      { checks.tables, { checks, 7, { 1 }, { 1 } }, "bad argument #1 to 'checks:tables' (label string expected, got number)" },
      { checks.tables, { checks, "l", { 1, "x" }, { 1, 2 } },
        "bad argument #2 to 'checks:tables' (element 2 is string, not a number)" },
      { checks.tables, { checks, "l", { 1, 2 }, { 1, {} } },
        "bad argument #3 to 'checks:tables' (element 2 is table, not a number)" },
      { checks.tables, { checks, "l", { 1 }, { 1 }, -1 },
        "bad argument #4 to 'checks:tables' (non-negative rtol expected, got number)" },
      { checks.tables, { checks, "l", { 1 }, { 1 }, 0, "0" },
        "bad argument #5 to 'checks:tables' (non-negative atol expected, got string)" },
      { checks.buffers, { checks, "b", { 1 }, 1 }, "bad argument #2 to 'checks:buffers' (gpurun.Buffer expected, got table)" },
      { checks.buffers, { checks, "b", nil, 1 }, "bad argument #2 to 'checks:buffers' (gpurun.Buffer expected, got nil)" },
      { checks.number, { checks, "n", "1", 1 }, "bad argument #2 to 'checks:number' (number expected, got string)" },
      { checks.number, { checks, "n", 1, { 1 } }, "bad argument #3 to 'checks:number' (number expected, got table)" },
      { checks.condition, { checks, nil, true }, "bad argument #1 to 'checks:condition' (label string expected, got nil)" },
      { checks.condition, { checks, "c", false, 42 },
        "bad argument #3 to 'checks:condition' (detail string or nil expected, got number)" },
      { check.tables, { "l", 1, 1 }, "bad argument #2 to 'check.tables' (table of numbers expected, got number)" },
      { check.compare_tables, { 1, 1 }, "bad argument #1 to 'check.compare_tables' (table of numbers expected, got number)" },
      { check.compare_tables, { { 1 }, { true } },
        "bad argument #2 to 'check.compare_tables' (element 1 is boolean, not a number)" },
    }
    for _, case in ipairs(cases) do
      local message = error_of(case[1], table.unpack(case[2], 1, 6))
      assert(message:find(case[3], 1, true), ("expected %q, got %q"):format(case[3], message))
    end
    assert.are.equal(0, #checks.outcomes) -- a refused call records nothing
  end)

  it("points a refused call at the script's line", function()
    local checks = recorder()
    local line = debug.getinfo(1, "l").currentline + 1
    local ok, message = pcall(function() checks:tables("label", 1.0, 1.0, 0, 0) end)
    assert.is_false(ok)
    assert.matches("check_spec%.lua:" .. line .. ": bad argument #2 to 'checks:tables'", message)
  end)
end)

describe("gpurun.check on host data", function()
  it("passes within rtol and atol, as numpy.allclose", function()
    assert.is_true((check.tables("t", { 1, 2, 3 }, { 1, 2, 3.00001 }, 1e-5, 1e-5)))
    assert.is_true((check.tables("t", { 1e6 + 5 }, { 1e6 }, 1e-5, 1e-5)))
    assert.is_false((check.tables("t", { 1e6 + 11 }, { 1e6 }, 1e-5, 1e-5)))
    assert.is_true((check.tables("t", { math.huge }, { math.huge }, 0, 0)))
  end)

  it("says how many elements failed, the worst difference and where", function()
    local ok, message = check.tables("graph replay", { 1, 2, 5, 4 }, { 1, 2, 3, 4.5 }, 1e-5, 1e-5)
    assert.is_false(ok)
    assert.are.equal("graph replay: 2 of 4 elements differ (rtol=1e-05, atol=1e-05); "
                     .. "worst |difference| 2 at index 3: got 5, expected 3", message)
  end)

  it("picks as worst the mismatch furthest past its tolerance", function()
    local summary = check.compare_tables({ 105, 1.5 }, { 100, 1 }, 0.1, 0)
    assert.are.equal(1, summary.mismatches)
    assert.are.equal(2, summary.worst_index) -- 5 is within 10% of 100, 0.5 is not within 0.1
    summary = check.compare_tables({ 120, 1.5 }, { 100, 1 }, 0.1, 0)
    assert.are.equal(2, summary.mismatches)
    assert.are.equal(1, summary.worst_index) -- 10 past its tolerance against 0.4
    summary = check.compare_tables({ 1, 2.00001, 3 }, { 1, 2, 3 }, 1e-5, 1e-5)
    assert.are.equal(0, summary.mismatches)
    assert.are.equal(2, summary.worst_index) -- all pass: the largest difference
  end)

  it("counts only NaN results, not NaN expectations", function()
    local summary = check.compare_tables({ 1, 0 / 0 }, { 0 / 0, 1 }, 0, 0)
    assert.are.equal(2, summary.mismatches)
    assert.are.equal(1, summary.nan)
  end)

  it("compares against one number", function()
    local summary = check.compare_tables({ 8, 8, 7.5 }, 8, 0, 0)
    assert.are.same({ count = 3, mismatches = 1, nan = 0, worst_index = 3, worst_actual = 7.5,
                      worst_expected = 8, worst_abs_diff = 0.5 }, summary)
  end)

  it("counts NaN as a failure and says so", function()
    local ok, message = check.tables("individual launches", { 0 / 0, 1 }, { 1, 1 }, 1e-5, 1e-5)
    assert.is_false(ok)
    assert.are.equal("individual launches: 1 of 2 elements differ (rtol=1e-05, atol=1e-05), "
                     .. "1 of them NaN; worst |difference| nan at index 1: got nan, expected 1",
                     message)
  end)

  it("fails on a length mismatch", function()
    assert.are.same({ false, "x: got 2 elements, expected 3" },
                    { check.tables("x", { 1, 2 }, { 1, 2, 3 }, 0, 0) })
  end)

  it("describes a device summary whose nan is a flag", function()
    local message = check.describe("r3", { count = 10, mismatches = 1, nan = true,
                                           worst_index = 4, worst_actual = 0 / 0,
                                           worst_expected = 2, worst_abs_diff = 0 / 0 }, 0, 0)
    assert.are.equal("r3: 1 of 10 elements differ (rtol=0, atol=0), some of them NaN; "
                     .. "worst |difference| nan at index 4: got nan, expected 2", message)
  end)

  it("collects checks and writes each failure", function()
    local lines = {}
    local checks = check.new("s.lua", function(text) lines[#lines + 1] = text end)
    assert.is_false(checks:passed(), "no check has run yet")
    assert.is_true(checks:tables("first", { 1 }, { 1 }, 0, 0))
    assert.is_true(checks:passed())
    assert.is_false(checks:tables("second", { 1 }, { 2 }, 0, 0))
    assert.is_false(checks:passed())
    assert.are.same({ first = true, second = false }, checks:results())
    assert.are.same({ "s.lua: check failed: second: 1 of 1 elements differ (rtol=0, atol=0); "
                      .. "worst |difference| 1 at index 1: got 1, expected 2\n" }, lines)
  end)
end)

describe("gpurun.check on device buffers", function()
  it("says the same as on host data, through gpurun.compare #gpu", function()
    gpurun.Device(0):set_current()
    local actual <close> = gpurun.array({ 1, 2, 5, 4 }, "float32")
    local expected <close> = gpurun.array({ 1, 2, 3, 4.5 }, "float32")
    assert.are.same({ check.tables("graph replay", { 1, 2, 5, 4 }, { 1, 2, 3, 4.5 }, 1e-5, 1e-5) },
                    { check.buffers("graph replay", actual, expected, 1e-5, 1e-5) })
    assert.are.same({ false, "r3: 3 of 4 elements differ (rtol=0, atol=0); "
                      .. "worst |difference| 2 at index 1: got 1, expected 3" },
                    { check.buffers("r3", expected, 3, 0, 0) })
    assert.are.same({ true }, { check.buffers("same", actual, actual, 0, 0) })
  end)
end)
