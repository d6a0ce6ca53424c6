-- bench/sort.lua: gpurun.sort of uint32 keys, of float32 keys with int32
-- values, and gpurun.lower_bound of as many queries, at several sizes,
-- each captured into a graph and the graph launched; bench/sort_compare.py
-- times cupy.sort, torch.sort and cupy.searchsorted the same way.
-- docs/sort.md says what it times.
--
--   build/gpurun bench/sort.lua [--sizes 4096,65536,1048576,16777216] [--reps 15]
--       [--seconds 0.1] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")

local cli = args.new("bench/sort.lua",
  "gpurun.sort (keys, pairs) and gpurun.lower_bound in graphs, in us per launch and keys per second.")
bench.add_options(cli, { sizes = "4096,65536,1048576,16777216", reps = 15, seconds = 0.1 })
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local timing = { seconds = options.seconds, reps = options.reps }

local function check_sorted(what, n, buffer)
  local t = buffer:to_table()
  for i = 2, n do
    if t[i - 1] > t[i] then
      error(("%s at %d elements: element %d (%s) after %s"):format(what, n, i, t[i], t[i - 1]), 0)
    end
  end
end

-- The paths at n elements, each sorting the same random input again at
-- every launch (a copy from a kept source first, timed apart as `copy`):
--   keys     uint32 keys, in place (4 passes)
--   pairs    float32 keys with int32 values, in place
--   search   lower_bound of n uint32 queries into n sorted keys
local function measure_size(stream, n)
  local rng <close> = gpurun.default_rng(n)
  local source <close> = rng:integers(n, 0, 1 << 30, "uint32")
  local float_source <close> = rng:random(n, "float32")
  local keys <close> = gpurun.empty(n, "uint32")
  local float_keys <close> = gpurun.empty(n, "float32")
  local values <close> = gpurun.empty(n, "int32")
  local sorted <close> = gpurun.empty(n, "uint32")
  local positions <close> = gpurun.empty(n, "int64")
  source:copy_to(sorted, stream)
  gpurun.sort(stream, sorted)
  local steps = {
    copy = function(target) source:copy_to(keys, target) end,
    keys = function(target)
      source:copy_to(keys, target)
      gpurun.sort(target, keys)
    end,
    pairs = function(target)
      float_source:copy_to(float_keys, target)
      gpurun.sort(target, float_keys, { values = values })
    end,
    search = function(target) gpurun.lower_bound(target, sorted, source, { out = positions }) end,
  }
  local figures = { elements = n }
  for _, key in ipairs{ "copy", "keys", "pairs", "search" } do
    steps[key](stream) -- compiles
    local graph <close> = bench.capture(stream, steps[key])
    figures[key] = bench.measure(stream, function(target) graph:launch(target) end, timing)
    stream:sync()
  end
  check_sorted("keys", n, keys)
  check_sorted("pairs", n, float_keys)
  local where, wanted = positions:get(1), source:get(1)
  if sorted:get(where) ~= wanted or (where > 1 and sorted:get(where - 1) >= wanted) then
    error(("search at %d elements: %d is not where %d goes"):format(n, where, wanted), 0)
  end
  return figures
end

local PATHS = { "copy", "keys", "pairs", "search" }

local function print_table(device, results)
  print(("gpurun on %s: us per graph launch (millions of keys per second), median of %d repetitions"):format(
        device.name, options.reps))
  local header = { ("%-8s"):format("path") }
  for _, figures in ipairs(results) do
    header[#header + 1] = ("%22d"):format(figures.elements)
  end
  print(table.concat(header))
  for _, path in ipairs(PATHS) do
    local row = { ("%-8s"):format(path) }
    for _, figures in ipairs(results) do
      local us = figures[path].us_per_iter
      row[#row + 1] = ("%12.2f (%7.0f)"):format(us, figures.elements / us)
    end
    print(table.concat(row))
  end
  print("keys and pairs include the copy of their input (the copy row)")
end

os.exit(bench.over_sizes(cli, options, measure_size, print_table), true)
