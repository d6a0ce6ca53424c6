-- reduce.lua: a map-reduce and a scan generated at run time, each one pass
-- over the data, into device buffers, captured into one graph.
--
--   gpurun scripts/reduce.lua [--elements N] [--iters N] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local report = require("gpurun.report")

local INPUTS = "float32 a, float32 b, float32 c"

local cli = args.new("reduce.lua",
  "Runs a fused map-reduce and a scan with select, launched and in one graph, checked against the host.")
cli:integer_option("--elements", "Elements per vector.", 1 << 20)
cli:common_options{ iters = 200 }
local options = cli:parse(arg)

--   fused map-reduce  sum(((a + b) * c - a)^2) as one kernel: an elementwise
--                     pipeline whose last stage is a reduction reads a, b and c
--                     once; the intermediates stay in registers
--   scan              the inclusive sum of the positions where r = (a + b) * c - a
--                     is negative (an elementwise flag, then gpurun.inclusive_scan),
--                     and gpurun.select of those r, counted on the device
--
-- Both run as launches and as one replayed graph, are checked against the
-- host, and are timed with the bytes each must move.
local function main()
  local device, out, checks = cli:open_run(options)
  local n = options.elements
  out:field("elements", n)
  out:field("iters", options.iters)
  out:say("Elements: " .. n)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)

  local rng <close> = gpurun.default_rng(1)
  local a <close> = rng:random(n, "float32")
  local b <close> = rng:random(n, "float32")
  local c <close> = rng:random(n, "float32")
  local squares <close> = gpurun.zeros(1, "float64")
  local negative <close> = gpurun.zeros(n, "int32")
  local running <close> = gpurun.zeros(n, "int64")
  local r <close> = gpurun.zeros(n, "float32")
  local picked <close> = gpurun.zeros(n, "float32")
  local count <close> = gpurun.zeros(1, "int64")

  local map_reduce = gpurun.elementwise_pipeline(INPUTS,
    { "float32 r3 = (a + b) * c - a", "sum float64 s = (double)r3 * r3" }, "s", "squares")
  local flags = gpurun.elementwise(INPUTS, "float32 r, int32 neg",
    "r = (a + b) * c - a; neg = r < 0.0f", "negative")
  local function fused(target)
    map_reduce(target, a, b, c, squares)
  end
  local function scan(target)
    flags(target, a, b, c, r, negative)
    gpurun.inclusive_scan(target, negative, running)
    gpurun.select(target, r, "x < 0.0f", picked, count)
  end

  -- The host's sum, in double precision; which r are negative is read from
  -- the device's own r (a value within rounding of 0 could flip sign).
  local at, bt, ct = a:to_table(), b:to_table(), c:to_table()
  local want_squares, want_picked = 0.0, {}
  for i = 1, n do
    local value = (at[i] + bt[i]) * ct[i] - at[i]
    want_squares = want_squares + value * value
  end
  at, bt, ct = nil, nil, nil -- luacheck: ignore 311 (lets the collector have the host copies)
  fused(stream) -- compiles it, and makes its temporaries, outside any capture
  scan(stream)
  for _, value in ipairs(r:to_table()) do
    if value < 0 then want_picked[#want_picked + 1] = value end
  end

  local function check(label)
    stream:sync()
    checks:number(label .. ": sum of squares", squares:get(1), want_squares, 1e-5, 1e-6)
    checks:number(label .. ": count", count:get(1), #want_picked, 0, 0)
    checks:number(label .. ": scan's last", running:get(n), #want_picked, 0, 0)
    local got = #want_picked > 0 and picked:to_table(1, #want_picked) or {}
    checks:tables(label .. ": selected", got, want_picked, 0, 0)
  end

  -- bytes each must move: a, b, c read; select reads r and writes what it keeps
  local ways = {
    { key = "fused", title = "fused map-reduce", step = fused, bytes = 12 * n },
    { key = "scan", title = "flags, scan, select", step = scan,
      bytes = 12 * n + 8 * n + 4 * n + 8 * n + 4 * n + 4 * #want_picked },
  }
  check("launched")
  local graph <close> = bench.capture(stream, function(builder)
    fused(builder)
    scan(builder)
  end)
  squares:fill(0.0)
  count:fill(0)
  graph:launch(stream)
  check("graph")

  out:say("")
  out:say("  " .. map_reduce:describe())
  for _, way in ipairs(ways) do
    local result = bench.run(stream, way.step, { iters = options.iters, warmup = 2 })
    local gb_per_s = way.bytes / (result.seconds / result.iters) / 1e9
    out:field(way.key, { us_per_iter = result.us_per_iter, seconds = result.seconds,
                         iters = result.iters, gb_per_s = gb_per_s })
    out:say(("%-22s%s  %6.0f GB/s"):format(way.title .. ":", report.timing_line("", result), gb_per_s))
  end
  local replay = bench.run(stream, function(s) graph:launch(s) end, { iters = options.iters, warmup = 2 })
  out:timing("graph", "both, one graph:      ", replay)
  out:field("sum_of_squares", squares:get(1))
  out:field("negative", count:get(1))
  out:say(("sum of squares %.6f, %d of %d negative"):format(squares:get(1), count:get(1), n))
  gpurun.set_current_stream(nil)
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
