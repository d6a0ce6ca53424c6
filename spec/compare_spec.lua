-- gpurun.compare and gpurun.allclose on Lua sequences: numpy's isclose, the
-- one copy of the rule that gpurun.check uses too (no GPU needed). Buffers
-- are compared in the buffer and check specs (#gpu).
local gpurun = require("gpurun")
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
