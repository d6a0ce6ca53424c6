-- bench/pdl_pipeline.lua: the cudagraphs sample's add -> mul -> sub as a
-- declared pipeline of three generated elementwise kernels (fuse = false,
-- so three kernels still: its second and third launched with programmatic
-- dependent launch on devices of compute capability 9.0 and up) against
-- the hand-built graph of the sample's three kernels (no PDL), replayed at
-- each size in one run: medians and the ratio. Target: the declared
-- pipeline at least 15% faster (ratio 0.85 or less).
--
--   build/gpurun bench/pdl_pipeline.lua [--sizes 4096,65536] [--iters N]
--        [--repeats N] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")
local add_mul_sub = require("gpurun.samples.add_mul_sub")

local cli = args.new("pdl_pipeline.lua", "A declared pipeline with PDL against the hand-built graph.")
bench.sizes_option(cli, "Elements per vector, comma-separated.", "4096,65536")
cli:integer_option("--iters", "Graph replays per timed loop.", 2000)
cli:integer_option("--repeats", "Timed loops per side and size (the median is reported).", 7)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)

local device = cli:open_device(0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local kernels <close> = add_mul_sub.compile(device)
local ew = gpurun.elementwise
local add = ew("float32 x, float32 y", "float32 r", "r = x + y", "add")
local mul = ew("float32 x, float32 y", "float32 r", "r = x * y", "mul")
local sub = ew("float32 x, float32 y", "float32 r", "r = x - y", "sub")
local pdl = device.compute_capability.major >= 9

local function replay_us(step)
  return bench.run(stream, step, { iters = options.iters, warmup = 20, repeats = options.repeats,
                                   name = "pdl_pipeline" }).us_per_iter
end

local rows = {}
for _, n in ipairs(options.sizes) do
  local rng <close> = gpurun.default_rng(5)
  local a, b, c = rng:random(n, "float32"), rng:random(n, "float32"), rng:random(n, "float32")
  local r1, r2, r3 = gpurun.zeros(n), gpurun.zeros(n), gpurun.zeros(n)
  local h1, h2, h3 = gpurun.zeros(n), gpurun.zeros(n), gpurun.zeros(n)
  local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
  local size = gpurun.u64(n)
  local hand = bench.capture(stream, function(builder)
    gpurun.launch(builder, config, kernels.vec_add, a, b, h1, size)
    gpurun.launch(builder, config, kernels.vec_mul, h1, c, h2, size)
    gpurun.launch(builder, config, kernels.vec_sub, h2, a, h3, size)
  end)
  local p = gpurun.pipeline{ name = "pdl_chain", fuse = false, quiet = true }
  local v = p:buffers{ a = a, b = b, c = c, r1 = r1, r2 = r2, r3 = r3 }
  p:call(add, v.a, v.b, v.r1)
  p:call(mul, v.r1, v.c, v.r2)
  p:call(sub, v.r2, v.a, v.r3)
  local marked = 0
  for _, unit in ipairs(p:plan().units) do
    if unit.programmatic then marked = marked + 1 end
  end
  local declared_graph = p:graph(stream)
  hand:launch(stream)
  stream:sync()
  if not gpurun.allclose(r3, h3, 1e-6, 1e-6) then
    error(("pdl_pipeline.lua: at %d elements the declared pipeline's r3 differs from the hand-built "
           .. "graph's"):format(n), 0)
  end
  local hand_us = replay_us(function(s) hand:launch(s) end)
  local declared_us = replay_us(function(s) declared_graph:launch(s) end)
  rows[#rows + 1] = { elements = n, hand_us = hand_us, declared_us = declared_us,
                      ratio = declared_us / hand_us, pdl_launches = pdl and marked or 0,
                      target_met = declared_us <= 0.85 * hand_us }
  p:close()
  hand:close()
  for _, buffer in ipairs({ a, b, c, r1, r2, r3, h1, h2, h3 }) do buffer:close() end
end

if options.json then
  print(cjson.encode({ device = device.name, pdl = pdl, iters = options.iters, repeats = options.repeats,
                       rows = rows }))
  return
end
print(("pdl_pipeline.lua on %s (compute capability %d.%d: %s), medians of %d loops of %d replays")
  :format(device.name, device.compute_capability.major, device.compute_capability.minor,
          pdl and "PDL used" or "no PDL before 9.0", options.repeats, options.iters))
print(("%10s  %14s  %14s  %7s  %4s  %s"):format("elements", "hand-built us", "declared us", "ratio",
  "PDL", "target <= 0.85"))
for _, row in ipairs(rows) do
  print(("%10d  %14.3f  %14.3f  %7.3f  %4d  %s"):format(row.elements, row.hand_us, row.declared_us,
    row.ratio, row.pdl_launches, row.target_met and "met" or "missed"))
end
