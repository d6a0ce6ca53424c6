-- gpurun.breakdown and `scripts/cudagraphs.lua --breakdown`: each stage's GPU
-- time and CPU enqueue time, and the launch overhead. The measuring passes
-- run here on a stand-in GPU whose kernels and launches take known times;
-- the script's specs need a GPU.
local breakdown = require("gpurun.breakdown")
local report = require("gpurun.report")
local cjson = require("cjson")
local process = require("spec.support.process")

-- A stream whose events read a GPU clock that advances by each stage's
-- kernel time, and a CPU clock that advances by each launch's enqueue time.
local function stand_in(kernel_s, enqueue_s)
  local gpu, cpu = { now = 0 }, { now = 0 }
  local Event = {}
  Event.__index = Event
  function Event:elapsed_ms(start) return (self.at - start.at) * 1e3 end
  function Event:close() self.closed = true end
  local stream = { syncs = 0, holds = {} }
  function stream.record(_, event)
    event = event or setmetatable({}, Event)
    event.at = gpu.now
    return event
  end
  function stream:sync() self.syncs = self.syncs + 1 end
  local stages = {}
  for i, seconds in ipairs(kernel_s) do
    stages[i] = { name = "k" .. i, run = function()
      cpu.now = cpu.now + enqueue_s[i]
      gpu.now = gpu.now + seconds
    end }
  end
  local options = {
    clock = function() return cpu.now end,
    hold = function(s, seconds) s.holds[#s.holds + 1] = seconds end,
  }
  return stream, stages, options
end

local function near(expected, actual, what)
  assert.is_true(math.abs(expected - actual) <= 1e-9 * math.max(1, math.abs(expected)),
                 ("%s: expected %.12g, got %.12g"):format(what, expected, actual))
end

describe("gpurun.breakdown", function()
  it("times each kernel on the GPU and each launch on the CPU", function()
    local stream, stages, options = stand_in({ 2e-6, 3e-6, 1e-6 }, { 4e-6, 5e-6, 6e-6 })
    options.iters = 100
    local result = breakdown.measure(stream, stages, options)
    assert.are.equal(128, result.iters, "whole batches of 32")
    assert.are.equal(32, result.batch)
    assert.are.same({ "k1", "k2", "k3" }, { result.stages[1].name, result.stages[2].name,
                                           result.stages[3].name })
    for i, expected in ipairs{ 2, 3, 1 } do
      near(expected, result.stages[i].gpu_us, "gpu_us of stage " .. i)
    end
    for i, expected in ipairs{ 4, 5, 6 } do
      near(expected, result.stages[i].enqueue_us, "enqueue_us of stage " .. i)
    end
    near(6, result.gpu_us_per_iter, "gpu_us_per_iter")
    assert.are.equal(4, #stream.holds, "one hold per GPU batch")
    assert.are.equal(8, stream.syncs, "a sync after every batch of both passes")
  end)

  it("holds longer and measures again when queueing a batch outran the hold", function()
    -- 32 x 100 us of launches: 3.2 ms, more than half of the first 2 ms hold
    local stream, stages, options = stand_in({ 1e-6 }, { 100e-6 })
    options.iters = 32
    local result = breakdown.measure(stream, stages, options)
    assert.are.equal(2, #stream.holds)
    near(0.002, stream.holds[1], "first hold")
    near(4 * 32 * 100e-6, stream.holds[2], "second hold")
    near(1, result.stages[1].gpu_us, "gpu_us")
  end)

  it("gives up with a message when no hold covers the launches", function()
    local stream, stages, options = stand_in({ 1e-6 }, { 1e-6 })
    local slower, now = 1e-3, 0
    stages[1].run = function()
      slower = slower * 1.5 -- every launch slower than the last, without end
      now = now + slower
    end
    options.clock = function() return now end
    options.iters = 1
    assert.has_error(function() breakdown.measure(stream, stages, options) end)
    local ok, message = pcall(breakdown.measure, stream, stages, options)
    assert.is_false(ok)
    assert.matches("^breakdown.measure: queueing 32 iterations took [%d.]+ s, more than a "
                   .. "[%d.]+ s hold could cover$", message)
  end)

  it("refuses bad stages and counts", function()
    local stream, stages, options = stand_in({ 1e-6 }, { 1e-6 })
    for _, bad in ipairs{ {}, "stages", { { name = "x" } }, { { run = print } } } do
      assert.has_error(function() breakdown.measure(stream, bad, options) end)
    end
    options.iters = 0
    assert.has_error(function() breakdown.measure(stream, stages, options) end)
    assert.has_error(function() breakdown.measure(stream, stages, { iters = 1 }) end,
                     "breakdown.measure: options.device (or options.hold) is required")
  end)

  it("takes the overhead as the wall time less the GPU's busy time", function()
    local overhead = breakdown.overhead({ gpu_us_per_iter = 4.5 }, { us_per_iter = 12 })
    assert.are.same({ wall_us_per_iter = 12, gpu_us_per_iter = 4.5, launch_overhead_us = 7.5,
                      overhead_fraction = 0.625 }, overhead)
  end)
end)

describe("gpurun.report's breakdown", function()
  local result = {
    iters = 1024,
    gpu_us_per_iter = 5.5,
    stages = {
      { name = "vec_add", gpu_us = 1.875, enqueue_us = 3.71 },
      { name = "vec_mul", gpu_us = 1.75, enqueue_us = 3.55 },
      { name = "vec_sub", gpu_us = 1.875, enqueue_us = 3.6 },
    },
  }
  local timing = { iters = 1000, seconds = 0.011, us_per_iter = 11 }

  it("prints a line a stage, then busy, wall and overhead per iteration", function()
    assert.are.same({
      "Where the time goes (individual launches; 1024 launches per stage, apart from the "
        .. "timed loop):",
      "  stage    GPU us/launch     CPU enqueue us",
      "  vec_add           1.88               3.71",
      "  vec_mul           1.75               3.55",
      "  vec_sub           1.88               3.60",
      "GPU busy per iteration:      5.50 us",
      "Wall time per iteration:    11.00 us",
      "Launch overhead:             5.50 us (50% of the wall time)",
    }, report.breakdown_lines(result, timing))
  end)

  it("puts the same figures under \"breakdown\" in JSON", function()
    local written = {}
    local out = report.new{ json = true, write = function(text) written[#written + 1] = text end }
    out:breakdown(result, timing)
    out:finish(require("gpurun.check").new("t.lua", function() end))
    local figures = cjson.decode(written[1])
    assert.are.same({
      launches_per_stage = 1024,
      stages = result.stages,
      gpu_us_per_iter = 5.5,
      wall_us_per_iter = 11,
      launch_overhead_us = 5.5,
      overhead_fraction = 0.5,
    }, figures.breakdown)
  end)
end)

local function run_cudagraphs(argv)
  local words = { "scripts/cudagraphs.lua" }
  for _, word in ipairs(argv) do
    words[#words + 1] = process.quote(word)
  end
  return process.gpurun(table.concat(words, " "))
end

describe("scripts/cudagraphs.lua --breakdown", function()
  it("lists --breakdown in its help", function()
    local result = run_cudagraphs{ "--help" }
    assert.are.equal(0, result.code)
    assert.matches("--breakdown", result.stdout, 1, true)
  end)

  it("prints where the time goes after the individual launches #gpu", function()
    local result = run_cudagraphs{ "--elements", "4096", "--iters", "200", "--breakdown" }
    assert.are.equal(0, result.code, result.stderr)
    local text = result.stdout
    assert.matches("\nIndividual launches: 200 iters in [%d.]+s  %([%d.]+ us/iter%)\n\n"
                   .. "Where the time goes %(individual launches; 224 launches per stage, "
                   .. "apart from the timed loop%):\n"
                   .. "  stage    GPU us/launch     CPU enqueue us\n"
                   .. "  vec_add +[%d.]+ +[%d.]+\n"
                   .. "  vec_mul +[%d.]+ +[%d.]+\n"
                   .. "  vec_sub +[%d.]+ +[%d.]+\n"
                   .. "GPU busy per iteration: +[%d.]+ us\n"
                   .. "Wall time per iteration: +[%d.]+ us\n"
                   .. "Launch overhead: +%-?[%d.]+ us %(%-?%d+%% of the wall time%)\n"
                   .. "\nBuilding CUDA graph%.%.%.\n", text)
    assert.matches("\nDone\n$", text)
  end)

  it("writes the breakdown into its JSON, consistent with the timing #gpu", function()
    local result = run_cudagraphs{ "--elements", "65536", "--iters", "100", "--breakdown",
                                   "--json" }
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    local b = figures.breakdown
    assert.are.equal(128, b.launches_per_stage)
    assert.are.equal(3, #b.stages)
    local busy = 0
    for i, name in ipairs{ "vec_add", "vec_mul", "vec_sub" } do
      assert.are.equal(name, b.stages[i].name)
      assert.is_true(b.stages[i].gpu_us > 0, name)
      assert.is_true(b.stages[i].enqueue_us > 0, name)
      busy = busy + b.stages[i].gpu_us
    end
    near(busy, b.gpu_us_per_iter, "busy time")
    near(figures.individual.us_per_iter, b.wall_us_per_iter, "wall time")
    near(b.wall_us_per_iter - b.gpu_us_per_iter, b.launch_overhead_us, "overhead")
    assert.is_true(figures.checks_passed)
  end)
end)
