-- bench/graph_update.lua: what changing one scalar of a graph costs, three
-- ways, in microseconds (median over repetitions): a new graph (capture,
-- complete, upload), a new capture of the same pipeline updated into the
-- graph (graph:update), and the one kernel node's arguments set in place
-- (graph:set_args). The pipeline is scripts/dag.lua's shape: two branches,
-- a copy node and a join, four nodes. Each way's result is checked.
--
--   build/gpurun bench/graph_update.lua [--elements N] [--reps N] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")

local cli = args.new("graph_update.lua", "The cost of changing one scalar of a graph.")
cli:integer_option("--elements", "Elements per vector.", 65536)
cli:integer_option("--reps", "Repetitions of each way.", 200)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)

local device = cli:open_device(0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local n = options.elements
local dag <close> = require("gpurun.samples.dag_graph").new(device, n)

local function captured(alpha)
  local builder = stream:create_graph_builder()
  builder:begin_building()
  dag:capture(builder, alpha)
  builder:end_building()
  return builder
end

-- Runs the graph and checks r = alpha * 1 + (2 + 0.5).
local function check(graph, alpha, way)
  graph:launch(stream)
  stream:sync()
  if not dag:correct(alpha) then
    error(("%s: wrong result for alpha %g"):format(way, alpha), 0)
  end
end

local clock = gpurun.perf_counter
local function time_us(step)
  local values = {}
  for rep = 1, options.reps do
    local alpha = rep % 7 + 1.0
    stream:sync()
    local start = clock()
    step(alpha)
    values[rep] = (clock() - start) * 1e6
  end
  return values
end

local graph = bench.capture(stream, function(builder) dag:capture(builder, 1.0) end)
local scale_node
for _, node in ipairs(graph:nodes()) do
  if node.name == "scale" then scale_node = node.index end
end

local recapture = time_us(function(alpha)
  local builder <close> = captured(alpha)
  local fresh = builder:complete()
  fresh:upload(stream)
  graph:close()
  graph = fresh
end)
local last_alpha = options.reps % 7 + 1.0
check(graph, last_alpha, "a new graph")
for _, node in ipairs(graph:nodes()) do
  if node.name == "scale" then scale_node = node.index end
end

local update = time_us(function(alpha)
  local builder <close> = captured(alpha)
  graph:update(builder)
end)
check(graph, last_alpha, "graph:update")

local set_args = time_us(function(alpha)
  graph:set_args(scale_node, dag.a, dag.x, alpha, n)
end)
check(graph, last_alpha, "graph:set_args")

local median = bench.median
local results = {
  device = device.name,
  elements = n,
  reps = options.reps,
  nodes = graph.node_count,
  unit = "us",
  new_graph = median(recapture),
  update = median(update),
  set_args = median(set_args),
}
results.update_speedup = results.new_graph / results.update
results.set_args_speedup = results.new_graph / results.set_args
graph:close()
gpurun.set_current_stream(nil)

if options.json then
  io.write(cjson.encode(results), "\n")
else
  io.write(("%s, a %d-node graph, %d elements; median of %d reps, microseconds\n\n"):format(
    results.device, results.nodes, n, options.reps))
  io.write(("  capture + complete + upload (a new graph)   %9.1f\n"):format(results.new_graph))
  io.write(("  capture + graph:update                       %9.1f   %5.1fx cheaper\n"):format(
    results.update, results.update_speedup))
  io.write(("  graph:set_args on the scale node             %9.1f   %5.1fx cheaper\n"):format(
    results.set_args, results.set_args_speedup))
end
