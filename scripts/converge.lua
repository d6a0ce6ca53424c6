-- converge.lua: a loop that runs until a value computed on the device
-- converges, inside one graph launch: a Jacobi relaxation solved as one
-- graph with a while node decided by an expression (or, with
-- --hand-written, by a kernel of its own), and again from Lua reading the
-- residual back after every step; both timed and checked against the host.
-- --cancel-after MS runs a loop that never ends and stops it from the host;
-- --forever runs it until Ctrl-C.
--
--   gpurun scripts/converge.lua [--points N] [--tol X] [--max-iters N] [--hand-written]
--                               [--cancel-after MS | --forever] [--iters N] [--device ID] [--json]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")

local KERNELS = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void relax(const float *u, float *v, unsigned int n)
{
    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n)
        return;
    v[i] = i == 0 || i == n - 1 ? u[i] : 0.5f * (u[i - 1] + u[i + 1]);
}

extern "C" __global__ void count(unsigned int *steps) { ++*steps; }

extern "C" __global__ void decide(cudaGraphConditionalHandle condition, const float *residual,
                                  float tol, unsigned int *steps, unsigned int max_steps)
{
    unsigned int done = ++*steps;
    cudaGraphSetConditional(condition, *residual > tol && done < max_steps ? 1u : 0u);
}
]]

local cli = args.new("converge.lua",
  "Iterates a relaxation until its residual converges, in one graph (a while node) and from Lua.")
cli:integer_option("--points", "Points of the grid.", 32, 3)
cli:number_option("--tol", "Stop when no point changes by more than this.", 1e-4)
cli:integer_option("--max-iters", "Steps at most.", 200000)
cli:flag("--hand-written", "Decide the loop with a kernel of the script's, not an expression.")
cli:integer_option("--cancel-after", "Also run a loop that never ends and cancel it after MS ms.", nil, 0)
cli:flag("--forever", "Run a loop that never ends, until Ctrl-C.")
cli:common_options{ iters = 5 }
local options = cli:parse(arg)
if options.tol <= 0 then
  cli:usage_error(("--tol: expected a positive number, got %g"):format(options.tol))
end

-- The initial values: 0 everywhere but 1 at the right end.
local function initial(n)
  local u = {}
  for i = 1, n do u[i] = i == n and 1.0 or 0.0 end
  return u
end

-- The same relaxation in Lua, in double precision: the values and steps.
local function host_solve(n, tol, max_steps)
  local u, v = initial(n), {}
  local steps = 0
  repeat
    local residual = 0
    for i = 1, n do
      v[i] = (i == 1 or i == n) and u[i] or 0.5 * (u[i - 1] + u[i + 1])
      residual = math.max(residual, math.abs(v[i] - u[i]))
    end
    u, v = v, u
    steps = steps + 1
  until residual <= tol or steps >= max_steps
  return u, steps
end

-- A loop that never ends (nothing clears its condition), stopped from the
-- host: graph:cancel() after --cancel-after ms, timed to the stream's end,
-- then a sync that must find the device idle; or, with --forever, a wait
-- that Ctrl-C ends (the loop checks its cancel flag after each pass).
local function run_forever(stream, step, u, u0, given, out, checks)
  local forever <close> = bench.capture(stream, function(builder)
    u:copy_from(u0, builder)
    local body = builder:while_loop(builder:create_condition(1))
    body:begin_building()
    step(body)
    body:end_building()
  end)
  forever:launch(stream)
  if given.forever then
    out:say("\nRunning a loop that never ends: Ctrl-C stops it")
    stream:sync()
    return
  end
  local started = gpurun.perf_counter()
  while gpurun.perf_counter() - started < given.cancel_after / 1000 do end
  local asked = gpurun.perf_counter()
  forever:cancel()
  stream:sync()
  local stopped = gpurun.perf_counter()
  stream:sync()
  local idle = gpurun.perf_counter()
  out:field("cancel_ms", (stopped - asked) * 1e3)
  out:field("idle_sync_us", (idle - stopped) * 1e6)
  out:say(("Cancelled after %d ms: stopped %.3f ms after graph:cancel(); the next sync took %.1f us")
    :format(given.cancel_after, (stopped - asked) * 1e3, (idle - stopped) * 1e6))
  checks:condition("the device is idle after the cancel", stream:query(), "stream still busy")
end

