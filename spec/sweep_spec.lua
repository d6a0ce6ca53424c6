-- gpurun.sweep and scripts/sweep.lua: sizes and ranges, the crossover, the
-- table, the JSON and CSV files, what happens on bad input, a failed
-- check, an error or Ctrl-C in the middle of a run. The sweep itself runs
-- here on stand-in pipelines (Lua functions that take a known time); the
-- scripts' real runs need a GPU.
local sweep = require("gpurun.sweep")
local plot = require("gpurun.plot")
local shell = require("gpurun.shell")
local cjson = require("cjson")
local process = require("spec.support.process")
local fixture = require("spec.support.sweep_fixture")
local q = process.quote

local files = require("spec.support.files")
local read, lines_of, temporary_folder = files.read, files.lines_of, files.temporary_folder

-- A cli whose usage errors raise instead of exiting.
local function raising_cli()
  return { usage_error = function(_, message) error("usage: " .. message, 0) end }
end

describe("gpurun.sweep's parts", function()
  it("are measuring and presenting, the entry keeping every public name", function()
    local parts = {
      sizes = require("gpurun.sweep.sizes"),
      measure = require("gpurun.sweep.measure"),
      present = require("gpurun.sweep.present"),
    }
    for _, name in ipairs({ "parse_size", "size_text", "sizes", "range_problem", "parse_range",
                            "format_bytes", "memory_problem" }) do
      assert.are.equal(parts.sizes[name], sweep[name], name)
    end
    for _, name in ipairs({ "THRESHOLD", "new_results", "record", "find_crossover" }) do
      assert.are.equal(parts.measure[name], sweep[name], name)
    end
    for _, name in ipairs({ "json_text", "csv_text", "table_header", "table_row", "summary" }) do
      assert.are.equal(parts.present[name], sweep[name], name)
    end
    -- Presenting needs nothing of measuring, and neither needs the entry.
    for _, path in ipairs({ "lua/gpurun/script/sweep/present.lua", "lua/gpurun/script/sweep/measure.lua",
                            "lua/gpurun/script/sweep/sizes.lua" }) do
      local text = read(path)
      assert.is_nil(text:find('require("gpurun.sweep")', 1, true), path)
      assert.is_nil(text:find('require("gpurun.script.sweep")', 1, true), path)
      if path:find("present") then assert.is_nil(text:find("sweep.measure", 1, true), path) end
    end
  end)
end)

