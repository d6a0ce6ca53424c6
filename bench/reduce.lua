-- bench/reduce.lua: gpurun's generated reductions and scans at several
-- sizes, each captured into a graph and the graph launched, with the
-- device's copy and read bandwidth, for bench/reduce_compare.sh (which runs
-- CUB, CuPy and torch on the same machine next and prints one table);
-- docs/reductions.md has the figures.
--
--   build/gpurun bench/reduce.lua [--sizes 4096,65536,1048576,16777216,67108864]
--       [--reps 15] [--seconds 0.1] [--copy-mib 1024] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local cjson = require("cjson")

local A, B, C = 1.5, 2.25, 0.5           -- r3 = (a + b) * c - a = 0.375, exact in float32
local FUSED_EACH = 0.375 * 0.375

-- A kernel that reads every byte once and keeps the result only where no
-- element can make it: the read limit, for the reductions to be set against.
local READ_KERNEL = [[
extern "C" __global__ void __launch_bounds__(256) read_only(const float4 *x, unsigned long long vectors,
                                                            float *sink)
{
    float total = 0.0f;
    for (unsigned long long v = blockIdx.x * 256ull + threadIdx.x; v < vectors;
         v += (unsigned long long)gridDim.x * 256)
        total += x[v].x + x[v].y + x[v].z + x[v].w;
    if (total == -1.0f) // never: the values are positive
        *sink = total;
}
]]

local cli = args.new("bench/reduce.lua",
  "gpurun's sum, argmax, fused map-reduce and inclusive scan in graphs, and the copy and read bandwidth.")
bench.add_options(cli, { sizes = "4096,65536,1048576,16777216,67108864", reps = 15, seconds = 0.1 })
cli:integer_option("--copy-mib", "Size of the copy and the read that measure the bandwidth, in MiB.", 1024)
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local timing = { seconds = options.seconds, reps = options.reps }

-- NaN is never close.
local function expect(what, n, got, want, rtol)
  if math.abs(got - want) > rtol * math.abs(want) or got ~= got then
    error(("%s at %d elements: got %.9g, expected %.9g"):format(what, n, got, want), 0)
  end
end

-- The paths at n float32 elements, each timed by bench.measure (from a
-- stream sync to a stream sync after warm-up, the median over --reps
-- repetitions of enough iterations for about --seconds, from 10 to 5000)
-- and checked:
--   sum          gpurun.sum into one float32 (accumulating in float32)
--   sum_f64      the same accumulating in float64, into one float64
--   argmax       gpurun.argmax into one int64
--   fused        sum(((a + b) * c - a)^2): an elementwise pipeline ending in
--                a reduction stage, one kernel reading a, b and c once
--   scan         gpurun.inclusive_scan into float32 (decoupled look-back)
--   sum_launch   gpurun.sum called directly each iteration (no graph)
local function measure_size(stream, n, pipeline)
  local x <close> = gpurun.full(n, 1.0, "float32")
  x:set(math.max(1, n - 3), 2.0) -- argmax's answer
  local a <close> = gpurun.full(n, A, "float32")
  local b <close> = gpurun.full(n, B, "float32")
  local c <close> = gpurun.full(n, C, "float32")
  local y <close> = gpurun.empty(n, "float32")
  local s <close> = gpurun.zeros(1, "float32")
  local s64 <close> = gpurun.zeros(1, "float64")
  local at <close> = gpurun.zeros(1, "int64")
  local total = n + 1.0 -- the ones, and the 2
  local steps = {
    sum = function(target) gpurun.sum(target, x, s) end,
    sum_f64 = function(target) gpurun.sum(target, x, s64, { accumulate = "float64" }) end,
    argmax = function(target) gpurun.argmax(target, x, at) end,
    fused = function(target) pipeline(target, a, b, c, s) end,
    scan = function(target) gpurun.inclusive_scan(target, x, y) end,
  }
  local checks = {
    -- float32 partials past 2^24 round: a loose check, sum_f64's is exact
    sum = function() expect("sum", n, s:get(1), total, 1e-4) end,
    sum_f64 = function() expect("sum in float64", n, s64:get(1), total, 0) end,
    argmax = function() expect("argmax", n, at:get(1), math.max(1, n - 3), 0) end,
    fused = function() expect("fused", n, s:get(1), n * FUSED_EACH, 1e-4) end,
    scan = function()
      expect("scan", n, y:get(1), n > 4 and 1 or y:get(1), 0)
      expect("scan", n, y:get(n), total, 1e-5)
    end,
  }
  local figures = { elements = n }
  for _, key in ipairs{ "sum", "sum_f64", "argmax", "fused", "scan" } do
    steps[key](stream) -- compiles, makes the temporaries
    local graph <close> = bench.capture(stream, steps[key])
    figures[key] = bench.measure(stream, function(target) graph:launch(target) end, timing)
    stream:sync()
    checks[key]()
  end
  figures.sum_launch = bench.measure(stream, steps.sum, timing)
  checks.sum()
  figures.fused_kernel = pipeline.kernels[1]:variant(a, b, c, s).kernel
  return figures