-- Jacobi relaxation of u'' = 0 on --points points with u = 0 and u = 1 at
-- the ends: each step sets every inner point to the mean of its
-- neighbours, and the residual is the largest change a step made. The loop
-- stops when the residual drops to --tol or below (or after --max-iters
-- steps). As a graph, the loop is a while node: its body runs a step (a
-- kernel), reduces max |v - u| into the residual on the device
-- (gpurun.max_abs_diff), copies the new values back (a memcpy node) and lets
-- a one-thread kernel set the condition from the residual, so the host
-- waits once per solve. The same solve driven from Lua reads the residual
-- back after every step. Both are timed, must take the same number of steps
-- to the same values, and are checked against the same relaxation in Lua
-- on the host.
local function main()
  local device, out, checks = cli:open_run(options)
  local n, tol, max_steps = options.points, options.tol, options.max_iters
  for _, key in ipairs{ "points", "tol", "max_iters", "iters" } do out:field(key, options[key]) end

  local stream <close> = device:create_stream()
  gpurun.set_current_stream(stream)
  local code <close> = gpurun.Program(KERNELS, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
  local relax <close> = code:get_kernel("relax")
  local decide <close> = code:get_kernel("decide")
  local count_step <close> = code:get_kernel("count")

  local u0 <close> = gpurun.array(initial(n), "float32")
  local u <close> = gpurun.empty(n, "float32")
  local v <close> = gpurun.empty(n, "float32")
  local residual <close> = gpurun.zeros(1, "float32")
  local steps <close> = gpurun.zeros(1, "uint32")
  local grid = gpurun.LaunchConfig{ grid = (n + 127) // 128, block = 128 }
  local one = gpurun.LaunchConfig{ grid = 1, block = 1 }

  -- One step: relax u into v, the largest change into residual, v back to u.
  local function step(target)
    gpurun.launch(target, grid, relax, u, v, n)
    gpurun.max_abs_diff(target, v, u, residual)
    u:copy_from(v, target)
  end
  u:copy_from(u0, stream) -- the step below reads u
  step(stream) -- compiles the reduction, which a capture cannot

  -- The solve as one graph: reset, then a while loop. By default an
  -- expression decides it: the values before each step kept in w, and the
  -- loop goes on while the step changed some point by more than tol (as
  -- float32 compares it, as the kernel below does) and the steps are fewer
  -- than max_steps. --hand-written: a kernel in the body decides.
  local w <close> = gpurun.empty(n, "float32")
  local tol32 = string.unpack("f", string.pack("f", tol))
  local expression = ("max_abs_diff(u, w) > %.17g and max(steps) < %d"):format(tol32, max_steps)
  local graph <close> = bench.capture(stream, function(builder)
    u:copy_from(u0, builder)
    steps:fill(0, builder)
    local body
    if options.hand_written then
      local again = builder:create_condition(1)
      body = builder:while_loop(again)
      body:begin_building()
      step(body)
      gpurun.launch(body, one, decide, again, residual, tol, steps, max_steps)
    else
      w:fill(1e30, builder) -- far from u: the first step always runs
      body = builder:while_loop(expression, { u = u, w = w, steps = steps })
      body:begin_building()
      w:copy_from(u, body)
      step(body)
      gpurun.launch(body, one, count_step, steps)
    end
    body:end_building()
  end)
  out:field("decision", options.hand_written and "kernel" or expression)

  -- The same solve from Lua: one device-to-host read per step.
  local function lua_solve(s)
    u:copy_from(u0, s)
    local count = 0
    repeat
      step(s)
      count = count + 1
    until residual:get(1, s) <= tol or count >= max_steps
    return count
  end

  local reference, host_steps = host_solve(n, tol, max_steps)
  local expected <close> = gpurun.array(reference, "float32")
  -- float32 against float64: the values agree to about the tolerance, and
  -- never closer than float32's rounding over the steps allows.
  local atol = math.max(10 * tol, 1e-5)

  local lua_steps = lua_solve(stream)
  local lua_values = u:to_table()
  checks:buffers("solved from Lua", u, expected, 0, atol)

  graph:launch(stream)
  stream:sync()
  local graph_steps = steps:get(1)
  checks:buffers("solved in one graph", u, expected, 0, atol)
  checks:tables("graph and Lua agree", u:to_table(), lua_values, 0, 0)
  checks:condition("graph and Lua take the same steps", graph_steps == lua_steps,
                ("graph %d, Lua %d"):format(graph_steps, lua_steps))
  out:field("steps", graph_steps)
  out:field("host_steps", host_steps)
  out:say(("\n%d points, tolerance %g: %d steps on the device (%d in double precision on the host)")
    :format(n, tol, graph_steps, host_steps))

  local in_graph = bench.run(stream, function(s) graph:launch(s) end,
                             { iters = options.iters, warmup = 1, name = "while graph" })
  local from_lua = bench.run(stream, function(s) lua_solve(s) end,
                             { iters = options.iters, warmup = 1, name = "Lua loop" })
  local per_step = function(result) return result.seconds * 1e6 / (result.iters * graph_steps) end
  out:timing("graph", "One graph (while node):  ", in_graph)
  out:timing("lua", "Lua loop, a read a step: ", from_lua)
  out:field("graph_us_per_step", per_step(in_graph))
  out:field("lua_us_per_step", per_step(from_lua))
  out:say(("Per step: %.2f us in the graph, %.2f us from Lua"):format(per_step(in_graph),
                                                                    per_step(from_lua)))
  out:speedup("Graph speedup: ", from_lua, in_graph)

  if options.cancel_after or options.forever then
    run_forever(stream, step, u, u0, options, out, checks)
  end

  gpurun.set_current_stream(nil)
  if checks:passed() then
    out:say("\nDone")
  end
  return out:finish(checks)
end

os.exit(main(), true)
