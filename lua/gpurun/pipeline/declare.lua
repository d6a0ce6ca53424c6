-- Declaring a pipeline: its options, its data (buffers, temporaries,
-- views) and scalars, and what every stage kind's declaration shares: the
-- table form of a stage, how its arguments name data and scalars, and its
-- accesses (the inferred ones, with what reads and writes declare in their
-- place). The stage kinds (pipeline/stage_kinds/) declare their stages
-- through these; pipeline/types.lua makes them the pipeline's methods.
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local access = require("gpurun.pipeline.access")

local raise = common.raise
local DTYPES = common.DTYPES
local type_name = common.type_name
local quoted = common.quoted

local declare = {}

-- Handles a stage's arguments may hold. Data are gpurun.Buffers (and
-- PinnedBuffers, and Lua tables for host state a callback touches),
-- declared with a name or passed as they are; temporaries (no buffer: the
-- pipeline makes them) and views of either. Scalars are named values a
-- stage passes and p:set changes.
local Data = {}
Data.__index = Data
local Scalar = {}
Scalar.__index = Scalar
declare.Data, declare.Scalar = Data, Scalar

-- The methods that declare data and scalars (the stage kinds add theirs).
local methods = {}
declare.methods = methods

local OPTIONS = { "name", "max_streams", "fuse", "strict", "timing", "pool", "quiet", "devices" }
local TIMING = { events = true, nvtx = true }

local is_plain_table = common.is_plain_table
declare.is_plain_table = is_plain_table

-- The one rule for option tables (gpurun.options): nil (-> {}) or a plain
-- table of known keys; raised at the caller's line as "what: ...", where
-- `shape` says what the table holds.
function declare.check_options_table(what, given, known, shape)
  if given == nil then
    return {}
  end
  if type(given) == "table" and not is_plain_table(given) then
    raise(("%s: options must be a plain table%s (no metatable), got a table with a metatable")
          :format(what, shape and " " .. shape or ""))
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
local check_options_table = declare.check_options_table

-- ---- construction -----------------------------------------------------------------

-- gpurun.pipeline's options, checked: { name, max_streams, fuse, strict,
-- timing, pool, quiet, devices }.
function declare.options(options)
  options = check_options_table("gpurun.pipeline", options, OPTIONS)
  local name = options.name or "pipeline"
  if not common.is_identifier(name) or name:sub(1, 1) == "_" then
    raise(("gpurun.pipeline: options.name must be a C identifier not starting with '_', got %s")
          :format(quoted(name)))
  end
  local max_streams = options.max_streams or 4
  if math.type(max_streams) ~= "integer" or max_streams < 1 or max_streams > 64 then
    raise(("gpurun.pipeline '%s': options.max_streams must be an integer from 1 to 64, got %s")
          :format(name, quoted(max_streams)))
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
          :format(name, quoted(options.timing)))
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

-- A new pipeline of the type `metatable`, for options as declare.options
-- gives them.
function declare.new(checked, metatable)
  return setmetatable({
    name = checked.name, options = checked,
    data = {}, by_name = {}, by_object = setmetatable({}, { __mode = "k" }),
    scalars = {}, stages = {}, version = 0, captures = 0, updates = 0, recaptures = 0,
    state = {}, -- what runs: streams, events, graphs (pipeline/compile.lua, run.lua)
    fused_cache = {}, -- fused kernels by their text (pipeline/fuse.lua)
    kernel_state = setmetatable({}, { __mode = "k" }), -- see declare.kernel_state
  }, metatable)
end

-- The declaration changed: what was planned from it is out of date.
function declare.changed(self)
  self.version = self.version + 1
  self.schedule = nil
end
local changed = declare.changed

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

-- The buffer types a pipeline takes as data, by what common.type_name
-- calls a value: a gpurun.Buffer or PinnedBuffer, or a table that claims to
-- be one but does not read as one (refused by place, naming the argument).
local BUFFER_TYPES = {
  ["gpurun.Buffer"] = "gpurun.Buffer", ["gpurun.PinnedBuffer"] = "gpurun.PinnedBuffer",
  ["table named gpurun.Buffer"] = "gpurun.Buffer",
  ["table named gpurun.PinnedBuffer"] = "gpurun.PinnedBuffer",
}

-- What a declaration reads of a buffer object (of_type: a gpurun.Buffer or
-- PinnedBuffer): its address, count, dtype and device.
local function buffer_fields(buffer, of_type)
  local on_device = 0
  if of_type == "gpurun.Buffer" then on_device = buffer.device end
  return buffer.ptr, #buffer, buffer.dtype, on_device
end

