-- gpurun.pipeline: stages declared by the data they read and write; the
-- DAG, the streams, the fusion and the temporaries are inferred
-- (pipeline/schedule.lua), and the plan runs stage by stage on streams
-- or as one replayed graph (pipeline/run.lua).
--
--   local p = gpurun.pipeline{ name = "sample" }
--   local r1, r2 = p:temporary("r1", n), p:temporary("r2", n)
--   p:call(add, a, b, r1)                  -- kernel objects with params
--   p:call(mul, r1, c, r2)
--   p:call(sub, r2, a, r3)                 -- add, mul, sub fused: r1, r2 in registers
--   p:launch(scale, config, d, y, p:scalar("alpha", 2.0), n)  -- a raw kernel
--   print(p:explain())                     -- no GPU needed so far
--   p:graph(stream)                        -- captured once, replayed
--   p:set("alpha", 0.5)                    -- in place, no capture
--
-- Data are gpurun.Buffers (and PinnedBuffers, and Lua tables for host
-- state a callback touches), declared with a name or passed as they are;
-- temporaries (no buffer: the pipeline makes them) and views of either.
-- Scalars are named values a stage passes and p:set changes.
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local access = require("gpurun.pipeline.access")

local raise = common.raise
local DTYPES = common.DTYPES

local Pipeline = {}
Pipeline.__index = Pipeline

-- Handles a stage's arguments may hold.
local Data = {}
Data.__index = Data
local Scalar = {}
Scalar.__index = Scalar

local OPTIONS = { "name", "max_streams", "fuse", "strict", "timing", "pool", "quiet", "devices" }
local TIMING = { events = true, nvtx = true }

local type_name = common.type_name

local function is_plain_table(value)
  return type(value) == "table" and getmetatable(value) == nil
end

-- The one rule for option tables (gpurun.options): nil (-> {}) or a plain
-- table of known keys; raised at the caller's line as "what: ...", where
-- `shape` says what the table holds.
local function check_options_table(what, given, known, shape)
  if given == nil then
    return {}
  end
  if not is_plain_table(given) then
    raise(("%s: options must be a table%s, got %s"):format(what, shape and " " .. shape or "",
          type_name(given)))
  end
  local why = options_rule.unknown(given, known)
  if why then
    raise(what .. ": " .. why)
  end
  return given
end
Pipeline.check_options_table = check_options_table

-- ---- construction -----------------------------------------------------------------

local function check_options(options)
  options = check_options_table("gpurun.pipeline", options, OPTIONS)
  local name = options.name or "pipeline"
  if not common.is_identifier(name) or name:sub(1, 1) == "_" then
    raise(("gpurun.pipeline: options.name must be a C identifier not starting with '_', got %s")
          :format(tostring(name)))
  end
  local max_streams = options.max_streams or 4
  if math.type(max_streams) ~= "integer" or max_streams < 1 or max_streams > 64 then
    raise(("gpurun.pipeline '%s': options.max_streams must be an integer from 1 to 64, got %s")
          :format(name, tostring(max_streams)))
  end
  for _, key in ipairs({ "fuse", "strict", "quiet" }) do
    if options[key] ~= nil and type(options[key]) ~= "boolean" then
      raise(("gpurun.pipeline '%s': options.%s must be a boolean, got %s"):format(name, key,
            type_name(options[key])))
    end
  end
  local timing = options.timing
  if timing == true then
    timing = "events"
  end
  if timing ~= nil and timing ~= false and not TIMING[timing] then
    raise(("gpurun.pipeline '%s': options.timing must be true, \"events\" or \"nvtx\", got %s")
          :format(name, tostring(options.timing)))
  end
  if options.pool ~= nil and type_name(options.pool) ~= "gpurun.MemoryPool" then
    raise(("gpurun.pipeline '%s': options.pool must be a gpurun.MemoryPool, got %s"):format(name,
          type_name(options.pool)))
  end
  local devices = options.devices
  if devices ~= nil then
    local ok = is_plain_table(devices) and #devices > 0
    local seen = {}
    for key, ordinal in pairs(ok and devices or {}) do
      if math.type(key) ~= "integer" or math.type(ordinal) ~= "integer" or ordinal < 0
          or ordinal >= 64 or seen[ordinal] then
        ok = false
      end
      seen[ordinal or false] = true
    end
    if not ok then
      raise(("gpurun.pipeline '%s': options.devices must be a list of device ordinals (distinct "
             .. "integers from 0 to 63), got %s"):format(name, type_name(devices)))
    end
  end
  return {
    name = name, max_streams = max_streams, fuse = options.fuse ~= false,
    strict = options.strict == true, timing = timing or nil, pool = options.pool,
    quiet = options.quiet == true, devices = options.devices,
  }
