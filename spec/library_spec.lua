-- The Lua library in lua/gpurun/ (argument handling, the timed loop, the
-- report, result checks on host data), and the scripts' command lines.
-- Nothing here needs a GPU.

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local check = require("gpurun.check")
local report = require("gpurun.report")
local cjson = require("cjson")
local process = require("spec.support.process")

-- Runs gpurun with `argv` -> stdout, stderr, exit code.
local function run_gpurun(argv)
  local words = {}
  for _, word in ipairs(argv) do
    words[#words + 1] = process.quote(word)
  end
  local result = process.gpurun(table.concat(words, " "))
  return result.stdout, result.stderr, result.code
end

-- The command line of scripts/cudagraphs.lua, built the same way.
local function cudagraphs_cli()
  local cli = args.new("cudagraphs.lua", "test")
  cli:integer_option("--elements", "Elements per vector.", 4096)
  cli:common_options{ iters = 1000 }
  return cli
end

describe("gpurun.args", function()
  it("reads positive integers and refuses everything else", function()
    assert.are.equal(4096, args.to_integer("4096"))
    assert.are.equal(7, args.to_integer("+7"))
    assert.are.equal(12, args.to_integer(" 12 "))
    assert.are.equal("integer", math.type(args.to_integer("1")))
    for _, bad in ipairs{ "0", "-3", "abc", "1.5", "1e3", "0x10", "", "12abc" } do
      local value, why = args.to_integer(bad)
      assert.is_nil(value, bad)
      assert.are.equal("expected a positive integer, got '" .. bad .. "'", why)
    end
    local value, why = args.to_integer("99999999999999999999")
    assert.is_nil(value)
    assert.matches("too large", why)
  end)

  it("reads non-negative integers for a minimum of 0", function()
    assert.are.equal(0, args.to_integer("0", 0))
    local value, why = args.to_integer("-1", 0)
    assert.is_nil(value)
    assert.are.equal("expected a non-negative integer, got '-1'", why)
  end)

  it("reads finite numbers", function()
    assert.are.equal(2.5, args.to_number("2.5"))
    assert.are.equal(-0.001, args.to_number("-1e-3"))
    for _, bad in ipairs{ "abc", "nan", "inf", "1e999", "" } do
      local value, why = args.to_number(bad)
      assert.is_nil(value, bad)
      assert.are.equal("expected a finite number, got '" .. bad .. "'", why)
    end
  end)

  it("gives the defaults with converted types", function()
    local ok, options = cudagraphs_cli():try_parse({})
    assert.is_true(ok)
    assert.are.same({ elements = 4096, iters = 1000, device = 0 },
                    { elements = options.elements, iters = options.iters, device = options.device })
    assert.are.equal("integer", math.type(options.elements))
    assert.is_falsy(options.json)
  end)

  it("reads the options it was given", function()
    local ok, options = cudagraphs_cli():try_parse{ "--elements", "1000", "--iters=20",
                                                    "--device", "1", "--json" }
    assert.is_true(ok)
    assert.are.equal(1000, options.elements)
    assert.are.equal(20, options.iters)
    assert.are.equal(1, options.device)
    assert.is_true(options.json)
  end)

  it("names the option and the value it refuses, on one line", function()
    local cases = {
      { { "--elements", "0" }, "--elements: expected a positive integer, got '0'" },
      { { "--elements", "-3" }, "--elements: expected a positive integer, got '-3'" },
      { { "--elements=-3" }, "--elements: expected a positive integer, got '-3'" },
      { { "--iters", "abc" }, "--iters: expected a positive integer, got 'abc'" },
      { { "--device", "-1" }, "--device: expected a non-negative integer, got '-1'" },
      { { "--elements" }, "option '--elements' requires an argument" },
    }
    for _, case in ipairs(cases) do
      local ok, message = cudagraphs_cli():try_parse(case[1])
      assert.is_false(ok, table.concat(case[1], " "))
      assert.are.equal(case[2], message)
    end
    local ok, message = cudagraphs_cli():try_parse{ "--elemnts", "5" }
    assert.is_false(ok)
    assert.matches("^unknown option '%-%-elemnts'", message)
    assert.is_nil(message:find("\n"), "one line")
  end)

  it("reads a negative number for a number option", function()
    local cli = args.new("t.lua", "test")
    cli:number_option("--alpha", "A coefficient.", 2.5)
    local ok, options = cli:try_parse{ "--alpha", "-0.5" }
    assert.is_true(ok)
    assert.are.equal(-0.5, options.alpha)
    ok, options = cli:try_parse{}
    assert.are.equal(2.5, options.alpha)
  end)

  it("says why a device cannot be used, with the exit code", function()
    assert.are.same({ "no CUDA GPU available: libcuda.so.1: cannot open", 1 },
                    { args.device_problem(0, 0, "libcuda.so.1: cannot open") })
    assert.are.same({ "no CUDA GPU available: no device", 1 },
                    { args.device_problem(0, 0, nil) })
    assert.are.same({ "error: --device 3: no such CUDA device (1 device visible)", 2 },
                    { args.device_problem(3, 1, nil) })
    assert.are.same({ "error: --device 2: no such CUDA device (2 devices visible)", 2 },
                    { args.device_problem(2, 2, nil) })
    assert.is_nil(args.device_problem(1, 2, nil))
  end)
end)

describe("a script's command line", function()
  local function assert_usage_error(argv, expected_line)
    local stdout, stderr, code = run_gpurun(argv)
    assert.are.equal(2, code, table.concat(argv, " ") .. ": " .. stderr)
    assert.are.equal("", stdout)
    if expected_line then
      assert.are.equal(expected_line .. "\n", stderr)
    else
      assert.matches("^[%w.]+: error: [^\n]+\n$", stderr)
    end
  end

  it("exits 2 with one line for --elements 0, launching nothing", function()
    assert_usage_error({ "scripts/cudagraphs.lua", "--elements", "0" },
                       "cudagraphs.lua: error: --elements: expected a positive integer, got '0'")
  end)

  it("exits 2 with one line for every bad value", function()
    for _, argv in ipairs{
      { "scripts/cudagraphs.lua", "--elements", "-5" },
      { "scripts/cudagraphs.lua", "--elements", "many" },
      { "scripts/cudagraphs.lua", "--iters", "0" },
      { "scripts/cudagraphs.lua", "--device", "first" },
      { "scripts/cudagraphs.lua", "--bogus" },
      { "scripts/stencil2d.lua", "--width", "0" },
      { "scripts/stencil2d.lua", "--alpha", "fast" },
      { "scripts/stencil2d.lua", "--height", "2000000" },
      { "scripts/stencil2d.lua", "--width", "100000", "--height", "100000" },
    } do
      assert_usage_error(argv)
    end
  end)

  it("prints --help and exits 0 without a GPU", function()
    local stdout, _, code = run_gpurun{ "scripts/cudagraphs.lua", "--help" }
    assert.are.equal(0, code)
    assert.matches("Usage: cudagraphs.lua", stdout, 1, true)
    for _, option in ipairs{ "--elements", "--iters", "--device", "--json" } do
      assert.matches(option, stdout, 1, true)
    end
  end)

  it("refuses a device that does not exist", function()
    local stdout, stderr, code = run_gpurun{ "scripts/cudagraphs.lua", "--device", "99" }
    assert.are.equal("", stdout)
    if gpurun.device_count() > 0 then
      assert.are.equal(2, code)
      assert.matches("^cudagraphs.lua: error: %-%-device 99: no such CUDA device", stderr)
    else
      assert.are.equal(1, code)
      assert.matches("^cudagraphs.lua: no CUDA GPU available: [^\n]+\n$", stderr)
    end
  end)
end)

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

describe("gpurun.report", function()
  local device = { name = "NVIDIA H200", compute_capability = { major = 9, minor = 0 } }
  local individual = { iters = 1000, seconds = 0.01182, us_per_iter = 11.82 }
  local graph = { iters = 1000, seconds = 0.00402, us_per_iter = 4.02 }

  local function passing_checks()
    local checks = check.new("t.lua", function() end)
    checks:tables("graph replay", { 8, 8 }, 8, 0, 0)
    return checks
  end

  -- The sample's run, through the report.
  local function write_sample(out, checks)
    out:device(device, 0)
    out:field("elements", 4096)
    out:field("iters", 1000)
    out:timing("individual", "\nIndividual launches: ", individual)
    out:say("\nBuilding CUDA graph...")
    out:timing("graph", "Graph replay:       ", graph)
    out:speedup("Graph speedup: ", individual, graph)
    out:say("\nGraph replay on updated data verified (same graph, new buffer contents)")
    out:say("\nDone")
    return out:finish(checks)
  end

  local function capture(json)
    local written = {}
    local out = report.new{ json = json, write = function(text) written[#written + 1] = text end }
    return out, written
  end

  it("writes the sample's text", function()
    local out, written = capture(false)
    assert.are.equal(0, write_sample(out, passing_checks()))
    assert.are.equal(table.concat({
      "Device: NVIDIA H200",
      "Compute Capability: 9.0",
      "",
      "Individual launches: 1000 iters in 0.0118s  (11.82 us/iter)",
      "",
      "Building CUDA graph...",
      "Graph replay:       1000 iters in 0.0040s  (4.02 us/iter)",
      "Graph speedup: 2.94x",
      "",
      "Graph replay on updated data verified (same graph, new buffer contents)",
      "",
      "Done",
      "",
    }, "\n"), table.concat(written))
  end)

  it("writes one JSON object of the same figures, and nothing else", function()
    local out, written = capture(true)
    assert.are.equal(0, write_sample(out, passing_checks()))
    assert.are.equal(1, #written)
    assert.matches("^{.*}\n$", written[1])
    local figures = cjson.decode(written[1])
    assert.are.equal("NVIDIA H200", figures.device)
    assert.are.equal(0, figures.device_id)
    assert.are.equal("9.0", figures.compute_capability)
    assert.are.equal(4096, figures.elements)
    assert.are.equal(1000, figures.iters)
    assert.are.same(individual, figures.individual)
    assert.are.same(graph, figures.graph)
    assert.is_true(math.abs(figures.speedup - 0.01182 / 0.00402) < 1e-12)
    assert.is_true(figures.checks_passed)
    assert.are.same({ ["graph replay"] = true }, figures.checks)
  end)

  it("ends with exit code 1 and checks_passed false when a check failed", function()
    local checks = check.new("t.lua", function() end)
    checks:tables("graph replay", { 8, 7 }, 8, 0, 0)
    local out, written = capture(true)
    assert.are.equal(1, out:finish(checks))
    local figures = cjson.decode(written[1])
    assert.is_false(figures.checks_passed)
    assert.are.same({ ["graph replay"] = false }, figures.checks)
  end)

  it("leaves out a speedup it cannot measure", function()
    local out, written = capture(false)
    out:speedup("Graph speedup: ", individual, { iters = 1000, seconds = 0, us_per_iter = 0 })
    assert.are.same({}, written)
    assert.is_nil(out.figures.speedup)
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

describe("gpurun.shell", function()
  local shell = require("gpurun.shell")

  it("quotes one /bin/sh word, whatever it holds", function()
    local tricky = "it's $HOME; `x` \"y\" \\ *"
    local pipe = io.popen("printf %s " .. shell.quote(tricky))
    assert.are.equal(tricky, pipe:read("a"))
    pipe:close()
  end)

  it("splits folders from paths and finds files", function()
    assert.are.equal("/a/b", shell.dirname("/a/b/c.lua"))
    assert.are.equal(".", shell.dirname("c.lua"))
    assert.is_true(shell.file_exists("spec/library_spec.lua"))
    assert.is_false(shell.file_exists("spec/no-such-file"))
  end)

  it("names the binary running the script", function()
    -- gpurun itself, or a stock Lua 5.4 that loaded gpurun.so (tools/dev.sh test-module)
    local expected = package.preload.gpurun and "/gpurun$" or "/lua[^/]*$"
    assert.matches(expected, shell.interpreter())
  end)
end)

