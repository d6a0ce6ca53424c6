-- The values tools/fuzz.lua calls gpurun with: edge-case numbers, strings,
-- tables (some with metamethods that call back into gpurun mid-call),
-- functions, and live and closed gpurun objects of every type. Every draw
-- goes through the generator handed to new(), so a seed replays exactly.
local catalog = require("spec.support.api_catalog")
local fakes = require("spec.support.fake_objects")

local Pool = {}
Pool.__index = Pool

local NAN = 0 / 0
local INF = math.huge

local SMALL_COUNTS = { 1, 2, 3, 4, 16, 37, 64, 100, 256, 1000, 4096 }
local EDGE_COUNTS = { 0, -1, -4096, 0.5, 1.5, 16.0, 1 << 20, (1 << 20) + 1, 1 << 24, 1 << 31,
  1 << 32, 1 << 40, math.maxinteger, math.mininteger, 2 ^ 63, -2 ^ 63, 2 ^ 64, INF, -INF, NAN,
  -0.0, "16", "0x10" }
local INTEGERS = { 0, 1, -1, 2, 3, 7, 8, 16, 31, 32, 64, 100, 127, 128, 255, 256, 1000, 1024,
  1025, 4096, 65535, 65536, 2147483647, 2147483648, -2147483648, -2147483649, 4294967295,
  4294967296, 1 << 40, math.maxinteger, math.mininteger, -4096 }
local FLOATS = { 0.0, -0.0, 0.5, 1.5, -1.5, 2.0, 3.5, 1e-300, 1e300, 1e39, -1e39,
  3.4028234663852886e38, 3.4028235677973366e38, 2 ^ 53, 2 ^ 63, -2 ^ 63, 2 ^ 64, INF, -INF,
  NAN, math.pi, 4096.0 }
local DTYPES = { "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8", "int16",
  "uint16", "float16", "bfloat16" }
local BAD_DTYPES = { "float8", "", "FLOAT32", "float", "int", 4, true }
local KERNEL_NAMES = { "vec_add", "vec_mul", "scale_shift", "fill_double", "byte_flag",
  "write_index_2d", "uses_shared", "k", "scale<float>", "nope", "", "vec_add\0x" }
local STRINGS = { "", "x", "ptx", "cubin", "c++", "c", "float32", "int8", "uint64", "float16",
  "vec_add", "nope", "8", "1e3", "-1", "0x10", "sm_90", "90", "compute_90", "c++17", "\0",
  "a\0b", "%s%s%n%d", "gpurun.Buffer", "grid", "block", "name", "name_expressions", "std",
  "arch", "close", "__index", string.rep("x", 5000), "\255\254" }

local SOURCES = {
  ok = 'extern "C" __global__ void k(float *x, size_t n) { if (threadIdx.x < n) x[threadIdx.x] = 1.0f; }',
  template = "template <typename T> __global__ void scale(T *x, T a) { x[0] *= a; }",
  broken = "this is not C++ {",
  empty = "",
  nul = "extern \"C\" __global__ void k() {}\0junk",
  long = ("// filler\n"):rep(2000) .. 'extern "C" __global__ void k() {}',
}

function Pool.new(random, options)
  local self = setmetatable({
    random = random,
    gpu = options.gpu,
    objects = {},  -- type name -> list of objects (they may get closed by calls)
    closed = {},   -- type name -> list of objects closed at set-up
    labels = setmetatable({}, { __mode = "k" }),
    on_builder = options.on_builder,
    pipelines = {},       -- gpurun.pipeline objects (tools/fuzz.lua makes them)
    kernel_objects = {},  -- what p:call takes: elementwise kernels and the like
    max_per_type = options.max_per_type or 8,
    max_buffer_elements = options.max_buffer_elements or 4096,
  }, Pool)
  for _, type_name in ipairs(catalog.types) do
    self.objects[type_name] = {}
    self.closed[type_name] = {}
  end
  self:make_tables()
  return self
end

