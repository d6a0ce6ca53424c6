-- bench/alloc_compare.lua: what buffer allocation and free cost the host in
-- gpurun, and temporaries made in a pipeline step, in one table of medians
-- beside plain C (bench/alloc_compare_c), Python's GPU libraries
-- (bench/alloc_compare.py) and the step in CUDA C++ (bench/alloc_step).
-- bench/alloc_compare.sh runs every side; docs/memory.md has the figures.
--
--   build/gpurun bench/alloc_compare.lua [--sizes 4096,1048576,268435456]
--       [--pairs 1000] [--reps 11] [--iters 2000] [--large-step-mib 256] [--c-json FILE]
--       [--python-json FILE] [--step-c-json FILE] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local cjson = require("cjson")

local MiB = 1 << 20
local ALPHA, BETA, EXPECTED = 2.0, 1.0, 2.5 -- r = (2a + 1) * 0.5 + a, a = 1: exact
local NO_SYNC_BUFFERS = 10000

local cli = args.new("bench/alloc_compare.lua",
  "Buffer allocation and free in gpurun, C, cuda.core, CuPy and PyTorch; temporaries in a pipeline step.")
bench.sizes_option(cli, "Comma-separated byte sizes.", "4096,1048576,268435456")
cli:integer_option("--pairs", "Alloc+free pairs per repetition.", 1000)
cli:integer_option("--reps", "Repetitions (the median is reported).", 11)
cli:integer_option("--iters", "Pipeline steps per timed repetition.", 2000)
cli:integer_option("--large-step-mib", "Each temporary of the large pipeline step, in MiB (0: no large step).",
                   256, 0)
