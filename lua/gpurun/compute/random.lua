-- gpurun.device_rng's generators: their state on the device, every check
-- of a fill's arguments, and the fill's launch (docs/random.md). The CUDA C
-- is random_source's; it is compiled once per dtype and device through
-- device_code, as the other generated kernels are. lua/gpurun/builtin/
-- random.lua is the type's face: it hands each method the generator's
-- record, { state, words, device, seed }.
--
-- A fill with a buffer given creates no table and formats no string once
-- its dtype's kernels are loaded and its size has been seen.

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local device_code = require("gpurun.compute.device_code")
local random_source = require("gpurun.compute.random_source")

local DTYPES, type_name, quoted = common.DTYPES, common.type_name, common.quoted

local random = {}

local STATE_WORDS = 8 -- seed (low, high), offset (low, high), blocks arrived, unused
local WORD = 0xffffffff
local BLOCK = random_source.BLOCK
local FLOATS = "float32, float64, float16, bfloat16"
local FILL_KEYS = { "stream" }
local STATE_KEYS = { "seed", "offset", "stream" }

local function bad_argument(fname, n, fmt, ...)
  common.bad_argument(fname, n, fmt, ...)
end

-- ---- compiled programs -----------------------------------------------------------

-- dtype -> { source, names (kind -> kernel name), kernel_names, devices,
-- and what device_code reads of a kernel: kind, name, block }.
local programs = {}

