-- pipeline.lua: the cudagraphs sample's add -> mul -> sub declared by its
-- data (gpurun.pipeline), beside a second, independent branch, both joined
-- and reduced to one number: gpurun infers the streams, the waits, the
-- fusion and where the intermediates live.
--
--   gpurun scripts/pipeline.lua [--elements N] [--alpha X] [--iters N]
--                               [--dot FILE] [--svg FILE] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local shell = require("gpurun.shell")
local timeline = require("gpurun.timeline")

local RTOL, ATOL = 1e-4, 1e-3 -- a float32 sum of 2^20 terms, added in any order
local WARMUP = 5

local cli = args.new("pipeline.lua",
  "Declares add -> mul -> sub, a second branch and a reduction by their data; plans, runs and replays them.")
cli:integer_option("--elements", "Elements per vector.", 1 << 20)
cli:number_option("--alpha", "Branch 2's factor.", 0.5)
cli.parser:option("--dot", "Write the plan's Graphviz DOT text to FILE.")
cli.parser:option("--svg", "Draw the plan as SVG into FILE (needs Graphviz's dot).")
cli:common_options{ iters = 1000 }
local options = cli:parse(arg)

local ew = gpurun.elementwise
local add = ew("float32 x, float32 y", "float32 r", "r = x + y", "add")
local mul = ew("float32 x, float32 y", "float32 r", "r = x * y", "mul")
local sub = ew("float32 x, float32 y", "float32 r", "r = x - y", "sub")
local scale = ew("float32 x, float32 alpha", "float32 r", "r = alpha * x", "scale")

-- The pipeline, declared by its data (the point of this script).
local function declare(n, buffers, alpha, reduce, timing)
  local p = gpurun.pipeline{ name = "sample", timing = timing }
  local v = p:buffers(buffers)                 -- a, b, c, d and total, named
  local a, b, c, d, total = v.a, v.b, v.c, v.d, v.total
  local r1, r2, r3 = p:temporary("r1", n), p:temporary("r2", n), p:temporary("r3", n)
  local y, both = p:temporary("y", n), p:temporary("both", n)
  p:call(add, a, b, r1)                       -- branch 1
  p:call(mul, r1, c, r2)
  p:call(sub, r2, a, r3)
  p:call(scale, d, p:scalar("alpha", alpha), y) -- branch 2
  p:call{ add, r3, y, both, name = "join" }   -- the join
  reduce(p, both, total)                      -- total = sum(both)
  return p
end