function Pool:pick(list)
  return list[self.random(#list)]
end

function Pool:chance(p)
  return self.random() < p
end

function Pool:label(value, name)
  self.labels[value] = name
  return value
end

-- ---- tables and functions ------------------------------------------------

-- A metamethod that, in the middle of a gpurun call reading the table,
-- closes one of the call's own arguments (what the C code is most likely to
-- hold on to), or now and then another object of the pool, or runs the
-- collector: the C code must not depend on anything those can take away.
function Pool:hostile_action()
  local roll = self.random()
  if roll < 0.25 then
    collectgarbage("collect")
    return
  end
  local object
  local args = self.current_args
  if roll < 0.85 and args and args.n > 0 then
    object = args[self.random(args.n)]
  elseif roll >= 0.85 then
    local list = self.objects[self:pick(catalog.types)]
    object = #list > 0 and self:pick(list)
  end
  local type_name = catalog.type_of(object)
  local close = type_name and catalog.metatable(type_name).methods.close
  if close then pcall(close, object) end
end

function Pool:make_tables()
  local pool = self
  local function hostile_index()
    return setmetatable({}, { __index = function() pool:hostile_action() return nil end })
  end
  local function hostile_len()
    return setmetatable({ 8 }, { __len = function() pool:hostile_action() return 1 end })
  end
  local cyclic = {}
  cyclic.self, cyclic[1] = cyclic, cyclic
  local big = {}
  for i = 1, 1000 do big[i] = i end
  self.tables = {
    self:label({}, "{}"),
    self:label({ 1, 2, 3 }, "{1,2,3}"),
    self:label({ 1.5, "x" }, "{1.5,'x'}"),
    self:label({ { 1 } }, "{{1}}"),
    self:label({ x = 1, y = 2, z = 3 }, "{x=,y=,z=}"),
    self:label(cyclic, "cyclic"),
    self:label(big, "{1..1000}"),
    self:label(setmetatable({}, { __name = "gpurun.Buffer" }), "table named gpurun.Buffer"),
    self:label(setmetatable({}, { __tostring = function() return {} end }), "__tostring returning a table"),
    self:label(setmetatable({}, { __index = function() error("fuzz: __index raised") end }),
      "raising __index"),
    self:label(hostile_index(), "hostile __index"),
    self:label(hostile_len(), "hostile __len"),
  }
  self.sequences = {
    self:label({ 1, 2, 3, 4 }, "{1,2,3,4}"), self:label({ 1.5 }, "{1.5}"),
    self:label({ 1, "x" }, "{1,'x'}"), self:label({ 1e39 }, "{1e39}"), self:label({ 300 }, "{300}"),
    self:label({ -1 }, "{-1}"), self:label({ NAN, INF }, "{nan,inf}"), self:label({}, "{}"),
    self:label({ 1, nil, 3 }, "{1,nil,3}"), self:label(big, "{1..1000}"),
  }
  self.option_tables = {
    self:label({}, "{}"),
    self:label({ std = "c++17" }, "{std=c++17}"),
    self:label({ std = "c++17", arch = "sm_90" }, "{std,arch=sm_90}"),
    self:label({ arch = "compute_90" }, "{arch=compute_90}"),
    self:label({ arch = 90 }, "{arch=90}"),
    self:label({ arch = 9 }, "{arch=9}"),
    self:label({ std = 17 }, "{std=17}"),
    self:label({ std = "c++1" }, "{std=c++1}"),
    self:label({ defines = { "A", "B=2", C = 3, D = true } }, "{defines}"),
    self:label({ defines = { "" } }, "{defines={''}}"),
    self:label({ defines = { ["A=B"] = 1 } }, "{defines={A=B=1}}"),
    self:label({ defines = { X = {} } }, "{defines={X={}}}"),
    self:label({ defines = { [2.5] = 1 } }, "{defines={[2.5]=1}}"),
    self:label({ include_paths = "/nonexistent" }, "{include_paths=str}"),
    self:label({ include_paths = { 5 } }, "{include_paths={5}}"),
    self:label({ line_info = true, debug = false, use_fast_math = true }, "{flags}"),
    self:label({ line_info = "yes" }, "{line_info='yes'}"),
    self:label({ max_register_count = 32 }, "{maxreg=32}"),
    self:label({ max_register_count = 0 }, "{maxreg=0}"),
    self:label({ max_register_count = NAN }, "{maxreg=nan}"),
    self:label({ relocatable_device_code = true }, "{rdc}"),
    self:label({ extra = { "--fuzz-unknown-option" } }, "{extra=bad}"),
    self:label({ extra = { 1 } }, "{extra={1}}"),
    self:label({ extra = { "-DX=\0" } }, "{extra={'-DX=\\0'}}"),
    self:label({ defines = { X = "1\0" } }, "{defines={X='1\\0'}}"),
    self:label({ extra = { "--brief-diagnostics=false" } }, "{extra=brief off}"),
    self:label({ [1] = true }, "{[1]=true}"),
    self:label({ nope = 1 }, "{nope=1}"),
    self:label(hostile_index(), "hostile __index"),
  }
  self.linker_option_tables = {
    self:label({ arch = "sm_90" }, "{arch=sm_90}"),
    self:label({ arch = "sm_90", link_time_optimization = true }, "{arch,lto}"),
    self:label({ arch = "compute_90", link_time_optimization = true }, "{compute_90,lto}"),
    self:label({ arch = "sm_90", verbose = true, optimization_level = 0, ftz = true }, "{verbose,O0,ftz}"),
    self:label({ arch = "sm_90", kernels_used = { "k" }, name = "fuzz" }, "{kernels_used}"),
    self:label({}, "{}"),
    self:label({ arch = "sm_9" }, "{arch=sm_9}"),
    self:label({ optimization_level = 2 }, "{O2}"),
    self:label({ ptxas_options = { "-v\0" } }, "{ptxas NUL}"),
    self:label({ nope = 1 }, "{nope=1}"),
    self:label(hostile_index(), "hostile __index"),
  }
  self.config_tables = {
    self:label({ grid = 1, block = 1 }, "{grid=1,block=1}"),
    self:label({ grid = 4, block = 256 }, "{grid=4,block=256}"),
    self:label({ grid = { 2, 2 }, block = { 16, 16 } }, "{grid={2,2},block={16,16}}"),
    self:label({ grid = 1, block = 128, shmem_size = 512 }, "{1,128,shmem=512}"),
    self:label({ grid = 1, block = 32, shmem_size = 1 << 30 }, "{shmem=1GiB}"),
    self:label({ grid = 65535, block = 1024 }, "{grid=65535,block=1024}"),
    self:label({ grid = 0, block = 1 }, "{grid=0}"),
    self:label({ grid = 1, block = 2048 }, "{block=2048}"),
    self:label({ grid = 1, block = { 32, 32, 2 } }, "{block=32x32x2}"),
    self:label({ grid = { 1, 65536 }, block = 1 }, "{grid.y=65536}"),
    self:label({ grid = NAN, block = 1 }, "{grid=nan}"),
    self:label({ grid = 2 ^ 63, block = 1 }, "{grid=2^63}"),
    self:label({ grid = { "8" }, block = 1 }, "{grid={'8'}}"),
    self:label({ grid = 1, block = 1, shmem_size = "64" }, "{shmem='64'}"),
    self:label({ grid = 1, block = 1, shmem_size = -1 }, "{shmem=-1}"),
    self:label({ grid = { 1, 2, 3, 4 }, block = 1 }, "{grid 4 entries}"),
    self:label({ grid = 1 }, "{grid only}"),
    self:label({ grid = 1, block = 1, shmem = 4 }, "{shmem typo}"),
    self:label({ grid = 1, block = 32, priority = -1 }, "{priority=-1}"),
    self:label({ grid = 1, block = 32, priority = 0 }, "{priority=0}"),
    self:label({ grid = 1, block = 32, priority = 99 }, "{priority=99}"),
    self:label({ grid = 1, block = 32, priority = 0.5 }, "{priority=0.5}"),
    self:label({ grid = 1, block = 32, priority = "high" }, "{priority='high'}"),
    self:label({ grid = hostile_len(), block = 1 }, "{grid=hostile __len}"),
    self:label(hostile_index(), "hostile __index"),
  }
  self.compile_args = {
    self:label({}, "{}"),
    self:label({ name = "fuzz.cu" }, "{name=fuzz.cu}"),
    self:label({ name = "" }, "{name=''}"),
    self:label({ name = "a\0b" }, "{name='a\\0b'}"),
    self:label({ name = 5 }, "{name=5}"),
    self:label({ name_expressions = { "scale<float>" } }, "{name_expressions={scale<float>}}"),
    self:label({ name_expressions = { "nope<int>" } }, "{name_expressions={nope<int>}}"),
    self:label({ name_expressions = "scale<float>" }, "{name_expressions=str}"),
    self:label({ name_expressions = { "" } }, "{name_expressions={''}}"),
    self:label({ name_expressions = { "k\0x" } }, "{name_expressions={'k\\0x'}}"),
    self:label({ foo = 1 }, "{foo=1}"),
    self:label({ [1] = 2 }, "{[1]=2}"),
    self:label(hostile_index(), "hostile __index"),
  }
  self.functions = {
    self:label(function() end, "function() end"),
    self:label(function(...) return ... end, "identity"),
    self:label(function() error("fuzz: callback raised") end, "raising function"),
    self:label(tostring, "tostring"),
    self:label(coroutine.create(function() end), "thread"),
    self:label(io.stderr, "io.stderr"),
  }
end

-- ---- objects ---------------------------------------------------------------

-- Keeps a gpurun object a call returned (replacing an older one when the
-- type's list is full). Large buffers are closed instead, so that the
-- O(n) methods stay cheap.
function Pool:add(value)
  local type_name = catalog.type_of(value)
  if not type_name then return end
  if type_name == "GraphBuilder" and self.on_builder then self.on_builder(value) end
  if type_name == "Buffer" or type_name == "PinnedBuffer" then
    local ok, size = pcall(function() return value.size end)
    if ok and size > self.max_buffer_elements then
      pcall(value.close, value)
      return
    end
  end
  local list = self.objects[type_name]
  if #list < self.max_per_type then
    list[#list + 1] = value
  else
    list[self.random(#list)] = value
  end
end

function Pool:add_closed(value)
  local type_name = assert(catalog.type_of(value), "not a gpurun object")
  local list = self.closed[type_name]
  list[#list + 1] = value
end

function Pool:object(type_name)
  local list = self.objects[type_name]
  if #list == 0 then return self:any() end
  return self:pick(list)
end

function Pool:closed_object(type_name)
  local list = self.closed[type_name]
  if #list == 0 then return self:object(type_name) end
  return self:pick(list)
end

-- Mostly a live object of the type, sometimes a closed one, sometimes
-- anything at all.
function Pool:typed(type_name)
  local roll = self.random()
  if roll < 0.75 then return self:object(type_name) end
  if roll < 0.83 then return self:closed_object(type_name) end
  if roll < 0.87 then return self:fake(type_name) end
  return self:any()
end

-- A table that pretends to be a gpurun object of the type (or of none), by
-- one of spec/support/fake_objects.lua's strategies.
function Pool:fake(type_name)
  local strategy = self:pick(fakes.STRATEGIES)
  return self:label(strategy.make(type_name), ("fake %s (%s)"):format(type_name or "object", strategy.name))
end

-- A pipeline of the pool, for a pipeline method's self.
function Pool:pipeline()
  return self:pick(self.pipelines)
end

-- Keeps a pipeline (replacing an older one when the list is full, so that
-- no pipeline grows without end).
function Pool:add_pipeline(pipeline, label)
  self:label(pipeline, label)
  if #self.pipelines < self.max_per_type then
    self.pipelines[#self.pipelines + 1] = pipeline
  else
    self.pipelines[self.random(#self.pipelines)] = pipeline
  end
end

function Pool:any_object()
  local type_name = self:pick(catalog.types)
  if self:chance(0.2) then return self:closed_object(type_name) end
  return self:object(type_name)
end

-- ---- draws -----------------------------------------------------------------

function Pool:any()
  local roll = self.random(13)
  if roll == 13 then return self:fake(self:pick(catalog.types)) end
  if roll == 1 then return nil end
  if roll == 2 then return self.random(2) == 1 end
  if roll == 3 then return self:pick(INTEGERS) end
  if roll == 4 then return self:pick(FLOATS) end
  if roll == 5 then return self:pick(STRINGS) end
  if roll == 6 then return self:pick(self.tables) end
  if roll == 7 then return self:pick(self.functions) end
  return self:any_object()
end

function Pool:count()
  if self:chance(0.75) then return self:pick(SMALL_COUNTS) end
  return self:pick(EDGE_COUNTS)
end

-- A sequence, often as long as one of the pool's buffers so that copies
-- can succeed.
function Pool:sequence()
  if self:chance(0.5) then return self:pick(self.sequences) end
  local length = self:pick(SMALL_COUNTS)
  local value = self:chance(0.8) and self.random(0, 100) or self:pick(FLOATS)
  local list = {}
  for i = 1, length do list[i] = value end
  return self:label(list, ("{%s x %d}"):format(tostring(value), length))
end

function Pool:kernel_arg()
  local roll = self.random()
  if roll < 0.35 then return self:object("Buffer") end
  if roll < 0.60 then return self:object("Scalar") end
  if roll < 0.80 then return self.random(1, 64) end
  if roll < 0.88 then return self:pick(FLOATS) end
  if roll < 0.93 then return self.random(2) == 1 end
  if roll < 0.945 then return self:object("Struct") end
  if roll < 0.96 then return self:object("TensorMap") end
  if roll < 0.97 then return self:object("Graph") end
  if roll < 0.98 then return self:object("PinnedBuffer") end
  return self:any()
end

local function one_of(...)
  local choices = { ... }
  return function(pool) return choices[pool.random(#choices)](pool) end
end

local function from(list, p_valid, invalid)
  return function(pool)
    if not invalid or pool:chance(p_valid) then return pool:pick(list) end
    return pool:pick(invalid)
  end
end

-- Fatbins of one PTX entry (the layout src/base/fatbin.c reads), sound and
-- damaged as a hostile file would be: a payload past the end, a huge
-- uncompressed size, zstd bytes that are not a frame, a frame that says
-- too little, PTX that is garbage. from_fatbin refuses every one whose
-- sizes or code it cannot vouch for as the driver would read them (the
-- driver believes them, and crashed on such draws), and takes the rest.
local FUZZ_PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k(.param .f32 x) { ret; }\n\0"
local function fatbin_of(flags, payload, options)
  options = options or {}
  -- An 80-byte PTX entry header, as nvcc 13 and fatbinary write one.
  local compressed = flags & 0x8000 ~= 0 and #payload or 0
  local entry = string.pack("<I2I2I4I8I4I4I4I4I8I8I8I8", 1, 0x101, 80, options.payload_size or #payload,
    compressed, 64, 0x90000, 90, 0, flags, 0, options.uncompressed or 0) .. ("\0"):rep(16)
  return string.pack("<I4I2I2I8", 0xBA55ED50, 1, 16, #entry + #payload) .. entry .. payload
end
-- A zstd frame of one raw block: what nvcc's zstd would make of short text.
local function zstd_frame(text, declared)
  return "\40\181\47\253" .. string.pack("<BBI3", 0x20, declared or #text, 1 | (#text << 3)) .. text
end
local FATBINS = {
  fatbin_of(0x11, FUZZ_PTX),
  fatbin_of(0x8011, zstd_frame(FUZZ_PTX), { uncompressed = #FUZZ_PTX }),
  fatbin_of(0x11, FUZZ_PTX, { payload_size = 1 << 40 }),
  fatbin_of(0x8011, zstd_frame(FUZZ_PTX), { uncompressed = 1 << 40 }),
  fatbin_of(0x8011, zstd_frame(FUZZ_PTX, 200), { uncompressed = 200 }),
  fatbin_of(0x8011, "\40\181\47\253" .. string.rep("\255", 60), { uncompressed = 100 }),
  fatbin_of(0x8011, zstd_frame(string.rep("\1", 90)), { uncompressed = 90 }),
  fatbin_of(0x2011, string.rep("\19", 64), { uncompressed = 64 }),
  fatbin_of(0x11, "\1.entry k(.param .f32\255" .. string.rep("(", 200)),
}

local draws
draws = {
  count = Pool.count,
  dtype = from(DTYPES, 0.85, BAD_DTYPES),
  element = one_of(function(p) return p:pick(INTEGERS) end, function(p) return p:pick(FLOATS) end),
  integer = function(p) return p:chance(0.85) and p:pick(INTEGERS) or p:pick(FLOATS) end,
  number = one_of(function(p) return p:pick(INTEGERS) end, function(p) return p:pick(FLOATS) end),
  string = function(p) return p:pick(STRINGS) end,
  seed = one_of(function(p) return p:pick(INTEGERS) end, function(p) return p:pick(FLOATS) end),
  attribute = from({ 1, 2, 16, 75, 76, 81, 97, 0, -1, 1000, 1 << 31, 1.5, "warp_size",
    "max_shared_memory_per_block_optin", "multiprocessor_count", "nope", "" }),
  event_options = from({ {}, { timing = false }, { blocking = true }, { timing = false, blocking = true },
    { timing = 1 }, { nope = true } }, 0.8, { 5, "x" }),
  stream_options = from({ {}, { priority = 0 }, { priority = -1 }, { priority = -5 }, { priority = 1 },
    { priority = 1.5 }, { prio = 1 } }, 0.8, { 5, "x" }),
  occupancy_options = from({ {}, { block = 256 }, { block = 32, shmem_size = 0 }, { block = { 16, 16 } },
    { block = 2048 }, { shmem_size = 4096 }, { shmem_size = 1 << 30 }, { block_size_limit = 128 },
    { block = 0 }, { block = 1.5 }, { nope = 1 } }, 0.85, { 5, "x" }),
  index = from({ 1, 2, 3, 4, 16, 37, 64, 4096, 0, -1, 4097, 1.5, NAN, 2 ^ 63, math.maxinteger,
    math.mininteger, "1" }),
  tolerance = from({ 0, 1e-5, 1e-8, 1, 0.5, -1, NAN, INF, "0.1" }),
  sequence = Pool.sequence,
  source = function(p)
    local names = { "ok", "template", "broken", "empty", "nul", "long" }
    return SOURCES[p:pick(names)]
  end,
  code_type = from({ "c++" }, 0.85, { "c", "cuda", "", "C++" }),
  target_name = from({ "ptx", "cubin" }, 0.8, { "PTX", "sass", "", "ptx\0" }),
  options = function(p)
    if p:chance(0.5) then return p:typed("ProgramOptions") end
    return p:pick(p.option_tables)
  end,
  options_table = function(p) return p:pick(p.option_tables) end,
  compile_args = function(p)
    if p:chance(0.4) then return nil end
    return p:pick(p.compile_args)
  end,
  config_table = function(p) return p:pick(p.config_tables) end,
  kernel_name = from(KERNEL_NAMES),
  cuda_call = from({ "cuMemAlloc", "cuLaunchKernel", "", "x" }),
  cuda_result = from({ 0, 1, 2, 200, 700, 999, 100000, -1, 1 << 31, math.maxinteger, 1.5 }),
  device = function(p) return p:typed("Device") end,
  stream = function(p) return p:typed("Stream") end,
  event = function(p) return p:typed("Event") end,
  buffer = function(p) return p:typed("Buffer") end,
  config = function(p) return p:typed("LaunchConfig") end,
  kernel = function(p) return p:typed("Kernel") end,
  launch_target = function(p)
    return p:typed(p:chance(0.7) and "Stream" or "GraphBuilder")
  end,
  buffer_or_table = function(p)
    if p:chance(0.5) then return p:typed("Buffer") end
    return p:sequence()
  end,
  buffer_or_number = function(p)
    if p:chance(0.6) then return p:typed("Buffer") end
    return draws.number(p)
  end,
  kernel_arg = Pool.kernel_arg,
  builder = function(p) return p:typed("GraphBuilder") end,
  condition = function(p) return p:typed("Condition") end,
  if_condition = function(p)
    if p:chance(0.5) then return p:typed("Condition") end
    return p:pick({ "max(x) > 0", "sum(x) < 1e6 and not any(x) == 1", "norm(x) >= 0 or mean(x) ~= 0",
      "max_abs_diff(x, x) == 0", "", "max(x) >", "maxx(x) > 1", "max(x, x) > 1", "(max(x) > 1",
      "max(y) > 1", "1 < max(x) )", "#", string.rep("not ", 100) .. "max(x) > 1", 5 })
  end,
  -- Never true: the fuzzer's bodies change nothing, so a true one would loop.
  loop_condition = function(p)
    if p:chance(0.5) then return p:typed("Condition") end
    return p:pick({ "norm(x) < 0", "max(x) < -inf", "max_abs(x) < 0 and sum(x) > 0", "", "max(x) <",
      "max(x) < -inf or", "nan(x) > 1", 7 })
  end,
  condition_buffers = function(p)
    if p:chance(0.6) then return { x = p:typed("Buffer") } end
    return p:pick({ nil, {}, { x = 5 }, { y = p:typed("Buffer") }, { x = p:typed("Buffer"), z = 1 },
      { cancellable = false }, { cancellable = true }, "x", 5 })
  end,
  loop_options = from({ nil, {}, { cancellable = true }, { cancellable = false } }, 0.8,
    { { cancellable = 1 }, { nope = true }, 5, "x" }),
  event_or_builder = function(p) return p:typed(p:chance(0.5) and "Event" or "GraphBuilder") end,
  event_or_stream = function(p) return p:typed(p:chance(0.5) and "Event" or "Stream") end,
  node_index = from({ 1, 2, 3, 4, 0, -1, 100, 1.5, "1", math.maxinteger }),
  boolean = from({ true, false }, 0.9, { 1, "true", 0 }),
  -- fuzz_guard.tame puts every path it can write under a temporary folder.
  output_path = from({ "graph.dot", "" }, 0.8, { "/nonexistent-gpurun-fuzz/graph.dot", 5 }),
  dot_flags = from({ nil, {}, { verbose = true }, { handles = true, kernel_node_params = false } },
    0.7, { { nope = true }, { [1] = true }, "verbose" }),
  dot_options = from({ nil, {}, { title = "fuzz" }, { name = "g" }, { races = true }, { races = {} } }, 0.7,
    { { title = 5 }, { name = {} }, "title", { races = 5 }, { races = { 5 } },
      { races = { { first = {}, second = {}, hazard = "RAW" } } } }),
  -- few replays: each is a replay of the graph's twin and one of the graph
  profile_options = from({ nil, {}, { replays = 1 }, { replays = 3 } }, 0.7,
    { { replays = 0 }, { replays = 1.5 }, { nope = 1 }, "replays", { replays = 1e9 } }),
  check_options = from({ nil, {}, { raise = false }, { raise = true } }, 0.8,
    { { raise = 1 }, { nope = true }, 5, "raise" }),
  access_modes = from({ {}, { "r" }, { "rw", "w" }, { false, "r" }, { [2] = "w" } }, 0.7,
    { "r", 5, { "x" }, { [0] = "r" }, { [99] = "r" }, { name = "r" }, { 1.5 } }),
  -- Host callbacks that return: a raising one is raised by whatever wait
  -- runs it, which may be the state check's.
  host_function = from({ function() end, function() return 1 end }, 0.9, { 5, "f" }),
  pipeline_options = from({ nil, {}, { name = "fuzz" }, { max_streams = 2 }, { fuse = false },
    { timing = true }, { strict = true } }, 0.7, { { nope = 1 }, { max_streams = 0 }, "x", 5 }),
  pool = function(p) return p:typed("MemoryPool") end,
  ipc_descriptor = function(p)
    local sound = string.pack("<c8I2I2I4I4I4c16I8I8c64", "gpurunIP", 1, p:pick({ 1, 2, 3 }), 120,
      p:pick({ 0, 1, 63 }), p:pick({ 0, 1, 99 }), ("\0"):rep(16), p:pick({ 0, 4, 1 << 62 }),
      p:pick({ 0, 16, 1 << 63 }), ("\0"):rep(64))
    return p:pick({ sound, sound:sub(1, p:pick({ 0, 8, 15, 16, 119 })), sound .. "x",
      "gpurunIP\2\0", ("\255"):rep(120), "" })
  end,
  allocation_handle = function(p)
    if p:chance(0.8) then return p:typed("IPCAllocationHandle") end
    return p:any()
  end,
  file_descriptor = from({ 2, 1 }, 0.7, { -1, 1 << 40, 1.5, "2" }),
  socket_path = from({ "fuzz.sock" }, 0.8, { "", ("x"):rep(200), 5 }),
  ipc_values = function(p)
    return p:pick({ {}, { "a" }, { "a", "" }, { p:typed("IPCAllocationHandle") }, { 5 }, "x" })
  end,
  ipc_options = from({ nil, {}, { timeout = 0.01 }, { import = false } }, 0.7,
    { { timeout = -1 }, { timeout = 0 / 0 }, { nope = 1 }, { max_bytes = 3 }, { import = 1 }, 5 }),
  access_mode = from({ "rw", "r", "none" }, 0.8, { "x", 5, "" }),
  managed_options = from({ nil, {}, { attach = "global" }, { attach = "host" } }, 0.8,
    { { attach = "device" }, { attach = 1 }, { attach = "" }, { nope = 1 }, "host", 5 }),
  pinned_options = from({ nil, {}, { mapped = true }, { mapped = false } }, 0.8,
    { { mapped = 1 }, { mapped = "yes" }, { map = true }, true, 5 }),
  location = function(p)
    if p:chance(0.35) then return "host" end
    if p:chance(0.3) then return p:typed("Device") end
    return p:pick({ 0, 1, -1, 64, 0.5, NAN, "device", "", {}, math.maxinteger })
  end,
  advice = from({ "set_read_mostly", "unset_read_mostly", "set_preferred_location",
    "unset_preferred_location", "set_accessed_by", "unset_accessed_by" }, 0.8,
    { "read_mostly", "SET_READ_MOSTLY", "", 1, 3, {} }),
  -- A constructor's { pool =, stream = }: mostly nil (cuMemAlloc), else live
  -- or closed pools, streams and builders, or junk.
  placement = function(p)
    local roll = p.random()
    if roll < 0.45 then return nil end
    if roll < 0.55 then return {} end
    if roll < 0.70 then return { pool = p:typed("MemoryPool"), stream = p:typed("Stream") } end
    if roll < 0.80 then return { stream = p:typed(p:chance(0.7) and "Stream" or "GraphBuilder") } end
    if roll < 0.88 then return { pool = p:typed("MemoryPool") } end
    return p:pick({ { pool = 5 }, { stream = "s" }, { nope = 1 }, 7, "pool" })
  end,
  pool_options = from({ nil, {}, { max_size = 1 << 21 }, { max_size = 1 << 20 }, { release_threshold = 0 },
    { release_threshold = math.huge }, { device = 0 }, { max_size = 0, release_threshold = 1 << 20 } }, 0.8,
    { { max_size = -1 }, { release_threshold = -1 }, { device = 99 }, { device = "x" }, { nope = 1 }, 5 }),
  tensor_map_options = from({ { box_dim = { 16 } }, { box_dim = { 4 } }, { shape = { 4, 4 }, box_dim = { 4, 4 } },
    { box_dim = { 16 }, swizzle = "swizzle_64b" }, { box_dim = { 256 }, oob_fill = "nan_request_zero_fma" },
    { shape = { 2, 8 }, strides = { 8, 1 }, box_dim = { 1, 8 } }, { box_dim = { 8 }, data_type = "uint32" } }, 0.8,
    { nil, {}, { box_dim = { 0 } }, { box_dim = { 257 } }, { box_dim = { 16 }, swizzle = "x" },
      { shape = { 1 << 32, 1 << 32 }, box_dim = { 1, 16 } }, { box_dim = { 16 }, nope = 1 }, 5, "x" }),
  tensor_map = function(p) return p:typed("TensorMap") end,
  split_options = from({ { count = 8 }, { count = 16 }, { count = 8, groups = 2 }, { count = 1 } }, 0.7,
    { nil, {}, { count = 0 }, { count = -8 }, { count = 1 << 20 }, { count = 8, groups = 65 },
      { count = 1.5 }, { groups = 2 }, { count = 8, nope = 1 }, 8, "x" }),
  context_options = function(p)
    if p:chance(0.7) then return { resources = { p:typed("SMResource") } } end
    return p:pick({ nil, {}, { resources = {} }, { resources = 5 }, { resources = { 5 } },
      { resources = { p:typed("SMResource"), p:typed("SMResource") } }, { nope = 1 }, "x" })
  end,
  complete_options = function(p)
    if p:chance(0.15) then return { device_launch = true, upload_stream = p:typed("Stream") } end
    return from({ nil, {}, { auto_free_on_launch = true }, { auto_free_on_launch = false },
      { device_launch = true }, { device_launch = false }, { use_node_priority = true } }, 0.8,
      { { auto_free_on_launch = 1 }, { nope = true }, 5, { device_launch = "yes" }, { upload_stream = 5 },
        { device_launch = true, auto_free_on_launch = true }, { use_node_priority = "yes" }, { check = 1 },
        { check = true }, { check = false, auto_free_on_launch = true } })(p)
  end,
  build_options = from({ nil, {}, { mode = "thread_local" }, { mode = "global" }, { mode = "relaxed" },
    "relaxed" }, 0.8, { { mode = "RELAXED" }, { mode = 1 }, { mode = "" }, { nope = 1 }, "x", 5 }),
  graph_or_builder = function(p) return p:typed(p:chance(0.5) and "Graph" or "GraphBuilder") end,
  -- Never a positive default: see api_catalog.lua.
  condition_default = from({ 0 }, 0.7, { -1, 4294967296, 1.5, "x", 0 / 0 }),
  first = from({ 1, 2, 4, 16, 0, -1, 17, 4096, 4097, 1.5, NAN, math.maxinteger }, 0.6, { nil, "1", {} }),
  range_count = from({ 1, 2, 3, 8, 15, 16, 0, -1, 4096, 1.5, math.maxinteger }, 0.6, { nil }),
  bytes = function(p)
    return p:pick({ "", "a", "abcd", string.rep("\0", 16), string.rep("\255", 64), string.rep("x", 4096 * 4) })
  end,
  copy_source = function(p)
    local roll = p.random()
    if roll < 0.3 then return p:typed("Buffer") end
    if roll < 0.5 then return p:typed("PinnedBuffer") end
    if roll < 0.7 then return p:sequence() end
    return draws.bytes(p)
  end,
  copy_destination = function(p)
    return p:typed(p:chance(0.6) and "Buffer" or "PinnedBuffer")
  end,
  object_code = function(p) return p:typed("ObjectCode") end,
  link_target = from({ "cubin", "ptx" }, 0.8, { "", "CUBIN", "ltoir", "ptx\0", 5 }),
  linker_options = function(p)
    if p:chance(0.4) then return p:typed("LinkerOptions") end
    return p:pick(p.linker_option_tables)
  end,
  linker_options_table = function(p) return p:pick(p.linker_option_tables) end,
  -- What ObjectCode.from_<type> takes: code as bytes (PTX, a truncated ELF,
  -- magic numbers with nothing after them, junk) or { path = } of files
  -- that are not device code, devices, folders and missing files.
  code_input = function(p)
    if p:chance(0.25) then return p:pick(FATBINS) end
    return draws.code_input_other(p)
  end,
  code_input_other = from({ ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry k() { ret; }\n",
    "\127ELF\2\1\1" .. string.rep("\0", 57), "\80\237\85\186\1\0\16\0" .. string.rep("\255", 8),
    "\237\67\78\127", "!<arch>\n", { path = "README.md" }, { path = "/dev/null" }, { path = "spec" },
    { path = "/nonexistent/k.cubin" } }, 0.7, { "", "\0", {}, { path = 5 }, { path = "" }, { nope = 1 }, 5 }),
  code_options = from({ nil, {}, { name = "fuzz" }, { symbol_mapping = { k = "k" } } }, 0.7,
    { { name = 5 }, { symbol_mapping = "k" }, { symbol_mapping = { k = 5 } }, { nope = 1 }, 5 }),
  path = from({ "README.md", "/nonexistent/x.npy", "", "a\0b", "spec", "/tmp" }, 0.5, STRINGS),
  shape = from({ {}, { 16 }, { 4, 4 }, { 2, 8 }, { 0 }, { 1.5 }, { -1 }, { 1 << 62, 4 } }, 0.8, { 16, "16" }),
  host_source = function(p)
    if p:chance(0.6) then return p:sequence() end
    return draws.bytes(p)
  end,
  params_text = from({ "float32 x", "T x", "float32 x, float32 y", "int32 x", "uint8 x", "float32 s",
    "int64 s", "T s", "float16 x", "bfloat16 s", "int16 x", "" }, 0.85,
    { "float8 x", "x", "float32 a", "float32 _x", 5 }),
  c_expression = from({ "x", "x * x", "a + b", "s = a", "x > 0.5f", "i" }, 0.8,
    { "", "this is not C", "a +", "x +* 2", 5 }),
  stage_list = from({ { "float32 r = x" }, { "float32 r = x + 1", "float32 q = r * 2" }, { "T r = x" },
    { "sum float32 r = x" }, { "float32 r = s", "max float32 q = r" } }, 0.8,
    { {}, { 5 }, { "r = x" }, "float32 r = x", { "float32 r = r" } }),
  stage_names = from({ "r", "q", "r, q", { "r" }, { "r", "q" } }, 0.8, { "", {}, { 5 }, "nope", 5 }),
  kernel_options = from({ nil, {}, { block = 128 }, { unroll = 2 }, { cache = "streaming" } }, 0.8,
    { { block = 100 }, { blok = 64 }, 5 }),
  pipeline_kernel_options = from({ nil, {}, { fuse = "never" }, { fuse = "always" }, { block = 128 },
    { accumulate = "float64" } }, 0.8, { { fuse = "x" }, { fusion = "never" }, { block = 100 }, 5 }),
  reduce_op = from({ "sum", "prod", "min", "max", "argmin", "argmax", "any", "all", "a + b" }, 0.85,
    { "nope", "", 5, "mean" }),
  identity = from({ 0, "0", 1.5, "-1" }, 0.7, { math.huge, NAN, "", {}, true }),
  reduction_options = from({ {}, { reduce_type = "float64" }, { block = 128 }, { unroll = 2 } },
    0.8, { { reduce_type = "nope" }, { block = 100 }, { unroll = 0 }, 5 }),
  reduce_options = from({ {}, { accumulate = "float64" }, { accumulate = "float16" },
    { rows = 4, cols = 4, axis = 2 },
    { rows = 2, cols = 8, axis = 1 }, { rows = 16, cols = 1, axis = 2 } }, 0.75,
    { { axis = 3 }, { nope = 1 }, { accumulate = "half" }, { rows = 3, cols = 3, axis = 2 },
      { offsets = 5 }, "x" }),
  scan_op = from({ "sum", "prod", "min", "max" }, 0.8, { "a + b", "argmax", "", "nope", 5 }),
  -- cuBLAS: 2-D views of the pool's buffers (small, so that some fit and
  -- some products agree), lists of them, and the options.
  matrix_options = from({ nil, {}, { ld = 4 }, { batch = 2 }, { batch = 2, stride = 4 }, { ld = 2 } }, 0.8,
    { { ld = 0 }, { batch = 0 }, { stride = -1 }, { nope = 1 }, { ld = 1 << 40 }, 5 }),
  matrix_view = function(p)
    local function view()
      local sides = { 1, 2, 4 }
      return { buffer = p:typed("Buffer"), rows = p:pick(sides), cols = p:pick(sides),
               batch = p:chance(0.2) and 2 or nil }
    end
    local roll = p.random()
    if roll < 0.75 then return view() end
    if roll < 0.85 then return { view(), view() } end
    return p:pick({ 5, "x", {}, { rows = 2 }, { buffer = p:typed("Buffer"), rows = 0, cols = 2 },
                    { buffer = p:typed("Buffer"), rows = 1 << 40, cols = 1 } })
  end,
  matmul_options = function(p)
    if p:chance(0.1) then return p:pick({ nil, 5, { nope = 1 }, { alpha = "x" }, { transa = 1 } }) end
    return { stream = draws.launch_target(p), alpha = p:chance(0.3) and p:pick(FLOATS) or nil,
             beta = p:chance(0.3) and p:pick({ 0, 1, 0.5 }) or nil, transa = p:chance(0.3) or nil,
             transb = p:chance(0.3) or nil, out = p:chance(0.3) and draws.matrix_view(p) or nil,
             epilogue = p:chance(0.3) and draws.matmul_epilogue(p) or nil,
             bias = p:chance(0.2) and p:typed("Buffer") or nil }
  end,
  -- cuBLASLt's epilogues, and names it has not (or not under that spelling).
  matmul_epilogue = from({ "relu", "gelu", "bias", "relu_bias", "gelu_bias" }, 0.8,
    { "RELU", "gelu_aux", "", "none", 5, true }),
  blas_alpha = function(p)
    if p:chance(0.7) then return p:pick(FLOATS) end
    return p:typed("Buffer")
  end,
  blas_options = function(p)
    if p:chance(0.1) then return p:pick({ nil, 5, { nope = 1 }, { stream = 5 } }) end
    return { stream = draws.launch_target(p) }
  end,
  -- cuSPARSE: the pool's CSR matrices, and the products' options.
  csr_matrix = function(p)
    if p:chance(0.9) then return p:typed("CsrMatrix") end
    return p:pick({ 5, "x", {}, p:typed("Buffer") })
  end,
  sparse_options = function(p)
    if p:chance(0.1) then return p:pick({ nil, 5, { nope = 1 }, { alpha = "x" }, { transpose = 1 } }) end
    return { stream = draws.launch_target(p), alpha = p:chance(0.3) and p:pick(FLOATS) or nil,
             beta = p:chance(0.3) and p:pick({ 0, 1, 0.5 }) or nil, transpose = p:chance(0.3) or nil }
  end,
  fft_shape = from({ 8, 16, { 4, 4 }, { 2, 3, 4 }, 1 }, 0.8,
    { 0, -1, 2.5, "8", {}, { 4, 0 }, { 2, 2, 2, 2 }, { 1 << 40, 1 << 40 } }),
  fft_plan_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { kind = "dct" }, { dtype = "int8" }, { batch = 0 }, { stream = 5 } })
    end
    return { kind = p:pick({ nil, "c2c", "r2c", "c2r" }), dtype = p:pick({ nil, "complex64", "complex128", "float32" }),
             batch = p:pick({ nil, 1, 2 }), stream = draws.launch_target(p) }
  end,
  fft_execute_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { direction = "backward" }, { stream = 5 } })
    end
    return { direction = p:pick({ nil, "forward", "inverse" }), stream = draws.launch_target(p) }
  end,
  fft_call_options = function(p)
    if p:chance(0.15) then return p:pick({ 5, { nope = 1 }, { n = 0 }, { n = 2.5 }, { stream = 5 } }) end
    return { n = p:pick({ nil, 4, 8, 16 }), stream = draws.launch_target(p) }
  end,
  buffer_or_count = function(p)
    if p:chance(0.6) then return p:typed("Buffer") end
    return p:count()
  end,
  rng_options = function(p)
    if p:chance(0.1) then return p:pick({ 5, { nope = 1 }, { stream = 5 }, "stream" }) end
    return { stream = draws.launch_target(p) }
  end,
  rng_state = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, {}, { seed = 1.5 }, { seed = 1, offset = -1 }, { seed = 1, stream = "s" }, { nope = 1 } })
    end
    return { seed = p:pick({ 0, 1, -7, math.maxinteger }), offset = p:pick({ 0, 3, 1 << 40 }),
             stream = p:chance(0.5) and draws.launch_target(p) or nil }
  end,
  blas_result_options = function(p)
    if p:chance(0.1) then return p:pick({ nil, 5, { nope = 1 }, { out = 5 } }) end
    return { stream = draws.launch_target(p), out = p:chance(0.5) and p:typed("Buffer") or nil }
  end,
  -- gpurun.system: NVML's device indices (or a report's), its capabilities.
  system_device = from({ 0, 1, { index = 0 } }, 0.8, { -1, 7, 1 << 40, 0.5, "0", {}, { index = "0" } }),
  p2p_caps = from({ nil, "read", "write", "nvlink", "atomics", "pci" }, 0.8, { "READ", "", 2, {} }),
  scan_options = from({ {}, { identity = 0 }, { deterministic = true }, { block = 64, items = 7 } },
    0.8, { { items = 0 }, { identity = NAN }, { nope = true }, { block = 1024, items = 32 }, "x" }),
  predicate = from({ "x > 0.5f", "x != 0", "i % 2 == 0" }, 0.8, { "", "nope(", 5 }),
  -- gpurun.sort's options: the pool's buffers as values, out, values_out
  -- and segments (some of another size or dtype, some the keys' own).
  sort_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, "x", { nope = 1 }, { descending = 1 }, { values = 5 }, { values_out = {} },
                      { segments = "0" } })
    end
    return { values = p:chance(0.4) and p:typed("Buffer") or nil, descending = p:chance(0.3) or nil,
             out = p:chance(0.2) and p:typed("Buffer") or nil,
             values_out = p:chance(0.1) and p:typed("Buffer") or nil,
             segments = p:chance(0.15) and p:typed("Buffer") or nil }
  end,
  search_options = function(p)
    if p:chance(0.15) then return p:pick({ 5, "x", { nope = 1 }, { out = 5 } }) end
    return p:chance(0.5) and { out = p:typed("Buffer") } or nil
  end,
  -- Structs (tools/fuzz.lua's layouts have fields x float32, n uint64, v
  -- float32[4], h float16, b uint8[3]).
  struct_fields = from({ { { "x", "float32" } }, { { "x", "float32" }, { "n", "uint64" } },
    { { "v", "float64", 4 }, { "c", "int8" } }, { { "h", "float16" }, { "b", "bfloat16", 3 } } }, 0.7,
    { {}, { {} }, { "x" }, { { "x", "float8" } }, { { "x", "int8" }, { "x", "int8" } }, { { "1x", "int8" } },
      { { "bytes", "int8" } }, { { "v", "float64", 1 << 20 } }, { { "v", "int8", 0 } },
      { { "v", "int8", NAN } }, { { string.rep("n", 300), "int8" } }, "x", 5 }),
  struct_options = from({ nil, {}, { align = 16 }, { align = 8 } }, 0.8,
    { { align = 3 }, { align = 1 << 20 }, { align = NAN }, { nope = 1 }, 5 }),
  struct_values = from({ nil, {}, { x = 1.5 }, { n = 7, v = { 1, 2, 3, 4 } }, { h = 0.5, b = { 1, 2, 3 } } },
    0.7, { { x = 1e39 }, { n = -1 }, { n = NAN }, { v = { 1 } }, { y = 1 }, { 1.5 }, { x = "1" }, 5, "x" }),
  struct_field_name = from({ "x", "n", "v", "h", "b", "layout", "bytes" }, 0.8, { "y", "", 1, NAN, {}, "a\0b" }),
  -- A pipeline's methods (tools/fuzz.lua's pipelines hold data t, u (16
  -- float32), i8 (16 int8), c (16 complex64) and scalars s, f32s (float32)).
  pipeline_name = from({ "t", "u", "i8", "s", "f32s", "x", "y", "v1", "t2" }, 0.8,
    { "", "1x", "a b", "#", 5, {}, string.rep("n", 300) }),
  pipeline_buffer = function(p)
    local roll = p.random()
    if roll < 0.4 then return p:typed("Buffer") end
    if roll < 0.55 then return p:typed("PinnedBuffer") end
    if roll < 0.7 then return {} end
    return p:pick(p.tables)
  end,
  buffer_list = function(p)
    if p:chance(0.7) then return { ["b" .. p.random(4)] = draws.pipeline_buffer(p) } end
    return p:pick({ {}, { 1 }, 5, "x" })
  end,
  pipeline_data = function(p)
    local roll = p.random()
    if roll < 0.6 then return p:pick({ "t", "u", "i8", "c", "v1", "nope" }) end
    if roll < 0.8 then return p:typed("Buffer") end
    return p:pick(p.tables)
  end,
  pipeline_arg = function(p)
    local roll = p.random()
    if roll < 0.45 then return p:pick({ "t", "u", "i8", "s", "f32s", "nope" }) end
    if roll < 0.6 then return draws.number(p) end
    if roll < 0.7 then return p:object("Scalar") end
    if roll < 0.8 then return p:typed("Buffer") end
    if roll < 0.9 then return p:pick(p.functions) end
    return p:pick(p.tables)
  end,
  pipeline_value = one_of(function(p) return p:pick(INTEGERS) end, function(p) return p:pick(FLOATS) end),
  pipeline_dtype = function(p)
    if p:chance(0.1) then return p:pick(p.tables) end
    return draws.dtype(p)
  end,
  kernel_object = function(p)
    if #p.kernel_objects > 0 and p:chance(0.85) then return p:pick(p.kernel_objects) end
    return p:pick(p.tables)
  end,
  buffer_options = from({ nil, { filled = true }, { filled = false } }, 0.8, { { filled = 1 }, { nope = 1 }, 5 }),
  stage_options = from({ nil, {}, { name = "s1" }, { reads = { "t" } }, { writes = { "u" } } }, 0.8,
    { { nope = 1 }, { reads = 5 }, { name = "" }, { writes = { "nope" } }, 5 }),
  pipeline_matrix = function(p)
    if p:chance(0.1) then return p:pick({ 5, "t", {}, { rows = 2 }, { buffer = "t", rows = 0, cols = 4 } }) end
    local sides = { 1, 2, 4, 8 }
    return { buffer = draws.pipeline_data(p), rows = p:pick(sides), cols = p:pick(sides),
             ld = p:chance(0.1) and p:pick({ 1, 4, 16 }) or nil, batch = p:chance(0.1) and 2 or nil }
  end,
  pipeline_matmul_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { alpha = "x" }, { transa = 1 }, { name = "" }, { reads = 5 } })
    end
    return { alpha = p:chance(0.3) and p:pick(FLOATS) or nil, beta = p:chance(0.3) and p:pick({ 0, 1, 0.5 }) or nil,
             transa = p:chance(0.3) or nil, transb = p:chance(0.3) or nil, name = p:chance(0.2) and "mm" or nil,
             epilogue = p:chance(0.3) and draws.matmul_epilogue(p) or nil,
             bias = p:chance(0.2) and draws.pipeline_data(p) or nil }
  end,
  pipeline_sort_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { descending = 1 }, { values = 7 }, { name = "" }, { writes = 5 } })
    end
    return { values = p:chance(0.3) and draws.pipeline_data(p) or nil,
             out = p:chance(0.2) and draws.pipeline_data(p) or nil,
             descending = p:chance(0.3) or nil, name = p:chance(0.2) and "s" or nil }
  end,
  pipeline_fft_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { kind = "z2z" }, { shape = 0 }, { shape = { 2, 2, 2, 2 } },
                      { batch = NAN }, { direction = "up" }, { name = "" }, { reads = 5 } })
    end
    return { kind = p:chance(0.4) and p:pick({ "c2c", "r2c", "c2r" }) or nil,
             shape = p:chance(0.3) and p:pick({ 16, 8, { 4, 4 }, { 2, 2, 4 }, 9 }) or nil,
             batch = p:chance(0.2) and p:pick({ 1, 2, 4 }) or nil,
             direction = p:chance(0.2) and p:pick({ "forward", "inverse" }) or nil,
             name = p:chance(0.2) and "f" or nil }
  end,
  pipeline_csr = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, "t", {}, { rows = 2 }, { row_offsets = "t", col_indices = "t", values = "t", rows = 0, cols = 1 } })
    end
    local sides = { 1, 3, 4, 15, 16 }
    return { row_offsets = draws.pipeline_data(p), col_indices = draws.pipeline_data(p),
             values = draws.pipeline_data(p), rows = p:pick(sides), cols = p:pick(sides) }
  end,
  pipeline_spmv_options = function(p)
    if p:chance(0.15) then
      return p:pick({ 5, { nope = 1 }, { alpha = "x" }, { beta = 1e300 }, { transpose = 1 }, { name = "" } })
    end
    return { alpha = p:chance(0.3) and p:pick(FLOATS) or nil, beta = p:chance(0.3) and p:pick({ 0, 1, 0.5 }) or nil,
             transpose = p:chance(0.3) or nil, name = p:chance(0.2) and "mv" or nil }
  end,
  plan_options = from({ nil, {}, { sources = true } }, 0.85, { { nope = 1 }, 5 }),
  key = from({ "name", "size", "dtype", "nbytes", "ptr", "device", "grid", "block", "shmem_size",
    "value", "type", "state", "stream", "source", "options", "code", "log", "lowered_names",
    "num_params", "handle", "id", "arch", "compute_capability", "total_memory",
    "multiprocessor_count", "max_threads_per_block", "max_shared_memory_per_block",
    "used", "reserved", "used_high", "reserved_high", "release_threshold", "max_size", "buffers",
    "is_default", "pool", "has_memory_nodes", "auto_free_on_launch", "device_launch",
    "nope", 1, 0, -1, 1.5, 4097, true }),
}