local function program(dtype)
  local found = programs[dtype]
  if not found then
    local text, names = random_source.source(dtype)
    local kinds, list = random_source.kinds(dtype), {}
    for i, kind in ipairs(kinds) do list[i] = names[kind] end
    found = { kind = "device_rng program", name = "gpurun_random_" .. dtype, block = BLOCK,
              source = text, names = names, kernel_names = list, devices = {},
              -- elements per counter: every kind of a dtype takes as many words
              per = 4 // random_source.words(kinds[1], dtype) }
    programs[dtype] = found
  end
  return found
end

local function make_config(n, entry, per)
  return gpurun.LaunchConfig{ grid = device_code.blocks(entry, (n + per - 1) // per, BLOCK), block = BLOCK }
end

-- ---- checks ----------------------------------------------------------------------

-- The stream a fill goes on, and whether it is a builder capturing.
local function target_of(fname, at, options)
  local target
  if options ~= nil then
    if not common.is_plain_table(options) then
      bad_argument(fname, at, "options table expected, got %s", type_name(options))
    end
    local why = options_rule.unknown(options, FILL_KEYS)
    if why then bad_argument(fname, at, "%s", why) end
    target = rawget(options, "stream")
  end
  if target == nil then target = gpurun.current_stream() end
  if target == nil then
    bad_argument(fname, at, "no stream: pass { stream = s } or call gpurun.set_current_stream(s)")
  end
  local kind = type_name(target)
  if kind ~= "gpurun.Stream" and kind ~= "gpurun.GraphBuilder" then
    bad_argument(fname, at, "options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got %s", kind)
  end
  return target, kind == "gpurun.GraphBuilder"
end

local function check_dtype(fname, at, dtype, integers)
  if type(dtype) ~= "string" then
    bad_argument(fname, at, "dtype name expected, got %s", type_name(dtype))
  end
  local info = DTYPES[dtype]
  if not info then
    bad_argument(fname, at, "unknown dtype %s (expected one of: %s)", quoted(dtype), common.DTYPE_NAMES)
  end
  if info.kind == "complex" then
    bad_argument(fname, at, "%s dtype expected, got %s (device_rng fills real dtypes)",
                 integers and "integer" or ("float (%s)"):format(FLOATS), dtype)
  elseif integers and info.float then
    bad_argument(fname, at, "integer dtype expected, got %s (random() makes float buffers)", dtype)
  elseif not integers and not info.float then
    bad_argument(fname, at, "float dtype (%s) expected, got %s (integers() makes integer buffers)", FLOATS, dtype)
  end
  return dtype
end

-- The buffer a fill writes (nil: make one of n elements) and its dtype:
-- `out` itself, or `out` elements of `dtype` (default `default`).
local function output(fname, record, out, dtype, at, default, integers)
  if type_name(out) == "gpurun.Buffer" then
    local own = out.dtype
    if dtype ~= nil and dtype ~= own then
      check_dtype(fname, at, dtype, integers)
      bad_argument(fname, at, "dtype %s does not match the buffer's, %s", dtype, own)
    end
    check_dtype(fname, 1, own, integers)
    if out.device ~= record.device then
      bad_argument(fname, 1, "the buffer is on device %d, the generator's state on device %d", out.device,
                   record.device)
    end
    return out, own
  end
  local n = math.type(out) == "float" and math.tointeger(out) or out
  if math.type(n) ~= "integer" or n < 1 then
    bad_argument(fname, 1, "gpurun.Buffer or positive element count expected, got %s",
                 type(out) == "number" and quoted(out) or type_name(out))
  end
  return nil, check_dtype(fname, at, dtype == nil and default or dtype, integers)
end

-- The buffer itself, or a new one of `count` elements: not on a builder.
local function made(fname, buffer, count, dtype, capturing)
  if buffer then return buffer end
  if capturing then
    bad_argument(fname, 1, "pass the buffer to fill on a gpurun.GraphBuilder: a new buffer is not "
                 .. "allocated during a capture")
  end
  return gpurun.empty(math.tointeger(count), dtype)
end

local function finite(fname, at, what, value)
  if type(value) ~= "number" then
    bad_argument(fname, at, "number expected for %s, got %s", what, type_name(value))
  end
  if value ~= value or value == math.huge or value == -math.huge then
    bad_argument(fname, at, "%s must be finite, got %s", what, quoted(value))
  end
  return value + 0.0
end

local function integer(fname, at, value)
  if type(value) ~= "number" then
    bad_argument(fname, at, "number expected, got %s", type_name(value))
  end
  local whole = math.tointeger(value)
  if not whole then bad_argument(fname, at, "number has no integer representation") end
  return whole
end

-- (dtype, options) from the arguments after the distribution's: a table in
-- the dtype's place is the options.
local function tail(dtype, options)
  if type(dtype) == "table" and options == nil then return nil, dtype end
  return dtype, options
end

-- ---- the fills --------------------------------------------------------------------

-- Loads the dtype's kernels on first use, then launches the kind's.
local function launch(fname, record, kind, target, capturing, out, dtype, a, b)
  local variant = program(dtype)
  local device = record.device
  if capturing and not variant.devices[device] then
    common.raise(("%s: the %s kernels are compiled on their first use; make one %s fill on a stream "
                  .. "before capturing"):format(fname, dtype, dtype))
  end
  local entry = device_code.compiled(variant, variant, device)
  local n = #out
  local config = device_code.shape(entry, n, make_config, entry, variant.per)
  local kernel = entry.kernels[variant.names[kind]]
  if a == nil then
    gpurun.launch(target, config, kernel, out, n, record.state)
  else
    gpurun.launch(target, config, kernel, out, n, record.state, a, b)
  end
  return out
end

-- random(record, out_or_n [, dtype] [, options]) -> out: uniform in [0, 1).
function random.random(record, out, dtype, options)
  local fname = "DeviceGenerator:random"
  dtype, options = tail(dtype, options)
  local buffer, checked = output(fname, record, out, dtype, 2, "float32", false)
  local target, capturing = target_of(fname, dtype == nil and 2 or 3, options)
  buffer = made(fname, buffer, out, checked, capturing)
  return launch(fname, record, "random", target, capturing, buffer, checked)
end

-- uniform(record, out_or_n, low, high [, dtype] [, options]) -> out.
function random.uniform(record, out, low, high, dtype, options)
  local fname = "DeviceGenerator:uniform"
  low, high = finite(fname, 2, "low", low), finite(fname, 3, "high", high)
  if high <= low or high - low == math.huge then
    bad_argument(fname, 3, "high (%s) must be greater than low (%s), with high - low finite", quoted(high),
                 quoted(low))
  end
  dtype, options = tail(dtype, options)
  local buffer, checked = output(fname, record, out, dtype, 4, "float32", false)
  local largest = DTYPES[checked].max
  if low < -largest or high > largest then
    bad_argument(fname, 3, "range [%s, %s) does not fit %s (largest %s)", quoted(low), quoted(high), checked,
                 quoted(largest))
  end
  local target, capturing = target_of(fname, dtype == nil and 4 or 5, options)
  buffer, dtype = made(fname, buffer, out, checked, capturing), checked
  return launch(fname, record, "uniform", target, capturing, buffer, dtype, low, high)
end

-- normal(record, out_or_n, mean, std [, dtype] [, options]) -> out.
function random.normal(record, out, mean, std, dtype, options)
  local fname = "DeviceGenerator:normal"
  mean, std = finite(fname, 2, "mean", mean), finite(fname, 3, "std", std)
  if std < 0 then bad_argument(fname, 3, "std must be 0 or more, got %s", quoted(std)) end
  dtype, options = tail(dtype, options)
  local buffer, checked = output(fname, record, out, dtype, 4, "float32", false)
  local target, capturing = target_of(fname, dtype == nil and 4 or 5, options)
  buffer, dtype = made(fname, buffer, out, checked, capturing), checked
  return launch(fname, record, "normal", target, capturing, buffer, dtype, mean, std)
end

-- integers(record, out_or_n, low, high [, dtype] [, options]) -> out, in
-- [low, high).
function random.integers(record, out, low, high, dtype, options)
  local fname = "DeviceGenerator:integers"
  low, high = integer(fname, 2, low), integer(fname, 3, high)
  if high <= low then
    bad_argument(fname, 3, "high (%d) must be greater than low (%d)", high, low)
  end
  dtype, options = tail(dtype, options)
  local buffer, checked = output(fname, record, out, dtype, 4, "int32", true)
  local info = DTYPES[checked]
  if low < info.min or high - 1 > info.max then
    bad_argument(fname, 3, "range [%d, %d) does not fit %s (%d..%d)", low, high, checked, info.min, info.max)
  end
  local target, capturing = target_of(fname, dtype == nil and 4 or 5, options)
  buffer, dtype = made(fname, buffer, out, checked, capturing), checked
  -- high - low wraps past 2^63: the kernel reads its 64 bits unsigned
  return launch(fname, record, "integers", target, capturing, buffer, dtype, low, high - low)
end

-- ---- the state ---------------------------------------------------------------------

local function seed_of(fname, at, value, what)
  if math.type(value) ~= "integer" then
    bad_argument(fname, at, "integer %s expected, got %s", what,
                 type(value) == "number" and quoted(value) or type_name(value))
  end
  return value
end

-- Queues the state's words on `target` (nil: the current stream, or the
-- whole device): fills, so that a builder records them as memset nodes.
local function write_state(record, seed, offset, target)
  local values = { seed & WORD, seed >> 32, offset & WORD, offset >> 32, 0 }
  for i, value in ipairs(values) do
    if target == nil then record.words[i]:fill(value) else record.words[i]:fill(value, target) end
  end
  record.seed = seed
end

-- new(seed) -> a record: the state's buffer on the current device, and
-- views of its words.
function random.new(...)
  if select("#", ...) == 0 then bad_argument("gpurun.device_rng", 1, "integer seed expected, got no value") end
  local seed = seed_of("gpurun.device_rng", 1, ..., "seed")
  local state = gpurun.zeros(STATE_WORDS, "uint32")
  local record = { state = state, device = state.device, words = {} }
  for i = 1, 5 do record.words[i] = state:view(i, 1) end
  write_state(record, seed, 0, nil)
  return record
end

local function state_target(fname, stream)
  if stream == nil then return nil end
  local kind = type_name(stream)
  if kind ~= "gpurun.Stream" and kind ~= "gpurun.GraphBuilder" then
    bad_argument(fname, 1, "stream must be a gpurun.Stream or gpurun.GraphBuilder, got %s", kind)
  end
  return stream
end

-- set_state(record, { seed =, offset = 0, stream = })
function random.set_state(record, state)
  local fname = "DeviceGenerator:set_state"
  if not common.is_plain_table(state) then
    bad_argument(fname, 1, "table { seed =, offset =, stream = } expected, got %s", type_name(state))
  end
  local why = options_rule.unknown(state, STATE_KEYS)
  if why then bad_argument(fname, 1, "%s", why) end
  local seed = seed_of(fname, 1, rawget(state, "seed"), "seed")
  local offset = rawget(state, "offset")
  if offset == nil then offset = 0 end
  if math.type(offset) ~= "integer" or offset < 0 then
    bad_argument(fname, 1, "offset must be an integer of 0 or more, got %s",
                 type(offset) == "number" and quoted(offset) or type_name(offset))
  end
  write_state(record, seed, offset, state_target(fname, rawget(state, "stream")))
end

-- get_state(record [, { stream = }]) -> { seed =, offset = }, read from
-- the device after what the stream holds: the call waits for it.
function random.get_state(record, options)
  local fname = "DeviceGenerator:get_state"
  local stream
  if options ~= nil then
    if not common.is_plain_table(options) then
      bad_argument(fname, 1, "options table expected, got %s", type_name(options))
    end
    local why = options_rule.unknown(options, FILL_KEYS)
    if why then bad_argument(fname, 1, "%s", why) end
    stream = rawget(options, "stream")
    if stream ~= nil and type_name(stream) ~= "gpurun.Stream" then
      bad_argument(fname, 1, "options.stream must be a gpurun.Stream (the state is read now, so it "
                   .. "cannot be captured), got %s", type_name(stream))
    end
  end
  local words = stream and record.state:to_table(1, 4, stream) or record.state:to_table(1, 4)
  return { seed = words[1] | (words[2] << 32), offset = words[3] | (words[4] << 32) }
end

return random
