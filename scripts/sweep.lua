-- sweep.lua: the cudaGraphs sample's lesson as a curve. The sample's
-- pipeline (r1 = a + b, r2 = r1 * c, r3 = r2 - a; scripts/cudagraphs.lua)
-- runs at every size from --from to --to as individual launches and as a
-- replayed CUDA graph. With short vectors the graph wins by saving launch
-- overhead; as vectors grow, kernel time swamps that overhead and the two
-- converge. The table marks the crossover; --plot draws the curve.
--
--   gpurun scripts/sweep.lua [--from 2^10] [--to 2^26] [--step 2] [--iters 1000]
--                            [--repeats 5] [--device 0] [--json FILE|-] [--csv FILE]
--                            [--plot FILE.png|FILE.svg]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local sweep = require("gpurun.sweep")

local add_mul_sub = require("gpurun.samples.add_mul_sub") -- cudagraphs.lua's kernels

-- Exact in float32, and any mix-up of arguments gives another r3:
-- (1.5 + 2.25) * 0.5 - 1.5 = 0.375. Every path starts from a poisoned r3.
local A, B, C, EXPECTED, POISON = 1.5, 2.25, 0.5, 0.375, -1.0
local RTOL, ATOL = 1e-5, 1e-5
local BLOCK = 256

local cli = args.new("sweep.lua",
  "Times add -> mul -> sub as individual launches and as a CUDA graph over a range of sizes.")
sweep.add_options(cli, { from = "2^10", to = "2^26" })
cli:integer_option("--iters", "Pipeline iterations per timed loop.", 1000)
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)
local settings = sweep.settings(cli, options)

-- The crossover is the first size at which the graph is less than 5%
-- ahead (gpurun.sweep's THRESHOLD).
local function main()
  local device = cli:open_device(options.device)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream) -- fills queue behind the launches

  local kernels <close> = add_mul_sub.compile(device)
  local vec_add, vec_mul, vec_sub = kernels.vec_add, kernels.vec_mul, kernels.vec_sub
  local launch = gpurun.launch

  local pipeline = {
    name = "add -> mul -> sub",
    x_label = "elements per vector",
    bytes_per_element = 6 * 4, -- a, b, c, r1, r2, r3 in float32
    setup = function(size)
      local n = size.elements
      local a = size:own(gpurun.full(n, A, "float32"))
      local b = size:own(gpurun.full(n, B, "float32"))
      local c = size:own(gpurun.full(n, C, "float32"))
      local r1 = size:own(gpurun.empty(n, "float32"))
      local r2 = size:own(gpurun.empty(n, "float32"))
      local r3 = size:own(gpurun.empty(n, "float32"))
      local config = gpurun.LaunchConfig{ grid = (n + BLOCK - 1) // BLOCK, block = BLOCK }
      local count = gpurun.u64(n)
      size.r3 = r3
      size.pipeline = function(target)
        launch(target, config, vec_add, a, b, r1, count)
        launch(target, config, vec_mul, r1, c, r2, count)
        launch(target, config, vec_sub, r2, a, r3, count)
      end
    end,
    reset = function(size)
      size.r3:fill(POISON)
    end,
    check = function(size, _, label)
      return check.buffers(label, size.r3, EXPECTED, RTOL, ATOL)
    end,
    -- Each path is one table (see lua/gpurun/script/sweep.lua); a new one is a
    -- few lines here. K iterations per graph, for instance, with
    -- local bench = require("gpurun.bench") above:
    --   { name = "per_graph_10", label = "10 iterations per graph", iterations_per_step = 10,
    --     prepare = function(size)
    --       local graph = size:own(bench.capture(size.stream, size.pipeline, { iterations = 10 }))
    --       return function(s) graph:launch(s) end
    --     end },
    -- and one fused kernel as a path whose prepare launches the
    -- fused kernel on buffers that setup keeps in `size`.
    paths = { sweep.INDIVIDUAL, sweep.GRAPH },
  }
  return sweep.main(pipeline, settings, sweep.context(device, stream, cli.name))
end

os.exit(main(), true)
