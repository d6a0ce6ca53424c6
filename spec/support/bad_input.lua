-- The machinery of spec/bad_input_spec.lua: the objects a row can pass
-- (made fresh for each row and closed after it), the markers that name
-- them in a row, the callers that call each function the way a script does
-- (so messages name the function as a script sees it), and the runner that
-- checks each row's error and that gpurun still works afterwards.
local gpurun = require("gpurun")
local catalog = require("spec.support.api_catalog")

local bad = {}

-- ---- how rows are written ----------------------------------------------------

-- R.stream: "the env's stream" inside a row's argument list.
local Marker = {}
bad.R = setmetatable({}, {
  __index = function(_, name) return setmetatable({ ref = name }, Marker) end,
})

-- A(...): an argument list that keeps its nils (A(nil) is one nil, A() none).
function bad.A(...)
  return table.pack(...)
end

-- P(pattern): a Lua pattern where a row's expectation is otherwise plain text.
function bad.P(pattern)
  return { pattern = pattern }
end

-- ANY(e1, e2, ...): any of these expectations (what differs between a
-- machine with a driver and one without).
function bad.ANY(...)
  return { any = { ... } }
end

local function matches(message, expected)
  if type(expected) == "string" then return message:find(expected, 1, true) ~= nil end
  if expected.pattern then return message:find(expected.pattern) ~= nil end
  for _, alternative in ipairs(expected.any) do
    if matches(message, alternative) then return true end
  end
  return false
end

bad.matches = matches

-- Whether an expectation is an argument error ("bad argument #n to ...",
-- "calling ... on bad self"): those must name the function as the script
-- spells it.
local function is_argument_error(expected)
  if type(expected) == "string" then
    return expected:find("bad argument #", 1, true) ~= nil or expected:find("on bad self", 1, true) ~= nil
  end
  if expected.pattern then return expected.pattern:find("bad argument #", 1, true) ~= nil end
  for _, alternative in ipairs(expected.any) do
    if is_argument_error(alternative) then return true end
  end
  return false
end
bad.is_argument_error = is_argument_error

local function show(expected)
  if type(expected) == "string" then return ("%q"):format(expected) end
  if expected.pattern then return ("pattern %q"):format(expected.pattern) end
  local parts = {}
  for i, alternative in ipairs(expected.any) do parts[i] = show(alternative) end
  return "any of " .. table.concat(parts, ", ")
end

-- ---- the objects rows pass ---------------------------------------------------------

local SOURCE = 'extern "C" __global__ void k(float *x, size_t n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }'
bad.SOURCE = SOURCE

-- factories[name](env) -> object; gpu[name]: it needs a current device.
local factories, gpu = {}, {}

local function current_device()
  local device = gpurun.Device(0) -- a new object when a row closed the last one
  device:set_current()
  return device
end

local function closed(object)
  object:close()
  return object
end

function factories.options() return gpurun.ProgramOptions({ std = "c++17" }) end
function factories.closed_options() return closed(gpurun.ProgramOptions({})) end
function factories.program() return gpurun.Program(SOURCE, "c++") end
function factories.closed_program() return closed(gpurun.Program(SOURCE, "c++")) end
function factories.ptx() return gpurun.Program(SOURCE, "c++"):compile("ptx") end
function factories.closed_ptx() return closed(gpurun.Program(SOURCE, "c++"):compile("ptx")) end
function factories.ltoir() -- LTO-IR's magic number and nothing a linker could use
  return gpurun.ObjectCode.from_ltoir("\237\67\78\127" .. string.rep("\0", 12))
end
function factories.linker_options() return gpurun.LinkerOptions({ arch = "sm_90" }) end
function factories.closed_linker_options() return closed(gpurun.LinkerOptions({})) end
function factories.linker() return gpurun.Linker(factories.ptx(), { arch = "sm_90" }) end
function factories.closed_linker() return closed(factories.linker()) end
function factories.compute_linker() return gpurun.Linker(factories.ptx(), { arch = "compute_90" }) end
function factories.ltoir_linker() -- LTO-IR nvJitLink refuses
  return gpurun.Linker(factories.ltoir(), { arch = "sm_90", name = "bad", link_time_optimization = true })
