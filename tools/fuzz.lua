-- tools/fuzz.lua — random calls into the gpurun API, looking for crashes.
-- Every call is drawn from spec/support/api_catalog.lua, with arguments from
-- spec/support/fuzz_pool.lua, and runs under pcall: raising an error is
-- fine, crashing is not. The options, the checks and what it prints are
-- described where they are read and made, below.
--
--   gpurun tools/fuzz.lua [--seed N] [--calls N] [--gpu] [--finalizers] [--check-every N]
--                         [--trace] [--stats] [--fakes]
local script_dir = (arg and arg[0] or ""):match("^(.*)/[^/]*$") or "."
local root = script_dir:match("^(.*)/tools$") or (script_dir == "tools" and ".") or script_dir .. "/.."
package.path = root .. "/?.lua;" .. package.path

local gpurun = require("gpurun")
local catalog = require("spec.support.api_catalog")
local Pool = require("spec.support.fuzz_pool")
local guard = require("spec.support.fuzz_guard")
local fakes = require("spec.support.fake_objects")

-- ---- options -----------------------------------------------------------------

local function usage(message)
  io.stderr:write("fuzz.lua: ", message, "\n",
    "usage: gpurun tools/fuzz.lua [--seed N] [--calls N] [--gpu] [--finalizers]"
    .. " [--check-every N] [--trace] [--stats] [--fakes]\n")
  os.exit(2)
end

-- A call is a module function, a method (often on the right type,
-- sometimes on a closed object or on anything), a metamethod, or a method
-- of one of the pool's pipelines (gpurun.pipeline), with arguments
-- plausible for the argument's kind, or anything at all, in any number.
-- Every --check-every calls, and at the end, the Lua state and gpurun must
-- still work; with --gpu, a reference launch must still compute the right
-- values.
--
-- Without --gpu no device is made current (run it with GPURUN_CUDA_DRIVER
-- naming a missing library to see the no-driver behaviour on a GPU host);
-- with --gpu, device 0 is current and the pool holds objects of every type.
-- --trace writes each call to stderr before making it: after a crash, the
-- last line is the call that crashed. The same seed replays the same calls.
-- --stats prints, per function, how many calls raised, to see how deep the
-- draws reach. --finalizers also drops garbage whose __gc closes the
-- arguments of the call in progress: the collector runs it at any
-- allocation inside gpurun, so C code that keeps a raw handle across an
-- allocation meets a closed object.
local options = { seed = 1, calls = 10000, gpu = false, check_every = 250, trace = false,
  stats = false, finalizers = false, fakes = false }
do
  local i = 1
  while arg[i] do
    local name = arg[i]
    local function integer()
      i = i + 1
      local value = math.tointeger(tonumber(arg[i] or ""))
      if value == nil then usage(name .. " needs an integer") end
      return value
    end
    if name == "--seed" then options.seed = integer()
    elseif name == "--calls" then options.calls = integer()
    elseif name == "--check-every" then options.check_every = math.max(1, integer())
    elseif name == "--gpu" then options.gpu = true
    elseif name == "--trace" then options.trace = true
    elseif name == "--stats" then options.stats = true
    elseif name == "--finalizers" then options.finalizers = true
    elseif name == "--fakes" then options.fakes = true
    else usage("unknown option " .. name) end
    i = i + 1
  end
end

math.randomseed(options.seed)
local random = math.random

-- ---- bookkeeping ----------------------------------------------------------------

local counts = { calls = 0, errors = 0, skipped = 0, violations = 0 }
local violations = {}
local recent = {} -- the last RECENT calls' descriptions, by call number mod RECENT
local RECENT = 20
local builders = setmetatable({}, { __mode = "v" }) -- every GraphBuilder seen, by id
local builder_count = 0
local seen_builder = setmetatable({}, { __mode = "k" })

local function remember_builder(builder)
  if seen_builder[builder] then return end
  seen_builder[builder] = true
  builder_count = builder_count + 1
  builders[builder_count] = builder
end

local pool = Pool.new(random, { gpu = options.gpu, on_builder = remember_builder })
pool.launches = setmetatable({}, { __mode = "k" }) -- pipelines with a raw kernel's stage

local function replay_command()
  return ("gpurun tools/fuzz.lua --seed %d --calls %d%s%s%s --check-every %d --trace")
    :format(options.seed, options.calls, options.gpu and " --gpu" or "",
      options.finalizers and " --finalizers" or "", options.fakes and " --fakes" or "",
      options.check_every)
end

