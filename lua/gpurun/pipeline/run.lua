-- Running a pipeline's plan: pipeline:run(stream) launches its units on
-- the planned streams (side streams made once per device, events for the
-- waits), pipeline:graph(stream) captures the same into one Graph and
-- replays it, pipeline:set(name, value) changes a scalar in place
-- (Graph:set_arg on the nodes that pass it) or points data at another
-- buffer of the same shape (a new capture, then Graph:update), and a plan
-- that changed is captured again (said once, on stderr).
--
-- Compiling a unit resolves its arguments once (buffers, typed scalars)
-- into a table its launch unpacks, so that a run allocates nothing but
-- what its temporaries need from a pool. Temporaries that fusion does not
-- keep in registers come from a memory pool (options.pool, else the
-- device's default one: gpurun.empty(n, dtype, { pool =, stream = })): in
-- a run, made on the first stream before the fork and freed on it after
-- the join; in a graph, made on the capturing builder (allocation nodes at
-- its start) and freed after the join (free nodes at its end), so that
-- each replay makes them and the driver may reuse their memory.
local gpurun = require("gpurun")
local nvtx = require("gpurun.nvtx")
local Pipeline = require("gpurun.pipeline.declare")
local common = require("gpurun.common")

local raise = common.raise
local DTYPES = common.DTYPES
local type_name = common.type_name

-- ---- arguments ---------------------------------------------------------------------

-- The typed scalar of `dtype` for a scalar's value, made once per value.
local function typed(scalar, dtype)
  local value = scalar.typed[dtype]
  if value == nil then
    local make = gpurun[DTYPES[dtype].scalar]
    local number = scalar.value
    if not DTYPES[dtype].float then
      number = math.tointeger(number) or raise(("scalar '%s' is %s, not an integer (a %s "
        .. "parameter takes it)"):format(scalar.name, tostring(number), dtype))
    end
    value = make(number)
    scalar.typed[dtype] = value
  end
  return value
end

-- The buffer behind data (a view made once per base buffer).
local function buffer_of(state, data)
  if data.kind == "buffer" then
    return data.buffer
  elseif data.kind == "temporary" then
    local buffer = state.temps[data]
    if not buffer then
      raise(("temporary '%s' has no memory now (fusion keeps it in registers, or a pool makes it "
             .. "only while the pipeline runs)"):format(data.name))
    end
    return buffer
  end
  local base = buffer_of(state, data.parent)
  local cached = state.views[data]
  if cached and cached.base == base then
    return cached.view
  end
  local view = base:view(data.offset + 1, data.count)
  state.views[data] = { base = base, view = view }
  return view
end
Pipeline.buffer_of = buffer_of

-- A raw kernel's scalar: typed when the scalar has a dtype, else the Lua
-- number (an integral float as an integer where the parameter is one).
local function raw_scalar(scalar, param)
  if scalar.dtype then
    return typed(scalar, scalar.dtype)
  end
  if param.kind == "integer" then
    return math.tointeger(scalar.value) or scalar.value
  end
  return scalar.value
end

-- The dtype a kernel object's parameter takes a scalar as.
local function call_dtype(scalar, param)
  if param.variable then
    if not scalar.dtype then
      raise(("scalar '%s' goes to parameter %s of type %s: give the scalar a dtype "
             .. "(p:scalar(name, value, dtype))"):format(scalar.name, param.name, param.type))
    end
    return scalar.dtype
  end
  return param.type
end

-- A constant number for a kernel object's parameter, typed once (a Lua
-- number would make a typed scalar at every call).
local function call_constant(value, param)
  if type(value) == "number" and not param.variable and DTYPES[param.type] then
    local dtype = DTYPES[param.type]
    local number = dtype.float and value or math.tointeger(value)
    if number ~= nil then
      return gpurun[dtype.scalar](number)
    end
  end
  return value
end

-- Fills `into` with arguments as a launch takes them: data as buffers,
-- scalars through scalar_of(scalar, position).
local function resolve(state, args, into, scalar_of)
  for position, arg in ipairs(args) do
    if arg.data then
      into[position] = buffer_of(state, arg.data)
    elseif arg.scalar then
      into[position] = scalar_of(arg.scalar, position)
    else
      into[position] = arg.constant
    end
  end
  return into
