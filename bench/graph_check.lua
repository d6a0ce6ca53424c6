-- bench/graph_check.lua: what the race check of a 1,000-node graph costs on
-- the CPU, in ms (medians): the pure checker on node lists made the same
-- way every run (a chain, a fork-join of many branches, a random DAG over
-- overlapping ranges) and, with a GPU, Graph:check on a captured graph of
-- as many kernels (reading its nodes from the driver included). One line
-- per case, `name: N ms`.
--
--   build/gpurun bench/graph_check.lua [--nodes 1000] [--reps 21]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local median = require("gpurun.bench").median
local race_check = require("gpurun.graph.race_check")

local cli = args.new("graph_check.lua", "What the race check of a graph costs on the CPU, in ms.")
cli:integer_option("--nodes", "Nodes per graph.", 1000)
cli:integer_option("--reps", "Timed checks per case (the median is printed).", 21)
local options = cli:parse(arg)
local N = options.nodes

local function access(mode, lo, hi, label)
  return { key = "memory", lo = lo, hi = hi, mode = mode, label = label }
end

-- Each node reads two of `buffers` buffers of 4 KiB and writes a third,
-- after `deps(i)`; own(i) -> the first and count of the buffers node i
-- draws from (all, by default).
local function node_list(buffers, deps, ranged, own)
  math.randomseed(42)
  local nodes = {}
  for i = 1, N do
    local function buffer(mode)
      local first, count = 1, buffers
      if own then first, count = own(i) end
      local b = first + math.random(count) - 1
      local lo, hi = b * 4096, b * 4096 + 4096
      if ranged then
        lo = lo + math.random(0, 3) * 1024
        hi = lo + 1024
      end
      return access(mode, lo, hi, "b" .. b)
    end
    nodes[i] = { kind = "kernel", name = "k" .. i, dependencies = deps(i),
                 accesses = { buffer("r"), buffer("r"), buffer("w") } }
  end
  return nodes
end

local CASES = {
  { "chain of kernels over 3 buffers", function()
    return node_list(3, function(i) return i > 1 and { i - 1 } or {} end)
  end },
  { "16 branches, 4 buffers each", function()
    return node_list(64, function(i) return i > 16 and { i - 16 } or {} end, false,
      function(i) return (i % 16) * 4 + 1, 4 end)
  end },
  { "16 branches sharing 64 buffers (racy)", function()
    return node_list(64, function(i) return i > 16 and { i - 16 } or {} end)
  end },
  { "random DAG, quarter ranges of 32 buffers", function()
    return node_list(32, function(i)
      local deps = {}
      for _ = 1, math.min(i - 1, 3) do
        local d = math.random(math.max(1, i - 20), i - 1)
        local seen = false
        for _, x in ipairs(deps) do seen = seen or x == d end
        if not seen then deps[#deps + 1] = d end
      end
      return deps
    end, true)
  end },
}

local function time(check)
  local runs = {}
  for r = 1, options.reps do
    collectgarbage("collect")
    local start = gpurun.perf_counter()
    check()
    runs[r] = (gpurun.perf_counter() - start) * 1e3
  end
  return median(runs)
end

for _, case in ipairs(CASES) do
  local nodes = case[2]()
  local races = race_check.check(nodes)
  print(("%s (%d nodes, %d races): %.2f ms"):format(case[1], N, #races,
    time(function() race_check.check(nodes) end)))
end

if gpurun.device_count() == 0 then
  print("no GPU: Graph:check on a captured graph not timed")
  return
end
local dev = cli:open_device(0)
local stream = dev:create_stream()
local SOURCE = [[
extern "C" __global__ void step(const float *a, const float *b, float *out, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = a[i] + b[i];
}
]]
local kernel = gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions{ arch = "sm_" .. dev.arch })
  :compile("cubin"):get_kernel("step")
local config = gpurun.LaunchConfig{ grid = 1, block = 256 }
local buffers = {}
for b = 1, 64 do buffers[b] = gpurun.empty(256, "float32") end
local builder = stream:create_graph_builder()
builder:begin_building()
local branches = { builder:split(4) }
math.randomseed(7)
for i = 1, N do
  local on = branches[i % 4 + 1]
  gpurun.launch(on, config, kernel, buffers[math.random(64)], buffers[math.random(64)],
    buffers[(i % 4) * 16 + math.random(16)], 256)
end
gpurun.join(table.unpack(branches))
builder:end_building()
local built = time(function() builder:check() end)
local graph = builder:complete()
local races = graph:check()
print(("Graph:check, %d kernels on 4 branches (%d races): %.2f ms"):format(graph.node_count, #races,
  time(function() graph:check() end)))
print(("GraphBuilder:check, the same: %.2f ms"):format(built))
