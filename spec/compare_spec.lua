-- gpurun.compare and gpurun.allclose: numpy's isclose on the device, and
-- the worst element of a mismatch.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local function assert_error(fragment, f, ...)
  assert_contains(fragment, error_of(f, ...))
end

describe("gpurun.compare and gpurun.allclose without a device", function()
  it("compare and allclose name a first argument that is neither a buffer nor a sequence", function()
    assert_error("bad argument #1 to 'gpurun.compare' (gpurun.Buffer or table of numbers expected, got number)", gpurun.compare, 1, 1)
    assert_error("bad argument #1 to 'gpurun.allclose' (gpurun.Buffer or table of numbers expected, got string)", gpurun.allclose, "1", 1)
    assert_error("bad argument #1 to 'gpurun.allclose' (gpurun.Buffer or table of numbers expected, got no value)", gpurun.allclose)
  end)
end)

describe("gpurun.compare and gpurun.allclose", function()
  before_each(function()
    gpurun.Device(0):set_current()
  end)

  it("follow numpy's isclose, NaN never close #gpu", function()
    local x = gpurun.array({ 1, 2, 3 }, "float64")
    assert.is_true(gpurun.allclose(x, gpurun.array({ 1, 2, 3 }, "float32")))
    assert.is_true(gpurun.allclose(x, gpurun.array({ 1, 2, 3.00002 }), 1e-5, 0))
    assert.is_false(gpurun.allclose(x, gpurun.array({ 1, 2, 3.0001 }), 1e-5, 0))
    assert.is_true(gpurun.allclose(gpurun.full(10, 2), 2))
    assert.is_false(gpurun.allclose(gpurun.full(10, 2), 2.001))
    assert.is_true(gpurun.allclose(gpurun.full(10, 2), 2.001, 0, 0.01))
    assert.is_true(gpurun.allclose(gpurun.array({ 1, 2 }, "int32"), gpurun.array({ 1, 2 }, "uint8"), 0, 0))
    -- infinities are close only to themselves
    assert.is_true(gpurun.allclose(gpurun.array({ math.huge, -math.huge }), gpurun.array({ math.huge, -math.huge })))
    assert.is_false(gpurun.allclose(gpurun.array({ math.huge }), gpurun.array({ -math.huge })))
    assert.is_false(gpurun.allclose(gpurun.array({ math.huge }), 1e30, 1, 1))

    local with_nan = gpurun.array({ 1, 0 / 0, 3 })
    assert.is_false(gpurun.allclose(with_nan, gpurun.array({ 1, 2, 3 })))
    local r = gpurun.compare(with_nan, gpurun.array({ 1, 2, 3 }))
    assert.are.equal(1, r.nan)
    assert.are.equal(1, r.mismatches)
    assert.are.equal(2, r.worst_index)
    local both = gpurun.compare(with_nan, gpurun.array({ 1, 0 / 0, 3 }))
    assert.are.equal(1, both.mismatches)
    assert.are.equal(0, both.nan)
    assert.is_false(gpurun.allclose(with_nan, 0 / 0, 1, 1))
  end)

  it("reports the element furthest past its tolerance #gpu", function()
    local r = gpurun.compare(gpurun.array({ 1, 2, 3, 4, 5 }), gpurun.array({ 1, 2.1, 3, 4.5, 5 }), 0, 0.01)
    assert.are.equal(5, r.count)
    assert.are.equal(2, r.mismatches)
    assert.are.equal(0, r.nan)
    assert.are.equal(4, r.worst_index)
    assert.are.equal(4, r.worst_actual)
    assert.are.equal(4.5, r.worst_expected)
    assert.are.equal(0.5, r.worst_abs_diff)
    assert.are.equal(0, r.rtol)
    assert.are.equal(0.01, r.atol)
    -- the largest excess, not the largest difference: 1000 vs 1001.5 is
    -- 0.4985 past its tolerance, 1 vs 1.8 is 0.7982 past
    local x = gpurun.array({ 1000, 1 }, "float64")
    local relative = gpurun.compare(x, gpurun.array({ 1001.5, 1.8 }, "float64"), 1e-3, 0)
    assert.are.equal(2, relative.mismatches)
    assert.are.equal(2, relative.worst_index)
    -- all passing: the largest difference
    local passing = gpurun.compare(gpurun.array({ 1, 2, 3 }, "float64"), gpurun.array({ 1, 2.00001, 3.000001 }, "float64"), 1e-5, 0)
    assert.are.equal(0, passing.mismatches)
    assert.are.equal(2, passing.worst_index)
    local exact = gpurun.compare(gpurun.full(4, 7, "int32"), 7)
    assert.are.equal(0, exact.mismatches)
    assert.are.equal(1, exact.worst_index)
    assert.are.equal(0, exact.worst_abs_diff)
  end)

  it("check their arguments #gpu", function()
    local x = gpurun.zeros(4)
    assert_error("bad argument #2 to 'gpurun.compare' (gpurun.Buffer of 4 elements expected, got 5)",
      gpurun.compare, x, gpurun.zeros(5))
    assert_error("bad argument #2 to 'gpurun.allclose' (gpurun.Buffer or number expected, got table)",
      gpurun.allclose, x, { 0, 0, 0, 0 })
    assert_error("bad argument #3 to 'gpurun.allclose' (non-negative relative tolerance expected)",
      gpurun.allclose, x, 0, -1)
    assert_error("bad argument #4 to 'gpurun.allclose' (non-negative absolute tolerance expected)",
      gpurun.allclose, x, 0, 0, 0 / 0)
  end)

  it("check 2^26 elements, finding a mismatch in the last chunk #gpu", function()
    local n = 1 << 26
    local a = gpurun.full(n, 1.5, "float32")
    local b = gpurun.full(n, 1.5, "float32")
    assert.is_true(gpurun.allclose(a, b))
    b:set(n - 5, 2)
    assert.is_false(gpurun.allclose(a, b))
    local r = gpurun.compare(a, b)
    assert.are.equal(n, r.count)
    assert.are.equal(1, r.mismatches)
    assert.are.equal(n - 5, r.worst_index)
    assert.are.equal(2, r.worst_expected)
    a:close()
    b:close()
  end)
end)