end

function Pipeline.new(options)
  local checked = check_options(options)
  local self = setmetatable({
    name = checked.name, options = checked,
    data = {}, by_name = {}, by_object = setmetatable({}, { __mode = "k" }),
    scalars = {}, stages = {}, version = 0, captures = 0, updates = 0, recaptures = 0,
    state = {}, -- what runs: streams, events, graphs (pipeline/run.lua)
    fused_cache = {}, -- fused kernels by their text (pipeline/report.lua)
    kernel_state = setmetatable({}, { __mode = "k" }), -- see state_of
  }, Pipeline)
  return self
end

local function changed(self)
  self.version = self.version + 1
  self.cached_plan = nil
end

-- ---- data -------------------------------------------------------------------------

local function check_name(self, name, what)
  if type(name) ~= "string" or not name:match("^[%a_][%w_%.%-]*$") then
    raise(("pipeline '%s': %s: a name (letters, digits, _ . -, not starting with a digit) "
           .. "expected, got %s"):format(self.name, what, type(name) == "string"
           and ("%q"):format(name) or type_name(name)))
  end
  if self.by_name[name] then
    raise(("pipeline '%s': %s: the name '%s' is taken already"):format(self.name, what, name))
  end
end

-- The address space and byte range of a buffer's memory.
local function place(data, buffer)
  local kind = type_name(buffer)
  if kind == "gpurun.Buffer" then
    data.key = "device " .. buffer.device
    data.device = buffer.device
  elseif kind == "gpurun.PinnedBuffer" then
    data.key = "host"
    data.host = true
  else
    data.key = buffer
    data.host = true
    data.lo, data.hi = 0, 1
    return
  end
  data.lo = buffer.ptr
  data.hi = buffer.ptr + buffer.nbytes
  data.count = #buffer
  data.dtype = buffer.dtype
end

local function add_data(self, data)
  data.id = #self.data + 1
  self.data[data.id] = setmetatable(data, Data)
  self.by_name[data.name] = data
  changed(self)
  return data
end

-- A declared buffer (a Buffer, a PinnedBuffer or a table), found again by
-- the object itself.
local function add_buffer(self, name, buffer, filled)
  local data = { name = name, kind = "buffer", buffer = buffer, filled = filled }
  place(data, buffer)
  self.by_object[buffer] = data
  return add_data(self, data)
end

local function data_kind(value)
  local kind = type_name(value)
  return kind == "gpurun.Buffer" or kind == "gpurun.PinnedBuffer" or is_plain_table(value)
end

-- buffer(name, buffer [, { filled = true }]) -> a handle: a Buffer, a
-- PinnedBuffer or a Lua table (host state, for host callbacks). filled =
-- false: the host never wrote it, so reading it before a stage writes it
-- is reported.
function Pipeline:buffer(name, buffer, options)
  check_name(self, name, "buffer")
  if not data_kind(buffer) then
    raise(("pipeline '%s': buffer '%s': a gpurun.Buffer, gpurun.PinnedBuffer or table expected, "
           .. "got %s"):format(self.name, name, type_name(buffer)))
  end
  if self.by_object[buffer] then
    raise(("pipeline '%s': buffer '%s': this buffer is declared already, as '%s'"):format(
          self.name, name, self.by_object[buffer].name))
  end
  options = check_options_table(("pipeline '%s': buffer '%s'"):format(self.name, name), options,
                                { "filled" }, "{ filled = boolean }")
  local filled = true
  if options.filled ~= nil then
    if type(options.filled) ~= "boolean" then
      raise(("pipeline '%s': buffer '%s': options.filled must be a boolean"):format(self.name, name))
    end
    filled = options.filled
  end
  return add_buffer(self, name, buffer, filled)
