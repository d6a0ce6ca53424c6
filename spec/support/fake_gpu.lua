-- A GPU made of Lua, for running gpurun.pipeline's run/graph/set code on a
-- machine with no GPU (spec/support/pipeline_fake_runs.lua): streams that
-- queue work and run it when drained, in a random interleaving that
-- respects each stream's order and its event waits; graph builders that
-- record nodes with the dependencies a capture would give them; graphs that
-- replay their nodes in a random order those dependencies allow, with
-- nodes(), set_args and update as gpurun's. Buffers hold Lua arrays (views
-- share them). install(gpurun) replaces the module's functions the
-- pipeline library calls; objects carry gpurun's type names, so that the
-- library's checks take them.
local fake = {}

local random = math.random
local next_address = 1 << 20

local function object(name, fields)
  local methods = fields.methods or {}
  fields.methods = nil
  local meta = { __name = name, __index = function(self, key)
    if methods[key] then return methods[key] end
    local getter = rawget(self, "_fields") and self._fields[key]
    if getter then return getter(self) end
    return nil
  end }
  for k, v in pairs(fields.meta or {}) do meta[k] = v end
  fields.meta = nil
  return setmetatable(fields, meta), methods
end

-- ---- streams and events --------------------------------------------------------

local streams = {}   -- every fake stream with work queued
local Event = {}

local function new_event()
  local event = object("gpurun.Event", { version = 0, done = 0, methods = Event, meta = {
    __sub = function(a, b) return (a.time or 0) - (b.time or 0) end } })
  return event
end
function Event.close() end

local clock = 0

