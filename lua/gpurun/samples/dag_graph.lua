-- scripts/dag.lua's graph for the benchmarks: two branches (a copy of b
-- then shift into y; scale of a into x), joined, then combine into r, so
-- that r = alpha * 1 + (2 + 0.5). Four nodes over float32 vectors.
--
--   local dag <close> = require("gpurun.samples.dag_graph").new(device, n)
--   local graph = bench.capture(stream, function(builder) dag:capture(builder, 2.0) end)

local gpurun = require("gpurun")
local kernels = require("gpurun.samples.kernels")

local dag_graph = {}

local Dag = {}
Dag.__index = Dag

-- Captures the four nodes on builder, scale's factor alpha.
function Dag:capture(builder, alpha)
  local n, config = self.n, self.config
  local side
  builder, side = builder:split(2)
  self.b_copy:copy_from(self.b, side)
  gpurun.launch(side, config, self.shift, self.b_copy, self.y, 0.5, n)
  gpurun.launch(builder, config, self.scale, self.a, self.x, alpha, n)
  gpurun.join(builder, side)
  gpurun.launch(builder, config, self.combine, self.x, self.y, self.r, n)
end

-- Whether r holds what a replay with scale's factor alpha gives.
function Dag:correct(alpha)
  return gpurun.allclose(self.r, alpha + 2.5, 1e-6, 0)
end

-- The buffers, then the code.
function Dag:close()
  for _, name in ipairs{ "a", "b", "b_copy", "x", "y", "r", "code" } do
    self[name]:close()
  end
end
Dag.__close = Dag.close

-- The kernels compiled for device, and the vectors of n elements.
function dag_graph.new(device, n)
  local code = gpurun.Program(kernels.source("dag"), "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  return setmetatable({
    n = n, code = code, config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 },
    scale = code:get_kernel("scale"), shift = code:get_kernel("shift"),
    combine = code:get_kernel("combine"),
    a = gpurun.full(n, 1.0, "float32"), b = gpurun.full(n, 2.0, "float32"),
    b_copy = gpurun.empty(n, "float32"), x = gpurun.empty(n, "float32"),
    y = gpurun.empty(n, "float32"), r = gpurun.empty(n, "float32"),
  }, Dag)
end

return dag_graph
