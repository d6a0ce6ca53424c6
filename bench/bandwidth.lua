-- bench/bandwidth.lua: host <-> device copy bandwidth from gpurun, for each
-- way a script can hold host data, beside plain C (bench/bandwidth_c) on
-- the same machine in the same run; docs/benchmark.md says how it times,
-- docs/performance.md has the figures.
--
--   build/gpurun bench/bandwidth.lua [--sizes 1048576,67108864,1073741824]
--       [--reps 7] [--table-max 67108864] [--json] [--c-bench PATH]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")
local shell = require("gpurun.shell")

local PROGRAM = "bandwidth.lua"
local TABLE_REPS = 3

local function fail(message, code)
  io.stderr:write(PROGRAM, ": ", message, "\n")
  os.exit(code or 1)
end

local cli = args.new(PROGRAM, "Host <-> device copy bandwidth: gpurun's ways against C.")
bench.sizes_option(cli, "Comma-separated sizes in bytes (multiples of 4).", "1048576,67108864,1073741824", 4)
cli:integer_option("--reps", "Timed copies per size, way and direction.", 7)
cli:integer_option("--table-max", "The largest size timed with Lua tables, in bytes.", 67108864)
cli:flag("--json", "Print one JSON object with every figure instead of the table.")
cli.parser:option("--c-bench", "The C reference (default: bench/bandwidth_c next to gpurun).")

-- The C side: one process for every size, its JSON decoded.
local function run_c(c_bench, sizes, reps)
  local command = ("%s --sizes %s --reps %d --json"):format(shell.quote(c_bench), table.concat(sizes, ","), reps)
  local pipe = assert(io.popen(command, "r"))
  local output = pipe:read("a")
  local ok, how, code = pipe:close()
  if not ok then fail(("%s ended with %s %s (its message is above)"):format(command, how, code)) end
  local decoded, result = pcall(cjson.decode, output)
  if not decoded or type(result) ~= "table" or type(result.results) ~= "table" then
    fail(("%s printed no usable JSON: %q"):format(command, output))
  end
  local seconds = {} -- [bytes][memory][direction] = { seconds... }
  for _, entry in ipairs(result.results) do
    seconds[entry.bytes] = seconds[entry.bytes] or { pinned = {}, pageable = {} }
    seconds[entry.bytes][entry.memory][entry.direction] = entry.seconds
  end
  return seconds
end

local now = gpurun.perf_counter

-- Seconds of `reps` calls of copy() each followed by a stream sync, after one
-- untimed call, timed from the host (perf_counter; CLOCK_MONOTONIC in C).
local function time_reps(stream, reps, copy)
  copy()
  stream:sync()
  local seconds = {}
  for rep = 1, reps do
    local start = now()
    copy()
    stream:sync()
    seconds[rep] = now() - start
  end
  return seconds
end

-- gpurun's ways at one size, float32 data:
--   table     buf:copy_from(t) / buf:to_table()   Lua numbers, converted in C
--   string    buf:copy_from(s) / buf:to_bytes()   raw elements in pageable memory
--   pinned    buf:copy_from(p) / buf:copy_to(p)   a gpurun.PinnedBuffer, queued on a stream
-- (C pageable and C pinned, cuMemcpyHtoDAsync / cuMemcpyDtoHAsync from
-- malloc'ed and cuMemHostAlloc'ed memory, come from bandwidth_c.) Tables are
-- timed only up to --table-max bytes (a 1 GiB table holds 2^28 Lua numbers
-- and takes minutes), with at most TABLE_REPS reps.
local function measure_size(stream, bytes, options)
  local n = bytes // 4
  local buffer <close> = gpurun.full(n, 1.5, "float32")
  local figures = {}

  local pinned <close> = gpurun.pinned(n, "float32")
  pinned:fill(2.5)
  figures.pinned = {
    h2d = time_reps(stream, options.reps, function() buffer:copy_from(pinned, stream) end),
    d2h = time_reps(stream, options.reps, function() buffer:copy_to(pinned, stream) end),
  }

  local text = pinned:to_bytes()
  figures.string = {
    h2d = time_reps(stream, options.reps, function() buffer:copy_from(text, stream) end),
    d2h = time_reps(stream, options.reps, function() text = buffer:to_bytes(stream) end),
  }
  text = nil
  collectgarbage()

  if bytes <= options.table_max then
    local values = buffer:to_table(stream)
    local reps = math.min(options.reps, TABLE_REPS)
    figures.table = {
      h2d = time_reps(stream, reps, function() buffer:copy_from(values, stream) end),
      d2h = time_reps(stream, reps, function() values = buffer:to_table(stream) end),
    }
    values = nil
    collectgarbage()
  end
  return figures