cli.parser:option("--c-json", "bench/alloc_compare_c --json output to put in the table.")
cli.parser:option("--python-json", "bench/alloc_compare.py --json output to put in the table.")
cli.parser:option("--step-c-json", "bench/alloc_step output (the step in plain CUDA C++) to put in the table.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local sizes = options.sizes

local function pairs_for(bytes)
  if bytes >= 64 * MiB then return math.max(options.pairs // 10, 10) end
  return options.pairs
end

local function read_json(path, what)
  if not path then return nil end
  local file, why = io.open(path, "rb")
  if not file then return { missing = ("no %s output: %s"):format(what, why) } end
  local text = file:read("a")
  file:close()
  local ok, decoded = pcall(cjson.decode, text)
  if not ok then return { missing = ("%s output is not JSON: %s"):format(what, text:sub(1, 200)) } end
  return decoded
end

-- ---- alloc+free pairs ------------------------------------------------------

-- CPU microseconds per alloc+free pair of `bytes`: the median over --reps
-- repetitions of --pairs pairs (a tenth of them, at least 10, from 64 MiB
-- on), after one pair of warm-up, on one stream synchronized after each
-- timed loop, outside it.
local function time_pairs(stream, pair, bytes)
  local count = pairs_for(bytes)
  pair(bytes)
  stream:sync()
  collectgarbage("collect")
  local runs, clock = {}, gpurun.perf_counter
  for rep = 1, options.reps do
    local start = clock()
    for _ = 1, count do pair(bytes) end
    runs[rep] = (clock() - start) * 1e6 / count
    stream:sync()
  end
  return { us_per_pair = bench.median(runs), min_us = math.min(table.unpack(runs)), pairs = count }
end

-- The pairs per size, on each path:
--   gpurun cuMemAlloc      gpurun.empty(n, "uint8") and close (the constructors' default)
--   gpurun default pool    gpurun.empty(n, "uint8", { stream = s }) and close
--   gpurun own pool        the same with { pool = gpurun.MemoryPool(), stream = s }
local function gpurun_pairs(stream)
  local pool <close> = gpurun.MemoryPool()
  local default_on = { stream = stream }
  local own_on = { pool = pool, stream = stream }
  local paths = {
    { "gpurun cuMemAlloc", function(bytes) gpurun.empty(bytes, "uint8"):close() end },
    { "gpurun default pool", function(bytes) gpurun.empty(bytes, "uint8", default_on):close() end },
    { "gpurun own pool", function(bytes) gpurun.empty(bytes, "uint8", own_on):close() end },
  }
  local results = {}
  for _, path in ipairs(paths) do
    local figures = {}
    for _, bytes in ipairs(sizes) do figures[tostring(bytes)] = time_pairs(stream, path[2], bytes) end
    results[path[1]] = { sizes = figures }
  end
  return results
end

-- ---- the pipeline step -------------------------------------------------------

-- Scale, shift, scale, combine on float32 temporaries of `mib` MiB (2^18
-- elements at 1 MiB), each temporary read by the kernel after the one that
-- writes it, the two never alive together; per step, launched one by one
-- and replayed as a graph, `iters` steps per repetition:
--   up front               the temporaries made once, before the loop
--   in the step            made and freed in the step: from the default pool
--                          when launched, allocation and free nodes when replayed
-- with the memory the temporaries held at their peak: their bytes up front,
-- the pool's used_high when launched, the graphs' used_high when replayed.
-- The graphs' memory comes in the driver's granules, 32 MiB on an H200,
-- which a 1 MiB step cannot show to be shared; the large step
-- (--large-step-mib, a hundredth of the steps, at least 20) can.
local function pipeline_step(device, stream, mib, iters)
  local elements = mib * MiB // 4 -- float32 elements of one temporary
  local code <close> = gpurun.Program(require("gpurun.samples.kernels").source("dag"), "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local scale <close> = code:get_kernel("scale")
  local shift <close> = code:get_kernel("shift")
  local combine <close> = code:get_kernel("combine")
  local config = gpurun.LaunchConfig{ grid = (elements + 255) // 256, block = 256 }
  local n = gpurun.u64(elements)
  local alpha, beta, half = gpurun.f32(ALPHA), gpurun.f32(BETA), gpurun.f32(0.5)
  local a <close> = gpurun.full(elements, 1.0, "float32")
  local r <close> = gpurun.zeros(elements, "float32")
  local launch = gpurun.launch

  -- The step, with temporaries from make(target) (closed by the step when
  -- it made them) or given.
  local function step(target, t1, t2, make)
    t1 = t1 or make(target)
    launch(target, config, scale, a, t1, alpha, n)
    launch(target, config, shift, t1, r, beta, n)
    if make then t1:close() end
    t2 = t2 or make(target)
    launch(target, config, scale, r, t2, half, n)
    launch(target, config, combine, t2, a, r, n)
    if make then t2:close() end
  end
  local function check(what)
    stream:sync()
    local summary = gpurun.compare(r, EXPECTED, 0, 0)
    if summary.mismatches > 0 then
      error(("%s: %d of %d elements are not %g"):format(what, summary.mismatches, summary.count,
            EXPECTED), 0)
    end
    r:fill(0, stream)
  end
  local function timed(body)
    local result = bench.run(stream, body, { iters = iters, repeats = options.reps })
    return result.us_per_iter
  end

  local rows = {}
  do -- up front
    local t1 <close> = gpurun.empty(elements, "float32")
    local t2 <close> = gpurun.empty(elements, "float32")
    local launched = timed(function(s) step(s, t1, t2) end)
    check("up front, launched")
    local graph <close> = bench.capture(stream, function(builder) step(builder, t1, t2) end)
    local replayed = timed(function(s) graph:launch(s) end)
    check("up front, replayed")
    rows.up_front = { launched_us = launched, replayed_us = replayed,
                      launched_peak = 2 * mib * MiB,
                      replayed_peak = 2 * mib * MiB + bench.graph_peak(device, graph, stream) }
  end
  do -- in the step
    local pool = device:memory_pool()
    local on = { stream = stream }
    local function make_on_stream() return gpurun.empty(elements, "float32", on) end
    stream:sync()
    pool:reset_peaks()
    local launched = timed(function(s) step(s, nil, nil, make_on_stream) end)
    stream:sync()
    local launched_peak = pool.used_high
    check("in the step, launched")
    local function make_on_builder(builder) return gpurun.empty(elements, "float32", { stream = builder }) end
    local graph <close> = bench.capture(stream, function(builder) step(builder, nil, nil, make_on_builder) end)
    local replayed = timed(function(s) graph:launch(s) end)
    check("in the step, replayed")
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[node.kind] = (kinds[node.kind] or 0) + 1 end
    rows.in_step = { launched_us = launched, replayed_us = replayed, launched_peak = launched_peak,
                     replayed_peak = bench.graph_peak(device, graph, stream),
                     alloc_nodes = kinds.mem_alloc or 0, free_nodes = kinds.mem_free or 0 }
  end
  rows.temporary_mib = mib
  return rows
end

-- ---- 10,000 buffers while another stream stays busy ------------------------------

-- 10,000 buffers of 1 MiB made and freed from a pool while a busy kernel
-- runs on another stream: the loop must not wait for the device.
local function no_sync(device, stream)
  local busy_code <close> = gpurun.Program(require("gpurun.samples.kernels").source("busy"), "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local busy <close> = busy_code:get_kernel("busy")
  local other <close> = device:create_stream()
  local pool <close> = gpurun.MemoryPool()
  local on = { pool = pool, stream = stream }
  gpurun.empty(MiB, "uint8", on):close()
  stream:sync()
  -- About a second of one SM's clock (CU_DEVICE_ATTRIBUTE_CLOCK_RATE, kHz).
  local cycles = gpurun.i64(device:get_attribute(13) * 1000)
  local clock = gpurun.perf_counter
  local started = clock()
  gpurun.launch(other, gpurun.LaunchConfig{ grid = 1, block = 1 }, busy, cycles)
  local loop_start = clock()
  for _ = 1, NO_SYNC_BUFFERS do gpurun.empty(MiB, "uint8", on):close() end
  local loop_seconds = clock() - loop_start
  local still_busy = not other:query()
  other:sync()
  local kernel_seconds = clock() - started
  stream:sync()
  return { buffers = NO_SYNC_BUFFERS, loop_ms = loop_seconds * 1e3, kernel_ms = kernel_seconds * 1e3,
           busy_stream_still_running = still_busy }
end

-- ---- the table ----------------------------------------------------------------------

local function size_text(bytes)
  if bytes >= MiB then return ("%d MiB"):format(bytes // MiB) end
  if bytes >= 1024 then return ("%d KiB"):format(bytes // 1024) end
  return bytes .. " B"
end

local ROWS = {
  { "cuMemAlloc + cuMemFree (C)", "c", "cuMemAlloc" },
  { "cuMemAllocFromPoolAsync + cuMemFreeAsync (C)", "c", "cuMemAllocAsync" },
  { "gpurun.empty + close (cuMemAlloc)", "gpurun", "gpurun cuMemAlloc" },
  { "gpurun, default pool ({ stream = s })", "gpurun", "gpurun default pool" },
  { "gpurun, own pool ({ pool = p, stream = s })", "gpurun", "gpurun own pool" },
  { "cuda.core DeviceMemoryResource", "python", "cuda.core DeviceMemoryResource" },
  { "cuda.core DeviceMemoryResource, own pool", "python", "cuda.core own pool" },
  { "CuPy MemoryPool", "python", "CuPy MemoryPool" },
  { "CuPy MemoryAsyncPool", "python", "CuPy MemoryAsyncPool" },
  { "PyTorch caching allocator", "python", "PyTorch caching allocator" },
}

-- The C side's per-rep figures as the others' medians.
local function c_results(c)
  if not c then return { missing = "not run (pass --c-json)" } end
  if c.missing then return c end
  local results = {}
  for _, entry in ipairs(c.results or {}) do
    results[entry.path] = results[entry.path] or { sizes = {} }
    results[entry.path].sizes[tostring(math.tointeger(entry.bytes))] =
      { us_per_pair = bench.median(entry.us_per_pair), pairs = entry.pairs }
  end
  return results
end

-- The C++ step's rows (bench/alloc_step): what the driver's memory nodes
-- cost a replay without gpurun, per size, beside the Lua step's.
local function print_step_c(step_c)
  print("\nthe same step in plain CUDA C++ (bench/alloc_step: cudaMallocAsync and cudaFreeAsync in the capture)")
  if not step_c or step_c.missing or not step_c.results then
    print("  missing (" .. tostring(step_c and step_c.missing or "not run (pass --step-c-json)") .. ")")
    return
  end
  print(("%-38s %14s %14s %14s %14s"):format("replayed us per step (median)", "up front", "in the graph",
                                             "difference", "ratio"))
  for _, entry in ipairs(step_c.results) do
    local up, inside = bench.median(entry.up_front_us), bench.median(entry.in_graph_us)
    print(("%-38s %14.2f %14.2f %14.2f %13.1f%%"):format(("two %d MiB temporaries"):format(
      math.tointeger(entry.mib) or entry.mib), up, inside, inside - up, 100 * inside / up))
  end
end

local function print_table(device, report)
  local header = ("%-48s"):format("alloc+free pair, CPU us (median)")
  for _, bytes in ipairs(sizes) do header = header .. ("%12s"):format(size_text(bytes)) end
  print(("%s; %d reps of %d pairs (a tenth from 64 MiB)"):format(device.name, options.reps, options.pairs))
  print(header)
  local sides = { c = report.c, gpurun = report.gpurun, python = report.python }
  for _, row in ipairs(ROWS) do
    local side = sides[row[2]]
    local result = side and (side.results or side)[row[3]]
    local line = ("%-48s"):format(row[1])
    if side == nil or side.missing or result == nil or result.missing then
      local why = side and (side.missing or (result and result.missing)) or "not run"
      line = line .. "  missing (" .. tostring(why or "not in its output") .. ")"
    else
      for _, bytes in ipairs(sizes) do
        local figures = result.sizes[tostring(bytes)]
        line = line .. (figures and ("%12.3f"):format(figures.us_per_pair) or ("%12s"):format("-"))
      end
    end
    print(line)
  end
  for _, step in ipairs({ report.pipeline, report.pipeline_large }) do
    print(("\n%-38s %14s %14s %14s %14s"):format(
      ("pipeline step, two %d MiB temporaries"):format(step.temporary_mib),
      "launched us", "replayed us", "peak launched", "peak replayed"))
    for _, row in ipairs({ { "made up front", step.up_front },
        { "made and freed in the step", step.in_step } }) do
      print(("%-38s %14.2f %14.2f %14s %14s"):format(row[1], row[2].launched_us, row[2].replayed_us,
        size_text(row[2].launched_peak), size_text(row[2].replayed_peak)))
    end
    print(("(the step's graph: %d allocation and %d free nodes; replayed: %.1f%% of the up-front graph's time)")
      :format(step.in_step.alloc_nodes, step.in_step.free_nodes,
              100 * step.in_step.replayed_us / step.up_front.replayed_us))
  end
  print_step_c(report.step_c)
  local n = report.no_sync
  print(("\n%d buffers of 1 MiB made and freed from a pool: the loop took %.1f ms while a busy kernel on "
    .. "another stream ran %.1f ms; that stream was %s after the loop")
    :format(n.buffers, n.loop_ms, n.kernel_ms, n.busy_stream_still_running and "still running"
      or "DONE (something waited for the device)"))
end

local device = cli:open_device(options.device)
local stream <close> = device:create_stream()
local report = {
  device = device.name,
  c = c_results(read_json(options.c_json, "bench/alloc_compare_c")),
  python = read_json(options.python_json, "bench/alloc_compare.py")
    or { missing = "not run (pass --python-json)" },
  step_c = read_json(options.step_c_json, "bench/alloc_step"),
  gpurun = { results = gpurun_pairs(stream) },
  pipeline = pipeline_step(device, stream, 1, options.iters),
  pipeline_large = options.large_step_mib > 0
    and pipeline_step(device, stream, options.large_step_mib, math.max(20, options.iters // 100)) or nil,
  no_sync = no_sync(device, stream),
}
if options.json then
  io.write(cjson.encode(report), "\n")
else
  print_table(device, report)
end
