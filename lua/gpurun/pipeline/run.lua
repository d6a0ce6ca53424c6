-- Running a pipeline on one device: p:run(stream) launches its units on
-- the schedule's streams (side streams made once per device, events for
-- the waits), p:graph(stream) captures the same into one Graph and
-- replays it, p:set(name, value) changes a scalar in place (Graph:set_arg
-- on the nodes that pass it) or points data at another buffer of the same
-- shape (a new capture, then Graph:update), and a schedule that changed is
-- captured again (said once, on stderr). What runs is compiled by
-- pipeline/compile.lua.
local gpurun = require("gpurun")
local nvtx = require("gpurun.nvtx")
local common = require("gpurun.common")
local compile = require("gpurun.pipeline.compile")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")
local schedule = require("gpurun.pipeline.schedule")

local raise = common.raise
local type_name = common.type_name

local run = {}

local function check_is_stream(self, stream, what)
  if type_name(stream) ~= "gpurun.Stream" then
    raise(("pipeline '%s': %s: a gpurun.Stream expected, got %s"):format(self.name, what,
          type_name(stream)))
  end
end

local function check_stream(self, stream, what)
  check_is_stream(self, stream, what)
  for _, d in ipairs(self.data) do
    if d.device and d.device ~= stream.device then
      raise(("pipeline '%s': %s: '%s' lives on device %d but the stream on device %d"):format(
            self.name, what, d.name, d.device, stream.device))
    end
  end
end

local function side_streams(state, sched, device)
  local streams = state.side_streams
  for s = #streams + 2, #sched.streams do
    streams[s - 1] = gpurun.Device(device):create_stream()
  end
  return streams
end

-- ---- run -------------------------------------------------------------------------

-- run(stream): the units on the planned streams: stream 1 is `stream`,
-- the others start after the work queued on it so far and it waits for
-- them at the end. Returns at once (p:wait() waits, running host
-- callbacks).
function run.run(self, stream)
  check_stream(self, stream, "run")
  local state, sched = compile.for_device(self, stream.device)
  local sides = side_streams(state, sched, stream.device)
  local made
  if state.pools then
    made = compile.pool_temporaries(self, state, sched, stream)
    compile.refresh_all(state)
  end
  local targets = state.targets or {}
  state.targets = targets
  targets[1] = stream
  local timing = self.options.timing
  if timing == "events" then
    stream:record(state.start_event) -- before the fork: every unit starts after it
  end
  for s = 2, #sched.streams do
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
  for s = 2, #sched.streams do
    stream:wait(targets[s])
  end
  if made then
    compile.free_pool(state, made)
  end
  state.last_stream = stream
  state.timed = timing == "events" or nil
end

-- wait(): waits for the last run or replay (host callbacks run meanwhile).
function run.wait(self)
  local stream = self.state.last_stream
  if stream then
    stream:sync()
  end
end

-- timings() -> { { unit, name, stream, start_ms, ms }... } of the last
-- run with options.timing = "events", after waiting for it: each unit's
-- GPU time and its start after the run's (an event before the fork).
function run.timings(self)
  local state = self.state
  if not state.timed then
    raise(("pipeline '%s': timings: no timed run (make the pipeline with timing = true, then "
           .. "p:run(stream))"):format(self.name))
  end
  run.wait(self)
  local sched = schedule.of(self)
  local first = state.start_event
  local list = {}
  for u, runnable in ipairs(state.units) do
    local pair = state.timing_events[u]
    list[u] = { unit = u, name = runnable.name, stream = sched.units[u].stream,
                start_ms = pair[1] - first, ms = pair[2] - pair[1] }
  end
  return list
end

-- ---- graphs ------------------------------------------------------------------------

-- A short text of what a capture depends on: units, streams, waits,
-- kernels. Two plans with the same one capture into graphs of the same
-- topology.
local function signature(sched)
  local parts = {}
  for u, unit in ipairs(sched.units) do
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
  if runnable.node_slots then
    return runnable.node_slots()
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

-- Captures the schedule into `builder` (an origin, idle); returns each unit's
-- graph nodes as { first, last } (GraphBuilder.node_count around its
-- launch), and where they take its scalars (unit_slots).
local function capture(self, state, sched, builder, stream)
  compile.prepare_kernels(self, state, sched, stream)
  builder:begin_building()
  local made
  if state.pools then
    made = compile.pool_temporaries(self, state, sched, builder)
    compile.refresh_all(state)
  end
  local targets = { builder }
  local forks <close> = closer({})
  if #sched.streams > 1 then
    targets = { builder:split(#sched.streams) }
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
    compile.free_pool(state, made)
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
  local state, sched = compile.for_device(self, stream.device)
  local old = state.graph
  if old then
    self.recaptures = self.recaptures + 1
  end
  local builder <close> = stream:create_graph_builder()
  local ranges, found = capture(self, state, sched, builder, stream)
  local sig = signature(sched)
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

-- graph(stream) -> Graph: captures the schedule into one graph (once, and again
-- after a change of the schedule) and launches it on the stream.
function run.graph(self, stream)
  check_is_stream(self, stream, "graph")
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
  local why = scalar.dtype and select(2, common.typed_scalar(value, scalar.dtype))
  if why then
    raise(("pipeline '%s': set: scalar '%s': %s"):format(self.name, scalar.name, why))
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
    local argument = slot.param and launch_arguments.raw_scalar(scalar, slot.param)
                     or launch_arguments.typed(scalar, slot.dtype)
    graph:set_arg(slot.node, slot.position, argument)
  end
end

local function set_data(self, data, value)
  local buffer = data.buffer
  if not buffer or type_name(value) ~= type_name(buffer) then
    raise(("pipeline '%s': set: '%s' is a %s; it takes %s"):format(self.name, data.name, data.kind,
          buffer and ("another " .. type_name(buffer) .. " of the same shape")
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
  declare.place(self, data, value, "set")
  self.by_object[data.buffer] = nil
  data.buffer = value
  self.by_object[value] = data
  declare.changed(self)
  local current = self.state.graph
  if current then
    build_graph(self, current.stream, ("'%s' points at another buffer"):format(data.name))
  end
end

-- set(name, value): a scalar's new value (every graph node that passes it
-- is set in place), or data's new buffer of the same dtype and count (the
-- graph is captured again and updated in place; a new schedule only when the
-- buffer's overlaps change it).
function run.set(self, name, value)
  local target = type(name) == "string" and self.by_name[name] or name
  local meta = getmetatable(target)
  if meta == declare.Scalar and self.by_name[target.name] == target then
    return set_scalar(self, target, value)
  elseif meta == declare.Data and self.data[target.id] == target then
    return set_data(self, target, value)
  end
  raise(("pipeline '%s': set: %s names no scalar or data of this pipeline"):format(self.name,
        type(name) == "string" and ("'" .. name .. "'") or type_name(name)))
end

-- close(): lets go of the graph, the temporaries, the side streams and
-- the events; the pipeline can run again (making them anew).
function run.close(self)
  local state = self.state
  if state.graph then
    state.graph.graph:close()
  end
  for _, buffer in pairs(state.temps or {}) do
    buffer:close()
  end
  compile.release(state)
  for _, stream in ipairs(state.side_streams or {}) do
    stream:close()
  end
  self.state = {}
end

return run