-- On Lua sequences: the same rule, the one copy that gpurun.check uses too
-- (no GPU needed).
local check = require("gpurun.check")

local NAN, INF = 0 / 0, math.huge

describe("gpurun.compare on Lua sequences", function()
  it("passes within atol + rtol * |expected|, as numpy.isclose", function()
    local summary = gpurun.compare({ 1, 2.00001, 3 }, { 1, 2, 3 }, 1e-5, 1e-5)
    assert.are.equal(3, summary.count)
    assert.are.equal(0, summary.mismatches)
    assert.are.equal(2, summary.worst_index) -- all pass: the largest difference
    assert.is_true(gpurun.allclose({ 100 }, { 105 }, 0.05, 0))
    assert.is_false(gpurun.allclose({ 100 }, { 106 }, 0.05, 0))
  end)

  it("names the mismatch furthest past its tolerance", function()
    local summary = gpurun.compare({ 105, 1.5, 7 }, { 100, 1, 7 }, 0.1, 0)
    assert.are.equal(1, summary.mismatches)
    assert.are.equal(2, summary.worst_index)
    assert.are.equal(1.5, summary.worst_actual)
    assert.are.equal(1, summary.worst_expected)
    assert.are.equal(0.5, summary.worst_abs_diff)
    assert.are.equal(0.1, summary.rtol)
    assert.are.equal(0, summary.atol)
  end)

  it("matches infinities only to themselves and NaN to nothing", function()
    assert.is_true(gpurun.allclose({ INF, -INF }, { INF, -INF }, 0, 0))
    assert.is_false(gpurun.allclose({ INF }, { -INF }))
    assert.is_false(gpurun.allclose({ NAN }, { NAN }))
    local summary = gpurun.compare({ 1, NAN, NAN }, { NAN, 1, NAN }, 0, 0)
    assert.are.equal(3, summary.mismatches)
    assert.are.equal(1, summary.nan) -- NaN results where the expected value is not
  end)

  it("compares against one number", function()
    local summary = gpurun.compare({ 8, 8, 7.5 }, 8, 0, 0)
    assert.are.equal(1, summary.mismatches)
    assert.are.equal(3, summary.worst_index)
  end)

  it("has no worst element for empty sequences", function()
    local summary = gpurun.compare({}, {}, 0, 0)
    assert.are.equal(0, summary.count)
    assert.is_nil(summary.worst_index)
    assert.is_true(gpurun.allclose({}, 1))
  end)

  it("gives gpurun.check's summaries", function()
    local actual, expected = { 1, 2.5, 9, INF }, { 1, 2, 3, INF }
    local from_check = check.compare_tables(actual, expected, 0.01, 0.1)
    local summary = gpurun.compare(actual, expected, 0.01, 0.1)
    summary.rtol, summary.atol = nil, nil
    for _, key in ipairs({ "count", "mismatches", "nan", "worst_index", "worst_actual",
                           "worst_expected", "worst_abs_diff" }) do
      assert.are.equal(summary[key], from_check[key], key)
    end
  end)

  it("refuses what is not a sequence of numbers of the right length", function()
    local function message(...)
      local ok, why = pcall(gpurun.compare, ...)
      assert.is_false(ok)
      return why
    end
    assert.matches("table of 2 numbers expected, got 1", message({ 1, 2 }, { 1 }), 1, true)
    assert.matches("element 2: number expected, got string", message({ 1, "2" }, 1), 1, true)
    assert.matches("gpurun.Buffer or table of numbers expected, got gpurun.ProgramOptions",
      message(gpurun.ProgramOptions{}, 1), 1, true)
    assert.matches("table of numbers or number expected, got string", message({ 1 }, "1"), 1, true)
  end)
end)
