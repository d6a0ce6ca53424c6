-- tests/sanitizer/two_streams.lua: whether initcheck follows writes made on
-- another stream. scripts/dag.lua's pipeline eight ways, each with a combine
-- kernel of its own name so that a report says which way it came from;
-- docs/reliability.md ("initcheck and a copy beside a kernel") tells what
-- it found. Every result is checked exactly; exit 0 when all are right.
-- With a way's name as its argument it runs that way alone, so that a
-- process under initcheck starts from memory no other way wrote.
local gpurun = require("gpurun")

-- scripts/dag.lua's kernels, and combine again under seven names.
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
COMBINE(combine_copy_streams)
COMBINE(combine_updated_graph)
COMBINE(combine_set_args_graph)
COMBINE(combine_uploaded_graph)
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

-- One way: fresh buffers (b_copy, x, y, r: none written yet), its own
-- combine kernel, run(...) queuing the work, then the check and the frees.
local only, ran = arg[1], false
local function way(name, run)
  if only and only ~= name then return end
  ran = true
  local b_copy, x, y, r = gpurun.empty(n), gpurun.empty(n), gpurun.empty(n), gpurun.empty(n)
  io.stderr:write(("%s: b_copy 0x%x, x 0x%x, y 0x%x, r 0x%x\n"):format(name, b_copy.ptr, x.ptr,
    y.ptr, r.ptr))
  run(code:get_kernel(name), b_copy, x, y, r)
  side:sync()
  main:sync()
  local mismatches = gpurun.compare(r, expected, 0, 0).mismatches
  print(("%s: %d of %d wrong"):format(name, mismatches, n))
  wrong = wrong + mismatches
  for _, buffer in ipairs({ b_copy, x, y, r }) do buffer:close() end
end

-- The two branches captured from a builder split in two; with_copy puts
-- dag.lua's copy of b first on the second branch.
local function capture(builder, combine, b_copy, x, y, r, with_copy)
  builder:begin_building()
  local branch, other = builder:split(2)
  local source = b
  if with_copy then
    b_copy:copy_from(b, other)
    source = b_copy
  end
  gpurun.launch(other, config, shift, source, y, 0.5, n)
  gpurun.launch(branch, config, scale, a, x, 2.0, n)
  gpurun.join(branch, other)
  gpurun.launch(branch, config, combine, x, y, r, n)
  builder:end_building()
end

-- That graph, launched; then changed as change(graph, ...) says and
-- launched again.
local function graph_way(combine, b_copy, x, y, r, with_copy, change, upload)
  local builder <close> = main:create_graph_builder()
  capture(builder, combine, b_copy, x, y, r, with_copy)
  local graph <close> = builder:complete()
  if upload then graph:upload(main) end
  graph:launch(main)
  main:sync()
  if change then
    change(graph, combine, b_copy, x, y, r)
    graph:launch(main)
    main:sync()
  end
end

-- The ways, each reading in `combine` two buffers written just before by
-- kernels on two streams:
--   combine_one_stream   scale, shift and combine on one stream
--   combine_two_streams  shift on a second stream, joined by Stream:wait
--   combine_graph        the two-stream version captured (split and join)
--   combine_copy_graph   the same with a copy first on the second branch,
--                        as dag.lua's (b copied, then shifted)
--   combine_updated_graph  the copy graph, launched, then updated from a
--                        new capture of it (graph:update) and launched
--   combine_set_args_graph the copy graph, launched, then its scale node's
--                        arguments set again (graph:set_args) and launched
--   combine_uploaded_graph the copy graph uploaded (graph:upload) before its
--                        first launch, as bench.capture and pipelines do
--   combine_copy_streams dag.lua's two_streams() as it is: the copy and
--                        shift on the second stream, the current stream
--                        set, eight rounds (its warm-up and iterations)
way("combine_one_stream", function(combine, _, x, y, r)
  gpurun.launch(main, config, scale, a, x, 2.0, n)
  gpurun.launch(main, config, shift, b, y, 0.5, n)
  gpurun.launch(main, config, combine, x, y, r, n)
end)

way("combine_two_streams", function(combine, _, x, y, r)
  gpurun.launch(side, config, shift, b, y, 0.5, n)
  gpurun.launch(main, config, scale, a, x, 2.0, n)
  main:wait(side)
  gpurun.launch(main, config, combine, x, y, r, n)
end)

way("combine_graph", function(...) graph_way(...) end)
way("combine_copy_graph", function(combine, b_copy, x, y, r) graph_way(combine, b_copy, x, y, r, true) end)

way("combine_updated_graph", function(combine, b_copy, x, y, r)
  graph_way(combine, b_copy, x, y, r, true, function(graph)
    local again <close> = main:create_graph_builder()
    capture(again, combine, b_copy, x, y, r, true)
    graph:update(again)
  end)
end)

way("combine_set_args_graph", function(combine, b_copy, x, y, r)
  graph_way(combine, b_copy, x, y, r, true, function(graph)
    for _, node in ipairs(graph:nodes()) do
      if node.name == "scale" then graph:set_args(node.index, a, x, 2.0, n) end
    end
  end)
end)

way("combine_uploaded_graph", function(combine, b_copy, x, y, r)
  graph_way(combine, b_copy, x, y, r, true, nil, true)
end)

way("combine_copy_streams", function(combine, b_copy, x, y, r)
  gpurun.set_current_stream(main)
  for _ = 1, 8 do
    b_copy:copy_from(b, side)
    gpurun.launch(side, config, shift, b_copy, y, 0.5, n)
    gpurun.launch(main, config, scale, a, x, 2.0, n)
    main:wait(side)
    gpurun.launch(main, config, combine, x, y, r, n)
  end
  gpurun.set_current_stream(nil)
end)

if not ran then
  io.stderr:write("two_streams.lua: no way named ", tostring(only), "\n")
  os.exit(2, true)
end
os.exit(wrong == 0, true)