end

-- The limits the paths are set against, on --copy-mib MiB:
--   copy         a device-to-device copy (read + write)
--   read         a kernel that only reads, with 16-byte loads
local function measure_copy(stream, device)
  local n = options.copy_mib * (1 << 20) // 4
  local source <close> = gpurun.full(n, 1.0, "float32")
  local target <close> = gpurun.empty(n, "float32")
  local copy = bench.measure(stream, function(s) source:copy_to(target, s) end, timing)
  local program <close> = gpurun.Program(READ_KERNEL, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local code <close> = program:compile("cubin")
  local kernel <close> = code:get_kernel("read_only")
  local config = gpurun.LaunchConfig{ grid = device.multiprocessor_count * 8, block = 256 }
  local vectors = gpurun.u64(n // 4)
  local read = bench.measure(stream, function(s) gpurun.launch(s, config, kernel, source, vectors, target) end,
                             timing)
  return {
    copy = { bytes = 8 * n, us = copy.us_per_iter, gb_per_s = 8 * n / (copy.us_per_iter * 1e-6) / 1e9 },
    read = { bytes = 4 * n, us = read.us_per_iter, gb_per_s = 4 * n / (read.us_per_iter * 1e-6) / 1e9 },
  }
end

-- Bytes each path must move per element.
local BYTES = { sum = 4, sum_f64 = 4, argmax = 4, fused = 12, scan = 8, sum_launch = 4 }
local PATHS = { "sum", "sum_f64", "argmax", "fused", "scan", "sum_launch" }

local function print_table(device, results, limits)
  print(("gpurun on %s: us/iter (GB/s), median of %d repetitions; graphs but sum_launch"):format(
        device.name, options.reps))
  local header = { ("%-12s"):format("path") }
  for _, figures in ipairs(results) do
    header[#header + 1] = ("%20d"):format(figures.elements)
  end
  print(table.concat(header))
  for _, path in ipairs(PATHS) do
    local row = { ("%-12s"):format(path) }
    for _, figures in ipairs(results) do
      local us = figures[path].us_per_iter
      row[#row + 1] = ("%12.2f (%5.0f)"):format(us, BYTES[path] * figures.elements / (us * 1e-6) / 1e9)
    end
    print(table.concat(row))
  end
  print(("copy: %.0f GB/s (read + write), read: %.0f GB/s, %d MiB"):format(limits.copy.gb_per_s,
        limits.read.gb_per_s, options.copy_mib))
end

local function main()
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)
  local pipeline = gpurun.elementwise_pipeline("float32 a, float32 b, float32 c",
    { "float32 r3 = (a + b) * c - a", "sum float32 s = r3 * r3" }, "s", "fused_sum")
  local results = {}
  for index, n in ipairs(options.sizes) do
    results[index] = measure_size(stream, n, pipeline)
  end
  local limits = measure_copy(stream, device)
  gpurun.set_current_stream(nil)
  if options.json then
    print(cjson.encode{ device = device.name, reps = options.reps, sizes = results, copy = limits.copy,
                        read = limits.read })
  else
    print_table(device, results, limits)
  end
  return 0
end

os.exit(main(), true)
