-- cudagraphs.lua: the cuda.core sample "cudaGraphs" (NVIDIA cuda-samples,
-- python/2_CoreConcepts/cudaGraphs) written on gpurun: what a CUDA graph
-- saves on many small kernels, the pipeline r1 = a + b, r2 = r1 * c,
-- r3 = r2 - a timed as individual launches and as one replayed graph.
--
--   gpurun scripts/cudagraphs.lua [--elements N] [--iters N] [--device ID] [--json]
--                                 [--breakdown] [--per-graph K]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local breakdown = require("gpurun.breakdown")

local KERNELS = require("gpurun.samples.kernels").source("cudagraphs") -- vec_add, vec_mul, vec_sub

local RTOL, ATOL = 1e-5, 1e-5
local WARMUP = 5

local cli = args.new("cudagraphs.lua",
  "Times add -> mul -> sub as individual launches and as a replayed CUDA graph.")
cli:integer_option("--elements", "Elements per vector (small, to show launch overhead).", 4096)
cli:common_options{ iters = 1000 }
cli:flag("--breakdown", "Also measure each kernel's GPU time and CPU enqueue time "
                        .. "(a separate pass) and report the launch overhead.")
cli:integer_option("--per-graph", "Also time a graph of K passes of the pipeline (us per iteration).")
local options = cli:parse(arg)

-- (a + b) * c - a in double precision from the float32 inputs.
local function reference(a, b, c)
  local expected = {}
  for i = 1, #a do
    expected[i] = (a[i] + b[i]) * c[i] - a[i]
  end
  return expected
end

-- The pipeline runs --iters times as three individual launches and --iters
-- times as one replayed graph; both are timed and checked against a host
-- reference. Then a, b and c are overwritten in place and the same graph
-- replayed once: a graph holds pointers, not data, so every element of r3
-- must be (1 + 2) * 3 - 1 = 8, which a reduction on the device checks
-- (gpurun.max_abs_diff: the largest |r3[i] - 8| must be 0).
-- With --breakdown, the individual launches' time is split into GPU time
-- and CPU enqueue time per kernel, and the launch overhead per iteration.
-- With --per-graph K, a third timing: a graph holding K passes of the
-- pipeline, so that one graph launch is spread over K iterations.
local function main()
  local device, out, checks = cli:open_run(options)
  out:field("elements", options.elements)
  out:field("iters", options.iters)

  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream) -- fills and copies queue behind the launches

  local program <close> = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local module <close> = program:compile("cubin")
  local vec_add <close> = module:get_kernel("vec_add")
  local vec_mul <close> = module:get_kernel("vec_mul")
  local vec_sub <close> = module:get_kernel("vec_sub")

  local n = options.elements
  local rng <close> = gpurun.default_rng(0)
  local a <close> = rng:random(n, "float32")
  local b <close> = rng:random(n, "float32")
  local c <close> = rng:random(n, "float32")
  local r1 <close> = gpurun.empty(n, "float32")
  local r2 <close> = gpurun.empty(n, "float32")
  local r3 <close> = gpurun.empty(n, "float32")
  local expected <close> = gpurun.array(reference(a:to_table(), b:to_table(), c:to_table()),
                                        "float32")

  local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
  local size = gpurun.u64(n)
  local launch = gpurun.launch

  -- One pass of the pipeline on a stream, or into a graph while capturing,
  -- a stage (one kernel) at a time.
  local function add(target) launch(target, config, vec_add, a, b, r1, size) end
  local function mul(target) launch(target, config, vec_mul, r1, c, r2, size) end
  local function sub(target) launch(target, config, vec_sub, r2, a, r3, size) end
  local function pipeline(target)
    add(target)
    mul(target)
    sub(target)
  end
  local stages = { { name = "vec_add", run = add }, { name = "vec_mul", run = mul },
                   { name = "vec_sub", run = sub } }

  local individual = bench.run(stream, pipeline, { iters = options.iters, warmup = WARMUP,
                                                   name = "individual" })
  checks:buffers("individual launches", r3, expected, RTOL, ATOL)
  out:timing("individual", "\nIndividual launches: ", individual)
  if options.breakdown then
    out:say("")
    out:breakdown(breakdown.measure(stream, stages, { iters = options.iters, device = device }),
                  individual)
  end

  out:say("\nBuilding CUDA graph...")
  local graph <close> = bench.capture(stream, pipeline)

  r3:fill(0.0) -- so the graph check sees the graph's own output
  local replay = bench.run(stream, function(s) graph:launch(s) end,
                           { iters = options.iters, warmup = WARMUP, name = "graph" })
  checks:buffers("graph replay", r3, expected, RTOL, ATOL)
  out:timing("graph", "Graph replay:       ", replay)
  out:speedup("Graph speedup: ", individual, replay)

  if options.per_graph then
    local k = options.per_graph
    local batched <close> = bench.capture(stream, pipeline, { iterations = k })
    r3:fill(0.0)
    local calls = (options.iters + k - 1) // k
    local result = bench.run(stream, function(s) batched:launch(s) end,
                             { iters = calls, warmup = WARMUP, per_step = k, name = "per graph" })
    checks:buffers(("graph of %d passes"):format(k), r3, expected, RTOL, ATOL)
    out:field("per_graph_iterations", k)
    out:timing("per_graph", ("Graph replay (%d per graph): "):format(k),
               { iters = calls * k, seconds = result.seconds, us_per_iter = result.us_per_iter })
  end

  a:fill(1.0)
  b:fill(2.0)
  c:fill(3.0)
  graph:launch(stream)
  local worst <close> = gpurun.max_abs_diff(stream, r3, 8.0) -- queued behind the replay
  if checks:number("graph replay on updated data", worst:get(1), 0, 0, 0) then
    out:say("\nGraph replay on updated data verified (same graph, new buffer contents)")
  end

  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