-- A value for an argument of `kind` (see api_catalog.lua): mostly a
-- plausible one, sometimes anything.
function Pool:draw(kind)
  local draw = draws[kind]
  if draw == nil or self:chance(0.2) then return self:any() end
  return draw(self)
end

-- A plausible value for an argument of `kind`, never anything at all (a
-- kind with no draw of its own: anything).
function Pool:plausible(kind)
  local draw = draws[kind]
  if draw == nil then return self:any() end
  return draw(self)
end

-- ---- descriptions ----------------------------------------------------------

function Pool:describe(value)
  local kind = type(value)
  if kind == "number" then
    if value ~= value then return "0/0" end
    if value == INF then return "math.huge" end
    if value == -INF then return "-math.huge" end
    if math.type(value) == "integer" then return tostring(value) end
    return ("%.17g"):format(value)
  elseif kind == "string" then
    local shown = #value > 40 and value:sub(1, 40) .. "...(" .. #value .. " bytes)" or value
    return ("%q"):format(shown):gsub("\n", "n")
  elseif self.labels[value] then
    return self.labels[value]
  elseif kind == "userdata" then
    local ok, text = pcall(tostring, value)
    return ok and text or "userdata"
  end
  return tostring(value)
end

Pool.SOURCES = SOURCES
Pool.DTYPES = DTYPES
return Pool
