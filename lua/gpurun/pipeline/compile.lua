-- Compiling a pipeline's schedule for one device: each unit made runnable
-- (a fusion group through its fused kernel, any other stage through its
-- kind's compile), the events its waits and timings need, and the pool
-- temporaries a run or a capture makes. A runnable unit resolves its
-- arguments once (buffers, typed scalars) into a table its launch unpacks,
-- so that a run allocates nothing but what its temporaries need from a
-- pool.
local gpurun = require("gpurun")
local fuse = require("gpurun.pipeline.fuse")
local launch_arguments = require("gpurun.pipeline.launch_arguments")
local schedule = require("gpurun.pipeline.schedule")

local compile = {}

-- A fusion group's unit: its fused kernel, with the group's inputs and
-- outputs as arguments.
local function compile_group(p, state, group, runnable)
  local fused = fuse.describe(p, group)
  local inputs, count, args = fused.inputs, #fused.inputs, runnable.args
  for _, input in ipairs(inputs) do
    if input.value ~= nil then
      input.constant = launch_arguments.call_constant(input.value, { type = input.type })
    end
  end
  local function scalar_of(scalar, position)
    return launch_arguments.typed(scalar, inputs[position].type)
  end
  runnable.refresh = function()
    launch_arguments.resolve(state, inputs, args, scalar_of)
    for k, d in ipairs(fused.outputs) do
      args[count + k] = launch_arguments.buffer_of(state, d)
    end
  end
  runnable.arity = count + #fused.outputs
  local pipe = fuse.kernel(p, group)
  runnable.object = pipe
  if runnable.unit.programmatic then
    runnable.launch = function(target)
      pipe:launch_after_kernel(target, table.unpack(args, 1, runnable.arity))
    end
  else
    runnable.launch = function(target) pipe(target, table.unpack(args, 1, runnable.arity)) end
  end
  for _, input in ipairs(inputs) do
    if input.scalar then runnable.scalars[input.scalar] = true end
  end
end

-- Unit u of the schedule made runnable: { unit (the schedule's), index,
-- name, args, scalars (the scalars it passes: a set), refresh(),
-- launch(target), arity, object or node_slots (see pipeline/stage_kinds.lua) }.
local function compile_unit(p, state, sched, u)
  local unit = sched.units[u]
  local runnable = { unit = unit, index = u, scalars = {}, args = {} }
  local names = {}
  for _, index in ipairs(unit.stages) do names[#names + 1] = p.stages[index].name end
  runnable.name = table.concat(names, " + ")
  if unit.group then
    compile_group(p, state, unit.group, runnable)
    return runnable
  end
  local stage = p.stages[unit.stages[1]]
  stage.kind.compile(stage, runnable, state)
  for _, arg in ipairs(stage.args or {}) do
    if arg.scalar then runnable.scalars[arg.scalar] = true end
  end
  return runnable
end

-- Lets go of the events and host callbacks a compiled schedule made. A
-- callback a graph still uses, or with runs queued, is left to the
-- collector (which the graph or the queue keeps it from until then).
function compile.release(state)
  for _, callback in ipairs(state.callbacks or {}) do
    pcall(callback.close, callback)
  end
  state.callbacks = {}
  for _, event in ipairs(state.owned_events or {}) do
    event:close()
  end
  state.owned_events = {}
end
local release = compile.release

local function new_event(state, timing)
  local event = gpurun.Event{ timing = timing or false }
  state.owned_events[#state.owned_events + 1] = event
  return event
end

-- Pool temporaries: made on `target` (a stream, or the capturing builder:
-- a memory-alloc node) before the units, freed after them (free_pool).
-- Returns the data made.
--
-- Temporaries that fusion does not keep in registers come from a memory
-- pool (options.pool, else the device's default one: gpurun.empty(n, dtype,
-- { pool =, stream = })): in a run, made on the first stream before the
-- fork and freed on it after the join; in a graph, made on the capturing
-- builder (allocation nodes at its start) and freed after the join (free
-- nodes at its end), so that each replay makes them and the driver may
-- reuse their memory.
function compile.pool_temporaries(p, state, sched, target)
  local made = {}
  local placement = { stream = target, pool = p.options.pool }
  for _, t in ipairs(sched.temporaries) do
    if t.where == "pool" then
      local buffer = gpurun.empty(t.data.count, t.data.dtype, placement)
      state.temps[t.data] = buffer
      made[#made + 1] = t.data
    end
  end
  return made
end

function compile.free_pool(state, made)
  for _, d in ipairs(made) do
    state.temps[d]:close()
    state.temps[d] = nil
  end
end

function compile.refresh_all(state)
  for _, runnable in ipairs(state.units) do
    runnable.refresh()
  end
end

-- p.state: everything p's schedule needs on `device` (its runnable units,
-- events, side streams), compiled once per declaration. Returns it and
-- the schedule.
function compile.for_device(p, device)
  local sched = schedule.of(p)
  local state = p.state
  if state.version == p.version and state.device == device then
    return state, sched
  end
  if state.device and state.device ~= device then
    release(state)
    state.side_streams = {}
  end
  state.version, state.device = p.version, device
  state.temps = state.temps or {} -- a pool's, only while a run or capture makes them
  state.views = state.views or {}
  state.side_streams = state.side_streams or {}
  state.callbacks = state.callbacks or {}
  state.owned_events = state.owned_events or {}
  release(state)
  state.units = {}
  for u = 1, #sched.units do
    state.units[u] = compile_unit(p, state, sched, u)
  end
  state.run_events, state.capture_events, state.timing_events = {}, {}, {}
  if p.options.timing == "events" then
    state.start_event = new_event(state, true)
  end
  -- Which units pass each scalar (set() refreshes those only).
  state.scalar_users = {}
  for _, runnable in ipairs(state.units) do
    for scalar in pairs(runnable.scalars) do
      local list = state.scalar_users[scalar] or {}
      state.scalar_users[scalar] = list
      list[#list + 1] = runnable
    end
  end
  for u, unit in ipairs(sched.units) do
    if unit.signals then
      state.run_events[u] = new_event(state)
      state.capture_events[u] = new_event(state)
    end
    if p.options.timing == "events" then
      state.timing_events[u] = { new_event(state, true), new_event(state, true) }
    end
  end
  local pools = false
  for _, t in ipairs(sched.temporaries) do
    if t.where == "pool" then pools = true end
  end
  state.pools = pools
  if not pools then
    compile.refresh_all(state)
  end
  return state, sched
end

-- Compiles and loads every kernel the units launch (a capture may not),
-- with the arguments they will take, and makes what a unit's library call
-- needs made before a capture (runnable.prepare(stream): an FFT plan):
-- pool temporaries are made on the stream for it (a capture makes its
-- own) and freed again.
function compile.prepare_kernels(p, state, sched, stream)
  local made
  if state.pools then
    made = compile.pool_temporaries(p, state, sched, stream)
  end
  compile.refresh_all(state)
  for _, runnable in ipairs(state.units) do
    runnable.stale = nil
    local object = runnable.object
    if object and object.prepare then
      object:prepare(table.unpack(runnable.args, 1, runnable.arity))
    end
    if runnable.prepare then
      runnable.prepare(stream)
    end
  end
  if made then
    compile.free_pool(state, made)
  end
end

return compile
