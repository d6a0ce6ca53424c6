-- bench/graph_profile.lua: what Graph:profile's instrumented twin costs
-- against the graph it times, for scripts/dag.lua's graph (two branches, a
-- copy node, a join): the node times along the critical path (and their
-- brackets, before an empty bracket's time is taken off each) and over all
-- nodes, the twin's replay and the plain graph's replay (medians), and
-- their ratios. Target: the critical path's sum within 10% of the plain
-- replay time (0.90 to 1.10).
--
--   build/gpurun bench/graph_profile.lua [--elements N] [--replays N] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local cjson = require("cjson")
local bench = require("gpurun.bench")
local timeline = require("gpurun.timeline")
local format = require("gpurun.graph.profile").format

local cli = args.new("graph_profile.lua", "The node times of dag.lua's graph against its replay time.")
cli:integer_option("--elements", "Elements per vector.", 65536)
cli:integer_option("--replays", "Replays of the twin and of the graph (1 to 10000).", 200)
cli:flag("--json", "One JSON object instead of the table.")
local options = cli:parse(arg)
if options.replays > 10000 then
  io.stderr:write("graph_profile.lua: error: --replays: expected an integer from 1 to 10000, got '",
                  options.replays, "'\n")
  os.exit(2)
end

local device = cli:open_device(0)
local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local n = options.elements
local dag <close> = require("gpurun.samples.dag_graph").new(device, n)
local graph <close> = bench.capture(stream, function(builder) dag:capture(builder, 2.0) end)
graph:launch(stream)
stream:sync()
if not dag:correct(2.0) then
  error("graph_profile.lua: dag.lua's graph gave a wrong result", 0)
end

local result = graph:profile(stream, { replays = options.replays })
local critical_ratio = result.critical_us / result.plain_us
local brackets_us = 0 -- the critical path's brackets, the events' own cost in them
for _, i in ipairs(result.critical_path) do brackets_us = brackets_us + result.nodes[i].bracket_us end
local summary = {
  device = device.name, elements = n, replays = result.replays, nodes = #result.nodes,
  critical_us = result.critical_us, total_us = result.total_us, twin_us = result.twin_us,
  empty_us = result.empty_us, critical_brackets_us = brackets_us,
  plain_us = result.plain_us, critical_over_plain = critical_ratio,
  total_over_plain = result.total_us / result.plain_us, twin_over_plain = result.twin_us / result.plain_us,
  within_target = critical_ratio >= 0.9 and critical_ratio <= 1.1,
  node_us = {},
}
for k, node in ipairs(result.nodes) do
  summary.node_us[k] = { index = node.index, name = node.name or node.kind, us = node.us,
                         critical = node.critical }
end

if options.json then
  print(cjson.encode(summary))
  return
end
print(("graph_profile.lua on %s: dag.lua's graph, %d elements, %d nodes, medians of %d replays")
  :format(device.name, n, #result.nodes, result.replays))
print(format(result))
print(timeline.format(result))
print(("%-44s %10s %8s"):format("", "us", "/ plain"))
print(("%-44s %10.3f %8s"):format("plain graph replay", result.plain_us, "1.000"))
print(("%-44s %10.3f %8.3f"):format("node times along the critical path", result.critical_us, critical_ratio))
print(("%-44s %10.3f %8.3f"):format("their brackets (an empty one is " .. ("%.3f us)"):format(result.empty_us),
  brackets_us, brackets_us / result.plain_us))
print(("%-44s %10.3f %8.3f"):format("node times, all nodes (branches overlap)", result.total_us,
  summary.total_over_plain))
print(("%-44s %10.3f %8.3f"):format("instrumented twin's replay", result.twin_us, summary.twin_over_plain))
print(("critical path / plain replay: %.3f (target 0.90 to 1.10: %s)"):format(critical_ratio,
  summary.within_target and "met" or "missed"))