describe("gpurun.sweep sizes", function()
  it("reads N and 2^K", function()
    assert.are.equal(4096, sweep.parse_size("4096"))
    assert.are.equal(4096, sweep.parse_size("2^12"))
    assert.are.equal(1, sweep.parse_size("2^0"))
    assert.are.equal(8, sweep.parse_size(" 2^3 "))
    assert.are.equal(1 << 40, sweep.parse_size("2^40"))
    for _, bad in ipairs{ "0", "-1", "abc", "1e3", "2^", "2^x", "3^4", "" } do
      local value, why = sweep.parse_size(bad)
      assert.is_nil(value, bad)
      assert.are.equal("expected a positive integer or 2^K, got '" .. bad .. "'", why)
    end
    assert.are.same({ nil, "expected a size up to 2^40, got '2^41'" }, { sweep.parse_size("2^41") })
  end)

  it("names powers of two as 2^K", function()
    assert.are.equal("2^10", sweep.size_text(1024))
    assert.are.equal("2^0", sweep.size_text(1))
    assert.are.equal("1000", sweep.size_text(1000))
  end)

  it("steps from --from to --to by a factor", function()
    local sizes = sweep.sizes(1 << 10, 1 << 26, 2)
    assert.are.equal(17, #sizes)
    assert.are.equal(1 << 10, sizes[1])
    assert.are.equal(1 << 26, sizes[17])
    assert.are.same({ 1024, 4096, 16384 }, sweep.sizes(1024, 20000, 4))
    assert.are.same({ 1000, 3000, 9000 }, sweep.sizes(1000, 10000, 3))
    assert.are.same({ 64 }, sweep.sizes(64, 64, 2))
    assert.are.same({ 1 << 40 }, sweep.sizes(1 << 40, 1 << 40, 2), "no overflow past the end")
  end)

  it("reads FROM:TO and refuses a range that runs backwards", function()
    assert.are.same({ 64, 4096 }, { sweep.parse_range("64:4096") })
    assert.are.same({ 64, 4096 }, { sweep.parse_range("2^6:2^12") })
    assert.are.same({ nil, "expected FROM:TO, got '64'" }, { sweep.parse_range("64") })
    assert.are.same({ nil, "FROM 2^7 is above TO 2^6" }, { sweep.parse_range("128:64") })
    assert.are.same({ nil, "expected a positive integer or 2^K, got 'x'" },
                    { sweep.parse_range("x:64") })
    assert.are.equal("--from 2^20 is above --to 2^10", sweep.range_problem(1 << 20, 1 << 10))
    assert.is_nil(sweep.range_problem(4, 4))
  end)

  it("says how much memory a size needs and how much there is", function()
    assert.are.equal("1.50 GiB", sweep.format_bytes(3 << 29))
    assert.are.equal("512 bytes", sweep.format_bytes(512))
    assert.are.equal("2.00 KiB", sweep.format_bytes(2048))
    local pipeline = { bytes_per_element = 24 }
    assert.is_nil(sweep.memory_problem(pipeline, 1 << 26, 2 << 30, 4 << 30))
    assert.are.equal("2^36 elements need 1.50 TiB (24 bytes per element); the device has "
                     .. "139.00 GiB free of 140.00 GiB",
                     sweep.memory_problem(pipeline, 1 << 36, 139 << 30, 140 << 30))
  end)

  it("names the driver from its version and the kernel module's", function()
    assert.are.equal("driver 580.159.03, CUDA 13.0", sweep.driver_text(13, 0,
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.03  Thu Oct  9 2025\n"))
    assert.are.equal("driver 580.95.05, CUDA 13.0", sweep.driver_text(13, 0,
      "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n"))
    assert.are.equal("CUDA 12.4 driver", sweep.driver_text(12, 4, nil))
  end)
end)

describe("gpurun.sweep settings", function()
  local cli = raising_cli()

  it("builds the sizes and keeps the files asked for", function()
    local settings = sweep.settings(cli, { from = 1024, to = 8192, step = 2, iters = 10,
                                           repeats = 3, json = "-" })
    assert.are.same({ 1024, 2048, 4096, 8192 }, settings.sizes)
    assert.is_true(settings.json_stdout)
    assert.is_nil(settings.json)
    assert.are.equal(3, settings.repeats)
    settings = sweep.settings(cli, { sizes = { 5, 7 }, iters = 1 })
    assert.are.same({ 5, 7 }, settings.sizes)
    assert.are.equal(sweep.DEFAULT_REPEATS, settings.repeats)
  end)

  it("refuses a backwards range and files that cannot be written, before measuring", function()
    local function refused(raw)
      local ok, message = pcall(sweep.settings, cli, raw)
      assert.is_false(ok)
      return message
    end
    assert.are.equal("usage: --from 2^12 is above --to 2^10",
                     refused{ from = 4096, to = 1024, iters = 1 })
    assert.are.equal("usage: --json: cannot write /nonexistent/x.json: No such file or directory",
                     refused{ sizes = { 1 }, iters = 1, json = "/nonexistent/x.json" })
    assert.are.equal("usage: --csv: cannot write /nonexistent/x.csv: No such file or directory",
                     refused{ sizes = { 1 }, iters = 1, csv = "/nonexistent/x.csv" })
    assert.are.equal("usage: --plot: cannot write /nonexistent/x.png: No such file or directory",
                     refused{ sizes = { 1 }, iters = 1, plot = "/nonexistent/x.png" })
    assert.are.equal("usage: --plot: expected a file name ending in .png or .svg, got 'x.pdf'",
                     refused{ sizes = { 1 }, iters = 1, plot = "x.pdf" })
  end)
end)

describe("gpurun.sweep results", function()
  local function results_with(speedups)
    local results = fixture()
    results.rows = {}
    for i, speedup in ipairs(speedups) do
      results.rows[i] = { elements = 1 << (9 + i), us_per_iter = { individual = 10 * speedup,
                          graph = 10 }, speedup = { graph = speedup }, checks = {} }
    end
    return results
  end

  it("finds the first size at which the graph falls under 1.05x after being above", function()
    assert.are.same({ elements = 1 << 12, speedup = 1.04 },
                    sweep.find_crossover(results_with{ 3, 1.2, 1.04, 1.01 }))
    assert.are.same({ elements = 1 << 11, speedup = 1.03 },
                    sweep.find_crossover(results_with{ 1.5, 1.03, 1.2, 1.01 }), "the first fall")
    assert.is_nil(sweep.find_crossover(results_with{ 3, 2, 1.5 }), "always ahead")
    assert.is_nil(sweep.find_crossover(results_with{ 1.01, 1.0, 0.99 }), "never ahead")
    assert.is_nil(sweep.find_crossover(results_with{}))
    assert.are.same({ elements = 1 << 11, speedup = 1.0499 },
                    sweep.find_crossover(results_with{ 1.05, 1.0499 }), "1.05 counts as ahead")
  end)

  it("says where the crossover is, or why there is none", function()
    local results = results_with{ 3, 1.2, 1.04 }
    results.crossover = sweep.find_crossover(results)
    assert.are.equal("Crossover: graph replay's advantage over individual launches falls below "
                     .. "5% at 2^12 (4096 elements): 1.04x", sweep.summary(results))
    results = results_with{ 3, 2 }
    results.crossover = nil
    assert.are.equal("No crossover: graph replay stays 5% or more ahead of individual launches "
                     .. "at every size", sweep.summary(results))
    results = results_with{ 1.01, 1.02 }
    results.crossover = nil
    assert.are.equal("No crossover: graph replay is never 5% ahead of individual launches "
                     .. "before it falls behind", sweep.summary(results))
  end)

  it("works out every path's speedup over the baseline as figures arrive", function()
    local results = fixture()
    results.paths[3] = { name = "fused", label = "one fused kernel" }
    local row = { elements = 1, us_per_iter = {}, speedup = {}, checks = {} }
    sweep.record(results, row, "graph", 4, true)
    assert.are.same({}, row.speedup, "no baseline yet")
    sweep.record(results, row, "individual", 12, true)
    sweep.record(results, row, "fused", 3, false)
    assert.are.same({ graph = 3, fused = 4 }, row.speedup)
    assert.are.same({ individual = true, graph = true, fused = false }, row.checks)
  end)

  it("writes CSV with a column per path and per speedup", function()
    assert.are.equal(table.concat({
      "elements,individual_us_per_iter,graph_us_per_iter,graph_speedup,checks_passed",
      "4096,13.6,4.06,3.34975,true",
      "1048576,13.2,11.9,1.10924,true",
      "16777216,185,182,1.01648,true",
      "67108864,701,,,true",
      "",
    }, "\n"), sweep.csv_text(fixture()))
  end)

  it("writes JSON with every figure and how the run ended", function()
    local figures = cjson.decode(sweep.json_text(fixture()))
    assert.are.equal("add -> mul -> sub", figures.pipeline)
    assert.are.equal("NVIDIA H200", figures.device)
    assert.are.same({ { name = "individual", label = "individual launches" },
                      { name = "graph", label = "graph replay" } }, figures.paths)
    assert.are.equal(4, #figures.rows)
    assert.are.same({ individual = 13.6, graph = 4.06 }, figures.rows[1].us_per_iter)
    assert.are.same({}, figures.rows[4].speedup)
    assert.are.equal(16777216, figures.crossover.elements)
    assert.is_false(figures.complete)
    assert.is_true(figures.interrupted)
    local results = fixture()
    results.crossover = nil
    assert.are.equal(cjson.null, cjson.decode(sweep.json_text(results)).crossover)
  end)

  it("prints aligned rows with the crossover and failed checks marked", function()
    local results = fixture()
    assert.are.equal("    elements  individual us    graph us  graph speedup",
                     sweep.table_header(results))
    assert.are.equal("        4096          13.60        4.06          3.35x",
                     sweep.table_row(results, results.rows[1]))
    assert.are.equal("    16777216         185.00      182.00          1.02x  <- crossover: "
                     .. "graph replay under 1.05x", sweep.table_row(results, results.rows[3]))
    assert.are.equal("    67108864         701.00           -              -",
                     sweep.table_row(results, results.rows[4]))
    results.rows[2].checks.graph = false
    assert.matches("  %(check failed: graph%)$", sweep.table_row(results, results.rows[2]))
  end)
end)

-- bench.time's clock, moved by the stand-in steps below: their timings
-- are exact, whatever else the machine is doing.
local bench = require("gpurun.bench")
local virtual_now = 0
local function virtual_clock()
  return virtual_now
end

-- A pipeline of Lua functions on a stream that does nothing: an individual
-- step takes 6 us + 1 ns per element, a graph step 1 us + 1.5 ns (on the
-- virtual clock), so the graph is ahead at 2^10 (2.76x) and behind from
-- 2^15 (0.77x). hooks: setup(size), check -> ok, message, step(path, size).
local function stand_in_pipeline(hooks)
  hooks = hooks or {}
  local function take(seconds)
    virtual_now = virtual_now + seconds
  end
  local function path(name, label, base_us, ns_per_element)
    return {
      name = name,
      label = label,
      prepare = function(size)
        local seconds = (base_us * 1e3 + size.elements * ns_per_element) * 1e-9
        return function()
          if hooks.step then hooks.step(name, size) end
          take(seconds)
        end
      end,
    }
  end
  return {
    name = "stand-in",
    bytes_per_element = 8,
    setup = function(size)
      size:own({ close = function() size.closed_objects = (size.closed_objects or 0) + 1 end })
      if hooks.setup then hooks.setup(size) end
    end,
    check = hooks.check or function() return true end,
    paths = { path("individual", "individual launches", 6, 1),
              path("graph", "graph replay", 1, 1.5) },
  }
end

-- A stand-in pipeline whose path `path_name` raises `message` at `elements`.
local function failing_pipeline(path_name, elements, message)
  return stand_in_pipeline{ step = function(name, size)
    if name == path_name and size.elements == elements then
      error(message, 0)
    end
  end }
end

-- Runs sweep.main in this process -> exit code, stdout, stderr.
local function run_main(pipeline, settings, context)
  local out, err = {}, {}
  context = context or {}
  context.name = context.name or "t.lua"
  context.stream = context.stream or { sync = function() end }
  context.device_name = context.device_name or "Stand-in GPU"
  context.driver = context.driver or "CUDA 0.0 driver"
  context.mem_info = context.mem_info or function() return 1 << 34, 1 << 35 end
  context.write = function(text) out[#out + 1] = text end
  context.write_error = function(text) err[#err + 1] = text end
  if context.progress == nil then
    context.progress = false
  end
  settings.iters = settings.iters or 20
  settings.repeats = settings.repeats or 2
  local code = sweep.main(pipeline, settings, context)
  return code, table.concat(out), table.concat(err)
end

describe("gpurun.sweep.main", function()
  local folder_of = files.folder_per_spec(before_each, after_each)
  local real_clock
  before_each(function()
    real_clock, bench.clock = bench.clock, virtual_clock
  end)
  after_each(function()
    bench.clock = real_clock
  end)

  it("prints a table as it goes and writes the files after every size", function()
    local folder = folder_of()
    local json, csv = folder .. "/s.json", folder .. "/s.csv"
    local rows_on_disk = {}
    local pipeline = stand_in_pipeline{ setup = function(size)
      local text = read(json)
      rows_on_disk[#rows_on_disk + 1] = text and #cjson.decode(text).rows or 0
      assert.are.equal(size.elements, ({ 1024, 32768, 65536 })[#rows_on_disk])
    end }
    local code, stdout, stderr = run_main(pipeline, { sizes = { 1024, 32768, 65536 },
                                                      json = json, csv = csv, iters = 200,
                                                      repeats = 3 })
    assert.are.equal(0, code, stderr)
    assert.are.equal("", stderr)
    assert.are.same({ 0, 1, 2 }, rows_on_disk, "the file grows a row at a time")
    local lines = lines_of(stdout)
    assert.are.equal("stand-in on Stand-in GPU (CUDA 0.0 driver), 200 iters, median of 3 "
                     .. "repeats, us per iteration", lines[1])
    assert.are.equal("    elements  individual us    graph us  graph speedup", lines[2])
    for i, elements in ipairs{ 1024, 32768, 65536 } do
      assert.matches(("^ +%d +[%%d.]+ +[%%d.]+ +[%%d.]+x"):format(elements), lines[2 + i])
    end
    assert.are.equal("", lines[6])
    assert.matches("^Crossover: graph replay's advantage over individual launches falls below "
                   .. "5%% at 2%^15 %(32768 elements%): 0%.77x$", lines[7])
    assert.matches("  <%- crossover: graph replay under 1%.05x$", lines[4])
    assert.are.equal(7, #lines)
    local figures = cjson.decode(read(json))
    assert.is_true(figures.complete)
    assert.is_false(figures.interrupted)
    assert.are.equal(3, #figures.rows)
    for _, row in ipairs(figures.rows) do
      assert.is_true(row.us_per_iter.graph > 0 and row.us_per_iter.individual > 0)
      assert.are.same({ individual = true, graph = true }, row.checks)
    end
    assert.is_true(math.abs(figures.rows[1].us_per_iter.individual - 7.024) < 1e-6)
    assert.is_true(math.abs(figures.rows[1].us_per_iter.graph - 2.536) < 1e-6)
    assert.are.equal(4, #lines_of(read(csv)))
  end)

  it("closes what each size owns when the size is done", function()
    local sizes = {}
    local pipeline = stand_in_pipeline{ setup = function(size) sizes[#sizes + 1] = size end }
    assert.are.equal(0, (run_main(pipeline, { sizes = { 8, 16 } })))
    assert.are.equal(1, sizes[1].closed_objects)
    assert.are.equal(1, sizes[2].closed_objects)
  end)

  it("writes only one JSON object to stdout with --json -", function()
    local code, stdout = run_main(stand_in_pipeline(), { sizes = { 8, 16 }, json_stdout = true })
    assert.are.equal(0, code)
    local figures = cjson.decode(stdout)
    assert.are.equal(2, #figures.rows)
    assert.are.equal(1, #lines_of(stdout))
  end)

  it("refuses sizes past the device's memory before measuring anything", function()
    local measured = false
    local pipeline = stand_in_pipeline{ setup = function() measured = true end }
    local code, stdout, stderr = run_main(pipeline, { sizes = { 1024, 1 << 30 } },
      { mem_info = function() return 1 << 32, 1 << 33 end })
    assert.are.equal(2, code)
    assert.are.equal("", stdout)
    assert.are.equal("t.lua: error: 2^30 elements need 8.00 GiB (8 bytes per element); the "
                     .. "device has 4.00 GiB free of 8.00 GiB\n", stderr)
    assert.is_false(measured)
  end)

  it("stops at a size that no longer fits, keeping what it measured", function()
    local folder = folder_of()
    local json = folder .. "/s.json"
    local calls = 0
    local code, _, stderr = run_main(stand_in_pipeline(), { sizes = { 1024, 2048 }, json = json },
      { mem_info = function()
        calls = calls + 1
        return calls <= 2 and 1 << 30 or 100, 1 << 30
      end })
    assert.are.equal(1, code)
    assert.are.equal("t.lua: 2^11 elements need 16.00 KiB (8 bytes per element); the device "
                     .. "has 100 bytes free of 1.00 GiB\n", stderr)
    local figures = cjson.decode(read(json))
    assert.are.equal(1, #figures.rows)
    assert.is_false(figures.complete)
    assert.is_false(figures.interrupted)
  end)

  it("reports a failed check, marks its row and exits 1", function()
    local pipeline = stand_in_pipeline{ check = function(size, path, label)
      if path.name == "graph" and size.elements == 16 then
        return false, label .. ": 3 of 16 elements differ"
      end
      return true
    end }
    local code, stdout, stderr = run_main(pipeline, { sizes = { 8, 16 } })
    assert.are.equal(1, code)
    assert.are.equal("t.lua: check failed: graph replay at 2^4 elements: 3 of 16 elements "
                     .. "differ\n", stderr)
    assert.matches("\n +16 [^\n]*  %(check failed: graph%)\n", stdout)
  end)

  it("keeps what it measured when a path raises, and says why in one line", function()
    local folder = folder_of()
    local json, csv = folder .. "/s.json", folder .. "/s.csv"
    local pipeline = failing_pipeline("graph", 32,
                                      "cuGraphLaunch: CUDA_ERROR_LAUNCH_FAILED (unspecified "
                                      .. "launch failure)")
    local code, stdout, stderr = run_main(pipeline, { sizes = { 16, 32, 64 }, json = json,
                                                      csv = csv })
    assert.are.equal(1, code)
    assert.are.equal("t.lua: cuGraphLaunch: CUDA_ERROR_LAUNCH_FAILED (unspecified launch "
                     .. "failure)\n", stderr)
    local figures = cjson.decode(read(json))
    assert.are.equal(2, #figures.rows, "the size that failed keeps its individual figure")
    assert.is_nil(figures.rows[2].us_per_iter.graph)
    assert.matches("\n +32 +[%d.]+ +%- +%-  %(size not finished%)\n", stdout)
    assert.are.equal(3, #lines_of(read(csv)))
  end)

  it("writes what it measured and returns 130 when interrupted", function()
    local folder = folder_of()
    local json, picture = folder .. "/s.json", folder .. "/s.svg"
    local pipeline = failing_pipeline("individual", 64, "interrupted!")
    local fake_gnuplot = folder .. "/gnuplot" -- draws an empty picture where gnuplot would
    assert(shell.write_file(fake_gnuplot, "#!/bin/sh\necho '<svg/>' > s.svg\n"))
    assert(os.execute("chmod +x " .. q(fake_gnuplot)))
    local code, _, stderr = run_main(pipeline, { sizes = { 16, 32, 64, 128 }, json = json,
                                                 plot = picture }, { gnuplot = fake_gnuplot })
    assert.are.equal(130, code)
    assert.matches("t.lua: interrupted after 2 of 4 sizes; wrote " .. folder .. "/s.json, "
                   .. folder .. "/s.svg\n$", stderr)
    local figures = cjson.decode(read(json))
    assert.is_true(figures.interrupted)
    assert.are.equal(2, #figures.rows)
    assert.is_truthy(read(folder .. "/s.dat"), "the plot's data is written too")
  end)

  it("keeps the data and names the package when gnuplot is missing", function()
    local folder = folder_of()
    local json, picture = folder .. "/s.json", folder .. "/s.png"
    local code, stdout, stderr = run_main(stand_in_pipeline(), { sizes = { 8 }, json = json,
      plot = picture }, { gnuplot = folder .. "/none" })
    assert.are.equal(1, code)
    assert.are.equal(("t.lua: gnuplot not found: wrote %s/s.dat and %s/s.gp; %s to draw %s\n")
                     :format(folder, folder, plot.INSTALL_HINT, picture), stderr)
    assert.is_truthy(read(json))
    assert.is_nil(stdout:find("Plot:", 1, true))
  end)

  local with_gnuplot = plot.find_gnuplot() and it or pending
  with_gnuplot("draws the picture at the end", function()
    local folder = folder_of()
    local picture = folder .. "/s.png"
    local code, stdout, stderr = run_main(stand_in_pipeline(), { sizes = { 8, 64, 512 },
                                                                 plot = picture })
    assert.are.equal(0, code, stderr)
    assert.matches("\nPlot: " .. picture:gsub("%p", "%%%0") .. "\n$", stdout)
    assert.are.equal("\137PNG", read(picture):sub(1, 4))
  end)

  it("runs iters / K steps of a path that does K iterations a step", function()
    local steps = 0
    local pipeline = stand_in_pipeline()
    pipeline.paths[2].iterations_per_step = 10
    local prepare = pipeline.paths[2].prepare
    pipeline.paths[2].prepare = function(size)
      local step = prepare(size)
      return function(stream) steps = steps + 1; step(stream) end
    end
    assert.are.equal(0, (run_main(pipeline, { sizes = { 8 }, iters = 100, repeats = 3 })))
    assert.are.equal(5 + 3 * 10, steps, "5 warm-up steps, then 10 steps a repeat")
  end)

  it("draws a progress line on stderr when asked, and clears it before each row", function()
    local code, stdout, stderr = run_main(stand_in_pipeline(), { sizes = { 8, 16 } },
                                          { progress = true })
    assert.are.equal(0, code)
    assert.matches("^\r\27%[Kt%.lua: 2%^3 individual  0/4 done  0:00 elapsed, estimating left",
                   stderr)
    assert.matches("\r\27%[K$", stderr, nil, "erased at the end")
    assert.is_nil(stdout:find("\r", 1, true), "the table has no progress in it")
  end)
end)

-- A script running a stand-in sweep that takes about 10 s, for Ctrl-C.
local INTERRUPTIBLE = [[
local sweep = require("gpurun.sweep")
local clock = require("gpurun").perf_counter
local json, marker = ...
local function spin(seconds) local t = clock() + seconds while clock() < t do end end
local function path(name)
  return { name = name, prepare = function(size)
    return function()
      if size.elements == 2 then
        local file = io.open(marker, "w") file:write("x") file:close()
      end
      spin(size.elements == 1 and 1e-6 or 1e-3)
    end
  end }
end
local pipeline = { name = "stand-in", bytes_per_element = 1, setup = function() end,
                   paths = { path("individual"), path("graph") } }
os.exit(sweep.main(pipeline, { sizes = { 1, 2 }, iters = 5000, repeats = 2, json = json },
                   { name = "t.lua", stream = { sync = function() end },
                     mem_info = function() return 1 << 30, 1 << 30 end }))
]]

describe("Ctrl-C during a sweep", function()
  it("writes what was measured and exits 130", function()
    local folder = temporary_folder()
    local script, json, marker = folder .. "/t.lua", folder .. "/s.json", folder .. "/marker"
    assert(shell.write_file(script, INTERRUPTIBLE))
    local command = ([[{
      %s %s %s %s & pid=$!
      tries=0
      while [ ! -s %s ] && [ $tries -lt 300 ] && kill -0 $pid 2>/dev/null; do
        sleep 0.1; tries=$((tries + 1))
      done
      kill -INT $pid
      wait $pid
    }]]):format(q(process.gpurun_bin()), q(script), q(json), q(marker), q(marker))
    local result = process.run(command)
    assert.are.equal(130, result.code, result.stderr)
    assert.matches("t%.lua: interrupted after 1 of 2 sizes; wrote [^\n]*s%.json\n$", result.stderr)
    local figures = cjson.decode(read(json))
    assert.is_true(figures.interrupted)
    assert.are.equal(1, #figures.rows)
    assert.is_truthy(figures.rows[1].us_per_iter.graph)
    files.remove_folder(folder)
  end)
end)

local function run_script(script, argv)
  local words = { q(script) }
  for _, word in ipairs(argv) do
    words[#words + 1] = q(word)
  end
  return process.gpurun(table.concat(words, " "))
end

describe("scripts/sweep.lua and stencil2d.lua --sweep on the command line", function()
  it("exits 2 with one line for bad input, before touching a GPU", function()
    for _, case in ipairs{
      { "scripts/sweep.lua", { "--from", "2^20", "--to", "2^10" },
        "sweep.lua: error: --from 2^20 is above --to 2^10" },
      { "scripts/sweep.lua", { "--from", "0" },
        "sweep.lua: error: --from: expected a positive integer or 2^K, got '0'" },
      { "scripts/sweep.lua", { "--to", "2^50" },
        "sweep.lua: error: --to: expected a size up to 2^40, got '2^50'" },
      { "scripts/sweep.lua", { "--step", "1" },
        "sweep.lua: error: --step: expected an integer >= 2, got '1'" },
      { "scripts/sweep.lua", { "--repeats", "0" },
        "sweep.lua: error: --repeats: expected a positive integer, got '0'" },
      { "scripts/sweep.lua", { "--plot", "sweep.jpg" },
        "sweep.lua: error: --plot: expected a file name ending in .png or .svg, got 'sweep.jpg'" },
      { "scripts/sweep.lua", { "--plot", "/nonexistent/sweep.png" },
        "sweep.lua: error: --plot: cannot write /nonexistent/sweep.png: No such file or directory" },
      { "scripts/sweep.lua", { "--json", "/nonexistent/sweep.json" },
        "sweep.lua: error: --json: cannot write /nonexistent/sweep.json: No such file or directory" },
      { "scripts/stencil2d.lua", { "--sweep", "64" },
        "stencil2d.lua: error: --sweep: expected FROM:TO, got '64'" },
      { "scripts/stencil2d.lua", { "--sweep", "128:64" },
        "stencil2d.lua: error: --sweep: FROM 2^7 is above TO 2^6" },
      { "scripts/stencil2d.lua", { "--sweep", "64:2^20" },
        "stencil2d.lua: error: --sweep: a 1048576 x 1048576 image is more than 2147483647 elements" },
      { "scripts/stencil2d.lua", { "--plot", "s.png" },
        "stencil2d.lua: error: --plot: draws a sweep; give --sweep FROM:TO too" },
    } do
      local result = run_script(case[1], case[2])
      assert.are.equal(2, result.code, table.concat(case[2], " ") .. ": " .. result.stderr)
      assert.are.equal("", result.stdout)
      assert.are.equal(case[3] .. "\n", result.stderr)
    end
  end)

  it("lists its options in --help", function()
    local result = run_script("scripts/sweep.lua", { "--help" })
    assert.are.equal(0, result.code)
    for _, option in ipairs{ "--from", "--to", "--step", "--iters", "--repeats", "--device",
                             "--json", "--csv", "--plot" } do
      assert.matches(option, result.stdout, 1, true)
    end
    assert.matches("(default: 2^10)", result.stdout, 1, true)
    assert.matches("(default: 2^26)", result.stdout, 1, true)
  end)
end)

describe("scripts/sweep.lua on a GPU", function()
  local folder_of = files.folder_per_spec(before_each, after_each)

  it("sweeps a small range and writes its JSON, CSV and picture #gpu", function()
    local folder = folder_of()
    local json, csv, picture = folder .. "/s.json", folder .. "/s.csv", folder .. "/s.png"
    local result = run_script("scripts/sweep.lua", { "--from", "2^10", "--to", "2^14",
      "--iters", "50", "--repeats", "2", "--json", json, "--csv", csv, "--plot", picture })
    local has_gnuplot = plot.find_gnuplot() ~= nil
    assert.are.equal(has_gnuplot and 0 or 1, result.code, result.stderr)
    local lines = lines_of(result.stdout)
    assert.matches("^add %-> mul %-> sub on %S.* %(.*CUDA %d+%.%d+.*%), 50 iters, median of 2 "
                   .. "repeats, us per iteration$", lines[1])
    assert.are.equal("    elements  individual us    graph us  graph speedup", lines[2])
    for i = 0, 4 do
      assert.matches(("^ +%d +[%%d.]+ +[%%d.]+ +[%%d.]+x"):format(1024 << i), lines[3 + i])
    end
    local figures = cjson.decode(read(json))
    assert.is_true(figures.complete)
    assert.are.equal(5, #figures.rows)
    for _, row in ipairs(figures.rows) do
      assert.are.same({ individual = true, graph = true }, row.checks)
      assert.is_true(row.us_per_iter.individual > 0 and row.us_per_iter.graph > 0)
    end
    assert.are.equal(6, #lines_of(read(csv)))
    if has_gnuplot then
      assert.are.equal("\137PNG", read(picture):sub(1, 4))
    end
  end)

  it("writes one JSON object to stdout with --json - #gpu", function()
    local result = run_script("scripts/sweep.lua", { "--from", "4096", "--to", "8192",
                                                     "--iters", "20", "--json", "-" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.same({ 4096, 8192 }, figures.sizes)
    assert.are.equal(2, #figures.rows)
  end)

  it("refuses sizes past the device's memory with the bytes needed #gpu", function()
    local result = run_script("scripts/sweep.lua", { "--from", "2^39", "--to", "2^40" })
    assert.are.equal(2, result.code)
    assert.matches("^sweep%.lua: error: 2%^40 elements need 24%.00 TiB %(24 bytes per element%); "
                   .. "the device has [%d.]+ GiB free of [%d.]+ GiB\n$", result.stderr)
  end)

  it("sweeps stencil2d's square images with --sweep #gpu", function()
    local result = run_script("scripts/stencil2d.lua", { "--sweep", "16:64", "--iters", "20",
                                                         "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal("saxpy -> 5-point stencil", figures.pipeline)
    assert.are.same({ 256, 1024, 4096 }, figures.sizes)
    for _, row in ipairs(figures.rows) do
      assert.are.same({ individual = true, graph = true }, row.checks)
    end
  end)
end)