-- A gpurun.reduction kernel (a kernel object with params, which p:call
-- takes; gpurun.sum is a function) where gpurun has them; else sum.cu's
-- kernel after a fill.
local function reducer(device, n)
  if gpurun.reduction then
    local sum = gpurun.reduction("float32 x", "float32 total", "x", "sum", nil, nil, "sample_sum")
    return function(p, x, total) p:call{ sum, x, total, name = "sum" } end, "gpurun.reduction (sum)"
  end
  local code = gpurun.Program(require("gpurun.samples.kernels").source("sum"), "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local kernel = code:get_kernel("sum_into")
  local config = gpurun.LaunchConfig{ grid = math.max(1, math.min((n + 255) // 256, 4096)), block = 256 }
  return function(p, x, total)
    p:fill(total, 0.0, { name = "zero total" })
    p:launch{ kernel, config, x, total, gpurun.u64(n), name = "sum" }
  end, "sum.cu's sum_into (gpurun.reduction is not in this gpurun)"
end

local function reference(a, b, c, d, alpha)
  local total = 0.0
  for i = 1, #a do
    total = total + ((a[i] + b[i]) * c[i] - a[i]) + alpha * d[i]
  end
  return total
end

-- Writes the DOT text, and the SVG through dot when asked: nil or a problem.
local function draw(p)
  local dot = p:to_dot{ title = "scripts/pipeline.lua" }
  if options.dot then
    local ok, why = shell.write_file(options.dot, dot)
    if not ok then return why end
  end
  if options.svg then
    local source = os.tmpname()
    local ok, why = shell.write_file(source, dot)
    if not ok then return why end
    local pipe = io.popen(("dot -Tsvg %s -o %s 2>&1"):format(shell.quote(source), shell.quote(options.svg)))
    local output = pipe:read("a")
    local done = pipe:close()
    os.remove(source)
    if not done then
      return ("could not draw %s with Graphviz's dot (install graphviz): %s"):format(options.svg,
        (output:gsub("%s+$", "")))
    end
  end
  return nil
end

--   branch 1:  r3 = (a + b) * c - a        add, mul, sub: fused into one kernel
--   branch 2:  y = alpha * d               on a stream of its own
--   join:      total = sum(r3 + y)         a gpurun.reduction kernel where gpurun
--                                          has them, else a raw kernel (sum.cu)
--
-- Nothing says which stream runs what, what waits for what, which stages
-- fuse or where r1, r2 live: gpurun infers it from what each stage reads
-- and writes. The script prints the plan (text, and Graphviz with --dot or
-- --svg), runs it stage by stage with a timeline of each unit's GPU time,
-- replays it as one graph, changes alpha in the graph in place, and checks
-- every result against the host.
local function main()
  local device, out, checks = cli:open_run(options)
  local n, alpha = options.elements, options.alpha
  out:field("elements", n)
  out:field("iters", options.iters)
  local stream <close> = device:create_stream()
  local rng <close> = gpurun.default_rng(0)
  local a <close> = rng:random(n, "float32")
  local b <close> = rng:random(n, "float32")
  local c <close> = rng:random(n, "float32")
  local d <close> = rng:random(n, "float32")
  local total <close> = gpurun.zeros(1, "float32")
  local ha, hb, hc, hd = a:to_table(), b:to_table(), c:to_table(), d:to_table()
  local reduce, reduction = reducer(device, n)
  out:field("reduction", reduction)

  -- The plan, before anything runs.
  local buffers = { a = a, b = b, c = c, d = d, total = total }
  local timed <close> = declare(n, buffers, alpha, reduce, true)
  out:say(timed:explain())
  out:field("plan", timed:plan())

  -- Stage by stage, with events around each unit: the timeline.
  timed:run(stream)
  local timings = timed:timings()
  out:say("\nTimeline of one run, stage by stage (GPU time of each unit):\n" .. timeline.format(timings))
  out:field("timeline", timings)
  checks:number("run, stage by stage", total:get(1), reference(ha, hb, hc, hd, alpha), RTOL, ATOL)

  local p <close> = declare(n, buffers, alpha, reduce, false)
  local staged = bench.run(stream, function(s) p:run(s) end,
                           { iters = options.iters, warmup = WARMUP, name = "stages" })
  out:timing("stages", "\nStage by stage: ", staged)
  local replay = bench.run(stream, function(s) p:graph(s) end,
                           { iters = options.iters, warmup = WARMUP, name = "graph" })
  out:timing("graph", "Graph replay:   ", replay)
  out:speedup("Graph speedup:  ", staged, replay)
  checks:number("graph replay", total:get(1), reference(ha, hb, hc, hd, alpha), RTOL, ATOL)

  -- A new alpha, set in the graph in place: no capture.
  local alpha2 = alpha * 3
  local captures = p.captures
  p:set("alpha", alpha2)
  p:graph(stream)
  stream:sync()
  if checks:number("graph with alpha set in place", total:get(1), reference(ha, hb, hc, hd, alpha2),
                   RTOL, ATOL) then
    out:say(("\nalpha %g -> %g set in the graph in place (%s), verified"):format(alpha, alpha2,
      p.captures == captures and "no new capture" or "captured again"))
  end
  checks:condition("a scalar set without a new capture", p.captures == captures,
    ("%d captures"):format(p.captures))

  local problem = draw(p)
  if problem then
    io.stderr:write(cli.name, ": ", problem, "\n")
    return 1
  end
  if options.dot then out:say("Plan drawn: " .. options.dot) end
  if options.svg then out:say("Plan drawn: " .. options.svg) end
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