end
function factories.linker_closed_code() -- an input closed after the Linker was made
  local code = factories.ptx()
  local linker = gpurun.Linker(code, { arch = "sm_90" })
  code:close()
  return linker
end
function factories.rng() return gpurun.default_rng(1) end
function factories.closed_rng() return closed(gpurun.default_rng(1)) end
function factories.config() return gpurun.LaunchConfig({ grid = 1, block = 16 }) end
-- A priority past every device's range (their least is 0).
function factories.far_priority_config() return gpurun.LaunchConfig({ grid = 1, block = 16, priority = 99 }) end
function factories.config_1024() return gpurun.LaunchConfig({ grid = 1, block = 1024 }) end
function factories.config_big_shmem()
  return gpurun.LaunchConfig({ grid = 1, block = 16, shmem_size = 1 << 30 })
end
function factories.scalar() return gpurun.u64(16) end
function factories.struct_layout() return gpurun.struct({ { "x", "float32" }, { "n", "uint64" } }) end
function factories.struct_value() return factories.struct_layout()({ x = 1.5 }) end
function factories.callback() return gpurun.HostCallback(function() end) end
function factories.closed_callback() return closed(gpurun.HostCallback(function() end)) end
function factories.broken_program() return gpurun.Program("this is not C++ {", "c++") end
function factories.closed_file()
  local file = io.tmpfile()
  file:close()
  return file
end
function factories.short_file() -- 3 bytes, read from the start
  local file = io.tmpfile()
  file:write("abc")
  file:seek("set", 0)
  return file
end
function factories.compute_program() -- PTX only: cubin must be refused
  return gpurun.Program(SOURCE, "c++", { arch = "compute_90" })
end
function factories.bad_option_program()
  return gpurun.Program(SOURCE, "c++", { extra = { "--no-such-nvrtc-option" } })
end

-- Pipelines (declared without a GPU): `pipe` with data of three dtypes and
-- three scalars, `empty_pipe` with nothing, `staged_pipe` with one stage,
-- `split_pipe` over two devices with a stage that cannot split; the
-- kernel objects they call; and objects that only pretend.
function factories.pipe()
  local p = gpurun.pipeline({ name = "bad" })
  p:temporary("t", 16)
  p:temporary("u", 16)
  p:temporary("i8", 16, "int8")
  p:temporary("i32", 16, "int32")
  p:scalar("s", 2.0)
  p:scalar("f32s", 1.5, "float32")
  p:scalar("big", 1e300)
  return p
end
function factories.empty_pipe() return gpurun.pipeline({ name = "empty" }) end
function factories.staged_pipe()
  local p = gpurun.pipeline({ name = "staged" })
  return p:fill(p:temporary("t", 16), 1.0)
end
function factories.split_pipe()
  local p = gpurun.pipeline({ name = "split", devices = { 0, 1 } })
  p:temporary("t", 16)
  return p:host(function() end)
end
function factories.twice() return gpurun.elementwise("float32 x", "float32 y", "y = 2 * x", "twice") end
function factories.scaled()
  return gpurun.elementwise("float32 a, float32 s", "float32 r", "r = a * s", "scaled")
end
function factories.named_buffer() return setmetatable({}, { __name = "gpurun.Buffer" }) end
function factories.named_kernel() return setmetatable({}, { __name = "gpurun.Kernel" }) end
function factories.lying_dtype() return setmetatable({}, { __tostring = function() return {} end }) end
function factories.table_with_metatable() return setmetatable({}, {}) end
-- The fuzzer's fakes (spec/support/fake_objects.lua): one whose __index
-- raises, and one that lies with every metamethod (__len raising too).
local fake_strategies = {}
for _, strategy in ipairs(require("spec.support.fake_objects").STRATEGIES) do
  fake_strategies[strategy.name] = strategy.make
end
function factories.raising_fake() return fake_strategies["raising __index"]() end
function factories.biting_fake() return fake_strategies["all three"]("Buffer") end
function factories.coroutine() return coroutine.create(function() end) end