end

-- buffers{ name = buffer, ... } -> { name = handle, ... }: buffer() for
-- each (in the order of their names), filled.
function Pipeline:buffers(list)
  if not is_plain_table(list) then
    raise(("pipeline '%s': buffers: a table { name = buffer, ... } expected, got %s"):format(
          self.name, type_name(list)))
  end
  local names = {}
  for name in pairs(list) do
    if type(name) ~= "string" then
      raise(("pipeline '%s': buffers: names must be strings, got %s"):format(self.name, type_name(name)))
    end
    names[#names + 1] = name
  end
  table.sort(names)
  local handles = {}
  for _, name in ipairs(names) do
    handles[name] = self:buffer(name, list[name])
  end
  return handles
end

-- temporary(name, count [, dtype]) -> a handle for device memory the
-- pipeline makes (float32 by default): in registers when fusion keeps it
-- there, else from a memory pool (options.pool, else the device's default
-- one), inside the graph when it is captured.
function Pipeline:temporary(name, count, dtype)
  check_name(self, name, "temporary")
  if math.type(count) ~= "integer" or count < 1 or count > 1 << 40 then
    raise(("pipeline '%s': temporary '%s': the count must be an integer from 1 to 2^40, got %s")
          :format(self.name, name, tostring(count)))
  end
  dtype = dtype or "float32"
  if not DTYPES[dtype] then
    raise(("pipeline '%s': temporary '%s': unknown dtype %s (one of %s)"):format(self.name, name,
          tostring(dtype), common.DTYPE_NAMES))
  end
  local data = { name = name, kind = "temporary", temporary = true, count = count, dtype = dtype,
                 lo = 0, hi = count * DTYPES[dtype].size, filled = false }
  data.key = data
  return add_data(self, data)
end

-- view(name, of, first [, count]) -> a handle for elements first ..
-- first + count - 1 (1-based) of a declared buffer or temporary, which
-- overlaps it and every other view of it.
function Pipeline:view(name, of, first, count)
  check_name(self, name, "view")
  local base = self:resolve_data(of, ("view '%s'"):format(name))
  if base.host and not base.count then
    raise(("pipeline '%s': view '%s': a table has no elements to view"):format(self.name, name))
  end
  if math.type(first) ~= "integer" or first < 1 or first > base.count then
    raise(("pipeline '%s': view '%s': first must be an element of '%s' (1 to %d), got %s"):format(
          self.name, name, base.name, base.count, tostring(first)))
  end
  count = count or base.count - first + 1
  if math.type(count) ~= "integer" or count < 1 or first + count - 1 > base.count then
    raise(("pipeline '%s': view '%s': count must be from 1 to %d, got %s"):format(self.name, name,
          base.count - first + 1, tostring(count)))
  end
  local size = DTYPES[base.dtype] and DTYPES[base.dtype].size or (base.hi - base.lo) // base.count
  local root = base.parent or base
  local offset = (base.offset or 0) + first - 1
  local data = { name = name, kind = "view", parent = root, offset = offset, count = count,
                 dtype = base.dtype, key = base.key, lo = base.lo + (first - 1) * size,
                 device = base.device, host = base.host, temporary = root.temporary,
                 filled = base.filled }
  data.hi = data.lo + count * size
  return add_data(self, data)
end

-- scalar(name, value [, dtype]) -> a handle for a value stages pass, that
-- p:set(name, value) changes (in place in a captured graph).
function Pipeline:scalar(name, value, dtype)
  check_name(self, name, "scalar")
  if type(value) ~= "number" then
    raise(("pipeline '%s': scalar '%s': a number expected, got %s"):format(self.name, name,
          type_name(value)))
  end
  if dtype ~= nil and not DTYPES[dtype] then
    raise(("pipeline '%s': scalar '%s': unknown dtype %s (one of %s)"):format(self.name, name,
          tostring(dtype), common.DTYPE_NAMES))
  end
  local scalar = setmetatable({ name = name, value = value, dtype = dtype, typed = {} }, Scalar)
  self.scalars[#self.scalars + 1] = scalar
  self.by_name[name] = scalar
  return scalar
end

-- The data a reference names: a handle, a name, or a buffer (declared
-- now under `default_name` when new). Nil for anything else.
function Pipeline:find_data(value, default_name)
  local meta = getmetatable(value)
  if meta == Data then
    if self.data[value.id] ~= value then
      raise(("pipeline '%s': '%s' belongs to another pipeline"):format(self.name, value.name))
    end
    return value
  end
  if type(value) == "string" then
    local found = self.by_name[value]
    return getmetatable(found) == Data and found or nil
  end
  local kind = type_name(value)
  if kind == "gpurun.Buffer" or kind == "gpurun.PinnedBuffer" then
    local known = self.by_object[value]
    if known then
      return known
    end
    local name = default_name or "buffer"
    if self.by_name[name] then
      local k = 2
      while self.by_name[name .. "#" .. k] do k = k + 1 end
      name = name .. "#" .. k
    end
    return add_buffer(self, name, value, true)
  end
  return nil
end

function Pipeline:resolve_data(value, what)
  local data = self:find_data(value)
  if not data then
    raise(("pipeline '%s': %s: a declared buffer, temporary or view (a handle, its name or a "
           .. "gpurun.Buffer) expected, got %s"):format(self.name, what,
           type(value) == "string" and ("'%s', which names none"):format(value) or type_name(value)))
  end
  return data
end

-- An argument as stages keep it: { data = d } | { scalar = s } | { value = v }.
local function argument(self, value, default_name)
  if getmetatable(value) == Scalar then
    if self.by_name[value.name] ~= value then
      raise(("pipeline '%s': scalar '%s' belongs to another pipeline"):format(self.name, value.name))
    end
    return { scalar = value }
  end
  if type(value) == "string" then
    local found = self.by_name[value]
    if getmetatable(found) == Scalar then
      return { scalar = found }
    elseif found then
      return { data = found }
    end
    return { value = value, unknown_name = true }
  end
  local data = self:find_data(value, default_name)
  if data then
    return { data = data }
  end
  return { value = value }
end

-- ---- access overrides -------------------------------------------------------------

local function read_overrides(self, options, what)
  local declared = {}
  for _, key in ipairs({ "reads", "writes" }) do
    local list = options[key]
    if list ~= nil then
      if not is_plain_table(list) then
        raise(("pipeline '%s': %s: %s must be a list of data, got %s"):format(self.name, what, key,
              type_name(list)))
      end
      for _, item in ipairs(list) do
        local data = self:resolve_data(item, ("%s: %s"):format(what, key))
        declared[data] = access.merge(declared[data], key == "reads" and "r" or "w")
      end
    end
  end
  return declared
end

-- The stage's accesses: the inferred ones, with what `declared` says in
-- their place (and added), refusing a write to what the code only reads.
local function accesses_of(self, stage_name, inferred, declared)
  local list, seen = {}, {}
  for _, item in ipairs(inferred) do
    local d = item.data
    if seen[d] then
      local entry = seen[d]
      entry.mode = access.merge(entry.mode, item.mode)
      entry.maybe_read = entry.maybe_read and item.maybe_read
      entry.const = entry.const and item.const
    else
      local entry = { data = d, mode = item.mode, maybe_read = item.maybe_read, how = item.how,
                      const = item.const }
      seen[d] = entry
      list[#list + 1] = entry
    end
  end
  for d, mode in pairs(declared) do
    local entry = seen[d]
    if entry and entry.const and mode ~= "r" then
      raise(("pipeline '%s': stage '%s' declares a write to '%s', but its code only reads it (%s)")
            :format(self.name, stage_name, d.name, entry.how))
    end
    if entry then
      entry.mode, entry.maybe_read, entry.how = mode, nil, "declared"
    else
      entry = { data = d, mode = mode, how = "declared" }
      seen[d] = entry
      list[#list + 1] = entry
    end
  end
  table.sort(list, function(x, y) return x.data.id < y.data.id end)
  return list, declared
end

local STAGE_OPTIONS = { "name", "reads", "writes" }

-- Splits the table form { positional..., name =, reads =, writes = }.
local function table_form(self, spec, what)
  local named
  for key, value in pairs(spec) do
    if math.type(key) ~= "integer" then
      named = named or {}
      named[key] = value
    end
  end
  if named then
    check_options_table(("pipeline '%s': %s"):format(self.name, what), named, STAGE_OPTIONS)
  end
  if spec.name ~= nil and (type(spec.name) ~= "string" or spec.name == "") then
    raise(("pipeline '%s': %s: name must be a non-empty string"):format(self.name, what))
  end
  local count = 0
  for key in pairs(spec) do
    if math.type(key) == "integer" and key > count then count = key end
  end
  return spec, count
end

-- A stage's arguments: the table form (`what` names the stage kind in
-- messages) or the arguments as given; and how many there are.
local function stage_spec(self, what, first, ...)
  if is_plain_table(first) and select("#", ...) == 0 then
    return table_form(self, first, what)
  end
  local spec = table.pack(first, ...)
  local count = spec.n
  spec.n = nil
  return spec, count
end

local function add_stage(self, stage)
  stage.index = #self.stages + 1
  self.stages[stage.index] = stage
  changed(self)
  return self
end

-- ---- stages -------------------------------------------------------------------------

-- launch(kernel, config, args...) or launch{ kernel, config, args...,
-- name =, reads = { ... }, writes = { ... } }: a raw kernel. Its pointer
-- arguments' accesses come from the kernel's declaration in its source
-- (const: read), overridden by reads/writes.
function Pipeline:launch(...)
  local spec, count = stage_spec(self, "launch", ...)
  local kernel, config = spec[1], spec[2]
  if type_name(kernel) ~= "gpurun.Kernel" then
    raise(("pipeline '%s': launch: a gpurun.Kernel expected first, got %s"):format(self.name,
          type_name(kernel)))
  end
  if type_name(config) ~= "gpurun.LaunchConfig" then
    raise(("pipeline '%s': launch of '%s': a gpurun.LaunchConfig expected second, got %s"):format(
          self.name, kernel.name, type_name(config)))
  end
  local name = spec.name or kernel.name
  local what = ("stage '%s'"):format(name)
  if count - 2 ~= kernel.num_params then
    raise(("pipeline '%s': %s: kernel '%s' takes %d arguments, got %d"):format(self.name, what,
          kernel.name, kernel.num_params, count - 2))
  end
  local declaration, why = access.declaration(kernel.source, kernel.name)
  if declaration and #declaration ~= kernel.num_params then
    declaration, why = nil, ("its declaration lists %d parameters, the PTX %d"):format(
      #declaration, kernel.num_params)
  end
  local params = kernel:params()
  local args, positions = {}, {}
  for position = 1, count - 2 do
    local param_name = declaration and declaration[position].text:match("([%a_][%w_]*)%s*$")
    local arg = argument(self, spec[position + 2], param_name)
    if arg.unknown_name and params[position].kind ~= "aggregate" then
      raise(("pipeline '%s': %s: argument %d, '%s', names no declared data or scalar"):format(
            self.name, what, position, arg.value))
    end
    if arg.data then
      if params[position].pointer == false then
        raise(("pipeline '%s': %s: argument %d is data ('%s'), but parameter %d (%s) is not a "
               .. "pointer"):format(self.name, what, position, arg.data.name, position,
               params[position].type or "?"))
      end
      if arg.data.host then
        raise(("pipeline '%s': %s: argument %d ('%s') is host memory; a kernel takes device "
               .. "buffers"):format(self.name, what, position, arg.data.name))
      end
      positions[#positions + 1] = position
    end
    args[position] = arg
  end
  local inferred = {}
  for position, item in pairs(access.raw(declaration, positions, why)) do
    item.data = args[position].data
    inferred[#inferred + 1] = item
  end
  local stage = { kind = "kernel", name = name, kernel = kernel, config = config, args = args,
                  params = params }
  stage.accesses, stage.declared = accesses_of(self, name, inferred, read_overrides(self, spec, what))
  return add_stage(self, stage)
end

local function check_call_args(self, kernel, args, what, elementwise_kernel)
  local count
  for position, param in ipairs(kernel.params) do
    local arg = args[position]
    if arg.unknown_name then
      raise(("pipeline '%s': %s: argument %d (%s), '%s', names no declared data or scalar"):format(
            self.name, what, position, param.name, arg.value))
    end
    if param.output and not arg.data then
      raise(("pipeline '%s': %s: output %s must be data (a buffer, temporary or view), got %s")
            :format(self.name, what, param.name, type_name(arg.value)))
    end
    if arg.data and arg.data.host then
      raise(("pipeline '%s': %s: %s ('%s') is host memory; the kernel takes device buffers")
            :format(self.name, what, param.name, arg.data.name))
    end
    if elementwise_kernel and arg.data then
      local d = arg.data
      if not param.variable and param.type ~= d.dtype then
        raise(("pipeline '%s': %s: %s is %s, but '%s' is %s"):format(self.name, what, param.name,
              param.type, d.name, tostring(d.dtype)))
      end
      if count and d.count ~= count then
        raise(("pipeline '%s': %s: '%s' has %d elements, but the kernel's other buffers %d")
              :format(self.name, what, d.name, d.count, count))
      end
      count = d.count
    end
  end
  return count
end

-- A kernel object that keeps temporaries of its own between calls
-- (gpurun.reduction's kernels, and elementwise pipelines holding one) must
-- not run twice at the same time: each call of it writes a datum standing
-- for that state, which orders them. It names no memory and no stage can
-- pass it (it has no name a stage could look up).
local function state_of(self, kernel)
  if not access.keeps_state(kernel) then
    return nil
  end
  local data = self.kernel_state[kernel]
  if not data then
    data = { name = ("state of '%s'"):format(tostring(kernel.name)), kind = "state", state = true,
             filled = true }
    place(data, data)
    data.id = #self.data + 1
    self.data[data.id] = setmetatable(data, Data)
    self.kernel_state[kernel] = data
  end
  return data
end

-- call(kernel, args...) or call{ kernel, args..., name =, reads =, writes
-- = }: a kernel object with params (gpurun.elementwise kernels and
-- pipelines, reductions), called as kernel(target, args...).
function Pipeline:call(...)
  local spec, count = stage_spec(self, "call", ...)
  local kernel = spec[1]
  if type(kernel) ~= "table" or type(kernel.params) ~= "table" or not getmetatable(kernel) then
    raise(("pipeline '%s': call: a kernel object with params (gpurun.elementwise, a reduction) "
           .. "expected first, got %s"):format(self.name, type_name(kernel)))
  end
  local name = spec.name or kernel.name or "call"
  local what = ("stage '%s'"):format(name)
  if count - 1 ~= #kernel.params then
    local names = {}
    for index, param in ipairs(kernel.params) do names[index] = param.name end
    raise(("pipeline '%s': %s: '%s' takes %d arguments (%s), got %d"):format(self.name, what,
          tostring(kernel.name), #kernel.params, table.concat(names, ", "), count - 1))
  end
  local args, positions = {}, {}
  for position, param in ipairs(kernel.params) do
    args[position] = argument(self, spec[position + 1], param.name)
    if args[position].data then
      positions[#positions + 1] = position
    end
  end
  local elementwise_kernel = access.is_elementwise_kernel(kernel)
  local n = check_call_args(self, kernel, args, what, elementwise_kernel)
  local inferred = {}
  for position, item in pairs(access.from_params(kernel.params, positions)) do
    item.data = args[position].data
    inferred[#inferred + 1] = item
  end
  local state = state_of(self, kernel)
  if state then
    inferred[#inferred + 1] = { data = state, mode = "w",
                                how = "the kernel's own temporaries: one call at a time" }
  end
  local stage = { kind = "call", name = name, kernel = kernel, args = args }
  stage.accesses, stage.declared = accesses_of(self, name, inferred, read_overrides(self, spec, what))
  if elementwise_kernel and n then
    local fusion, why = access.fusable(kernel)
    if fusion then
      fusion.count = n
      local device
      for _, arg in ipairs(args) do
        if arg.data and arg.data.device then device = arg.data.device end
      end
      fusion.device = device
      stage.fusion = fusion
    else
      stage.not_fused = why
    end
  end
  return add_stage(self, stage)
end

local function simple_options(self, options, what)
  options = check_options_table(("pipeline '%s': %s"):format(self.name, what), options,
                                STAGE_OPTIONS, "{ name =, reads =, writes = }")
  return (table_form(self, options, what))
end

-- copy(destination, source [, options]): Buffer:copy_from (or copy_to a
-- PinnedBuffer) between two data of one size and dtype.
function Pipeline:copy(destination, from, options)
  options = simple_options(self, options, "copy")
  local dst = self:resolve_data(destination, "copy destination")
  local src = self:resolve_data(from, "copy source")
  local name = options.name or ("copy %s <- %s"):format(dst.name, src.name)
  for _, d in ipairs({ dst, src }) do
    if not d.count then
      raise(("pipeline '%s': stage '%s': '%s' is a table; copies take buffers"):format(self.name,
            name, d.name))
    end
  end
  if dst.host and src.host then
    raise(("pipeline '%s': stage '%s': a copy between two host buffers is not GPU work"):format(
          self.name, name))
  end
  if dst.count ~= src.count or dst.dtype ~= src.dtype then
    raise(("pipeline '%s': stage '%s': '%s' is %d x %s and '%s' %d x %s (a copy takes two of one "
           .. "size and dtype: copy views for a part)"):format(self.name, name, dst.name, dst.count,
           tostring(dst.dtype), src.name, src.count, tostring(src.dtype)))
  end
  local stage = { kind = "copy", name = name, dst = dst, src = src, count = dst.count }
  stage.accesses, stage.declared = accesses_of(self, name, {
    { data = src, mode = "r", how = "copy source", const = true },
    { data = dst, mode = "w", how = "copy destination" },
  }, read_overrides(self, options, ("stage '%s'"):format(name)))
  return add_stage(self, stage)
end

-- fill(destination, value [, options]): Buffer:fill.
function Pipeline:fill(destination, value, options)
  options = simple_options(self, options, "fill")
  local dst = self:resolve_data(destination, "fill destination")
  local name = options.name or ("fill %s"):format(dst.name)
  if type(value) ~= "number" then
    raise(("pipeline '%s': stage '%s': the fill value must be a number, got %s"):format(self.name,
          name, type_name(value)))
  end
  if dst.host then
    raise(("pipeline '%s': stage '%s': '%s' is host memory; fills are device work"):format(
          self.name, name, dst.name))
  end
  local stage = { kind = "fill", name = name, dst = dst, value = value }
  stage.accesses, stage.declared = accesses_of(self, name, { { data = dst, mode = "w", how = "fill" } },
                               read_overrides(self, options, ("stage '%s'"):format(name)))
  return add_stage(self, stage)
end

-- host(fn [, options]): fn() runs on the main thread at this point of the
-- stream order (gpurun.HostCallback), while the script waits for the
-- pipeline; it must not call into the GPU. Without reads or writes it is a
-- barrier: it reads and writes every declared data.
function Pipeline:host(fn, options)
  options = simple_options(self, options, "host")
  if type(fn) ~= "function" then
    raise(("pipeline '%s': host: a function expected, got %s"):format(self.name, type_name(fn)))
  end
  local name = options.name or "host"
  local declared = read_overrides(self, options, ("stage '%s'"):format(name))
  -- A barrier's accesses are every data the plan knows (see barrier_accesses).
  local stage = { kind = "host", name = name, fn = fn, barrier = next(declared) == nil }
  stage.accesses, stage.declared = accesses_of(self, name, {}, declared)
  return add_stage(self, stage)
end

Pipeline.Data = Data
Pipeline.Scalar = Scalar

function Data:__tostring()
  return ("pipeline data '%s' (%s%s)"):format(self.name, self.kind,
    self.count and (", %d x %s"):format(self.count, tostring(self.dtype)) or "")
end

function Scalar:__tostring()
  return ("pipeline scalar '%s' = %s"):format(self.name, tostring(self.value))
end

function Pipeline:__tostring()
  return ("gpurun.pipeline '%s' (%d stage%s)"):format(self.name, #self.stages,
    #self.stages == 1 and "" or "s")
end

return Pipeline