end

-- ---- units ----------------------------------------------------------------------

-- A unit made runnable: launch(target) with its arguments in `args`
-- (refresh() resolves them again), and the scalars it passes.
local function compile_unit(self, state, plan, u)
  local unit = plan.units[u]
  local runnable = { unit = unit, index = u, scalars = {}, args = {} }
  local args = runnable.args
  local names = {}
  for _, index in ipairs(unit.stages) do names[#names + 1] = self.stages[index].name end
  runnable.name = table.concat(names, " + ")
  if unit.group then
    local fused = self:fused(unit.group)
    local inputs, count = fused.inputs, #fused.inputs
    for _, input in ipairs(inputs) do
      if input.value ~= nil then
        input.constant = call_constant(input.value, { type = input.type })
      end
    end
    runnable.refresh = function()
      resolve(state, inputs, args, function(scalar, position)
        return typed(scalar, inputs[position].type)
      end)
      for k, d in ipairs(fused.outputs) do
        args[count + k] = buffer_of(state, d)
      end
    end
    runnable.arity = count + #fused.outputs
    local pipe = self:fused_pipe(unit.group)
    runnable.object = pipe
    runnable.launch = function(target) pipe(target, table.unpack(args, 1, runnable.arity)) end
    for _, input in ipairs(inputs) do
      if input.scalar then runnable.scalars[input.scalar] = true end
    end
    return runnable
  end
  local stage = self.stages[unit.stages[1]]
  local kind = stage.kind
  if kind == "kernel" then
    local kernel, config, params = stage.kernel, stage.config, stage.params
    for _, arg in ipairs(stage.args) do
      arg.constant = arg.value
    end
    runnable.refresh = function()
      resolve(state, stage.args, args, function(scalar, position)
        return raw_scalar(scalar, params[position])
      end)
    end
    runnable.arity = #stage.args
    runnable.raw_kernel = kernel
    runnable.stage = stage
    runnable.launch = function(target)
      gpurun.launch(target, config, kernel, table.unpack(args, 1, runnable.arity))
    end
  elseif kind == "call" then
    local kernel = stage.kernel
    for position, arg in ipairs(stage.args) do
      if arg.value ~= nil then
        arg.constant = call_constant(arg.value, kernel.params[position])
      end
    end
    runnable.refresh = function()
      resolve(state, stage.args, args, function(scalar, position)
        return typed(scalar, call_dtype(scalar, kernel.params[position]))
      end)
    end
    runnable.arity = #stage.args
    runnable.object = kernel
    runnable.launch = function(target) kernel(target, table.unpack(args, 1, runnable.arity)) end
  elseif kind == "copy" then
    local dst, src = stage.dst, stage.src
    runnable.refresh = function()
      args[1], args[2] = buffer_of(state, dst), buffer_of(state, src)
    end
    if dst.host then
      runnable.launch = function(target) args[2]:copy_to(args[1], target) end
    else
      runnable.launch = function(target) args[1]:copy_from(args[2], target) end
    end
  elseif kind == "fill" then
    local dst, value = stage.dst, stage.value
    runnable.refresh = function() args[1] = buffer_of(state, dst) end
    runnable.launch = function(target) args[1]:fill(value, target) end
  else -- host
    local callback = gpurun.HostCallback(stage.fn)
    state.callbacks[#state.callbacks + 1] = callback
    runnable.refresh = function() end
    runnable.launch = function(target) callback:launch(target) end
  end
  for _, arg in ipairs(stage.args or {}) do
    if arg.scalar then runnable.scalars[arg.scalar] = true end
  end
  return runnable
end

-- ---- state per device ------------------------------------------------------------

-- Lets go of the events and host callbacks a compiled plan made. A
-- callback a graph still uses, or with runs queued, is left to the
-- collector (which the graph or the queue keeps it from until then).
local function release(state)
  for _, callback in ipairs(state.callbacks or {}) do
    pcall(callback.close, callback)
  end
  state.callbacks = {}
  for _, event in ipairs(state.owned_events or {}) do
    event:close()
  end
  state.owned_events = {}
end

local function new_event(state, timing)
  local event = gpurun.Event{ timing = timing or false }
  state.owned_events[#state.owned_events + 1] = event
  return event
end

-- Pool temporaries: made on `target` (a stream, or the capturing builder:
-- a memory-alloc node) before the units, freed after them.
local function pool_temporaries(self, state, plan, target)
  local made = {}
  local placement = { stream = target, pool = self.options.pool }
  for _, t in ipairs(plan.temporaries) do
    if t.where == "pool" then
      local buffer = gpurun.empty(t.data.count, t.data.dtype, placement)
      state.temps[t.data] = buffer
      made[#made + 1] = t.data
    end
  end
  return made
end

local function free_pool_temporaries(state, made)
  for _, d in ipairs(made) do
    state.temps[d]:close()
    state.temps[d] = nil
  end
end

local function refresh_all(state)
  for _, runnable in ipairs(state.units) do
    runnable.refresh()
  end
end

-- Everything the plan needs on the stream's device, compiled once per plan.
local function compiled(self, device)
  local plan = self:planned()
  local state = self.state
  if state.version == self.version and state.device == device then
    return state, plan
  end
  if state.device and state.device ~= device then
    release(state)
    state.side_streams = {}
  end
  state.version, state.device = self.version, device
  state.temps = state.temps or {} -- a pool's, only while a run or capture makes them
  state.views = state.views or {}
  state.side_streams = state.side_streams or {}
  state.callbacks = state.callbacks or {}
  state.owned_events = state.owned_events or {}
  release(state)
  state.units = {}
  for u = 1, #plan.units do
    state.units[u] = compile_unit(self, state, plan, u)
  end
  state.run_events, state.capture_events, state.timing_events = {}, {}, {}
  if self.options.timing == "events" then
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
  for u, unit in ipairs(plan.units) do
    if unit.signals then
      state.run_events[u] = new_event(state)
      state.capture_events[u] = new_event(state)
    end
    if self.options.timing == "events" then
      state.timing_events[u] = { new_event(state, true), new_event(state, true) }
    end
  end
  local pools = false
  for _, t in ipairs(plan.temporaries) do
    if t.where == "pool" then pools = true end
  end
  state.pools = pools
  if not pools then
    refresh_all(state)
  end
  return state, plan
end

local function check_stream(self, stream, what)
  if type_name(stream) ~= "gpurun.Stream" then
    raise(("pipeline '%s': %s: a gpurun.Stream expected, got %s"):format(self.name, what,
          type_name(stream)))
  end
  for _, d in ipairs(self.data) do
    if d.device and d.device ~= stream.device then
      raise(("pipeline '%s': %s: '%s' lives on device %d but the stream on device %d"):format(
            self.name, what, d.name, d.device, stream.device))
    end
  end
end

local function side_streams(state, plan, device)
  local streams = state.side_streams
  for s = #streams + 2, #plan.streams do
    streams[s - 1] = gpurun.Device(device):create_stream()
  end
  return streams
end

-- Compiles and loads every kernel the units launch (a capture may not),
-- with the arguments they will take: pool temporaries are made on the
-- stream for it (a capture makes its own) and freed again.
local function prepare_kernels(self, state, plan, stream)
  local made
  if state.pools then
    made = pool_temporaries(self, state, plan, stream)
  end
  refresh_all(state)
  for _, runnable in ipairs(state.units) do
    runnable.stale = nil
    local object = runnable.object
    if object and object.prepare then
      object:prepare(table.unpack(runnable.args, 1, runnable.arity))
    end
  end
  if made then
    free_pool_temporaries(state, made)
  end
end

-- ---- run -------------------------------------------------------------------------

-- run(stream): the units on the planned streams: stream 1 is `stream`,
-- the others start after the work queued on it so far and it waits for
-- them at the end. Returns at once (p:wait() waits, running host
-- callbacks).
function Pipeline:run(stream)
  check_stream(self, stream, "run")
  local state, plan = compiled(self, stream.device)
  local sides = side_streams(state, plan, stream.device)
  local made
  if state.pools then
    made = pool_temporaries(self, state, plan, stream)
    refresh_all(state)
  end
  local targets = state.targets or {}
  state.targets = targets
  targets[1] = stream
  local timing = self.options.timing
  if timing == "events" then
    stream:record(state.start_event) -- before the fork: every unit starts after it
  end
  for s = 2, #plan.streams do
    targets[s] = sides[s - 1]
    targets[s]:wait(stream)
  end
  local events, timers = state.run_events, state.timing_events
  for u, runnable in ipairs(state.units) do
    local unit = runnable.unit
    local target = targets[unit.stream]
    local waits = unit.waits
    for k = 1, #waits do
      target:wait(events[waits[k]])
    end
    if runnable.stale then
      runnable.stale = nil
      runnable.refresh()
    end
    if timing == "events" then
      target:record(timers[u][1])
      runnable.launch(target)
      target:record(timers[u][2])
    elseif timing == "nvtx" then
      nvtx.range_push(runnable.name)
      runnable.launch(target)
      nvtx.range_pop()
    else
      runnable.launch(target)
    end
    if unit.signals then
      target:record(events[u])
    end
  end
  for s = 2, #plan.streams do
    stream:wait(targets[s])
  end
  if made then
    free_pool_temporaries(state, made)
  end
  state.last_stream = stream
  state.timed = timing == "events" or nil
end

-- wait(): waits for the last run or replay (host callbacks run meanwhile).
function Pipeline:wait()
  local stream = self.state.last_stream
  if stream then
    stream:sync()
  end
end

-- timings() -> { { unit, name, stream, start_ms, ms }... } of the last
-- run with options.timing = "events", after waiting for it: each unit's
-- GPU time and its start after the run's (an event before the fork).
function Pipeline:timings()
  local state = self.state
  if not state.timed then
    raise(("pipeline '%s': timings: no timed run (make the pipeline with timing = true, then "
           .. "p:run(stream))"):format(self.name))
  end
  self:wait()
  local plan = self:planned()
  local first = state.start_event
  local list = {}
  for u, runnable in ipairs(state.units) do
    local pair = state.timing_events[u]
    list[u] = { unit = u, name = runnable.name, stream = plan.units[u].stream,
                start_ms = pair[1] - first, ms = pair[2] - pair[1] }
  end
  return list
end

-- ---- graphs ------------------------------------------------------------------------

-- A short text of what a capture depends on: units, streams, waits,
-- kernels. Two plans with the same one capture into graphs of the same
-- topology.
local function signature(plan)
  local parts = {}
  for u, unit in ipairs(plan.units) do
    parts[u] = ("%s@%d/%s"):format(table.concat(unit.stages, "+"), unit.stream,
                                   table.concat(unit.waits, ","))
  end
  return table.concat(parts, ";")
end

-- Where a unit's nodes take its scalars, found while it is captured (its
-- buffers all alive): { { kernel, slots = { [position] = { scalar, dtype }
-- or { scalar, param } (a raw kernel's) } }... }, one entry per node it
-- makes, or false when a kernel object cannot say its nodes' arguments.
local function unit_slots(runnable)
  if not next(runnable.scalars) then
    return nil
  end
  if runnable.raw_kernel then
    local slots = {}
    local stage_args = runnable.stage.args
    for position, arg in ipairs(stage_args) do
      if arg.scalar then
        slots[position] = { scalar = arg.scalar, param = runnable.stage.params[position] }
      end
    end
    return { { kernel = runnable.raw_kernel, slots = slots } }
  end
  local object = runnable.object
  if not (object and object.node_arguments) then
    return false
  end
  local launches = object:node_arguments(table.unpack(runnable.args, 1, runnable.arity))
  if not launches then
    return false
  end
  local entries = {}
  for k, launch in ipairs(launches) do
    local slots = {}
    for position = 1, #launch.args do
      for scalar in pairs(runnable.scalars) do
        for dtype, value in pairs(scalar.typed) do
          if rawequal(launch.args[position], value) then
            slots[position] = { scalar = scalar, dtype = dtype }
          end
        end
      end
    end
    entries[k] = { kernel = launch.kernel, slots = slots }
  end
  return entries
end

-- { [scalar] = { { node, position, dtype | param }... } } for the graph,
-- or nil when a node is not where the capture put it or a unit's nodes are
-- not known: set() then captures again.
local function scalar_slots(state, graph, ranges, found)
  local nodes
  local slots = {}
  for u in ipairs(state.units) do
    local entries = found[u]
    if entries == false then
      return nil
    elseif entries then
      nodes = nodes or graph:nodes()
      local first, last = ranges[u][1], ranges[u][2]
      if last - first + 1 ~= #entries then
        return nil
      end
      for k, entry in ipairs(entries) do
        local node = nodes[first + k - 1]
        if not node or node.kind ~= "kernel" or node.kernel ~= entry.kernel then
          return nil
        end
        for position, slot in pairs(entry.slots) do
          local list = slots[slot.scalar] or {}
          slots[slot.scalar] = list
          list[#list + 1] = { node = first + k - 1, position = position, dtype = slot.dtype,
                              param = slot.param }
        end
      end
    end
  end
  return slots
end

-- Closes what a capture made (forks, and the builder unless it is
-- handed on), on every path out, an error's too.
local function closer(list)
  return setmetatable(list, { __close = function(made)
    for k = #made, 1, -1 do
      if made[k] then made[k]:close() end
    end
  end })
end

-- Captures the plan into `builder` (an origin, idle); returns each unit's
-- graph nodes as { first, last } (GraphBuilder.node_count around its
-- launch), and where they take its scalars (unit_slots).
local function capture(self, state, plan, builder, stream)
  prepare_kernels(self, state, plan, stream)
  builder:begin_building()
  local made
  if state.pools then
    made = pool_temporaries(self, state, plan, builder)
    refresh_all(state)
  end
  local targets = { builder }
  local forks <close> = closer({})
  if #plan.streams > 1 then
    targets = { builder:split(#plan.streams) }
    for s = 2, #targets do forks[s - 1] = targets[s] end
  end
  local ranges, found, events = {}, {}, state.capture_events
  for u, runnable in ipairs(state.units) do
    local unit = runnable.unit
    local target = targets[unit.stream]
    for _, w in ipairs(unit.waits) do
      target:wait(events[w])
    end
    if runnable.stale then
      runnable.stale = nil
      runnable.refresh()
    end
    local before = builder.node_count
    runnable.launch(target)
    ranges[u] = { before + 1, builder.node_count }
    found[u] = unit_slots(runnable)
    if unit.signals then
      target:record(events[u])
    end
  end
  if #targets > 1 then
    gpurun.join(table.unpack(targets))
  end
  if made then
    free_pool_temporaries(state, made)
  end
  builder:end_building()
  return ranges, found
end

local function note(self, text)
  if not self.noted and not self.options.quiet then
    self.noted = true
    io.stderr:write(("gpurun.pipeline '%s': %s (said once)\n"):format(self.name, text))
  end
end

local function build_graph(self, stream, reason)
  local state, plan = compiled(self, stream.device)
  local old = state.graph
  if old then
    self.recaptures = self.recaptures + 1
  end
  local builder <close> = stream:create_graph_builder()
  local ranges, found = capture(self, state, plan, builder, stream)
  local sig = signature(plan)
  local graph
  if old and old.graph.has_memory_nodes then
    -- The driver updates no graph with memory nodes (pool temporaries).
    note(self, (reason or "the plan changed") .. ": its graph makes temporaries inside it, which "
         .. "a graph cannot update in place, so a new one was captured")
  elseif old and old.signature == sig and old.device == stream.device then
    local ok = pcall(old.graph.update, old.graph, builder)
    if ok then
      graph = old.graph
      self.updates = self.updates + 1
    else
      note(self, (reason or "the plan changed") .. ": the graph could not be updated in place, so "
           .. "a new one was captured")
    end
  elseif old then
    note(self, (reason or "the plan changed") .. ": its topology differs, so it was planned and "
         .. "captured again")
  end
  if not graph then
    graph = builder:complete()
    if old then old.graph:close() end
    self.captures = self.captures + 1
  end
  graph:upload(stream)
  state.graph = { graph = graph, version = self.version, signature = sig, device = stream.device,
                  stream = stream, ranges = ranges }
  state.graph.slots = scalar_slots(state, graph, ranges, found)
  return state.graph
end

-- graph(stream) -> Graph: captures the plan into one graph (once, and again
-- after a change of the plan) and launches it on the stream.
function Pipeline:graph(stream)
  local current = self.state.graph
  if not current or current.version ~= self.version or current.device ~= stream.device then
    check_stream(self, stream, "graph")
    current = build_graph(self, stream)
  end
  current.graph:launch(stream)
  self.state.last_stream = stream
  return current.graph
end

-- ---- set -------------------------------------------------------------------------

local function set_scalar(self, scalar, value)
  if type(value) ~= "number" then
    raise(("pipeline '%s': set: scalar '%s' takes a number, got %s"):format(self.name, scalar.name,
          type_name(value)))
  end
  scalar.value = value
  local cached = scalar.typed
  for dtype in pairs(cached) do cached[dtype] = nil end
  local state = self.state
  if not state.units or state.version ~= self.version then
    return
  end
  -- The next run or capture resolves these units' arguments again.
  local users = state.scalar_users[scalar]
  for k = 1, users and #users or 0 do
    users[k].stale = true
  end
  local current = state.graph
  if not current or current.version ~= self.version then
    return
  end
  if not current.slots then
    build_graph(self, current.stream, ("scalar '%s' changed"):format(scalar.name))
    return
  end
  local graph = current.graph
  for _, slot in ipairs(current.slots[scalar] or {}) do
    local value = slot.param and raw_scalar(scalar, slot.param) or typed(scalar, slot.dtype)
    graph:set_arg(slot.node, slot.position, value)
  end
end

local function set_data(self, data, value)
  local kind = type_name(value)
  if data.kind ~= "buffer" or kind ~= type_name(data.buffer) then
    raise(("pipeline '%s': set: '%s' is %s; it takes %s"):format(self.name, data.name,
          data.kind == "buffer" and "a buffer" or ("a " .. data.kind),
          data.kind == "buffer" and ("another " .. type_name(data.buffer) .. " of the same shape")
          or "no buffer (the pipeline makes it)"))
  end
  if (data.count and (#value ~= data.count or value.dtype ~= data.dtype)) then
    raise(("pipeline '%s': set: '%s' is %d x %s; another buffer of that shape expected, got %d x %s")
          :format(self.name, data.name, data.count, data.dtype, #value, value.dtype))
  end
  if self.by_object[value] and self.by_object[value] ~= data then
    raise(("pipeline '%s': set: this buffer is declared already, as '%s'"):format(self.name,
          self.by_object[value].name))
  end
  self.by_object[data.buffer] = nil
  data.buffer = value
  self.by_object[value] = data
  data.lo, data.hi = value.ptr, value.ptr + value.nbytes
  data.device = value.device
  self.version = self.version + 1
  self.cached_plan = nil
  local current = self.state.graph
  if current then
    build_graph(self, current.stream, ("'%s' points at another buffer"):format(data.name))
  end
end

-- set(name, value): a scalar's new value (every graph node that passes it
-- is set in place), or data's new buffer of the same dtype and count (the
-- graph is captured again and updated in place; a new plan only when the
-- buffer's overlaps change it).
function Pipeline:set(name, value)
  local target = type(name) == "string" and self.by_name[name] or name
  local meta = getmetatable(target)
  if meta == Pipeline.Scalar and self.by_name[target.name] == target then
    return set_scalar(self, target, value)
  elseif meta == Pipeline.Data and self.data[target.id] == target then
    return set_data(self, target, value)
  end
  raise(("pipeline '%s': set: %s names no scalar or data of this pipeline"):format(self.name,
        type(name) == "string" and ("'" .. name .. "'") or type_name(name)))
end

-- close(): lets go of the graph, the temporaries, the side streams and
-- the events; the pipeline can run again (making them anew).
function Pipeline:close()
  local state = self.state
  if state.graph then
    state.graph.graph:close()
  end
  for _, buffer in pairs(state.temps or {}) do
    buffer:close()
  end
  release(state)
  for _, stream in ipairs(state.side_streams or {}) do
    stream:close()
  end
  self.state = {}
end
Pipeline.__close = Pipeline.close

return Pipeline
