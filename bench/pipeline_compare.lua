-- bench/pipeline_compare.lua: what declaring a pipeline by its data costs
-- against building its graph by hand, in one run, medians, one table:
-- replay (1), two overlapping branches (2), one scalar changed (3) and
-- planning on the CPU (4), each against its target; docs/pipelines.md has
-- the figures.
--
--   build/gpurun bench/pipeline_compare.lua [--elements N] [--iters N]
--        [--repeats N] [--instances N] [--cycles N] [--plan-only] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")
local timeline = require("gpurun.timeline")
local kernels = require("gpurun.samples.kernels")
local schedule = require("gpurun.pipeline.schedule")

local PROGRAM = "pipeline_compare.lua"
local cli = args.new(PROGRAM, "Declared pipelines against hand-built graphs.")
cli:integer_option("--elements", "Elements per vector.", 65536)
cli:integer_option("--iters", "Graph replays per timed loop.", 2000)
cli:integer_option("--repeats", "Timed loops per row (the median is reported).", 7)
cli:integer_option("--instances", "Graphs of dag.lua's DAG made and timed per side.", 6)
cli:integer_option("--cycles", "Clock cycles per busy kernel of the overlap rows.", 200000, 0)
cli:integer_option("--stages", "Stages of the planning rows.", 1000)
cli:flag("--plan-only", "Only the planning rows (no GPU needed).")
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)