-- The address space and byte range of a buffer's memory, or an error
-- naming `what` (the argument that passed it): a closed buffer, or a table
-- that only names itself a gpurun type.
function declare.place(self, data, buffer, what)
  local of_type = type_name(buffer)
  if not BUFFER_TYPES[of_type] then
    data.key = buffer
    data.host = true
    data.lo, data.hi = 0, 1
    return
  end
  if of_type ~= BUFFER_TYPES[of_type] then
    raise(("pipeline '%s': %s: a %s expected, got %s (%s)"):format(self.name, what,
          BUFFER_TYPES[of_type], of_type, common.fake_problem(buffer)))
  end
  local ok, ptr, count, dtype, device = pcall(buffer_fields, buffer, of_type)
  if not ok then
    raise(("pipeline '%s': %s: %s"):format(self.name, what, common.error_text(ptr)))
  end
  if of_type == "gpurun.Buffer" then
    data.key = "device " .. device
    data.device = device
    data.host = nil
  else
    data.key = "host"
    data.device = nil
    data.host = true
  end
  data.lo = ptr
  data.hi = ptr + count * DTYPES[dtype].size
  data.count = count
  data.dtype = dtype
end
local place = declare.place

local function add_data(self, data)
  data.id = #self.data + 1
  self.data[data.id] = setmetatable(data, Data)
  self.by_name[data.name] = data
  changed(self)
  return data
end

-- A declared buffer (a Buffer, a PinnedBuffer or a table), found again by
-- the object itself.
local function add_buffer(self, name, buffer, filled, what)
  local data = { name = name, kind = "buffer", buffer = buffer, filled = filled }
  place(self, data, buffer, what)
  self.by_object[buffer] = data
  return add_data(self, data)
end

local function is_data(value)
  return BUFFER_TYPES[type_name(value)] ~= nil or is_plain_table(value)
end

-- buffer(name, buffer [, { filled = true }]) -> a handle: a Buffer, a
-- PinnedBuffer or a Lua table (host state, for host callbacks). filled =
-- false: the host never wrote it, so reading it before a stage writes it
-- is reported.
function methods:buffer(name, buffer, options)
  check_name(self, name, "buffer")
  if not is_data(buffer) then
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
  return add_buffer(self, name, buffer, filled, ("buffer '%s'"):format(name))
end

-- buffers{ name = buffer, ... } -> { name = handle, ... }: buffer() for
-- each (in the order of their names), filled.
function methods:buffers(list)
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

-- Why `dtype` names no dtype (nil when it names one).
local function dtype_problem(dtype)
  if DTYPES[dtype] then
    return nil
  end
  if type(dtype) ~= "string" then
    return ("a dtype name (one of %s) expected, got %s"):format(common.DTYPE_NAMES, type_name(dtype))
  end
  return ("unknown dtype %s (one of %s)"):format(dtype, common.DTYPE_NAMES)
end

-- temporary(name, count [, dtype]) -> a handle for device memory the
-- pipeline makes (float32 by default): in registers when fusion keeps it
-- there, else from a memory pool (options.pool, else the device's default
-- one), inside the graph when it is captured.
function methods:temporary(name, count, dtype)
  check_name(self, name, "temporary")
  if math.type(count) ~= "integer" or count < 1 or count > 1 << 40 then
    raise(("pipeline '%s': temporary '%s': the count must be an integer from 1 to 2^40, got %s")
          :format(self.name, name, quoted(count)))
  end
  dtype = dtype or "float32"
  local why = dtype_problem(dtype)
  if why then
    raise(("pipeline '%s': temporary '%s': %s"):format(self.name, name, why))
  end
  local data = { name = name, kind = "temporary", temporary = true, count = count, dtype = dtype,
                 lo = 0, hi = count * DTYPES[dtype].size, filled = false }
  data.key = data
  return add_data(self, data)
end

