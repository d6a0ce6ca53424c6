-- bench/fused.lua: gpurun's generated kernels for r3 = (a + b) * c - a at
-- several sizes, and the device's copy bandwidth, for bench/fused_compare.sh
-- (which runs CuPy and torch.compile on the same machine next);
-- docs/elementwise.md has the figures.
--
--   build/gpurun bench/fused.lua [--sizes 4096,65536,1048576,16777216,67108864]
--       [--reps 15] [--seconds 0.1] [--copy-mib 1024] [--unroll N] [--block N]
--       [--blocks-per-sm N] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local ew = require("gpurun.compute.elementwise")
local cjson = require("cjson")

local INPUTS = "float32 a, float32 b, float32 c"
local STAGES = { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }
-- Exact in float32, and any mix-up of arguments gives another r3.
local A, B, C, EXPECTED = 1.5, 2.25, 0.5, 0.375

local cli = args.new("bench/fused.lua",
  "gpurun's fused and per-stage elementwise kernels for (a + b) * c - a, and the copy bandwidth.")
bench.add_options(cli, { sizes = "4096,65536,1048576,16777216,67108864", reps = 15, seconds = 0.1 })
cli:integer_option("--copy-mib", "Size of the copy that measures the bandwidth, in MiB.", 1024)
cli:integer_option("--unroll", "gpurun.elementwise's unroll option.", 1)
cli:integer_option("--block", "Threads per block.", 256)
cli:integer_option("--blocks-per-sm", "Blocks per multiprocessor (default: a full one).")
cli:integer_option("--device", "CUDA device id.", 0, 0)
cli:flag("--json", "Print one JSON object instead of the table.")
local options = cli:parse(arg)
local timing = { seconds = options.seconds, reps = options.reps }

local function check(stream, buffer, what, n)
  stream:sync()
  local summary = gpurun.compare(buffer, EXPECTED, 0, 0)
  if summary.mismatches > 0 then
    error(("%s at %d elements: %d of %d elements of r3 are not %g (r3[%d] = %g)"):format(
          what, n, summary.mismatches, summary.count, EXPECTED, summary.worst_index,
          summary.worst_actual), 0)
  end
end

-- The paths at n elements, each timed by bench.measure (from a stream sync
-- to a stream sync after warm-up, the median over --reps repetitions of
-- enough iterations for about --seconds, from 10 to 5000) and checked:
--   fused launch      pipe(stream, a, b, c, r3): one fused kernel, argument checks in Lua
--   fused plan        the same kernel bound once (pipe:bind), plan:launch per iteration
--   fused graph       a graph of that one kernel, graph:launch per iteration
--   fused streaming graph  the same with cache = "streaming": its 16-byte loads
--                     and stores carry the evict-first hint (ld/st.global.cs)
--   generated launch  three generated kernels (r1, r2, r3 all written), launched
--   generated graph   the same three in one graph
local function measure_size(stream, n, fused, generated, streaming)
  local a <close> = gpurun.full(n, A, "float32")
  local b <close> = gpurun.full(n, B, "float32")
  local c <close> = gpurun.full(n, C, "float32")
  local r1 <close> = gpurun.empty(n, "float32")
  local r2 <close> = gpurun.empty(n, "float32")
  local r3 <close> = gpurun.empty(n, "float32")
  local figures = { elements = n }

  local function timed(key, step)
    r3:fill(0.0)
    figures[key] = bench.measure(stream, step, timing)
    check(stream, r3, key, n)
  end
  local function graph_of(step)
    return bench.capture(stream, step)
  end

  local fused_step = function(s) fused(s, a, b, c, r3) end
  local generated_step = function(s) generated(s, a, b, c, r1, r2, r3) end
  timed("fused_launch", fused_step)
  do
    local plans <close> = fused:bind(a, b, c, r3)
    timed("fused_plan", function(s) plans:launch(s) end)
  end
  do
    local graph <close> = graph_of(fused_step)
    timed("fused_graph", function(s) graph:launch(s) end)
  end
  do
    streaming:prepare(a, b, c, r3) -- compiled now: a capture cannot compile it
    local graph <close> = graph_of(function(s) streaming(s, a, b, c, r3) end)
    timed("fused_streaming_graph", function(s) graph:launch(s) end)
  end
  timed("generated_launch", generated_step)
  do
    local graph <close> = graph_of(generated_step)
    timed("generated_graph", function(s) graph:launch(s) end)
  end
  figures.fused_kernel = fused.kernels[1]:variant(a, b, c, r3).kernel
  return figures
end

-- One device-to-device copy of --copy-mib MiB (read + write counted).
local function measure_copy(stream)
  local n = options.copy_mib * (1 << 20) // 4
  local source <close> = gpurun.full(n, 1.0, "float32")
  local target <close> = gpurun.empty(n, "float32")
  local copy = bench.measure(stream, function(s) source:copy_to(target, s) end, timing)
  return { bytes = 2 * 4 * n, us = copy.us_per_iter,
           gb_per_s = 2 * 4 * n / (copy.us_per_iter * 1e-6) / 1e9 }
end

local PATHS = { "fused_launch", "fused_plan", "fused_graph", "fused_streaming_graph", "generated_launch",
                "generated_graph" }

local function print_table(device, results, copy)
  print(("gpurun on %s: us/iter, median of %d repetitions"):format(device.name, options.reps))
  local header = { ("%-24s"):format("path") }
  for _, figures in ipairs(results) do
    header[#header + 1] = ("%12d"):format(figures.elements)
  end
  print(table.concat(header))
  for _, path in ipairs(PATHS) do
    local row = { ("%-24s"):format(path:gsub("_", " ")) }
    for _, figures in ipairs(results) do
      row[#row + 1] = ("%12.2f"):format(figures[path].us_per_iter)
    end
    print(table.concat(row))
  end
  local row = { ("%-24s"):format("fused graph GB/s") }
  for _, figures in ipairs(results) do
    row[#row + 1] = ("%12.0f"):format(16 * figures.elements / (figures.fused_graph.us_per_iter * 1e-6) / 1e9)
  end
  print(table.concat(row))
  print(("copy: %.0f GB/s (%d MiB device to device, read + write counted)"):format(
        copy.gb_per_s, options.copy_mib))
end

local function main()
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)
  local kernel_options = { unroll = options.unroll, block = options.block,
                           blocks_per_sm = options.blocks_per_sm }
  local fused = ew.pipeline(INPUTS, STAGES, "r3", "fused", kernel_options)
  local generated = ew.pipeline(INPUTS, STAGES, "r1, r2, r3", "generated", kernel_options)
  local streaming_options = { cache = "streaming" }
  for key, value in pairs(kernel_options) do streaming_options[key] = value end
  local streaming = ew.pipeline(INPUTS, STAGES, "r3", "fused_streaming", streaming_options)
  local results = {}
  for index, n in ipairs(options.sizes) do
    results[index] = measure_size(stream, n, fused, generated, streaming)
  end
  local copy = measure_copy(stream)
  if options.json then
    print(cjson.encode{ device = device.name, reps = options.reps, options = kernel_options,
                        sizes = results, copy = copy })
  else
    print_table(device, results, copy)
  end
  return 0
end

os.exit(main(), true)
