-- gpurun.fft: cuFFT's policy and every check before any library call
-- (shapes, kinds, dtypes, element counts, the stream, the direction);
-- cuFFT is called from C (src/types/fft_plan.c). Plans are records here;
-- gpurun.FftPlan (lua/gpurun/builtin/fft.lua) is their face. Shapes are in
-- C order, as NumPy's: the last dimension varies fastest, and a real
-- transform halves it (n // 2 + 1 complex elements).

local gpurun = require("gpurun")
local common = require("gpurun.common")
local arguments = require("gpurun.compute.arguments")

local core = package.loaded["gpurun.fft_core"] -- src/types/fft_plan.c, opened with the module
local type_name, raise = common.type_name, common.raise
local check_options, target_of = arguments.check_options, arguments.stream_option

local fft = {}

-- The precision of a transform by either of its dtypes: the complex dtype,
-- the real one, and cufftType's codes for each kind.
local PRECISIONS = {}
do
  local single = { complex = "complex64", real = "float32", c2c = 0x29, r2c = 0x2a, c2r = 0x2c }
  local double = { complex = "complex128", real = "float64", c2c = 0x69, r2c = 0x6a, c2r = 0x6c }
  PRECISIONS.complex64, PRECISIONS.float32 = single, single
  PRECISIONS.complex128, PRECISIONS.float64 = double, double
end
local KINDS = { c2c = true, r2c = true, c2r = true }

-- Whether a transform takes buffers of dtype (either side of a precision).
function fft.takes_dtype(dtype)
  return PRECISIONS[dtype] ~= nil
end
local DIRECTIONS = { forward = -1, inverse = 1 }
local PLAN_KEYS = { "kind", "dtype", "batch", "stream" }
local EXECUTE_KEYS = { "direction", "stream" }
local CALL_KEYS = { "n", "stream" }
local MAX_RANK = 3
-- Element counts stay exact in a double (and in cuFFT's 64-bit sizes).
local MAX_ELEMENTS = 1 << 53

local function bad_argument(fname, n, fmt, ...)
  common.bad_argument(fname, n, fmt, ...)
end

local function shape_text(shape)
  local parts = {}
  for i, n in ipairs(shape) do parts[i] = tostring(n) end
  return "(" .. table.concat(parts, ", ") .. (#shape == 1 and ",)" or ")")
end

-- A positive integer, or why not (what names it).
local function size_problem(value, what)
  if math.type(value) ~= "integer" then
    return ("%s must be a positive integer, got %s"):format(what,
      math.type(value) and common.quoted(value) or type_name(value))
  end
  if value < 1 then
    return ("%s must be a positive integer, got %d"):format(what, value)
  end
  return nil
end

-- The shape as a fresh sequence of 1 to 3 positive integers (a number is
-- a 1-D shape), or nil and why not.
local function shape_copy(shape)
  if math.type(shape) == "integer" then shape = { shape } end
  if not common.is_plain_table(shape) then
    return nil, ("shape must be a positive integer or a sequence of 1 to %d, got %s"):format(
      MAX_RANK, type_name(shape))
  end
  local rank = #shape
  if rank < 1 or rank > MAX_RANK then
    return nil, ("shape must have 1 to %d dimensions (cuFFT's plans), got %d"):format(MAX_RANK,
                                                                                      rank)
  end
  local copy = {}
  for i = 1, rank do
    local why = size_problem(rawget(shape, i), ("shape[%d]"):format(i))
    if why then return nil, why end
    copy[i] = rawget(shape, i)
  end
  return copy
end

local function product(shape, last)
  local count = 1
  for i = 1, #shape - 1 do count = count * shape[i] end
  return count * (last or shape[#shape])
end

local function device_of(target)
  if type_name(target) == "gpurun.GraphBuilder" then return target.stream.device end
  return target.device
end

-- cuFFT opens on the first call that needs it, after the checks.
local function loaded(fname)
  local why = core.load()
  if why then raise(fname .. ": " .. why) end
end

-- The record of a plan, checked, with no library call: shape, kind, the
-- complex and real dtypes, batch, and what a transform reads and writes
-- (dtype and element count of each side); or nil, the argument's position
-- (1: the shape, 2: the options) and why. kind, dtype and batch are the
-- options' values (nil: their defaults), so that a declared pipeline's
-- stage makes the same checks.
function fft.record_problem(shape, kind, dtype, batch)
  local why
  shape, why = shape_copy(shape)
  if not shape then return nil, 1, why end
  kind = kind or "c2c"
  if not KINDS[kind] then
    return nil, 2, ("options.kind must be 'c2c', 'r2c' or 'c2r', got %s"):format(common.quoted(kind))
  end
  dtype = dtype or "complex64"
  local precision = PRECISIONS[dtype]
  if not precision then
    return nil, 2, ("options.dtype must be complex64 or complex128 (or float32 or float64, the same "
                    .. "precisions), got %s"):format(common.quoted(dtype))
  end
  batch = batch or 1
  why = size_problem(batch, "options.batch")
  if why then return nil, 2, why end
  local last = shape[#shape]
  local half = last // 2 + 1
  local elements = batch + 0.0 -- in floats: an integer product could wrap
  for _, n in ipairs(shape) do elements = elements * n end
  if elements >= MAX_ELEMENTS then
    return nil, 1, ("shape %s with batch %d is too large (%.0f elements)"):format(shape_text(shape),
                                                                                 batch, elements)
  end
  local full, halved = product(shape), product(shape, half)
  local record = { shape = shape, kind = kind, dtype = precision.complex, real = precision.real,
                   batch = batch, type = precision[kind], half = half }
  local complex, real = precision.complex, precision.real
  if kind == "c2c" then
    record.input, record.input_count = complex, full * batch
    record.output, record.output_count = complex, full * batch
  elseif kind == "r2c" then
    record.input, record.input_count = real, full * batch
    record.output, record.output_count = complex, halved * batch
  else
    record.input, record.input_count = complex, halved * batch
    record.output, record.output_count = real, full * batch
  end
  return record
end

function fft.describe(fname, shape, options)
  local _, shape_why = shape_copy(shape)
  if shape_why then bad_argument(fname, 1, "%s", shape_why) end
  options = check_options(fname, 2, options, PLAN_KEYS)
  local record, position, why = fft.record_problem(shape, rawget(options, "kind"),
                                                   rawget(options, "dtype"), rawget(options, "batch"))
  if not record then bad_argument(fname, position, "%s", why) end
  return record
end

-- plan(shape [, { kind =, dtype =, batch =, stream = }]) -> a record with
-- its cuFFT plan made on the stream's device (the current stream's by
-- default).
function fft.plan(shape, options)
  local fname = "gpurun.fft.plan"
  local record = fft.describe(fname, shape, options)
  local target = target_of(fname, 2, options or {})
  loaded(fname)
  local shape_ = record.shape
  record.core, record.work_size = core.make(target, record.type, record.batch, table.unpack(shape_))
  record.device = device_of(target)
  return record
end

-- Why `what` (input or output), of `dtype` and `count` elements, is not
-- what the plan's transform reads or writes there, or nil.
local function operand_problem(record, what, dtype, count, want_dtype, want_count)
  if dtype ~= want_dtype then
    return ("%s has dtype %s; the %s plan's %s is %s"):format(what, dtype, record.kind, what,
                                                             want_dtype)
  end
  if count ~= want_count then
    local halved = (record.kind == "r2c" and what == "output")
      or (record.kind == "c2r" and what == "input")
    return ("%s has %d elements; the %s plan of shape %s%s %s %d%s"):format(what, count,
      record.kind, shape_text(record.shape),
      record.batch > 1 and (" and batch %d"):format(record.batch) or "",
      what == "input" and "reads" or "writes", want_count,
      halved and (" (its last dimension %d // 2 + 1 = %d)"):format(record.shape[#record.shape],
                                                                  record.half) or "")
  end
  return nil
end

-- The checks of a transform that need only its operands' dtypes and
-- element counts (measure(operand) gives them) and whether output is
-- input, so that a declared pipeline makes them before there is memory:
-- nil, or the operand's position (1: input, 2: output) and why.
function fft.shape_problem(record, input, output, same, measure)
  local dtype, count = measure(input)
  local why = operand_problem(record, "input", dtype, count, record.input, record.input_count)
  if why then return 1, why end
  dtype, count = measure(output)
  why = operand_problem(record, "output", dtype, count, record.output, record.output_count)
  if why then return 2, why end
  if record.kind ~= "c2c" and same then
    return 2, ("a %s transform is out of place: output must not be input"):format(record.kind)
  end
  return nil
end

local function measured(buffer)
  return buffer.dtype, #buffer
end

local function check_operand(fname, n, record, buffer, what)
  if type_name(buffer) ~= "gpurun.Buffer" then
    bad_argument(fname, n, "%s must be a gpurun.Buffer, got %s", what, type_name(buffer))
  end
  if buffer.device ~= record.device then
    bad_argument(fname, n, "%s is on device %d but the plan on device %d", what, buffer.device,
                 record.device)
  end
end

-- The direction code of a call (-1 forward, 1 inverse), or nil and why:
-- c2c takes either (forward by default); a real transform only its own.
function fft.direction_code(record, direction)
  if direction ~= nil and DIRECTIONS[direction] == nil then
    return nil, ("options.direction must be 'forward' or 'inverse', got %s"):format(
      common.quoted(direction))
  end
  local own = record.kind == "c2r" and "inverse" or "forward"
  if record.kind ~= "c2c" and direction ~= nil and direction ~= own then
    return nil, ("a %s plan runs %s only, not %s"):format(record.kind, own, direction)
  end
  return DIRECTIONS[direction or own]
end

-- execute(record, input, output [, { direction =, stream = }]): one
-- transform, queued on the stream (or recorded by the GraphBuilder).
function fft.execute(record, input, output, options)
  local fname = "FftPlan:execute"
  options = check_options(fname, 3, options, EXECUTE_KEYS)
  check_operand(fname, 1, record, input, "input")
  check_operand(fname, 2, record, output, "output")
  local position, why = fft.shape_problem(record, input, output, input.ptr == output.ptr, measured)
  if position then bad_argument(fname, position, "%s", why) end
  local direction
  direction, why = fft.direction_code(record, rawget(options, "direction"))
  if not direction then bad_argument(fname, 3, "%s", why) end
  local target = target_of(fname, 3, options)
  if device_of(target) ~= record.device then
    bad_argument(fname, 3, "the stream is on device %d but the plan on device %d",
                 device_of(target), record.device)
  end
  core.execute(record.core, target, input, output, direction, record.input_count,
               record.output_count)
  return output
end

function fft.close(record)
  if record.core then core.close(record.core) end
end

-- ---- one call, one new buffer: fft, ifft, rfft, irfft --------------------------------

-- Plans of the one-call functions, by device, kind, dtype, batch and n
-- (a tree, so that finding one builds no string).
local cache = {}

local function cached_plan(target, kind, dtype, batch, n)
  local node = cache
  for _, key in ipairs{ core.context_of(target), kind, dtype, batch } do
    node[key] = node[key] or {}
    node = node[key]
  end
  local record = node[n]
  if record == nil then
    record = fft.plan(n, { kind = kind, dtype = dtype, batch = batch, stream = target })
    node[n] = record
  end
  return record
end

-- clear_cache(): closes the one-call functions' plans (a plan a graph
-- still uses goes when the graph does).
function fft.clear_cache()
  local function close_all(node)
    for _, value in pairs(node) do
      if value.core then
        pcall(core.close, value.core)
      else
        close_all(value)
      end
    end
  end
  close_all(cache)
  cache = {}
end

-- The input of a one-call function: a buffer of one of `dtypes`, and its
-- rows of `per` elements: n (options.n, default all of it) and the batch.
local function rows_of(fname, x, options, dtypes, per_row)
  if type_name(x) ~= "gpurun.Buffer" then
    bad_argument(fname, 1, "gpurun.Buffer expected, got %s", type_name(x))
  end
  local length = #x
  if not dtypes[x.dtype] then
    bad_argument(fname, 1, "x has dtype %s; %s takes %s", x.dtype, fname, dtypes.text)
  end
  options = check_options(fname, 2, options, CALL_KEYS)
  local n = rawget(options, "n")
  if n ~= nil then
    local why = size_problem(n, "options.n")
    if why then bad_argument(fname, 2, "%s", why) end
  end
  n = n or per_row.default(length)
  local row = per_row.row(n)
  if n < 1 or length % row ~= 0 then
    bad_argument(fname, 1, "x has %d elements, not a whole number of rows of %d (n = %d)", length,
                 row, n)
  end
  return n, length // row, options
end

local COMPLEX = { complex64 = true, complex128 = true, text = "complex64 or complex128" }
local REAL = { float32 = true, float64 = true, text = "float32 or float64" }
local WHOLE = { default = function(length) return length end, row = function(n) return n end }
local HALVED = { default = function(length) return 2 * (length - 1) end,
                 row = function(n) return n // 2 + 1 end }

local function one_call(fname, x, options, kind, direction)
  local dtypes = kind == "r2c" and REAL or COMPLEX
  local n, batch
  n, batch, options = rows_of(fname, x, options, dtypes, kind == "c2r" and HALVED or WHOLE)
  local target = target_of(fname, 2, options)
  if x.device ~= device_of(target) then
    bad_argument(fname, 1, "x is on device %d but the stream on device %d", x.device,
                 device_of(target))
  end
  local record = cached_plan(target, kind, x.dtype, batch, n)
  local input = x
  if kind == "c2r" then -- cuFFT's C2R overwrites its input: it works on a copy
    input = gpurun.empty(#x, x.dtype, { stream = target })
    input:copy_from(x, target)
  end
  local out = gpurun.empty(record.output_count, record.output, { stream = target })
  core.execute(record.core, target, input, out, direction, record.input_count,
               record.output_count)
  return out
end

-- fft(x [, { n =, stream = }]) -> a new complex buffer: the forward
-- transform of each row of n elements (n = #x by default).
function fft.fft(x, options)
  return one_call("gpurun.fft.fft", x, options, "c2c", DIRECTIONS.forward)
end

-- ifft(x [, { n =, stream = }]) -> the inverse transform, unnormalised.
function fft.ifft(x, options)
  return one_call("gpurun.fft.ifft", x, options, "c2c", DIRECTIONS.inverse)
end

-- rfft(x [, { n =, stream = }]) -> n // 2 + 1 complex elements per row of
-- n real ones.
function fft.rfft(x, options)
  return one_call("gpurun.fft.rfft", x, options, "r2c", DIRECTIONS.forward)
end

-- irfft(x [, { n =, stream = }]) -> n real elements per row of n // 2 + 1
-- complex ones (n = 2 (#x - 1) by default), unnormalised.
function fft.irfft(x, options)
  return one_call("gpurun.fft.irfft", x, options, "c2r", DIRECTIONS.inverse)
end

return fft
