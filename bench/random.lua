-- bench/random.lua: gpurun.device_rng's float32 uniform and normal fills,
-- each called on a stream and captured into a graph, in GB/s of the bytes
-- they write, against a device-to-device copy and a memset of the same
-- buffer measured in the same run (docs/random.md; bench/random_compare.py
-- times torch and CuPy on the same sizes).
--
--   build/gpurun bench/random.lua [--sizes 1048576,16777216,67108864] [--reps 15]
--       [--seconds 0.1] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")

local cli = args.new("bench/random.lua",
  "gpurun.device_rng's float32 uniform and normal fills, against a copy and a memset, in GB/s written.")
bench.add_options(cli, { sizes = "1048576,16777216,67108864", reps = 15, seconds = 0.1 })
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local timing = { seconds = options.seconds, reps = options.reps }

local PATHS = { "uniform", "uniform_graph", "normal", "normal_graph", "memset", "copy" }

local function gb_per_s(bytes, figures)
  return bytes / (figures.us_per_iter * 1e-6) / 1e9
end

-- The paths at n float32 elements, each timed by bench.measure (the median
-- over --reps repetitions of enough iterations for about --seconds):
--   uniform, normal     gen:random / gen:normal(out, 0, 1) on the stream
--   *_graph             the same fill captured once, the graph launched
--   memset              out:fill(0): the write limit
--   copy                a device-to-device copy of the buffer (read + write)
local function measure_size(stream, n)
  local gen <close> = gpurun.device_rng(1234)
  local out <close> = gpurun.empty(n, "float32")
  local source <close> = gpurun.full(n, 1.0, "float32")
  local on_stream = { stream = stream }
  local steps = {
    uniform = function(target) gen:random(out, target == stream and on_stream or { stream = target }) end,
    normal = function(target) gen:normal(out, 0, 1, target == stream and on_stream or { stream = target }) end,
  }
  local figures = { elements = n }
  for _, key in ipairs{ "uniform", "normal" } do
    steps[key](stream) -- compiles the kernels, makes the launch shape
    figures[key] = bench.measure(stream, steps[key], timing)
    local graph <close> = bench.capture(stream, steps[key])
    figures[key .. "_graph"] = bench.measure(stream, function(target) graph:launch(target) end, timing)
  end
  -- the last fill's values, as a check that it drew (a mean near 0)
  stream:sync()
  local sample, total = out:to_table(1, math.min(n, 65536), stream), 0
  for _, v in ipairs(sample) do total = total + v end
  if math.abs(total / #sample) > 0.05 then
    error(("normal fill at %d elements: sample mean %.4f"):format(n, total / #sample), 0)
  end
  figures.memset = bench.measure(stream, function(target) out:fill(0, target) end, timing)
  figures.copy = bench.measure(stream, function(target) source:copy_to(out, target) end, timing)
  figures.offset = gen:get_state{ stream = stream }.offset
  local written = 4 * n
  for _, path in ipairs(PATHS) do
    figures[path].gb_per_s = gb_per_s(path == "copy" and 2 * written or written, figures[path])
  end
  return figures
end

local function print_table(device, results)
  print(("gpurun.device_rng on %s: us/iter (GB/s written; copy: read + write), median of %d repetitions")
        :format(device.name, options.reps))
  local header = { ("%-15s"):format("path") }
  for _, figures in ipairs(results) do header[#header + 1] = ("%22d"):format(figures.elements) end
  print(table.concat(header))
  for _, path in ipairs(PATHS) do
    local row = { ("%-15s"):format(path) }
    for _, figures in ipairs(results) do
      row[#row + 1] = ("%13.2f (%6.0f)"):format(figures[path].us_per_iter, figures[path].gb_per_s)
    end
    print(table.concat(row))
  end
  for _, path in ipairs{ "uniform_graph", "normal_graph" } do
    local row = { ("%-15s"):format(path .. "/copy") }
    for _, figures in ipairs(results) do
      row[#row + 1] = ("%22s"):format(("%.3f"):format(figures[path].gb_per_s / figures.copy.gb_per_s))
    end
    print(table.concat(row))
    row = { ("%-15s"):format(path .. "/memset") }
    for _, figures in ipairs(results) do
      row[#row + 1] = ("%22s"):format(("%.3f"):format(figures[path].gb_per_s / figures.memset.gb_per_s))
    end
    print(table.concat(row))
  end
end

os.exit(bench.over_sizes(cli, options, measure_size, print_table), true)
