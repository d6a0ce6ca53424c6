-- tests/sanitizer/two_streams.lua: whether initcheck follows writes made on
-- another stream. scripts/dag.lua, bench/graph_update.lua and
-- bench/pipeline_compare.lua read, in `combine`, two buffers written just
-- before by kernels on two streams, and initcheck called the reads
-- uninitialized. The same pipeline here three ways, each with a combine
-- kernel of its own name so that a report says which way it came from:
--   combine_one_stream   scale, shift and combine on one stream
--   combine_two_streams  shift on a second stream, joined by Stream:wait
--   combine_graph        the two-stream version captured (split and join)
--   combine_copy_graph   the same with a copy first on the second branch,
--                        as dag.lua's (b copied, then shifted)
-- Every result is checked exactly; exit 0 when all are right.
local gpurun = require("gpurun")

-- scripts/dag.lua's kernels, and combine again under three names.
local KERNELS = require("gpurun.samples.kernels").source("dag") .. [[
#define COMBINE(name) \
extern "C" __global__ void name(const float *x, const float *y, float *out, size_t n) \
{ \
    size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; \
    if (i < n) out[i] = x[i] + y[i]; \
}
COMBINE(combine_one_stream)
COMBINE(combine_two_streams)
COMBINE(combine_graph)
COMBINE(combine_copy_graph)
]]

local device = gpurun.Device(0):set_current()
local main <close> = device:create_stream()
local side <close> = device:create_stream()
local code <close> = gpurun.Program(KERNELS, "c++", { arch = "sm_" .. device.arch }):compile("cubin")
local scale, shift = code:get_kernel("scale"), code:get_kernel("shift")
local n = 4096
local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
local a <close> = gpurun.full(n, 1.0, "float32")
local b <close> = gpurun.full(n, 2.0, "float32")
local expected = 2.0 * 1.0 + (2.0 + 0.5)
local wrong = 0

local function check(name, r)
  main:sync()
  local mismatches = gpurun.compare(r, expected, 0, 0).mismatches
  print(("%s: %d of %d wrong"):format(name, mismatches, n))
  wrong = wrong + mismatches
end

do
  local x <close> = gpurun.empty(n)
  local y <close> = gpurun.empty(n)
  local r <close> = gpurun.empty(n)
  gpurun.launch(main, config, scale, a, x, 2.0, n)
  gpurun.launch(main, config, shift, b, y, 0.5, n)
  gpurun.launch(main, config, code:get_kernel("combine_one_stream"), x, y, r, n)
  check("combine_one_stream", r)
end

do
  local x <close> = gpurun.empty(n)
  local y <close> = gpurun.empty(n)
  local r <close> = gpurun.empty(n)
  gpurun.launch(side, config, shift, b, y, 0.5, n)
  gpurun.launch(main, config, scale, a, x, 2.0, n)
  main:wait(side)
  gpurun.launch(main, config, code:get_kernel("combine_two_streams"), x, y, r, n)
  check("combine_two_streams", r)
end

do
  local x <close> = gpurun.empty(n)
  local y <close> = gpurun.empty(n)
  local r <close> = gpurun.empty(n)
  local combine = code:get_kernel("combine_graph")
  local builder <close> = main:create_graph_builder()
  builder:begin_building()
  local branch, other = builder:split(2)
  gpurun.launch(other, config, shift, b, y, 0.5, n)
  gpurun.launch(branch, config, scale, a, x, 2.0, n)
  gpurun.join(branch, other)
  gpurun.launch(branch, config, combine, x, y, r, n)
  builder:end_building()
  local graph <close> = builder:complete()
  graph:launch(main)
  check("combine_graph", r)
end

do
  local b_copy <close> = gpurun.empty(n)
  local x <close> = gpurun.empty(n)
  local y <close> = gpurun.empty(n)
  local r <close> = gpurun.empty(n)
  local combine = code:get_kernel("combine_copy_graph")
  local builder <close> = main:create_graph_builder()
  builder:begin_building()
  local branch, other = builder:split(2)
  b_copy:copy_from(b, other)
  gpurun.launch(other, config, shift, b_copy, y, 0.5, n)
  gpurun.launch(branch, config, scale, a, x, 2.0, n)
  gpurun.join(branch, other)
  gpurun.launch(branch, config, combine, x, y, r, n)
  builder:end_building()
  local graph <close> = builder:complete()
  graph:launch(main)
  check("combine_copy_graph", r)
end

os.exit(wrong == 0, true)
