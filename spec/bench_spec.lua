-- gpurun.bench: the timed loop (warm-up, sync, time, sync), repeats and
-- their median, with stand-in streams and clocks: no GPU.
local gpurun = require("gpurun")
local bench = require("gpurun.bench")

describe("gpurun.bench", function()
  local function fake_stream()
    return { syncs = 0, sync = function(self) self.syncs = self.syncs + 1 end }
  end

  it("times iters calls of the step between two syncs", function()
    local stream = fake_stream()
    local calls, passed = 0, nil
    local seconds = bench.time(stream, function(s) calls = calls + 1; passed = s end, 10)
    assert.are.equal(10, calls)
    assert.are.equal(stream, passed)
    assert.are.equal(2, stream.syncs)
    assert.is_true(seconds >= 0)
  end)

  it("measures the time the steps take", function()
    local clock = gpurun.perf_counter
    local function step()
      local deadline = clock() + 0.002
      while clock() < deadline do end
    end
    local seconds = bench.time(fake_stream(), step, 3)
    assert.is_true(seconds >= 0.006, seconds)
    assert.is_true(seconds < 1, seconds)
  end)

  it("warms up, then times", function()
    local stream = fake_stream()
    local calls = 0
    local result = bench.run(stream, function() calls = calls + 1 end, { iters = 10 })
    assert.are.equal(15, calls) -- 5 warm-up calls by default
    assert.are.equal(4, stream.syncs)
    assert.are.equal(10, result.iters)
    assert.are.equal(result.seconds * 1e6 / 10, result.us_per_iter)
    assert.are.same({ result.seconds }, result.runs)
  end)

  it("reports the median of repeated runs", function()
    local calls = 0
    local result = bench.run(fake_stream(), function() calls = calls + 1 end,
                             { iters = 4, warmup = 0, repeats = 3 })
    assert.are.equal(12, calls)
    assert.are.equal(3, #result.runs)
    assert.are.equal(bench.median(result.runs), result.seconds)
    assert.are.equal(math.min(table.unpack(result.runs)), result.min_seconds)
  end)

  it("refuses bad counts", function()
    local step = function() end
    for _, options in ipairs{ { iters = 0 }, {}, { iters = 1.5 }, { iters = 1, warmup = -1 },
                              { iters = 1, repeats = 0 } } do
      assert.has_error(function() bench.run(fake_stream(), step, options) end)
    end
  end)

  it("takes medians without reordering the list", function()
    local values = { 3, 1, 2 }
    assert.are.equal(2, bench.median(values))
    assert.are.same({ 3, 1, 2 }, values)
    assert.are.equal(2.5, bench.median{ 4, 1, 3, 2 })
    assert.are.equal(7, bench.median{ 7 })
  end)
end)
