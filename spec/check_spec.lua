-- gpurun.check: the number and condition checks, the default tolerances,
-- and arguments of the wrong kind refused with a message of its own.
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
