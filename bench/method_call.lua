-- bench/method_call.lua: what a method call and a field read cost from Lua,
-- in ns per call (medians), on the calls that run in loops: one line per
-- case, `name: N ns/call`; docs/benchmark.md has the cases and figures.
--
--   build/gpurun bench/method_call.lua [--reps 31] [--calls 200] [--lookups 200000]
--
-- To compare two builds, run the same file with each gpurun in one command.
-- Without a GPU it says so and exits 1.

local gpurun = require("gpurun")
local args = require("gpurun.args")
local median = require("gpurun.bench").median

local cli = args.new("method_call.lua", "What a method call and a field read cost from Lua, in ns per call.")
cli:integer_option("--reps", "Timed loops per case (the median is printed).", 31)
cli:integer_option("--calls", "Launches per timed loop of the launch cases.", 200)
cli:integer_option("--lookups", "Reads per timed loop of the other cases.", 200000)
local options = cli:parse(arg)

local dev = cli:open_device(0)
local clock = gpurun.perf_counter

-- The median ns per call of `calls` calls of loop(calls), timed reps times.
local function ns_per_call(loop, calls, before, after)
  local runs = {}
  for r = 1, options.reps do
    if before then before() end
    collectgarbage("collect")
    local start = clock()
    loop(calls)
    runs[r] = (clock() - start) * 1e9 / calls
    if after then after() end
  end
  return median(runs)
end

local function report(name, ns)
  print(("%s: %.1f ns/call"):format(name, ns))
end

local stream <close> = dev:create_stream()
local program <close> = gpurun.Program([[
extern "C" __global__ void touch(float *x) { if (threadIdx.x == 0 && blockIdx.x == 0) x[0] += 1.0f; }
]], "c++", { arch = "sm_" .. dev.arch })
local code <close> = program:compile("cubin")
local kernel = code:get_kernel("touch")
local buf <close> = gpurun.zeros(256, "float32")
local config = gpurun.LaunchConfig{ grid = 1, block = 32 }
local plan <close> = kernel:bind(config, buf)
local builder <close> = stream:create_graph_builder()
builder:begin_building()
gpurun.launch(builder, config, kernel, buf)
builder:end_building()
local graph <close> = builder:complete()
graph:upload(stream)
graph:launch(stream)
plan:launch(stream)
stream:sync()

local Object = {}
Object.__index = Object
function Object.method(_) end
local object = setmetatable({}, Object)

local function sync() stream:sync() end

-- A loop of n calls of `body` (Lua text over o and s), compiled with the
-- key written out, as a script writes it: `o:launch(s)`, `o.size`.
local function loop(body, o)
  local chunk = ("local o, s = ...; return function(n) local f; for _ = 1, n do %s end; return f end")
    :format(body)
  return assert(load(chunk, "=" .. body))(o, stream)
end

-- The cases:
--   lua table:method()       an empty method of a plain Lua object (methods
--                            table as __index): the reference for a call
--   graph:launch(stream)     a one-kernel graph replayed: lookup, call, cuGraphLaunch
--   plan:launch(stream)      a bound one-kernel launch: lookup, call, cuLaunchKernel
--   lua table.method         the method looked up only (no call)
--   graph.launch             the same for the Graph's method
--   plan.launch              the same for the LaunchPlan's method
--   buf.size                 a field of a Buffer (its getter runs)
--   empty loop               the loop alone, included in every figure above
-- The launch cases time --calls launches between two syncs, outside the
-- timed interval (so the GPU's queue never fills); the lookups time
-- --lookups reads. Each case is timed --reps times and the median printed.
for _, case in ipairs({
  { "lua table:method()", "o:method()", object, options.lookups },
  { "graph:launch(stream)", "o:launch(s)", graph, options.calls, sync },
  { "plan:launch(stream)", "o:launch(s)", plan, options.calls, sync },
  { "lua table.method", "f = o.method", object, options.lookups },
  { "graph.launch", "f = o.launch", graph, options.lookups },
  { "plan.launch", "f = o.launch", plan, options.lookups },
  { "buf.size", "f = o.size", buf, options.lookups },
  { "empty loop", "f = o", object, options.lookups },
}) do
  local name, body, o, calls, around = table.unpack(case)
  report(name, ns_per_call(loop(body, o), calls, around, around))
end
stream:sync()
