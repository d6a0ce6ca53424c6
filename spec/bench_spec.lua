-- gpurun.bench: the timed loop (warm-up, sync, time, sync), repeats and
-- their median, bench.measure's iterations for a time, and the benches'
-- --sizes, --reps and --seconds, with stand-in streams and clocks: no GPU;
-- bench.event_ms on a GPU.
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

  -- A clock that each call of the step moves on by `step_seconds`.
  local function with_virtual_clock(step_seconds, body)
    local now = 0
    local saved = bench.clock
    bench.clock = function() return now end
    local ok, why = pcall(body, function() now = now + step_seconds end)
    bench.clock = saved
    assert(ok, why)
  end

  it("measures with as many calls as fill about the seconds asked for", function()
    with_virtual_clock(2 ^ -10, function(step)
      local calls = 0
      local result = bench.measure(fake_stream(), function() calls = calls + 1; step() end,
                                   { seconds = 2 ^ -5, reps = 3 })
      assert.are.same({ us_per_iter = 2 ^ -10 * 1e6, min_us = 2 ^ -10 * 1e6, iters = 32, reps = 3 }, result)
      assert.are.equal(5 + 10 + 3 * 32, calls) -- warm-up, probe, the timed loops
    end)
  end)

  it("keeps measure's iterations from 10 to 5000", function()
    with_virtual_clock(2 ^ -10, function(step)
      assert.are.equal(10, bench.measure(fake_stream(), step, { seconds = 0 }).iters)
      assert.are.equal(10, bench.measure(fake_stream(), step, { seconds = -1 }).iters)
      assert.are.equal(5000, bench.measure(fake_stream(), step, { seconds = 1e9 }).iters)
    end)
    with_virtual_clock(0, function(step) -- a step faster than the clock can tell
      local result = bench.measure(fake_stream(), step, { seconds = 2 ^ -5, reps = 1, warmup = 0 })
      assert.are.equal(5000, result.iters)
      assert.are.equal(0, result.us_per_iter)
    end)
  end)

  it("refuses measure's bad options, naming them", function()
    local step = function() end
    for _, case in ipairs{
      { nil, "options with seconds are required" },
      { {}, "options.seconds must be a finite number, got nil" },
      { { seconds = "0.1" }, "options.seconds must be a finite number, got '0.1'" },
      { { seconds = 0 / 0 }, "options.seconds must be a finite number" },
      { { seconds = math.huge }, "options.seconds must be a finite number, got inf" },
      { { seconds = 0.1, reps = 0 }, "options.reps must be a positive integer, got 0" },
      { { seconds = 0.1, reps = 1.5 }, "options.reps must be a positive integer, got 1.5" },
      { { seconds = 0.1, repeats = 3 }, "unknown option 'repeats'" },
    } do
      local ok, why = pcall(bench.measure, fake_stream(), step, case[1])
      assert.is_false(ok)
      assert.matches("bench.measure: " .. case[2], why, 1, true)
    end
  end)

  it("parses a list of sizes, every item a positive integer", function()
    assert.are.same({ 4096, 65536, 1 }, bench.parse_sizes("4096,65536, 1 "))
    assert.are.same({ 8, 1024 }, bench.parse_sizes("8,1024", 4))
    for _, case in ipairs{
      { "4096,0", "expected a positive integer, got '0'" },
      { "1e3", "expected a positive integer, got '1e3'" },
      { "0x10", "expected a positive integer, got '0x10'" },
      { "2.0", "expected a positive integer, got '2.0'" },
      { "-4", "expected a positive integer, got '-4'" },
      { "", "expected a positive integer, got ''" },
      { "4,,8", "expected a positive integer, got ''" },
      { "99999999999999999999", "expected a positive integer, got '99999999999999999999' (too large)" },
      { 4096, "expected comma-separated positive integers, got 4096" },
    } do
      local sizes, why = bench.parse_sizes(case[1])
      assert.is_nil(sizes)
      assert.are.equal(case[2], why)
    end
    assert.are.same({ nil, "expected a multiple of 4, got '6'" }, { bench.parse_sizes("8,6", 4) })
    assert.has_error(function() bench.parse_sizes("8", 0) end,
                     "bench.parse_sizes: the multiple must be a positive integer, got 0")
  end)

  it("times each of the runs between two events, waited for #gpu", function()
    local device = gpurun.Device(0)
    device:set_current()
    local stream <close> = device:create_stream()
    local program <close> = gpurun.Program(require("gpurun.samples.kernels").source("busy"), "c++",
                                           gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
    local code <close> = program:compile("cubin")
    local busy = code:get_kernel("busy")
    local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
    local calls, passed = 0, nil
    -- 4e6 cycles: at least 1.3 ms at any clock up to 3 GHz.
    local ms = bench.event_ms(stream, function(s)
      calls = calls + 1
      passed = s
      gpurun.launch(s, one, busy, gpurun.i64(4000000))
    end, 3)
    assert.are.equal(3, calls)
    assert.are.equal(stream, passed)
    assert.is_true(ms >= 1.3 and ms < 1000, ms)
  end)

  describe("options", function()
    local args = require("gpurun.args")

    it("adds --sizes, --reps and --seconds, their defaults shown in --help", function()
      local cli = args.new("b.lua", "")
      bench.add_options(cli, { sizes = "4096,65536", reps = 15, seconds = 0.1 })
      local ok, options = cli:try_parse({})
      assert.is_true(ok)
      assert.are.same({ 4096, 65536 }, options.sizes)
      assert.are.equal(15, options.reps)
      assert.are.equal(0.1, options.seconds)
      local _, help = cli:try_parse({ "--help" })
      assert.matches("--sizes <sizes>%s+Comma%-separated element counts%. %(default: 4096,65536%)", help)
      ok, options = cli:try_parse({ "--sizes", "8", "--reps", "3", "--seconds", "2" })
      assert.is_true(ok)
      assert.are.same({ 8 }, options.sizes)
      assert.are.equal(3, options.reps)
      assert.are.equal(2, options.seconds)
    end)

    it("refuses a bad value as a usage error naming its option", function()
      local cli = args.new("b.lua", "")
      bench.add_options(cli, { sizes = "4096", reps = 15, seconds = 0.1 })
      for _, case in ipairs{
        { { "--sizes", "4096,x" }, "--sizes: expected a positive integer, got 'x'" },
        { { "--sizes", "-8" }, "--sizes: expected a positive integer, got '-8'" },
        { { "--reps", "0" }, "--reps: expected a positive integer, got '0'" },
        { { "--seconds", "inf" }, "--seconds: expected a finite number, got 'inf'" },
      } do
        assert.are.same({ false, case[2] }, { cli:try_parse(case[1]) })
      end
    end)

    it("adds only the options given a default", function()
      local cli = args.new("b.lua", "")
      bench.add_options(cli, { sizes = "4096" })
      local ok, why = cli:try_parse({ "--reps", "3" })
      assert.is_false(ok)
      assert.matches("unknown option '%-%-reps'", why)
      assert.has_error(function() bench.add_options(args.new("c.lua", ""), { size = "1" }) end,
                       "bench.add_options: unknown option 'size' (known: sizes, reps, seconds)")
    end)

    it("takes --sizes of its own description and multiple", function()
      local cli = args.new("b.lua", "")
      bench.sizes_option(cli, "Comma-separated sizes in bytes (multiples of 4).", "1048576", 4)
      assert.are.same({ 1048576 }, select(2, cli:try_parse({})).sizes)
      assert.are.same({ false, "--sizes: expected a multiple of 4, got '6'" }, { cli:try_parse({ "--sizes", "6" }) })
      assert.matches("multiples of 4%)%. %(default: 1048576%)", select(2, cli:try_parse({ "-h" })))
      assert.has_error(function() bench.sizes_option(args.new("c.lua", ""), "", "4", 1.5) end,
                       "bench.sizes_option: the multiple must be a positive integer, got 1.5")
    end)
  end)
end)