local Stream = {}
local function new_stream(device)
  local stream = object("gpurun.Stream", { device = device or 0, queue = {}, methods = Stream })
  streams[#streams + 1] = stream
  return stream
end

local function enqueue(stream, op)
  if stream.closed then error("attempt to use a closed gpurun.Stream", 3) end
  stream.queue[#stream.queue + 1] = op
end

function Stream:record(event)
  event = event or new_event()
  event.version = event.version + 1
  event.capture = nil
  local version = event.version
  enqueue(self, { ready = function() return true end, run = function()
    clock = clock + 1
    event.time = clock
    if version > event.done then event.done = version end
  end })
  return event
end

function Stream:wait(what)
  if getmetatable(what).__name == "gpurun.Stream" then
    what = what:record(new_event())
  end
  if what.version == 0 then error("Stream:wait: a recorded gpurun.Event expected", 2) end
  if what.capture then error("Stream:wait: the event was recorded during a graph capture", 2) end
  local version = what.version
  enqueue(self, { ready = function() return what.done >= version end, run = function() end })
  return self
end

function fake.drain()
  while true do
    local ready = {}
    local pending = false
    for _, stream in ipairs(streams) do
      local op = stream.queue[1]
      if op then
        pending = true
        if op.ready() then ready[#ready + 1] = stream end
      end
    end
    if not pending then return end
    if #ready == 0 then error("fake GPU: every stream waits for another (a deadlock)") end
    local stream = ready[random(#ready)]
    local op = table.remove(stream.queue, 1)
    op.run()
  end
end

function Stream.sync() fake.drain() end
function Stream:close() self.closed = true end

-- ---- buffers ------------------------------------------------------------------------

local Buffer = {}
local function new_buffer(count, dtype, store, offset, base)
  local size = (dtype == "float64" or dtype == "int64" or dtype == "uint64") and 8 or 4
  local buffer = object("gpurun.Buffer", { count = count, dtype = dtype, device = base and base.device or 0,
    store = store, offset = offset or 0, base = base, size_bytes = size, methods = Buffer,
    meta = { __len = function(self) return self.count end } })
  if not base then
    buffer.address = next_address
    next_address = next_address + ((count * size + 255) // 256 + 1) * 256
  end
  local root = base or buffer
  buffer.ptr = root.address + (offset or 0) * size
  buffer.nbytes = count * size
  return buffer
end

function fake.buffer(count, dtype)
  local store = {}
  for i = 1, count do store[i] = 0 end
  return new_buffer(count, dtype or "float32", store)
end

function Buffer:view(first, count)
  count = count or self.count - first + 1
  return new_buffer(count, self.dtype, self.store, self.offset + first - 1, self.base or self)
end

function Buffer:get_all()
  local out = {}
  for i = 1, self.count do out[i] = self.store[self.offset + i] end
  return out
end
Buffer.to_table = Buffer.get_all

function Buffer:set_all(values)
  for i = 1, self.count do self.store[self.offset + i] = values[i] end
end

function Buffer:close() self.closed = true end

-- Work on a target: run later on a stream, or a node of a capture.
local add_node

local function submit(target, kind, run, extra)
  local name = getmetatable(target).__name
  if name == "gpurun.Stream" then
    enqueue(target, { ready = function() return true end, run = run })
  elseif name == "gpurun.GraphBuilder" then
    add_node(target, kind, run, extra)
  else
    error("fake GPU: a stream or a builder expected, got " .. tostring(name), 3)
  end
end

function Buffer:fill(value, target)
  submit(target, "memset", function()
    for i = 1, self.count do self.store[self.offset + i] = value end
  end)
  return self
end

function Buffer:copy_from(source, target)
  submit(target, "memcpy", function()
    local values = source:get_all()
    self:set_all(values)
  end)
  return self
end

function Buffer:copy_to(destination, target)
  submit(target, "memcpy", function()
    destination:set_all(self:get_all())
  end)
  return self
end

-- ---- kernels ------------------------------------------------------------------------

-- A raw kernel: params as Kernel:params() gives them, its source, and a
-- host body run with the launch's arguments.
function fake.kernel(name, source, params, body)
  return object("gpurun.Kernel", { name = name, source = source, num_params = #params,
    body = body, methods = { params = function() return params end, close = function() end,
      check_argument = function(self) return self end } })
end

local function value_of(x)
  if type(x) == "userdata" and getmetatable(x).__name == "gpurun.Scalar" then return x.value end
  return x
end
fake.value_of = value_of

local function launch_kernel(target, kernel, args, count)
  local stored = table.move(args, 1, count, 1, {})
  submit(target, "kernel", function(node)
    local a = node and node.args or stored
    local values = {}
    for i = 1, node and node.arity or count do values[i] = a[i] end
    kernel.body(table.unpack(values, 1, node and node.arity or count))
  end, { kernel = kernel, args = stored, arity = count })
end

-- A kernel object with params, as gpurun.elementwise's (not fusable: it
-- has no operation): body(inputs..., output) per element on the host.
function fake.object(name, params, body)
  local cuda = fake.kernel(name .. "_scalar", nil, {}, function(_, ...)
    local args = { ... }
    local out = args[#args]
    for e = 1, out.count do
      local inputs = {}
      for i = 1, #args - 1 do
        local a = args[i]
        inputs[i] = type(a) == "table" and getmetatable(a).__name == "gpurun.Buffer"
          and a.store[a.offset + e] or value_of(a)
      end
      out.store[out.offset + e] = body(table.unpack(inputs, 1, #args - 1))
    end
  end)
  local k = setmetatable({ name = name, params = params, cuda = cuda, prepared = 0 }, {
    __call = function(self, target, ...)
      local args = { self.n_of(...), ... }
      launch_kernel(target, cuda, args, select("#", ...) + 1)
      return select(#params, ...)
    end,
  })
  function k.n_of(...)
    local last = select(select("#", ...), ...)
    return last.count
  end
  function k:node_arguments(...)
    return { { kernel = cuda, args = { self.n_of(...), ... } } }
  end
  function k:prepare() self.prepared = self.prepared + 1 return self end
  return k
end

-- ---- graphs -------------------------------------------------------------------------

local Builder, Graph = {}, {}

local function new_builder(stream, root)
  local builder = object("gpurun.GraphBuilder", { stream = stream, deps = {}, state = "idle",
    root = root, methods = Builder, meta = { __close = function(self) self:close() end }, _fields = { node_count = function(self)
      local r = self.root or self
      return r.state == "building" and #r.nodes or 0
    end } })
  return builder
end

function add_node(builder, kind, run, extra)
  if builder.state ~= "building" then error("GraphBuilder is not building (it is " .. builder.state .. ")", 3) end
  local root = builder.root or builder
  local node = { index = #root.nodes + 1, kind = kind, run = run, dependencies = {} }
  for id in pairs(builder.deps) do node.dependencies[#node.dependencies + 1] = id end
  table.sort(node.dependencies)
  for k, v in pairs(extra or {}) do node[k] = v end
  root.nodes[#root.nodes + 1] = node
  builder.deps = { [node.index] = true }
end

local function copy_set(set)
  local out = {}
  for k in pairs(set) do out[k] = true end
  return out
end

function Builder:begin_building()
  self.state, self.nodes, self.deps = "building", {}, {}
  return self
end

function Builder:split(n)
  local out = { self }
  for i = 2, n do
    local fork = new_builder(new_stream(self.stream.device), self.root or self)
    fork.state = "building"
    fork.deps = copy_set(self.deps)
    fork.fork = true
    out[i] = fork
  end
  return table.unpack(out, 1, n)
end

function Builder:record(event)
  event.version = event.version + 1
  event.capture = self.root or self
  event.deps = copy_set(self.deps)
  return event
end

function Builder:wait(what)
  local deps = getmetatable(what).__name == "gpurun.Event" and what.deps or what.deps
  if getmetatable(what).__name == "gpurun.Event" and what.capture ~= (self.root or self) then
    error("GraphBuilder:wait: an event recorded in this capture expected", 2)
  end
  for id in pairs(deps) do self.deps[id] = true end
  return self
end

function Builder:end_building()
  for _, node in ipairs(self.nodes) do node.builder = nil end
  self.state = "built"
  return self
end

function Builder:close()
  self.state = "closed"
  if self.fork then self.stream:close() end
end

function fake.join(...)
  local all = { ... }
  local into = all[1]
  for _, b in ipairs(all) do if not b.fork then into = b break end end
  for _, b in ipairs(all) do
    if b ~= into then
      for id in pairs(b.deps) do into.deps[id] = true end
      b.state = "joined"
    end
  end
  return into
end

function Builder:complete()
  if self.state ~= "built" then error("GraphBuilder:complete: nothing built", 2) end
  local graph = object("gpurun.Graph", { nodes_list = {}, methods = Graph, launches = 0,
    set_args_calls = 0, node_count = #self.nodes })
  for i, node in ipairs(self.nodes) do
    local copy = {}
    for k, v in pairs(node) do copy[k] = v end
    graph.nodes_list[i] = copy
  end
  return graph
end

-- Runs the nodes in a random order their dependencies allow.
local function replay(graph)
  local nodes = graph.nodes_list
  local done, left = {}, #nodes
  while left > 0 do
    local ready = {}
    for i, node in ipairs(nodes) do
      if not done[i] then
        local ok = true
        for _, d in ipairs(node.dependencies) do
          if not done[d] then ok = false break end
        end
        if ok then ready[#ready + 1] = i end
      end
    end
    local i = ready[random(#ready)]
    nodes[i].run(nodes[i])
    done[i] = true
    left = left - 1
  end
end

function Graph:launch(stream)
  self.launches = self.launches + 1
  enqueue(stream, { ready = function() return true end, run = function() replay(self) end })
end
function Graph.upload() end
function Graph:close() self.closed = true end

function Graph:nodes()
  local out = {}
  for i, node in ipairs(self.nodes_list) do
    out[i] = { index = i, kind = node.kind, kernel = node.kernel, dependencies = node.dependencies }
  end
  return out
end

function Graph:set_args(i, ...)
  local node = self.nodes_list[i]
  if not node or node.kind ~= "kernel" then error("Graph:set_args: not a kernel node", 2) end
  if select("#", ...) ~= node.arity then error("Graph:set_args: wrong argument count", 2) end
  node.args = { ... }
  self.set_args_calls = self.set_args_calls + 1
  return self
end

function Graph:set_arg(i, k, value)
  local node = self.nodes_list[i]
  if not node or node.kind ~= "kernel" then error("Graph:set_arg: not a kernel node", 2) end
  if k < 1 or k > node.arity then error("Graph:set_arg: argument position out of range", 2) end
  local args = table.move(node.args, 1, node.arity, 1, {})
  args[k] = value
  node.args = args
  self.set_arg_calls = (self.set_arg_calls or 0) + 1
  return self
end

-- The new capture's nodes in place of these, when it has the same shape.
function Graph:update(builder)
  local new = builder.nodes
  if #new ~= #self.nodes_list then error("Graph:update: its topology differs", 2) end
  for i, node in ipairs(new) do
    local old = self.nodes_list[i]
    if old.kind ~= node.kind or old.kernel ~= node.kernel
        or table.concat(old.dependencies, ",") ~= table.concat(node.dependencies, ",") then
      error("Graph:update: its topology differs", 2)
    end
  end
  for i, node in ipairs(new) do
    local copy = {}
    for k, v in pairs(node) do copy[k] = v end
    self.nodes_list[i] = copy
  end
  self.updates = (self.updates or 0) + 1
  return self
end

-- ---- host callbacks -------------------------------------------------------------------

local function new_callback(fn)
  return object("gpurun.HostCallback", { methods = {
    launch = function(self, target)
      submit(target, "host", function() fn() end)
      return self
    end,
    close = function() end,
  } })
end

-- ---- install ---------------------------------------------------------------------------

function fake.stream() return new_stream(0) end

function fake.install(gpurun)
  function Stream:create_graph_builder() return new_builder(self) end
  gpurun.launch = function(target, config, kernel, ...)
    assert(getmetatable(config).__name == "gpurun.LaunchConfig", "fake launch: a config expected")
    launch_kernel(target, kernel, { ... }, select("#", ...))
  end
  gpurun.Event = function() return new_event() end
  gpurun.join = fake.join
  -- Buffers that gpurun.empty makes live on the device made current last.
  local current = 0
  gpurun.Device = function(ordinal)
    return { create_stream = function() return new_stream(ordinal) end,
             set_current = function() current = ordinal end }
  end
  gpurun.HostCallback = new_callback
  gpurun.empty = function(count, dtype)
    local buffer = fake.buffer(count, dtype)
    buffer.device = current
    return buffer
  end
  fake.config = setmetatable({}, { __name = "gpurun.LaunchConfig" })
end

return fake