end

local function gbps(bytes, seconds)
  return seconds and bytes / bench.median(seconds) / 1e9 or nil
end

local function size_text(bytes)
  if bytes >= 1 << 30 then return ("%.0f GiB"):format(bytes / (1 << 30)) end
  if bytes >= 1 << 20 then return ("%.0f MiB"):format(bytes / (1 << 20)) end
  if bytes >= 1 << 10 then return ("%.0f KiB"):format(bytes / (1 << 10)) end
  return bytes .. " B"
end

local ROWS = {
  { key = "table", label = "table" },
  { key = "string", label = "string (pageable)" },
  { key = "pinned", label = "gpurun pinned" },
  { key = "c_pageable", label = "C pageable" },
  { key = "c_pinned", label = "C pinned" },
}
local GOAL = 0.90

-- { bytes, rows = { { way, h2d, d2h } }, ratio = { h2d, d2h } } for one size:
-- each figure the median over the reps, in GB/s (10^9 bytes per second), and
-- the ratio gpurun pinned / C pinned, whose goal is GOAL (within 10%).
local function summarize(bytes, figures, c)
  local ways = {
    table = figures.table, string = figures.string, pinned = figures.pinned,
    c_pageable = c.pageable, c_pinned = c.pinned,
  }
  local rows = {}
  for _, row in ipairs(ROWS) do
    local way = ways[row.key]
    if way then
      rows[#rows + 1] = { way = row.key, label = row.label, h2d = gbps(bytes, way.h2d), d2h = gbps(bytes, way.d2h) }
    end
  end
  local pinned, reference = ways.pinned, ways.c_pinned
  return {
    bytes = bytes,
    rows = rows,
    ratio = { h2d = gbps(bytes, pinned.h2d) / gbps(bytes, reference.h2d),
              d2h = gbps(bytes, pinned.d2h) / gbps(bytes, reference.d2h) },
  }
end

local function print_table(title, results)
  print(title)
  print()
  print(("%10s  %-18s %10s %10s"):format("size", "memory", "H2D GB/s", "D2H GB/s"))
  for _, result in ipairs(results) do
    for _, row in ipairs(result.rows) do
      print(("%10s  %-18s %10.2f %10.2f"):format(size_text(result.bytes), row.label, row.h2d, row.d2h))
    end
    local h2d, d2h = result.ratio.h2d, result.ratio.d2h
    print(("%10s  gpurun pinned / C pinned: H2D %.3f, D2H %.3f (goal >= %.2f: %s)"):format("", h2d, d2h,
      GOAL, (h2d >= GOAL and d2h >= GOAL) and "ok" or "MISSED"))
  end
end

local options = cli:parse({ ... })
-- Only counted: the C side runs first, with no context of this process open.
local problem, code = args.device_problem(0, gpurun.device_count(), gpurun.driver_error())
if problem then
  fail(problem, code)
end
if not options.c_bench then
  local interpreter = shell.interpreter()
  if not interpreter then fail("cannot tell where the gpurun binary is: pass --c-bench PATH") end
  options.c_bench = shell.dirname(interpreter) .. "/bench/bandwidth_c"
end
if not shell.file_exists(options.c_bench) then
  fail(("no C reference at %s: build it with `cmake --build build --target bandwidth_c`, or pass "
    .. "--c-bench PATH"):format(options.c_bench))
end

local c = run_c(options.c_bench, options.sizes, options.reps)
local device = cli:open_device(0)
local stream <close> = device:create_stream()
local results = {}
for i, bytes in ipairs(options.sizes) do
  results[i] = summarize(bytes, measure_size(stream, bytes, options), c[bytes])
end

local driver_major, driver_minor = gpurun.driver_version()
if options.json then
  io.write(cjson.encode({
    device = device.name, driver = ("%d.%d"):format(driver_major, driver_minor), gpurun = gpurun.version,
    reps = options.reps, table_reps = TABLE_REPS, unit = "GB/s (1e9 bytes/s), median", sizes = results,
  }), "\n")
else
  print_table(("%s, CUDA driver %d.%d; median of %d reps (tables: %d) of one copy and a stream sync; "
    .. "GB/s = 10^9 bytes/s"):format(device.name, driver_major, driver_minor, options.reps,
      math.min(options.reps, TABLE_REPS)), results)
end