local function fail(what)
  io.stderr:write(("fuzz: %s (seed %d)\n"):format(what, options.seed))
  io.stderr:write("fuzz: the last calls:\n")
  for i = counts.calls - RECENT + 1, counts.calls do
    if i >= 1 then io.stderr:write("  ", recent[i % RECENT], "\n") end
  end
  io.stderr:write("fuzz: replay with: ", replay_command(), "\n")
  os.remove(guard.SCRATCH_PATH)
  io.stdout:write(("calls %d errors %d skipped %d violations %d seed %d\n")
    :format(counts.calls, counts.errors, counts.skipped, counts.violations, options.seed))
  os.exit(1)
end

local function violation(description, what)
  counts.violations = counts.violations + 1
  -- --fakes lists them all: fuzz_spec.lua tells the known ones apart.
  local kept = options.fakes and math.huge or 20
  if #violations < kept then violations[#violations + 1] = description .. ": " .. what end
end

-- ---- the objects every draw can reach -----------------------------------------

-- fresh[Type]() makes a new, usable object of the type. The pool starts with
-- a few of each, and gets one more of each at every state check, since the
-- calls close what they are given.
local fresh = {}
local reference = {} -- GPU mode: what the state check launches, out of the pool's reach
local factory = {}   -- GPU mode: what the fresh objects are made from, likewise
local rotation = 0
local function next_of(list)
  rotation = rotation + 1
  return list[rotation % #list + 1]
end

function fresh.ProgramOptions()
  return gpurun.ProgramOptions(next_of({ {}, { std = "c++17" }, { std = "c++17", arch = "sm_90" } }))
end
function fresh.Program()
  local source = Pool.SOURCES[next_of({ "ok", "template", "broken" })]
  return gpurun.Program(source, "c++", next_of({ {}, { std = "c++17", arch = "sm_90" } }))
end
function fresh.ObjectCode()
  return gpurun.Program(Pool.SOURCES.ok, "c++"):compile("ptx")
end
function fresh.Generator()
  return gpurun.default_rng(next_of({ 1, -7, 0, math.maxinteger }))
end
function fresh.HostCallback()
  return gpurun.HostCallback(function() end)
end
-- A pipeline with the data and scalars pool draws name (fuzz_pool.lua):
-- over one device, or split over two.
function fresh.Pipeline()
  local pipeline_options = next_of({ { name = "fuzz" }, { name = "fuzz_timed", timing = true, max_streams = 2 },
    { name = "fuzz_split", devices = { 0, 1 } } })
  local p = gpurun.pipeline(pipeline_options)
  p:temporary("t", 16)
  p:temporary("u", 16)
  p:temporary("i8", 16, "int8")
  p:temporary("c", 16, "complex64")
  p:scalar("s", 2.0)
  p:scalar("f32s", 1.5, "float32")
  pool:add_pipeline(p, "pipeline '" .. pipeline_options.name .. "'")
  return p
end

local function add_closed(object)
  object:close()
  pool:add_closed(object)
end

local function setup_common()
  for _, type_name in ipairs({ "ProgramOptions", "Program", "ObjectCode", "Generator", "HostCallback" }) do
    for _ = 1, 3 do pool:add(fresh[type_name]()) end
    add_closed(fresh[type_name]())
  end
  -- What pipelines call: kernel objects made without a GPU.
  pool.kernel_objects = {
    pool:label(gpurun.elementwise("float32 x", "float32 y", "y = 2 * x", "fuzz_twice"), "twice"),
    pool:label(gpurun.elementwise("float32 a, float32 s", "float32 r", "r = a * s", "fuzz_scaled"), "scaled"),
    pool:label(gpurun.elementwise("T x", "T y", "y = x", "fuzz_copy"), "copy<T>"),
    pool:label(gpurun.elementwise_pipeline("float32 a", { "float32 r1 = a + 1", "float32 r2 = r1 * 2" },
      "r2", "fuzz_chain"), "chain"),
    pool:label(gpurun.reduction("float32 x", "float32 y", "x", "sum", nil, nil, "fuzz_sum"), "sum"),
  }
  for _ = 1, 3 do fresh.Pipeline() end
  pool.max_per_type = 10
  for _, config in ipairs({ { grid = 1, block = 1 }, { grid = 4, block = 256 },
      { grid = { 2, 2 }, block = { 16, 16 } }, { grid = 1, block = 128, shmem_size = 512 },
      { grid = 1, block = 1024 }, { grid = { 2147483647 }, block = 1 } }) do
    pool:add(gpurun.LaunchConfig(config))
  end
  for _, scalar in ipairs({ gpurun.u64(16), gpurun.u64(4096), gpurun.i64(-1), gpurun.u32(7),
      gpurun.i32(-7), gpurun.f32(1.5), gpurun.f64(2.5), gpurun.u64(1 << 40) }) do
    pool:add(scalar)
  end
  for _, made in ipairs({
      { gpurun.struct({ { "x", "float32" }, { "n", "uint64" }, { "v", "float32", 4 } }), { x = 1.5, n = 7 } },
      { gpurun.struct({ { "h", "float16" }, { "b", "uint8", 3 } }, { align = 16 }), { b = { 1, 2, 3 } } } }) do
    pool:add(made[1])
    pool:add(made[1]:new())
    pool:add(made[1](made[2]))
  end
  pool.max_per_type = 8
end

local SAFE_KERNELS = { "vec_add", "vec_mul", "scale_shift", "fill_double", "byte_flag",
  "write_index_2d", "uses_shared" }
local BUFFER_SHAPES = { { 16, "float32" }, { 256, "float32" }, { 4096, "float32" },
  { 64, "float64" }, { 37 * 19, "int32" }, { 4, "uint8" }, { 1, "int8" }, { 16, "uint64" } }

local function current_device()
  local device = gpurun.Device(0) -- a new object when a call closed the old one
  device:set_current()
  return device
end

-- Everything fresh objects are made of is made anew too: a kernel or a
-- stream shared between them would reach the calls (plan.kernel,
-- builder.stream) and, once a call closed it, no fresh object would work.
local function gpu_factories()
  function fresh.Device() return current_device() end
  function fresh.Stream() return current_device():create_stream() end
  function fresh.Event() return fresh.Stream():record() end
  -- Pools of their own, small ones among them (allocations past them must
  -- fail cleanly), and the device's default pool now and then.
  function fresh.MemoryPool()
    local kind = next_of({ "small", "own", "default" })
    if kind == "default" then return current_device():memory_pool() end
    return gpurun.MemoryPool(kind == "small" and { max_size = 2 << 20 } or {})
  end
  -- Buffers of cuMemAlloc's memory, of stream-ordered memory from a pool,
  -- and of managed memory, in turn.
  function fresh.Buffer()
    local shape = next_of(BUFFER_SHAPES)
    local kind = next_of({ "plain", "pool", "managed" })
    if kind == "pool" then
      return gpurun.zeros(shape[1], shape[2], { pool = fresh.MemoryPool(), stream = fresh.Stream() })
    elseif kind == "managed" then
      return gpurun.managed(shape[1], shape[2], { attach = next_of({ "global", "host" }) }):fill(0)
    end
    return gpurun.zeros(shape[1], shape[2])
  end
  -- Every other one mapped, so that kernels reach it.
  function fresh.PinnedBuffer()
    local shape = next_of(BUFFER_SHAPES)
    return gpurun.pinned(shape[1], shape[2], { mapped = next_of({ false, true }) })
  end
  function fresh.ObjectCode()
    return gpurun.Program(require("spec.support.kernels").SOURCE, "c++", factory.options)
      :compile("cubin")
  end
  function fresh.Kernel() return factory.code:get_kernel(next_of(SAFE_KERNELS)) end
  function fresh.LaunchPlan()
    local a = gpurun.zeros(16, "float32")
    return factory.code:get_kernel("vec_add"):bind(factory.config, a, a, a, gpurun.u64(16))
  end
  function fresh.GraphBuilder() return fresh.Stream():create_graph_builder() end
  function fresh.DeviceGenerator() return gpurun.device_rng(next_of({ 1, -7, 0, math.maxinteger })) end
  function fresh.FftPlan()
    return gpurun.fft.plan(next_of({ 8, { 4, 4 } }), { kind = next_of({ "c2c", "r2c", "c2r" }),
      dtype = next_of({ "complex64", "complex128" }), stream = fresh.Stream() })
  end
  -- A group of a split, the remainder, or the whole device's SMs; green
  -- contexts of a group (the device's minimum partition).
  function fresh.SMResource()
    local sm = current_device().resources.sm
    local kind = next_of({ "group", "remainder", "whole" })
    if kind == "whole" then return sm end
    local groups, remainder = sm:split({ count = sm.min_partition_size })
    return kind == "remainder" and remainder or groups[1]
  end
  function fresh.Context()
    local groups = current_device().resources.sm:split({ count = current_device().resources.sm.min_partition_size })
    return current_device():create_context({ resources = groups })
  end
  -- The n x n identity in CSR form, n and the dtype those of a pool's
  -- buffers (16 float32, 64 float64), so that some products fit.
  function fresh.CsrMatrix()
    local n, dtype = table.unpack(next_of({ { 16, "float32" }, { 64, "float64" } }))
    local offsets = {}
    for i = 0, n do offsets[#offsets + 1] = i end
    return gpurun.csr(gpurun.array(offsets, "int32"), gpurun.array(table.move(offsets, 1, n, 1, {}), "int32"),
                      gpurun.full(n, 1, dtype), n, n)
  end
  function fresh.TensorMap()
    return gpurun.zeros(64, next_of({ "float32", "int32" })):as_tensor_map({ box_dim = { 16 } })
  end
  -- Graphs of plain launches, and graphs with allocation and free nodes: a
  -- temporary freed inside, and a buffer the graph keeps making (auto-free
  -- or not), so that launches of both kinds are drawn; and plain ones that
  -- kernels may launch, uploaded, passed as kernel arguments.
  function fresh.Graph()
    local kind = next_of({ "plain", "temporary", "keeps", "keeps_auto_free", "device_launch" })
    local a = gpurun.zeros(16, "float32")
    local kernel = factory.code:get_kernel("vec_add")
    local builder = fresh.Stream():create_graph_builder()
    builder:begin_building()
    if kind == "plain" or kind == "device_launch" then
      gpurun.launch(builder, factory.config, kernel, a, a, a, gpurun.u64(16))
    else
      local t = gpurun.empty(16, "float32", { stream = builder })
      gpurun.launch(builder, factory.config, kernel, a, a, t, gpurun.u64(16))
      gpurun.launch(builder, factory.config, kernel, t, t, a, gpurun.u64(16))
      if kind == "temporary" then t:close() else pool:add(t) end
    end
    builder:end_building()
    if kind == "device_launch" then
      return builder:complete({ device_launch = true, upload_stream = builder.stream })
    end
    return builder:complete({ auto_free_on_launch = kind == "keeps_auto_free" })
  end
end

local function setup_gpu()
  local kernels = require("spec.support.kernels")
  add_closed(gpurun.Device(0))
  local device = current_device()
  factory.options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
  factory.code = gpurun.Program(kernels.SOURCE, "c++", factory.options):compile("cubin")
  factory.config = gpurun.LaunchConfig({ grid = 1, block = 16 })
  gpu_factories()

  pool:add(device)
  for _, type_name in ipairs({ "Stream", "Event", "GraphBuilder", "Graph", "LaunchPlan",
      "MemoryPool", "TensorMap", "DeviceGenerator", "CsrMatrix", "FftPlan" }) do
    for _ = 1, 2 do pool:add(fresh[type_name]()) end
    add_closed(fresh[type_name]())
  end
  -- Green contexts where the driver has them; their streams join the pool.
  if pcall(function() return current_device().resources end) then
    for _, type_name in ipairs({ "SMResource", "Context" }) do
      for _ = 1, 2 do pool:add(fresh[type_name]()) end
      add_closed(fresh[type_name]())
    end
    pool:add(fresh.Context():create_stream())
  end
  for _ = 1, #SAFE_KERNELS do pool:add(fresh.Kernel()) end
  add_closed(fresh.Kernel())
  for _ = 1, #BUFFER_SHAPES do pool:add(fresh.Buffer()) end
  add_closed(fresh.Buffer())
  for _ = 1, #BUFFER_SHAPES do pool:add(fresh.PinnedBuffer()) end
  add_closed(fresh.PinnedBuffer())
  local base = fresh.Buffer()
  pool:add(base:view(1))
  local orphan = fresh.Buffer():view(1) -- its base closed under it
  orphan.base:close()
  pool:add_closed(orphan)
  pool:add(fresh.ObjectCode())

  -- Objects whose parts were closed under them.
  local other_code = fresh.ObjectCode()
  pool:add_closed(other_code:get_kernel("vec_add"))
  add_closed(other_code)
  local gone = gpurun.zeros(16, "float32")
  pool:add(factory.code:get_kernel("vec_add"):bind(factory.config, gone, gone, gone,
    gpurun.u64(16)))
  gone:close() -- its plan must now refuse to launch
  local doomed = device:create_stream()
  pool:add(doomed:create_graph_builder())
  doomed:close() -- its builder must now refuse everything
  local built = fresh.GraphBuilder() -- built, not completed
  local x = gpurun.zeros(16, "float32")
  built:begin_building()
  gpurun.launch(built, factory.config, factory.code:get_kernel("vec_add"), x, x, x, gpurun.u64(16))
  built:end_building()
  pool:add(built)

  -- The state check's own objects: no call can reach them.
  reference.stream = device:create_stream()
  reference.add = fresh.ObjectCode():get_kernel("vec_add")
  reference.n = 1000
  reference.a = gpurun.full(reference.n, 1.5, "float32")
  reference.b = gpurun.full(reference.n, 2.0, "float32")
  reference.out = gpurun.zeros(reference.n, "float32")
  reference.config = gpurun.LaunchConfig({ grid = 4, block = 256 })
  device:sync()
end

-- One more usable object of each type that calls can close.
local function refresh()
  for _, type_name in ipairs(catalog.types) do
    if fresh[type_name] then
      local ok, object = pcall(fresh[type_name])
      if ok then pool:add(object) end
    end
  end
  fresh.Pipeline()
end

-- ---- the state check ------------------------------------------------------------

local initial_device_count = gpurun.device_count()

local function check_gpu()
  -- Captures the calls left open would swallow the reference launch.
  for id = 1, builder_count do
    local builder = builders[id]
    if builder then
      local ok, state = pcall(function() return builder.state end)
      if ok and state == "building" then pcall(builder.end_building, builder) end
    end
  end
  -- Host callbacks the calls queued run at the first wait: an error one
  -- raises is the calls' doing, not the state's.
  pcall(function() current_device():sync() end)
  local r = reference
  r.out:fill(0, r.stream)
  gpurun.launch(r.stream, r.config, r.add, r.a, r.b, r.out, gpurun.u64(r.n))
  r.stream:sync()
  local values = r.out:to_table(r.stream)
  for i = 1, r.n do
    if values[i] ~= 3.5 then error(("reference launch: element %d is %s, not 3.5"):format(i, values[i])) end
  end
end

local function check_state(after)
  local ok, err = pcall(function()
    local sum = 0
    for i = 1, 100 do sum = sum + i end
    assert(sum == 5050, "Lua arithmetic")
    assert(("%d-%s"):format(7, "x") == "7-x", "string.format")
    assert(gpurun.device_count() == initial_device_count, "device_count changed")
    assert(gpurun.LaunchConfig({ grid = 2, block = 32 }).grid[1] == 2, "LaunchConfig")
    assert(gpurun.u64(9).value == 9, "gpurun.u64")
    collectgarbage("collect") -- runs the finalizers of everything dropped
    if options.gpu then check_gpu() end
  end)
  if not ok then fail(("state check after call %d failed: %s"):format(after, tostring(err))) end
  refresh()
end

-- ---- drawing a call ---------------------------------------------------------------

local METAMETHOD_ARGS = {
  __index = { "key" }, __newindex = { "key", "any" }, __sub = { "event" }, __close = { "any" },
}
-- Launches get more draws: most of them stop at gpurun's checks.
-- A pipeline's close ends one of a few: drawn more often than a pool
-- object's, so that a run of the spec's length draws it.
local WEIGHTS = { ["gpurun.launch"] = 3, ["Kernel:bind"] = 2, ["LaunchPlan:launch"] = 2,
  ["Graph:launch"] = 2, ["GraphBuilder:begin_building"] = 2, ["pipeline:close"] = 0.15 }

-- A pipeline's methods, called on the pool's pipelines.
local pipeline_entries = {}
for _, name in ipairs(catalog.sorted_keys(catalog.pipeline)) do
  pipeline_entries[#pipeline_entries + 1] = { kind = "pipeline method", type = "Pipeline", name = name,
    label = "pipeline:" .. name, spec = catalog.pipeline[name],
    resolved = function(self, ...) return self[name](self, ...) end }
end

-- gpurun.system's functions: NVML where the machine has it, else its
-- one-line message.
local system_entries = {}
for _, name in ipairs(catalog.sorted_keys(catalog.system)) do
  system_entries[#system_entries + 1] = { kind = "function", name = name,
    label = "gpurun.system." .. name, spec = catalog.system[name],
    resolved = function(...) return gpurun.system[name](...) end }
end

local entries, cumulative, total = {}, {}, 0
local all_entries = catalog.entries()
for _, entry in ipairs(pipeline_entries) do all_entries[#all_entries + 1] = entry end
for _, entry in ipairs(system_entries) do all_entries[#all_entries + 1] = entry end
for _, entry in ipairs(all_entries) do
  entry.fn = entry.resolved or catalog.resolve(gpurun, entry)
  assert(entry.fn, "catalog entry " .. entry.label .. " does not resolve")
  -- A lock that succeeds holds every later CUDA call of the process until
  -- an unlock: drawn at random on a GPU host, the run would stop there.
  if entry.spec.checkpoint then goto next_entry end
  local weight = WEIGHTS[entry.label]
    or ((entry.name == "close" or entry.name == "__close") and 0.05) -- or every pool ends up closed
    or (entry.spec.never_raises and 0.2)
    or (entry.spec.reduces and 0.3) -- each new dtype compiles a kernel: NVRTC's time
    or (entry.spec.runs and 0.3)
    or (entry.kind == "metamethod" and 0.4)
    or 1
  total = total + weight
  entries[#entries + 1] = entry
  cumulative[#cumulative + 1] = total
  ::next_entry::
end

local function pick_entry()
  local roll = random() * total
  local low, high = 1, #cumulative
  while low < high do
    local mid = (low + high) // 2
    if cumulative[mid] < roll then low = mid + 1 else high = mid end
  end
  return entries[low]
end

-- A value for a kernel parameter used as `use` (see fuzz_guard.lua's
-- models): a buffer for a pointer, a small count, a number or scalar of the
-- right size; now and then something else.
local COUNTS = { 1, 2, 4, 15, 16, 17, 37, 64, 256, 703, 1000, 4096, 4097 }
local function plausible_kernel_arg(use)
  local roll = random()
  if roll < 0.05 then return pool:any() end
  if use == "ptr" then return pool:object("Buffer") end
  if use == "any" then
    return pool:pick({ 1.5, -2, 0, true, false, gpurun.f32(0.5), gpurun.i32(3), gpurun.f64(0.25),
      gpurun.i64(7) })
  end
  if roll < 0.6 then return pool:pick(COUNTS) end
  local count = pool:pick(COUNTS)
  if use == "u64" then return gpurun.u64(count) end
  if use == "i64" then return gpurun.i64(count) end
  if use == "u32" then return gpurun.u32(count) end
  return gpurun.i32(count)
end

-- A launch (gpurun.launch or Kernel:bind) whose target, configuration
-- and kernel are live and whose arguments fit the kernel's parameters, so
-- that launches really run (the guard still skips the unsafe ones).
-- Graph:set_args: a graph and one of its kernel nodes, or nil.
local function kernel_node()
  local graph = pool:object("Graph")
  if catalog.type_of(graph) ~= "Graph" then return nil end
  local ok, nodes = pcall(graph.nodes, graph)
  if not ok then return nil end
  local kernel_nodes = {}
  for _, node in ipairs(nodes) do
    if node.kernel then kernel_nodes[#kernel_nodes + 1] = node end
  end
  if #kernel_nodes == 0 then return nil end
  return graph, pool:pick(kernel_nodes)
end

local function well_formed_launch(entry)
  local graph, node
  if entry.label == "Graph:set_args" then
    graph, node = kernel_node()
    if not graph then return nil end
  end
  local kernel = node and node.kernel or pool:object("Kernel")
  local ok, name = pcall(function() return kernel.name end)
  local model = ok and guard.KERNELS[name]
  if not model then return nil end
  local args = { n = 0 }
  local function push(value)
    args.n = args.n + 1
    args[args.n] = value
  end
  if graph then
    push(graph)
    push(node.index)
  elseif entry.label == "gpurun.launch" then
    push(pool:object(random() < 0.8 and "Stream" or "GraphBuilder"))
    push(pool:object("LaunchConfig"))
    push(kernel)
  else
    push(kernel)
    push(pool:object("LaunchConfig"))
  end
  local first = args.n + 1
  for _, use in ipairs(model) do push(plausible_kernel_arg(use)) end
  -- Most counts fit the buffers: what fits, in 8-byte elements.
  local fits = math.huge
  for i, use in ipairs(model) do
    local ok_size, nbytes = pcall(function() return args[first + i - 1].nbytes end)
    if use == "ptr" and ok_size and math.type(nbytes) == "integer" then
      fits = math.min(fits, nbytes // 8)
    end
  end
  if fits >= 1 and fits < math.huge and random() < 0.6 then
    local budget = fits
    for i, use in ipairs(model) do
      if use ~= "ptr" and use ~= "any" then
        local count = random(1, math.max(1, budget))
        budget = math.max(1, budget // count)
        args[first + i - 1] = count
      end
    end
  end
  return args
end

-- args (with .n) for one call of entry.
local function draw_args(entry)
  if entry.spec.launches and random() < 0.6 then
    local args = well_formed_launch(entry)
    if args then return args end
  end
  local args, n = {}, 0
  local function push(value)
    n = n + 1
    args[n] = value
  end
  if entry.kind == "pipeline method" then
    push(pool:pipeline())
  elseif entry.kind ~= "function" then
    push(pool:typed(entry.type))
  end
  local kinds = entry.kind == "metamethod" and (METAMETHOD_ARGS[entry.name] or {}) or entry.spec.args
  local variadic = kinds[#kinds] == "..."
  local fixed = variadic and #kinds - 2 or #kinds
  for i = 1, fixed do push(pool:draw(kinds[i])) end
  if variadic then
    for _ = 1, random(0, 6) do push(pool:draw(kinds[#kinds - 1])) end
  end
  local roll = random()
  local least = entry.kind == "pipeline method" and 1 or 0 -- a pipeline's self always
  if roll < 0.12 and n > least then
    n = random(least, n - 1) -- too few
  elseif roll < 0.20 then
    for _ = 1, random(3) do push(pool:any()) end -- too many
  end
  args.n = n
  return args
end

local function describe_call(index, entry, args)
  local parts = {}
  for i = 1, args.n do parts[i] = pool:describe(args[i]) end
  return ("#%d %s(%s)"):format(index, entry.label, table.concat(parts, ", "))
end

-- ---- checking what a call did -------------------------------------------------------

local per_entry = {} -- label -> { calls, errors }, for --stats

local function check_error(description, err)
  if type(err) ~= "string" then
    violation(description, "raised a " .. type(err) .. " instead of a message")
  elseif err == "" then
    violation(description, "raised an empty message")
  elseif err:find("(null)", 1, true) then
    violation(description, "message contains (null): " .. err)
  elseif not options.gpu and err:gsub("CUDA C%+*%f[^%w+]", ""):find("CUDA", 1, true)
      and not err:find("the CUDA driver could not be loaded", 1, true)
      and not err:find("no current CUDA device", 1, true) then
    -- Without a driver, only these two may speak of CUDA (the language,
    -- "CUDA C" or "CUDA C++", aside).
    violation(description, "without a driver, a CUDA message other than the two expected: " .. err)
  end
end

-- Why an error is not one of gpurun's one-line messages
-- (spec/support/fake_objects.lua's rules), or nil: with strict, any of
-- them; else, for a pipeline method, Lua's own errors from inside gpurun,
-- and a Lua library's argument error (a pipeline method raises its own
-- messages, naming the argument).
local function internal_error(entry, err, strict)
  if strict then return fakes.problem(err) end
  if entry.kind ~= "pipeline method" or type(err) ~= "string" then return nil end -- check_error's
  local problem = fakes.internal(err)
  if not problem and err:find("bad argument #%d+ to '[%w_.:]+'") then
    problem = "a Lua library's argument error instead of a message"
  end
  return problem
end

local function check_results(description, results, args)
  for i = 2, results.n do
    local type_name = catalog.type_of(results[i])
    if type_name and not rawequal(results[i], args[1]) then
      if not options.gpu and catalog.device_types[type_name] then
        violation(description, "made a gpurun." .. type_name .. " without a driver")
      end
      pool:add(results[i])
    end
  end
end

-- ---- run ---------------------------------------------------------------------------------

setup_common()
if options.gpu then setup_gpu() end
check_state(0)

-- One call of entry with args (through fn when given), unless the guard
-- skips it (a guard that raises, a finalizer having closed what it looked
-- at, skips too). With strict, every error must be one of gpurun's
-- one-line messages.
local function make_call(draw, entry, args, strict, where, fn)
  guard.cap_sizes(entry.spec, args, entry.kind == "function" and 0 or 1)
  guard.tame(entry.spec, args, entry.kind == "function" and 0 or 1)
  local judged, allowed = true, true
  if entry.kind == "pipeline method" then
    -- A pipeline with a raw kernel's stage runs only without a GPU: no
    -- guard has looked at its launches' arguments.
    allowed = not (options.gpu and entry.spec.runs and pool.launches[args[1]])
  elseif options.gpu then
    judged, allowed = pcall(guard.allowed, entry, args, args.n)
  end
  if not (judged and allowed) then
    counts.skipped = counts.skipped + 1
    return
  end
  counts.calls = counts.calls + 1
  local description = describe_call(draw, entry, args) .. (where and " [fake in " .. where .. "]" or "")
  recent[counts.calls % RECENT] = description
  if options.trace then io.stderr:write(description, "\n") end
  if options.finalizers and random() < 0.05 then
    -- Garbage whose finalizers close this call's arguments, at whatever
    -- allocation inside the call the collector happens to run them.
    for _ = 1, 20 do setmetatable({}, { __gc = function() pool:hostile_action() end }) end
  end
  pool.current_args = args -- what the pool's hostile metamethods close
  local results = table.pack(pcall(fn or entry.fn, table.unpack(args, 1, args.n)))
  pool.current_args = nil
  local tally = per_entry[entry.label] or { calls = 0, errors = 0 }
  per_entry[entry.label] = tally
  tally.calls = tally.calls + 1
  if results[1] then
    check_results(description, results, args)
    if entry.label == "pipeline:launch" then pool.launches[args[1]] = true end
  else
    tally.errors = tally.errors + 1
    counts.errors = counts.errors + 1
    if options.stats and type(results[2]) == "string" then
      local shape = results[2]:gsub("\n.*", ""):gsub("%-?%d[%d%.e%+%-]*", "N"):sub(1, 110)
      tally.shapes = tally.shapes or {}
      tally.shapes[shape] = (tally.shapes[shape] or 0) + 1
    end
    check_error(description, results[2])
    local problem = internal_error(entry, results[2], strict)
    if problem then violation(description, ("%s: %q"):format(problem, tostring(results[2]))) end
  end
  if counts.calls % options.check_every == 0 then check_state(counts.calls) end
end

-- The kinds of entry's arguments, self first for methods and metamethods
-- (as the kind "self"), without the trailing "...".
local function positions_of(entry)
  local kinds = entry.kind == "metamethod" and (METAMETHOD_ARGS[entry.name] or {}) or entry.spec.args
  local list = {}
  if entry.kind ~= "function" then list[1] = "self" end
  for _, kind in ipairs(kinds) do
    if kind ~= "..." then list[#list + 1] = kind end
  end
  return list
end

-- What an argument of `kind` is beside a fake: a plausible value; a
-- pipeline method's self, a fresh pipeline.
local function beside_fake(entry, kind)
  if kind == "self" then
    return entry.kind == "pipeline method" and fresh.Pipeline() or pool:object(entry.type)
  end
  return pool:plausible(kind)
end

-- --fakes: each entry, each position, each strategy, options.calls times.
-- It makes no random draws of functions: it calls every entry of the
-- catalog, a pipeline's methods among them, with a fake object
-- (spec/support/fake_objects.lua: a lying __name, an __index that raises, a
-- __tostring that returns a table, ...) in each argument position, self
-- included, by every strategy, the other arguments plausible. Every error
-- must be a one-line gpurun message, not an internal Lua error nor an
-- argument error that names no function (fake_objects.lua's list). The
-- fake draws are among the random calls' arguments too.
local function sweep_fakes()
  local draw = 0
  for _, entry in ipairs(entries) do
    local kinds = positions_of(entry)
    for position, kind in ipairs(kinds) do
      local claim = kind == "self" and entry.type or fakes.CLAIMS[kind]
      for _, strategy in ipairs(fakes.STRATEGIES) do
        for _ = 1, options.calls do
          draw = draw + 1
          local args = { n = #kinds }
          for i, other in ipairs(kinds) do args[i] = beside_fake(entry, other) end
          args[position] = pool:label(strategy.make(claim), ("fake %s (%s)"):format(claim or "object",
                                                                                     strategy.name))
          local offset = entry.kind == "function" and 0 or 1
          -- A pipeline's method itself, not looked up on a fake self.
          local fn = entry.kind == "pipeline method" and fresh.Pipeline()[entry.name] or nil
          make_call(draw, entry, args, true, kind == "self" and "self" or "#" .. (position - offset), fn)
        end
      end
    end
  end
end

if options.fakes then
  sweep_fakes()
else
  -- Skipped draws do not count: the run makes exactly options.calls calls.
  local draws = 0
  while counts.calls < options.calls do
    draws = draws + 1
    local entry = pick_entry()
    make_call(draws, entry, draw_args(entry), false)
  end
end
check_state(options.calls)
os.remove(guard.SCRATCH_PATH)

if options.stats then
  for _, entry in ipairs(entries) do
    local tally = per_entry[entry.label]
    if tally then
      io.stderr:write(("%-32s %6d calls %6d raised\n"):format(entry.label, tally.calls, tally.errors))
      local shapes = {}
      for shape, count in pairs(tally.shapes or {}) do shapes[#shapes + 1] = { shape, count } end
      table.sort(shapes, function(a, b) return a[2] > b[2] or (a[2] == b[2] and a[1] < b[1]) end)
      for i = 1, math.min(4, #shapes) do
        io.stderr:write(("    %6d  %s\n"):format(shapes[i][2], shapes[i][1]))
      end
    end
  end
end
-- Prints "calls N errors E skipped K violations V seed S" and exits 0; on a
-- failed check or a violation (an error that is not a string, a message
-- with "(null)" in it, a device object made without a driver, a message
-- about CUDA without a driver other than "the CUDA driver could not be
-- loaded" or "no current CUDA device", a pipeline method's message that is
-- not one of gpurun's, as --fakes judges them: "attempt to index a nil
-- value" and the like) it says what, with the seed and the last calls, and
-- exits 1.
if #violations > 0 then
  for _, line in ipairs(violations) do io.stderr:write("fuzz: violation: ", line, "\n") end
  fail(("%d violation(s)"):format(counts.violations))
end
io.stdout:write(("calls %d errors %d skipped %d violations %d seed %d\n")
  :format(counts.calls, counts.errors, counts.skipped, counts.violations, options.seed))