-- view(name, of, first [, count]) -> a handle for elements first ..
-- first + count - 1 (1-based) of a declared buffer or temporary, which
-- overlaps it and every other view of it.
function methods:view(name, of, first, count)
  check_name(self, name, "view")
  local base = declare.resolve_data(self, of, ("view '%s'"):format(name))
  if base.host and not base.count then
    raise(("pipeline '%s': view '%s': a table has no elements to view"):format(self.name, name))
  end
  if math.type(first) ~= "integer" or first < 1 or first > base.count then
    raise(("pipeline '%s': view '%s': first must be an element of '%s' (1 to %d), got %s"):format(
          self.name, name, base.name, base.count, quoted(first)))
  end
  count = count or base.count - first + 1
  if math.type(count) ~= "integer" or count < 1 or first + count - 1 > base.count then
    raise(("pipeline '%s': view '%s': count must be from 1 to %d, got %s"):format(self.name, name,
          base.count - first + 1, quoted(count)))
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
function methods:scalar(name, value, dtype)
  check_name(self, name, "scalar")
  if type(value) ~= "number" then
    raise(("pipeline '%s': scalar '%s': a number expected, got %s"):format(self.name, name,
          type_name(value)))
  end
  if dtype ~= nil then
    local why = dtype_problem(dtype)
    if not why then
      -- The value must be one the dtype holds, as a launch would find.
      why = select(2, common.typed_scalar(value, dtype))
    end
    if why then
      raise(("pipeline '%s': scalar '%s': %s"):format(self.name, name, why))
    end
  end
  local scalar = setmetatable({ name = name, value = value, dtype = dtype, typed = {} }, Scalar)
  self.scalars[#self.scalars + 1] = scalar
  self.by_name[name] = scalar
  return scalar
end

-- The data a reference names: a handle, a name, or a buffer (declared
-- now under `default_name` when new; `what` names the argument in
-- messages). Nil for anything else.
function declare.find_data(self, value, default_name, what)
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
  if BUFFER_TYPES[type_name(value)] then
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
    return add_buffer(self, name, value, true, what or name)
  end
  return nil
end

-- The data a reference names, or an error saying what `what` expected.
function declare.resolve_data(self, value, what)
  local data = declare.find_data(self, value, nil, what)
  if not data then
    raise(("pipeline '%s': %s: a declared buffer, temporary or view (a handle, its name or a "
           .. "gpurun.Buffer) expected, got %s"):format(self.name, what,
           type(value) == "string" and ("'%s', which names none"):format(value) or type_name(value)))
  end
  return data
end

-- Why declared data cannot be a device buffer that a library takes (it is
-- host memory, or a table), or nil; `takes` names the library.
function declare.not_device_buffer(data, what, takes)
  if data.host then
    return ("%s ('%s') is host memory; %s takes device buffers"):format(what, data.name, takes)
  end
  if not data.count then
    return ("%s ('%s') is a table; %s takes buffers"):format(what, data.name, takes)
  end
  return nil
end

-- An argument as stages keep it: { data = d } | { scalar = s } | { value = v }
-- (`what` names it in messages).
function declare.argument(self, value, default_name, what)
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
  local data = declare.find_data(self, value, default_name, what)
  if data then
    return { data = data }
  end
  return { value = value }
end

-- A kernel object that keeps temporaries of its own between calls
-- (gpurun.reduction's kernels, and elementwise pipelines holding one) must
-- not run twice at the same time: each call of it writes a datum standing
-- for that state, which orders them. It names no memory and no stage can
-- pass it (it has no name a stage could look up). Nil for other kernels.
function declare.kernel_state(self, kernel)
  if not access.keeps_state(kernel) then
    return nil
  end
  local data = self.kernel_state[kernel]
  if not data then
    data = { name = ("state of %s"):format(quoted(kernel.name)), kind = "state", state = true,
             filled = true }
    place(self, data, data)
    data.id = #self.data + 1
    self.data[data.id] = setmetatable(data, Data)
    self.kernel_state[kernel] = data
  end
  return data
end

-- ---- a stage's accesses ------------------------------------------------------------

-- The data its options' reads and writes lists name: { [data] = mode }.
function declare.read_overrides(self, options, what)
  local declared = {}
  for _, key in ipairs({ "reads", "writes" }) do
    local list = options[key]
    if list ~= nil then
      if not is_plain_table(list) then
        raise(("pipeline '%s': %s: %s must be a list of data, got %s"):format(self.name, what, key,
              type_name(list)))
      end
      for _, item in ipairs(list) do
        local data = declare.resolve_data(self, item, ("%s: %s"):format(what, key))
        declared[data] = access.merge(declared[data], key == "reads" and "r" or "w")
      end
    end
  end
  return declared
end

-- The stage's accesses: the inferred ones, with what `declared` says in
-- their place (and added), refusing a write to what the code only reads.
-- Returns them (in data order) and `declared`.
function declare.accesses_of(self, stage_name, inferred, declared)
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

-- ---- a stage's arguments -----------------------------------------------------------

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
function declare.stage_spec(self, what, first, ...)
  if is_plain_table(first) and select("#", ...) == 0 then
    return table_form(self, first, what)
  end
  local spec = table.pack(first, ...)
  local count = spec.n
  spec.n = nil
  return spec, count
end

-- The options table of a stage that takes its data first ({ name =,
-- reads =, writes = }), checked.
function declare.stage_options(self, options, what)
  options = check_options_table(("pipeline '%s': %s"):format(self.name, what), options,
                                STAGE_OPTIONS, "{ name =, reads =, writes = }")
  return (table_form(self, options, what))
end

-- Adds a stage of kind `kind` (pipeline/stage_kinds/) as declared; returns
-- the pipeline, so that declarations chain.
function declare.add_stage(self, kind, stage)
  stage.kind = kind
  stage.index = #self.stages + 1
  self.stages[stage.index] = stage
  changed(self)
  return self
end

function Data:__tostring()
  return ("pipeline data '%s' (%s%s)"):format(self.name, self.kind,
    self.count and (", %d x %s"):format(self.count, tostring(self.dtype)) or "")
end

function Scalar:__tostring()
  return ("pipeline scalar '%s' = %s"):format(self.name, tostring(self.value))
end

return declare