local median = bench.median
local clock = gpurun.perf_counter
local rows = {}
local function row(entry) rows[#rows + 1] = entry end

-- ---- 4. planning (CPU) ------------------------------------------------------------------

-- 4. Planning a 1,000-stage pipeline (--stages) on the CPU (target: under
-- 10 ms); --plan-only runs these rows alone (no GPU needed).

-- A yardstick for the planning rows: milliseconds of CPU for 10^7 Lua
-- additions on this machine (about 25 on a fast desktop core).
local function lua_yardstick()
  local start = os.clock()
  local x = 0
  for i = 1, 10000000 do x = x + i end
  return (os.clock() - start) * 1e3, x
end

local function planning_rows()
  local add = gpurun.elementwise("float32 a, float32 b", "float32 r", "r = a + b", "padd")
  local twice = gpurun.elementwise("float32 x", "float32 y", "y = x; y *= 2.0f", "ptwice")
  local function declare(shape)
    local p = gpurun.pipeline{ name = "plan" .. shape }
    local data = {}
    for i = 1, 32 do
      data[i] = p:temporary("t" .. i, 4096)
      p:fill(data[i], 0.0)
    end
    math.randomseed(7)
    for s = 1, options.stages - 32 do
      local a, b, r = data[math.random(32)], data[math.random(32)], data[math.random(32)]
      if shape == "chains" then
        -- The sample's chain again and again, through temporaries: fusion groups of three.
        local k = (s - 1) % 3
        if k == 0 then p:call(add, a, b, data[(s // 3) % 32 + 1]) else p:call(add, data[(s // 3) % 32 + 1], b, r) end
      elseif shape == "fusable" then
        p:call(add, a, b, r)
      else
        p:call(twice, a, r)
      end
    end
    return p
  end
  for _, shape in ipairs({ "random", "fusable", "chains" }) do
    local p = declare(shape)
    -- The inference (what run and graph use: the schedule, cached until
    -- the declaration changes, dropped here), then plan()'s tables of it.
    local times, tables = {}, {}
    for rep = 1, math.max(9, options.repeats) do
      p.schedule = nil
      local start = os.clock()
      schedule.of(p)
      local planned = os.clock()
      p:plan()
      times[rep] = (planned - start) * 1e3
      tables[rep] = (os.clock() - planned) * 1e3
    end
    local plan = p:plan()
    table.sort(times)
    row({ key = "plan_" .. shape, what = ("planning %d stages, %s (%d units, %d fused groups, %d edges; "
      .. "min %.1f ms; plan()'s tables +%.1f ms)"):format(#plan.stages, shape == "random"
              and "random reads and writes, no fusion" or shape == "fusable"
              and "random, every stage fusable" or "chains of three",
              #plan.units, #plan.groups, #plan.edges, times[1], median(tables)),
      declared = median(times), unit = "ms CPU", target = "< 10 ms",
      ok = median(times) < 10 })
  end
end

-- ---- 1..3. on the GPU ----------------------------------------------------------------------

-- 1. Replay: the graph gpurun.pipeline captures for scripts/dag.lua's DAG
--    (two branches, a copy node, a join) and for the cudagraphs sample's
--    chain (add -> mul -> sub, raw kernels), against the hand-built graph
--    of the same stages (target: within 3%), and what pipeline:graph()
--    adds per replay over Graph:launch; the fused declaration of the chain
--    (elementwise kernels, r1 and r2 in registers) for reference; the DAG,
--    which has two branches, as the best and the median of --instances
--    graphs of each side, since the driver's mapping of branches to
--    hardware queues differs from one instance to the next.
-- 2. Overlap: two independent branches of equal work (busy.cu kernels)
--    against one branch (target: within 10% of one branch's time), with the
--    event timeline of a run stage by stage.
-- 3. One scalar changed in a captured pipeline (pipeline:set: Graph:set_arg
--    in place) against capturing anew (target: under 2 us, at least 25x
--    cheaper), and a buffer pointed elsewhere (capture + Graph:update).

local function replay_us(stream, step)
  local result = bench.run(stream, step, { iters = options.iters, warmup = 20,
                                           repeats = options.repeats, name = "pipeline_compare" })
  return result.us_per_iter
end

local dag_structures, dag_instances

-- Closes what it holds (graphs, pipelines) when it goes out of scope.
local function closer(list)
  return setmetatable(list, { __close = function(held)
    for k = #held, 1, -1 do held[k]:close() end
  end })
end

-- A graph's nodes and edges as one line: "1 memcpy; 2 kernel shift <- 1; ...".
local function structure(graph)
  local parts = {}
  for _, node in ipairs(graph:nodes()) do
    local text = ("%d %s%s"):format(node.index, node.kind, node.name and (" " .. node.name) or "")
    if #node.dependencies > 0 then text = text .. " <- " .. table.concat(node.dependencies, ",") end
    parts[#parts + 1] = text
  end
  return table.concat(parts, "; ")
end

local function gpu_rows(device)
  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)
  local popts = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
  local dag_code <close> = gpurun.Program(kernels.source("dag"), "c++", popts):compile("cubin")
  local sample_code <close> = gpurun.Program(kernels.source("cudagraphs"), "c++", popts):compile("cubin")
  local busy_code <close> = gpurun.Program(kernels.source("busy"), "c++", popts):compile("cubin")
  local scale, shift, combine = dag_code:get_kernel("scale"), dag_code:get_kernel("shift"),
                                dag_code:get_kernel("combine")
  local vec_add, vec_mul, vec_sub = sample_code:get_kernel("vec_add"), sample_code:get_kernel("vec_mul"),
                                    sample_code:get_kernel("vec_sub")
  local busy = busy_code:get_kernel("busy")
  local n = options.elements
  local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
  local rng <close> = gpurun.default_rng(3)
  local a, b, c = rng:random(n, "float32"), rng:random(n, "float32"), rng:random(n, "float32")
  local b_copy, x, y, r = gpurun.empty(n), gpurun.empty(n), gpurun.empty(n), gpurun.empty(n)
  local r1, r2, r3 = gpurun.empty(n), gpurun.empty(n), gpurun.empty(n)

  -- dag.lua's DAG, by hand and declared.
  local function dag_by_hand(builder, alpha)
    local side
    builder, side = builder:split(2)
    b_copy:copy_from(b, side)
    gpurun.launch(side, config, shift, b_copy, y, 0.5, n)
    gpurun.launch(builder, config, scale, a, x, alpha, n)
    gpurun.join(builder, side)
    gpurun.launch(builder, config, combine, x, y, r, n)
  end
  local function declare_dag()
    local p = gpurun.pipeline{ name = "dag", quiet = true }
    local v = p:buffers{ a = a, b = b, b_copy = b_copy, x = x, y = y, r = r }
    p:copy(v.b_copy, v.b)
    p:launch(shift, config, v.b_copy, v.y, 0.5, n)
    p:launch(scale, config, v.a, v.x, p:scalar("alpha", 2.0), n)
    p:launch(combine, config, v.x, v.y, v.r, n)
    return p
  end
  -- The driver maps a graph's branches to its hardware queues when it
  -- instantiates the graph, and two instances of one capture can replay
  -- 2 us apart (CUDA_DEVICE_MAX_CONNECTIONS=1 takes the spread away): so
  -- --instances of each, made in turn (the hand-built one first every
  -- other time), each timed, and the best and the median of each side.
  local hand_graphs <close> = closer({})
  local dags <close> = closer({})
  local declared_graphs = {}
  for k = 1, options.instances do
    local function by_hand()
      hand_graphs[k] = bench.capture(stream, function(builder) dag_by_hand(builder, 2.0) end)
    end
    local function declared()
      dags[k] = declare_dag()
      declared_graphs[k] = dags[k]:graph(stream)
    end
    if k % 2 == 1 then by_hand(); declared() else declared(); by_hand() end
  end
  local dag, dag_graph, hand_dag = dags[1], declared_graphs[1], hand_graphs[1]
  stream:sync()
  local dag_result = r:to_table(stream)
  hand_dag:launch(stream)
  stream:sync()
  local hand_result = r:to_table(stream)
  for i = 1, n, math.max(1, n // 64) do
    assert(dag_result[i] == hand_result[i], "dag: the declared graph's result differs")
  end
  assert(dag_graph.node_count == hand_dag.node_count, "dag: the node counts differ")
  dag_structures = { declared = structure(dag_graph), hand = structure(hand_dag) }
  local hand_times, declared_times = {}, {}
  for k = 1, options.instances do
    local hand_k, declared_k = hand_graphs[k], declared_graphs[k]
    hand_times[k] = replay_us(stream, function(s) hand_k:launch(s) end)
    declared_times[k] = replay_us(stream, function(s) declared_k:launch(s) end)
  end
  dag_instances = { hand = hand_times, declared = declared_times }
  local hand, declared = math.min(table.unpack(hand_times)), math.min(table.unpack(declared_times))
  row({ key = "replay_dag", what = ("dag.lua's DAG (%d nodes), graph replay, the best of %d instances")
          :format(dag_graph.node_count, options.instances),
        declared = declared, hand = hand, unit = "us/iter", target = "within 3%",
        ok = declared <= hand * 1.03 })
  row({ key = "replay_dag_median", what = ("  the median of the %d instances"):format(options.instances),
        declared = median(declared_times), hand = median(hand_times), unit = "us/iter",
        target = "(the driver's queues)" })
  local through = replay_us(stream, function(s) dag:graph(s) end)
  row({ key = "replay_dag_method", what = "  the first instance through pipeline:graph(stream)", declared = through,
        hand = declared_times[1], unit = "us/iter", target = "(Graph:launch)" })

  -- The sample's chain of raw kernels.
  local size = gpurun.u64(n)
  local hand_chain <close> = bench.capture(stream, function(builder)
    gpurun.launch(builder, config, vec_add, a, b, r1, size)
    gpurun.launch(builder, config, vec_mul, r1, c, r2, size)
    gpurun.launch(builder, config, vec_sub, r2, a, r3, size)
  end)
  local chain <close> = gpurun.pipeline{ name = "chain", quiet = true }
  chain:launch(vec_add, config, a, b, r1, size)
  chain:launch(vec_mul, config, r1, c, r2, size)
  chain:launch(vec_sub, config, r2, a, r3, size)
  local chain_graph = chain:graph(stream)
  stream:sync()
  hand = replay_us(stream, function(s) hand_chain:launch(s) end)
  declared = replay_us(stream, function(s) chain_graph:launch(s) end)
  row({ key = "replay_chain", what = "the sample's add -> mul -> sub (raw kernels), graph replay",
        declared = declared, hand = hand, unit = "us/iter", target = "within 3%",
        ok = declared <= hand * 1.03 })
  local ew = gpurun.elementwise
  local fused <close> = gpurun.pipeline{ name = "fused", quiet = true }
  local t1, t2 = fused:temporary("t1", n), fused:temporary("t2", n)
  fused:call(ew("float32 x, float32 y", "float32 r", "r = x + y", "fadd"), a, b, t1)
  fused:call(ew("float32 x, float32 y", "float32 r", "r = x * y", "fmul"), t1, c, t2)
  fused:call(ew("float32 x, float32 y", "float32 r", "r = x - y", "fsub"), t2, a, r3)
  local fused_graph = fused:graph(stream)
  stream:sync()
  local fused_us = replay_us(stream, function(s) fused_graph:launch(s) end)
  row({ key = "replay_fused", what = "  declared with elementwise kernels: fused, r1 and r2 in registers",
        declared = fused_us, hand = hand, unit = "us/iter", target = "(for reference)" })

  -- 2. Two branches of equal work, against one.
  local cycles = gpurun.i64(options.cycles)
  local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
  local function branches(count, timing)
    local p = gpurun.pipeline{ name = "branches" .. count, timing = timing, quiet = true }
    for k = 1, count do
      -- busy writes no memory: a token each branch's stages write orders them.
      local token = p:temporary("token" .. k, 1)
      for step = 1, 4 do
        p:launch{ busy, one, cycles, name = ("branch%d_%d"):format(k, step), writes = { token } }
      end
    end
    return p
  end
  local one_branch <close> = branches(1, false)
  local two_branches <close> = branches(2, false)
  local g1, g2 = one_branch:graph(stream), two_branches:graph(stream)
  stream:sync()
  local iters = math.max(20, options.iters // 20)
  local function per_replay(graph)
    return bench.run(stream, function(s) graph:launch(s) end, { iters = iters, warmup = 3,
      repeats = options.repeats, name = "overlap" }).us_per_iter
  end
  local t_one, t_two = per_replay(g1), per_replay(g2)
  row({ key = "overlap", what = ("two branches of 4 busy kernels (%d cycles each) vs one branch"):format(
        options.cycles), declared = t_two, hand = t_one, unit = "us/replay", target = "within 10%",
        ok = t_two <= t_one * 1.10 })
  local timed <close> = branches(2, true)
  timed:run(stream)
  local overlap_timeline = timed:timings()

  -- 3. One scalar, in place, against capturing anew.
  local reps = math.max(200, options.iters)
  local set_times = {}
  for k = 1, options.repeats do
    stream:sync()
    local start = clock()
    for i = 1, reps do
      dag:set("alpha", (i % 7) + 1.0)
    end
    set_times[k] = (clock() - start) * 1e6 / reps
  end
  local set_us = median(set_times)
  local capture_times = {}
  for k = 1, math.max(50, options.repeats) do
    stream:sync()
    local start = clock()
    local fresh = bench.capture(stream, function(builder) dag_by_hand(builder, (k % 7) + 1.0) end)
    capture_times[k] = (clock() - start) * 1e6
    fresh:close()
  end
  local capture_us = median(capture_times)
  row({ key = "set", what = "one scalar changed: pipeline:set (Graph:set_arg in place)", declared = set_us,
        hand = capture_us, unit = "us/change", target = "< 2 us, >= 25x cheaper than a new capture",
        ok = set_us < 2 and capture_us / set_us >= 25, vs = "a new capture + complete + upload" })
  local a2 = gpurun.empty(n):copy_from(a)
  local update_times = {}
  for k = 1, math.max(50, options.repeats) do
    stream:sync()
    local start = clock()
    dag:set("a", k % 2 == 1 and a2 or a)
    update_times[k] = (clock() - start) * 1e6
  end
  row({ key = "rebind", what = "a buffer pointed elsewhere: pipeline:set (capture + Graph:update)",
        declared = median(update_times), hand = capture_us, unit = "us/change",
        target = "(graph:update, no new graph)", ok = dag.captures == 1 })
  dag:graph(stream)
  stream:sync()
  gpurun.set_current_stream(nil)
  return overlap_timeline
end

-- ---- the table ------------------------------------------------------------------------------

local overlap_timeline
local device
if not options.plan_only then
  local problem, code = args.device_problem(0, gpurun.device_count(), gpurun.driver_error())
  if problem then
    io.stderr:write(PROGRAM, ": ", problem, "; --plan-only runs the planning rows\n")
    os.exit(code)
  end
  device = cli:open_device(0)
  overlap_timeline = gpu_rows(device)
end
planning_rows()

if options.json then
  io.write(cjson.encode({ device = device and device.name, elements = options.elements,
    iters = options.iters, repeats = options.repeats, rows = rows, timeline = overlap_timeline,
    lua_additions_ms = (lua_yardstick()) }), "\n")
  os.exit(0)
end
io.write(("pipeline_compare.lua%s: %d elements, medians of %d runs\n\n"):format(
  device and (" on " .. device.name) or " (planning only)", options.elements, options.repeats))
io.write(("(this CPU: 10^7 Lua additions in %.1f ms)\n\n"):format(lua_yardstick()))
io.write(("%-78s %12s %12s %8s  %-6s %s\n"):format("what", "declared", "by hand", "ratio", "target", ""))
for _, entry in ipairs(rows) do
  local ratio = entry.hand and entry.declared / entry.hand
  io.write(("%-78s %12.3f %12s %8s  %s%s\n"):format(entry.what .. " (" .. entry.unit .. ")", entry.declared,
    entry.hand and ("%.3f"):format(entry.hand) or "-", ratio and ("%.3f"):format(ratio) or "-",
    entry.target, entry.ok == nil and "" or (entry.ok and "  ok" or "  MISSED")))
end
if dag_structures then
  io.write(("\ndag.lua's DAG, declared: %s\n               by hand:  %s\n"):format(
    dag_structures.declared, dag_structures.hand))
  local function list(times)
    local parts = {}
    for k, t in ipairs(times) do parts[k] = ("%.2f"):format(t) end
    return table.concat(parts, " ")
  end
  io.write(("each instance, us/iter: declared %s\n                        by hand  %s\n"):format(
    list(dag_instances.declared), list(dag_instances.hand)))
end
if overlap_timeline then
  io.write("\nTimeline of the two branches, run stage by stage (events around each kernel):\n")
  io.write(timeline.format(overlap_timeline), "\n")
end
