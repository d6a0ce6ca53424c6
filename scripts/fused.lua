-- fused.lua: the cudaGraphs sample's pipeline, r1 = a + b, r2 = r1 * c,
-- r3 = r2 - a, three ways (the sample's kernels, three generated ones, one
-- fused kernel), each as individual launches and as a CUDA graph, with the
-- bandwidth each way reaches.
--
--   gpurun scripts/fused.lua [--elements N] [--iters N] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local report = require("gpurun.report")
local ew = require("gpurun.compute.elementwise")

local RTOL, ATOL = 1e-5, 1e-5
local WARMUP = 5
local BLOCK = 256

local STAGES = { "float32 r1 = a + b", "float32 r2 = r1 * c", "float32 r3 = r2 - a" }
local INPUTS = "float32 a, float32 b, float32 c"

local cli = args.new("fused.lua",
  "Times add -> mul -> sub as the sample's kernels, as generated elementwise kernels and as one fused kernel.")
cli:integer_option("--elements", "Elements per vector.", 1 << 20)
cli:common_options{ iters = 1000 }
local options = cli:parse(arg)

local function reference(a, b, c)
  local expected = {}
  for i = 1, #a do
    expected[i] = (a[i] + b[i]) * c[i] - a[i]
  end
  return expected
end

--   sample     the sample's own three kernels (lua/gpurun/samples/kernels/cudagraphs.cu)
--   generated  three kernels from gpurun.elementwise (16-byte loads and
--              stores, a launch shape chosen from the device)
--   fused      one gpurun.elementwise kernel for the whole pipeline: a, b
--              and c read once, r3 written once, r1 and r2 in registers
--
-- All six results are checked against a host reference. The bandwidth is
-- what each way moves (sample and generated: 3 x (2 reads + 1 write), fused:
-- 3 reads + 1 write per element) over its time.
local function main()
  local device, out, checks = cli:open_run(options)
  local n = options.elements
  out:field("elements", n)
  out:field("iters", options.iters)
  out:say("Elements: " .. n)

  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)

  local program <close> = gpurun.Program(require("gpurun.samples.kernels").source("cudagraphs"), "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local module <close> = program:compile("cubin")
  local vec_add <close> = module:get_kernel("vec_add")
  local vec_mul <close> = module:get_kernel("vec_mul")
  local vec_sub <close> = module:get_kernel("vec_sub")
  local generated = ew.pipeline(INPUTS, STAGES, "r1, r2, r3", "generated")
  local fused = ew.pipeline(INPUTS, STAGES, "r3", "fused")

  local rng <close> = gpurun.default_rng(0)
  local a_host, b_host, c_host = rng:random_table(n, "float32"), rng:random_table(n, "float32"),
                                 rng:random_table(n, "float32")
  local a <close> = gpurun.array(a_host, "float32")
  local b <close> = gpurun.array(b_host, "float32")
  local c <close> = gpurun.array(c_host, "float32")
  local expected <close> = gpurun.array(reference(a_host, b_host, c_host), "float32")
  a_host, b_host, c_host = nil, nil, nil -- luacheck: ignore 311 (lets the collector have the host copies)
  local r1 <close> = gpurun.empty(n, "float32")
  local r2 <close> = gpurun.empty(n, "float32")
  local r3 <close> = gpurun.empty(n, "float32")

  local config = gpurun.LaunchConfig{ grid = (n + BLOCK - 1) // BLOCK, block = BLOCK }
  local size = gpurun.u64(n)
  local launch = gpurun.launch
  local ways = {
    { key = "sample", title = "Sample kernels", bytes = 36 * n,
      step = function(target)
        launch(target, config, vec_add, a, b, r1, size)
        launch(target, config, vec_mul, r1, c, r2, size)
        launch(target, config, vec_sub, r2, a, r3, size)
      end },
    { key = "generated", title = "Generated kernels", bytes = 36 * n, pipeline = generated,
      step = function(target) generated(target, a, b, c, r1, r2, r3) end },
    { key = "fused", title = "Fused kernel", bytes = 16 * n, pipeline = fused,
      step = function(target) fused(target, a, b, c, r3) end },
  }

  local function record(way, mode, result)
    local gb_per_s = way.bytes / (result.seconds / result.iters) / 1e9
    way.figures[mode] = { iters = result.iters, seconds = result.seconds,
                          us_per_iter = result.us_per_iter, gb_per_s = gb_per_s }
    local label = ("%-28s"):format(("%s, %s:"):format(way.title, mode == "launch" and "launched" or "graph"))
    out:say(("%s%s  %6.0f GB/s"):format(label, report.timing_line("", result), gb_per_s))
  end

  for _, way in ipairs(ways) do
    way.figures = {}
    out:field(way.key, way.figures)
    out:say("")
    if way.pipeline then
      for line in way.pipeline:describe():gmatch("[^\n]+") do
        out:say("  " .. line)
      end
    end
    r3:fill(0.0)
    local launched = bench.run(stream, way.step, { iters = options.iters, warmup = WARMUP })
    checks:buffers(way.key .. ", launched", r3, expected, RTOL, ATOL)
    record(way, "launch", launched)

    local graph <close> = bench.capture(stream, way.step)
    r3:fill(0.0) -- so the check sees what the graph computed
    local replay = bench.run(stream, function(s) graph:launch(s) end,
                             { iters = options.iters, warmup = WARMUP })
    checks:buffers(way.key .. ", graph", r3, expected, RTOL, ATOL)
    record(way, "graph", replay)
    way.replay = replay
  end

  out:say("")
  local speedup = report.speedup(ways[1].replay, ways[3].replay)
  if speedup then
    out:field("fused_vs_sample_graph", speedup)
    out:say(("Fused graph vs sample graph: %.2fx"):format(speedup))
  end
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