local GPU_FACTORIES
GPU_FACTORIES = {
  device = function() return current_device() end,
  closed_device = function() return closed(current_device()) end,
  stream = function() return current_device():create_stream() end,
  other_stream = function() return current_device():create_stream() end,
  closed_stream = function() return closed(current_device():create_stream()) end,
  event = function(env) return env.stream:record() end,
  closed_event = function(env) return closed(env.stream:record()) end,
  code = function()
    local device = current_device()
    local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
    return gpurun.Program(require("spec.support.kernels").SOURCE, "c++", options):compile("cubin")
  end,
  add = function(env) return env.code:get_kernel("vec_add") end,
  scale = function(env) return env.code:get_kernel("scale_shift") end,
  byte_flag = function(env) return env.code:get_kernel("byte_flag") end,
  bounded = function(env) return env.code:get_kernel("bounded") end,
  closed_kernel = function(env) return closed(env.code:get_kernel("vec_add")) end,
  orphan_kernel = function() -- its ObjectCode is closed
    local code = GPU_FACTORIES.code()
    local kernel = code:get_kernel("vec_add")
    code:close()
    return kernel
  end,
  closed_code = function() return closed(GPU_FACTORIES.code()) end,
  buffer = function() current_device(); return gpurun.zeros(16, "float32") end,
  buffer8 = function() current_device(); return gpurun.zeros(8, "float32") end,
  buffer_f64 = function() current_device(); return gpurun.zeros(16, "float64") end,
  buffer_i32 = function() current_device(); return gpurun.zeros(16, "int32") end,
  drng = function() current_device(); return gpurun.device_rng(1) end,
  closed_drng = function() current_device(); return closed(gpurun.device_rng(1)) end,
  buffer_u8 = function() current_device(); return gpurun.zeros(4, "uint8") end,
  buffer_i16 = function() current_device(); return gpurun.zeros(16, "int16") end,
  dist = function() -- the world of one, started once for the process
    current_device()
    return require("gpurun.dist").init()
  end,
  closed_buffer = function() current_device(); return closed(gpurun.zeros(16, "float32")) end,
  csr = function() -- the 16 x 16 identity, float32
    current_device()
    local offsets = {}
    for i = 0, 16 do offsets[#offsets + 1] = i end
    return gpurun.csr(gpurun.array(offsets, "int32"), gpurun.array(table.move(offsets, 1, 16, 1, {}), "int32"),
                      gpurun.full(16, 1, "float32"), 16, 16)
  end,
  closed_csr = function(env) return closed(GPU_FACTORIES.csr(env)) end,
  view = function(env) return env.buffer:view(5, 8) end,
  orphan_view = function() -- its base was closed
    current_device()
    local base = gpurun.zeros(16, "float32")
    local view = base:view(1, 4)
    base:close()
    return view
  end,
  pinned = function() current_device(); return gpurun.pinned(16, "float32") end,
  pinned8 = function() current_device(); return gpurun.pinned(8, "float32") end,
  pinned_i32 = function() current_device(); return gpurun.pinned(16, "int32") end,
  pinned_u8 = function() current_device(); return gpurun.pinned(4, "uint8") end,
  closed_pinned = function() current_device(); return closed(gpurun.pinned(16, "float32")) end,
  mapped_pinned = function() current_device(); return gpurun.pinned(16, "float32", { mapped = true }) end,
  managed = function() current_device(); return gpurun.managed(16, "float32") end,
  pinned_graph = function(env) -- a graph that copies env.pinned into env.buffer
    local builder = env.stream:create_graph_builder()
    local buffer, pinned = env.buffer, env.pinned
    builder:begin_building()
    buffer:copy_from(pinned, builder)
    builder:end_building()
    local graph = builder:complete()
    builder:close()
    return graph
  end,
  plan = function(env) return env.add:bind(env.config, env.buffer, env.buffer, env.buffer, gpurun.u64(16)) end,
  closed_plan = function(env)
    return closed(env.add:bind(env.config, env.buffer, env.buffer, env.buffer, gpurun.u64(16)))
  end,
  plan_closed_buffer = function(env) -- a buffer it passes was closed after bind
    local gone = gpurun.zeros(16, "float32")
    local plan = env.add:bind(env.config, gone, gone, gone, gpurun.u64(16))
    gone:close()
    return plan
  end,
  builder = function(env) return env.stream:create_graph_builder() end,
  building = function(env)
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    return builder
  end,
  built = function(env)
    local builder = env.stream:create_graph_builder()
    local config, add, buffer = env.config, env.add, env.buffer -- made before the capture
    builder:begin_building()
    gpurun.launch(builder, config, add, buffer, buffer, buffer, gpurun.u64(16))
    builder:end_building()
    return builder
  end,
  abandoned = function(env) -- an argument error while building ended its capture
    local builder = env.stream:create_graph_builder()
    local config, add = env.config, env.add
    builder:begin_building()
    pcall(gpurun.launch, builder, config, add)
    return builder
  end,
  closed_builder = function(env) return closed(env.stream:create_graph_builder()) end,
  builder_closed_stream = function(env) -- its stream was closed under it
    local builder = env.other_stream:create_graph_builder()
    env.other_stream:close()
    return builder
  end,
  other_building = function(env) -- a second capture, on another stream
    local builder = env.other_stream:create_graph_builder()
    builder:begin_building()
    return builder
  end,
  allocating_built = function(env) -- a built capture that allocates (a memory node)
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    gpurun.empty(16, "float32", { stream = builder })
    builder:end_building()
    return builder
  end,
  conditional_built = function(env) -- a built capture with a conditional node
    local builder = env.stream:create_graph_builder()
    builder:begin_building()
    local body = builder:if_then(builder:create_condition())
    body:begin_building()
    body:end_building()
    builder:end_building()
    return builder
  end,
  condition = function(env) return env.building:create_condition() end,
  closed_condition = function(env) return closed(env.building:create_condition()) end,
  other_condition = function(env) return env.other_building:create_condition() end,
  body = function(env) -- an idle conditional body of `building`
    return env.building:if_then(env.condition)
  end,
  building_body = function(env) -- a conditional body of `building`, capturing
    local body = env.building:if_then(env.condition)
    body:begin_building()
    return body
  end,
  graph = function(env) return env.built:complete() end,
  closed_graph = function(env) return closed(env.built:complete()) end,
  -- Graphs kernels may launch: uploaded (on other_stream, which no row's
  -- builder captures), and not.
  device_graph = function(env)
    return env.built:complete({ device_launch = true, upload_stream = env.other_stream })
  end,
  device_graph_not_uploaded = function(env) return env.built:complete({ device_launch = true }) end,
  tensor_map = function(env) return env.buffer:as_tensor_map({ box_dim = { 16 } }) end,
  closed_tensor_map = function(env) return closed(env.buffer:as_tensor_map({ box_dim = { 16 } })) end,
  tensor_map_closed_buffer = function() -- the buffer it points at was closed under it
    current_device()
    local gone = gpurun.zeros(16, "float32")
    local map = gone:as_tensor_map({ box_dim = { 16 } })
    gone:close()
    return map
  end,
  handle = function() return gpurun.IPCAllocationHandle(2) end, -- over a duplicate of stderr
  closed_handle = function() return closed(gpurun.IPCAllocationHandle(2)) end,
  pool = function() current_device(); return gpurun.MemoryPool() end,
  closed_pool = function() current_device(); return closed(gpurun.MemoryPool()) end,
  small_pool = function() current_device(); return gpurun.MemoryPool({ max_size = 64 << 20 }) end, -- the driver rounds a maximum up to its granularity (32 MiB on an H200)
  default_pool = function() return current_device():memory_pool() end,
  pool_buffer = function(env) -- 16 float32 from env.pool, ordered on env.stream
    return gpurun.zeros(16, "float32", { pool = env.pool, stream = env.stream })
  end,
  -- Green contexts: the device's SMs, a group of the smallest partition,
  -- a context of it.
  sm = function() return current_device().resources.sm end,
  closed_sm = function() return closed(current_device().resources.sm) end,
  sm_group = function(env) return (env.sm:split({ count = env.sm.min_partition_size })) [1] end,
  context = function(env) return current_device():create_context({ resources = { env.sm_group } }) end,
  closed_context = function(env)
    return closed(current_device():create_context({ resources = { env.sm_group } }))
  end,
}
for name, factory in pairs(GPU_FACTORIES) do
  factories[name] = factory
  gpu[name] = true
end

-- A row's objects: made on first use, closed (in reverse order) by
-- close_env, so that no row sees what another did.
local function new_env()
  local made = {}
  return setmetatable({}, {
    __index = function(env, name)
      local factory = assert(factories[name], "no object named " .. tostring(name))
      local object = factory(env)
      rawset(env, name, object)
      made[#made + 1] = object
      return object
    end,
    __close = function()
      for i = #made, 1, -1 do
        local object = made[i]
        if catalog.type_of(object) == "GraphBuilder" then pcall(object.close, object) end
      end
      for i = #made, 1, -1 do
        local object = made[i]
        -- From the type's methods: a Struct's keys are its fields.
        local type_name = catalog.type_of(object)
        local close = type_name and catalog.metatable(type_name).methods.close
        if close then pcall(close, object) end
      end
    end,
  })
end

-- Objects that start a capture are made last: nothing may be allocated
-- while a graph is being built.
local CAPTURING = {
  building = true, other_building = true, condition = true, closed_condition = true,
  other_condition = true, body = true, building_body = true,
}

-- Makes the objects a row names (its markers and `before`) in a safe order.
-- The markers of an argument: itself, or those of an options table (one
-- level down, as in { offsets = R.buffer }).
local function markers_of(value)
  if getmetatable(value) == Marker then return { value } end
  local found = {}
  if type(value) == "table" and getmetatable(value) == nil then
    for _, field in pairs(value) do
      if getmetatable(field) == Marker then found[#found + 1] = field end
    end
  end
  return found
end

local function make_objects(env, row)
  local names = {}
  for i = 1, row[2] and row[2].n or 0 do
    for _, marker in ipairs(markers_of(row[2][i])) do names[#names + 1] = marker.ref end
  end
  for _, name in ipairs(row.before or {}) do names[#names + 1] = name end
  for pass = 1, 2 do
    for _, name in ipairs(names) do
      if (CAPTURING[name] ~= nil) == (pass == 2) then local _ = env[name] end
    end
  end
end

local function resolve_args(env, args)
  local out = { n = args.n }
  for i = 1, args.n do
    local value = args[i]
    if getmetatable(value) == Marker then
      value = env[value.ref]
    elseif #markers_of(value) > 0 then
      local copy = {}
      for key, field in pairs(value) do
        copy[key] = getmetatable(field) == Marker and env[field.ref] or field
      end
      value = copy
    end
    out[i] = value
  end
  return out
end

-- Whether a row needs a device: it passes a device object, or says so.
function bad.needs_gpu(row)
  if row.gpu ~= nil then return row.gpu end
  for _, name in ipairs(row.before or {}) do
    if gpu[name] then return true end
  end
  for i = 1, row[2] and row[2].n or 0 do
    for _, marker in ipairs(markers_of(row[2][i])) do
      if gpu[marker.ref] then return true end
    end
  end
  return false
end

-- ---- callers -----------------------------------------------------------------------

-- The function a label names is called as a script calls it: gpurun.f(...)
-- for module functions, self:m(...) for methods, so that Lua names it in
-- the message as it would in the script. `self = "any"` rows (the wrong
-- kind of self) go through a local named after the method instead, since
-- `42:fill()` never reaches gpurun.
local callers = {}

local function caller(label, any_self)
  local key = label .. (any_self and "/any" or "")
  if callers[key] then return callers[key] end
  local module_function = label:match("^gpurun%.([%w_]+)$") or label:match("^gpurun%.(%u%w*%.[%w_]+)$")
    or label:match("^gpurun%.(system%.[%w_]+)$")
    or label:match("^gpurun%.(checkpoint%.[%w_]+)$")
    or label:match("^gpurun%.(ipc%.[%w_]+)$")
    or label:match("^gpurun%.(fft%.[%w_]+)$")
  local type_name, method = label:match("^(%u%w*):([%w_]+)$")
  local mt_type, metamethod = label:match("^(%u%w*)%.(__[%w_]+)$")
  local dist_function = label:match("^dist%.([%w_]+)$")
  local pipeline_method = label:match("^pipeline:([%w_]+)$")
  local chunk, upvalue
  if pipeline_method then
    chunk = ("return function(self, ...) local r = table.pack(self:%s(...)); return r end")
      :format(pipeline_method)
  elseif dist_function then
    chunk = ("local dist = ...; return function(...) local r = table.pack(dist.%s(...)); return r end")
      :format(dist_function)
    upvalue = require("gpurun.dist")
  elseif module_function then
    chunk = ("local gpurun = ...; return function(...) local r = table.pack(gpurun.%s(...)); return r end")
      :format(module_function)
    upvalue = gpurun
  elseif method and not any_self then
    chunk = ("return function(self, ...) local r = table.pack(self:%s(...)); return r end"):format(method)
  elseif method then
    chunk = ("local %s = ...; return function(...) local r = table.pack(%s(...)); return r end")
      :format(method, method)
    upvalue = assert(catalog.metatable(type_name).methods[method], label)
  elseif metamethod then
    chunk = ("local %s = ...; return function(...) local r = table.pack(%s(...)); return r end")
      :format(metamethod, metamethod)
    upvalue = assert(catalog.metatable(mt_type)[metamethod], label)
  else
    error("bad label " .. label)
  end
  callers[key] = assert(load(chunk, "=" .. label))(upvalue)
  return callers[key]
end

-- ---- running rows ------------------------------------------------------------------

-- The state every row must leave working: the Lua state, gpurun's
-- module functions, and with a device, a launch that computes the right
-- values (reference: made by bad.reference()).
local initial_device_count = gpurun.device_count()

function bad.reference()
  local device = current_device()
  local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
  local code = gpurun.Program(require("spec.support.kernels").SOURCE, "c++", options):compile("cubin")
  local n = 300
  return {
    n = n, code = code, add = code:get_kernel("vec_add"), stream = device:create_stream(),
    a = gpurun.full(n, 1.25, "float32"), b = gpurun.full(n, 2.5, "float32"),
    out = gpurun.zeros(n, "float32"), config = gpurun.LaunchConfig({ grid = 2, block = 256 }),
  }
end

local function still_works(reference)
  local sum = 0
  for i = 1, 10 do sum = sum + i end
  assert(sum == 55, "Lua arithmetic is broken")
  assert(gpurun.device_count() == initial_device_count, "device_count() changed")
  assert(gpurun.LaunchConfig({ grid = 3, block = 64 }).grid[1] == 3, "LaunchConfig is broken")
  assert(gpurun.u64(5).value == 5, "gpurun.u64 is broken")
  if reference then
    current_device()
    local r = reference
    r.out:fill(0, r.stream)
    gpurun.launch(r.stream, r.config, r.add, r.a, r.b, r.out, gpurun.u64(r.n))
    r.stream:sync()
    local values = r.out:to_table(r.stream)
    for i = 1, r.n do
      assert(values[i] == 3.75, ("the reference launch computed %s at %d, not 3.75"):format(values[i], i))
    end
  end
end

-- Whether the machine is in the state a row's `when` asks for.
local function applies(row)
  if row.when == nil then return true end
  if row.when == "no_driver" then return gpurun.driver_error() ~= nil end
  if row.when == "no_device" then
    local ok, err = pcall(gpurun.mem_info)
    return not ok and tostring(err):find("no current CUDA device", 1, true) ~= nil
  end
  error("unknown `when` " .. tostring(row.when))
end
bad.applies = applies

-- A short text for a row's arguments, to tell rows of one function apart.
local function describe_args(args)
  if args == nil then return "(a sequence of calls)" end
  local parts = {}
  for i = 1, args.n do
    local value = args[i]
    if getmetatable(value) == Marker then parts[i] = value.ref
    elseif type(value) == "string" then parts[i] = ("%q"):format(#value > 30 and value:sub(1, 30) .. "..." or value)
    elseif type(value) == "number" and value ~= value then parts[i] = "nan"
    else
      -- A forged object's __tostring may refuse it, as its other metamethods do.
      local ok, text = pcall(tostring, value)
      parts[i] = ok and text or type(value)
    end
  end
  return "(" .. table.concat(parts, ", ") .. ")"
end

-- The capture rule after a row's call raised while `builder` (on
-- reference.capture_stream) captured: the builder is abandoned, a plain
-- launch on its stream computes the right values, and it begins again.
-- Returns nil, or what broke.
local function capture_rule_problem(builder, reference)
  local state = builder.state
  if state ~= "abandoned" then return "left the capturing builder " .. tostring(state) end
  local r = reference
  local launched, why = pcall(function()
    r.out:fill(0, r.capture_stream)
    gpurun.launch(r.capture_stream, r.config, r.add, r.a, r.b, r.out, gpurun.u64(r.n))
    r.capture_stream:sync()
    local values = r.out:to_table(r.capture_stream)
    for i = 1, r.n do
      assert(values[i] == 3.75, ("the launch after it computed %s at %d, not 3.75"):format(values[i], i))
    end
  end)
  if not launched then return "a plain launch on the stream after it failed: " .. tostring(why) end
  local again, problem = pcall(function()
    builder:begin_building()
    builder:end_building()
  end)
  if not again then return "the builder could not begin again: " .. tostring(problem) end
  return nil
end

-- Runs the rows that apply here; returns counts and a list of failures.
-- With `capturing` (and a reference with a capture_stream), each call runs
-- while a builder captures, and the capture rule is what is checked: the
-- call raises, the builder is abandoned, the stream launches right after
-- and the builder begins again (the message may differ from the row's:
-- a capture refuses some things first).
-- A row: { label, A(args...), expected } with optional fields
--   self = "any"   self is not an object of the type (called through a local)
--   before = {...} env objects to make before the call (a builder capturing)
--   call = function(env) ... end   a sequence of calls instead of args
--   when = "no_driver" | "no_device"   only on a machine in that state
--   gpu = true     needs a device though no argument says so
function bad.run(rows, reference, capturing)
  local counts = { calls = 0, errors = 0 }
  local failures = {}
  for index, row in ipairs(rows) do
    if not applies(row) then goto next end
    local label, expected = row[1], row[3]
    local description = ("row %d %s%s"):format(index, label, describe_args(row[2]))
    local ok, err
    do
      local env <close> = new_env()
      local made, args = pcall(function()
        make_objects(env, row)
        return row[2] and resolve_args(env, row[2])
      end)
      if not made then
        failures[#failures + 1] = description .. ": making its arguments failed: " .. tostring(args)
        goto next
      end
      counts.calls = counts.calls + 1
      local builder <close> = capturing and reference.capture_stream:create_graph_builder() or nil
      if builder then builder:begin_building() end
      if row.call then
        ok, err = pcall(row.call, env)
      else
        ok, err = pcall(caller(label, row.self == "any"), table.unpack(args, 1, args.n))
      end
      if builder then
        local problem = ok and "raised no error while a builder captured"
          or capture_rule_problem(builder, reference)
        if problem then failures[#failures + 1] = description .. ": " .. problem end
      end
    end
    if capturing then
      counts.errors = counts.errors + 1
    elseif ok then
      failures[#failures + 1] = description .. ": raised no error (expected " .. show(expected) .. ")"
    else
      counts.errors = counts.errors + 1
      if type(err) ~= "string" then
        failures[#failures + 1] = description .. ": raised a " .. type(err) .. ", not a message"
      elseif not matches(err, expected) then
        failures[#failures + 1] = ("%s: expected %s in the message, got %q"):format(description,
          show(expected), err)
      elseif is_argument_error(expected)
          and (not err:find("'" .. label .. "'", 1, true) or err:find("'?'", 1, true)) then
        failures[#failures + 1] = ("%s: the argument error does not name '%s': %q"):format(description,
          label, err)
      end
    end
    do
      local works, why = pcall(still_works, reference)
      if not works then
        failures[#failures + 1] = description .. ": gpurun no longer works after it: " .. tostring(why)
      end
    end
    ::next::
  end
  return counts, failures
end

-- Labels with rows, for the completeness check.
function bad.labels(rows)
  local labels = {}
  for _, row in ipairs(rows) do labels[row[1]] = true end
  return labels
end

bad.factories = factories
bad.gpu_objects = gpu
return bad
