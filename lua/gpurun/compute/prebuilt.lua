-- The common reductions, made with gpurun.reduction and kept per dtype:
-- gpurun.sum, prod, min, max, argmin, argmax, any, all, mean, norm and
-- max_abs_diff.
--
--   gpurun.sum(stream, x, out)                  -- out: a 1-element buffer
--   gpurun.max(stream, x, per_row, { rows = R, cols = C, axis = 2 })

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")
local arguments = require("gpurun.compute.arguments")
local reduction = require("gpurun.compute.reduction")

local DTYPES = common.DTYPES

local prebuilt = {}

local OPTION_NAMES = { "accumulate", "rows", "cols", "axis", "offsets" }
local EXTRA_SHAPE_KEYS = { accumulate = true }
local INTEGER_DTYPES = {}
for dtype, info in pairs(DTYPES) do
  INTEGER_DTYPES[dtype] = not info.float or nil
end

local FLOAT_NAMES = {}
for name in common.DTYPE_NAMES:gmatch("[%w_]+") do
  if DTYPES[name].float then FLOAT_NAMES[#FLOAT_NAMES + 1] = name end
end
FLOAT_NAMES = table.concat(FLOAT_NAMES, ", ")

local type_name, bad_argument = common.type_name, common.bad_argument

-- Wider results for sums of integers, as numpy and torch give.
local function summed(dtype)
  if INTEGER_DTYPES[dtype] then
    return dtype:sub(1, 1) == "u" and "uint64" or "int64"
  end
  return dtype
end

local function floating(dtype)
  return DTYPES[dtype].float and dtype or "float64"
end

-- name -> { map (x as the input; R the result's C type, A the
-- accumulator's), op, post, result = dtype -> default result dtype,
-- accumulates (takes options.accumulate), integer_result, float_result }.
local OPS = {
  sum = { map = "x", op = "sum", result = summed, accumulates = true },
  prod = { map = "x", op = "prod", result = summed, accumulates = true },
  min = { map = "x", op = "min", result = function(dtype) return dtype end },
  max = { map = "x", op = "max", result = function(dtype) return dtype end },
  argmin = { map = "x", op = "argmin", arg = true, result = function() return "int64" end,
             integer_result = true },
  argmax = { map = "x", op = "argmax", arg = true, result = function() return "int64" end,
             integer_result = true },
  any = { map = "x != 0", op = "any", result = function() return "uint8" end },
  all = { map = "x != 0", op = "all", result = function() return "uint8" end },
  mean = { map = "x", op = "sum", post = "s = a / (A)count", result = floating, accumulates = true,
           float_result = true },
  norm = { map = "(A)x * (A)x", op = "sum", post = "s = sqrt(a)", result = floating, accumulates = true,
           float_result = true },
}

-- The kernels made so far: op -> x dtype -> result dtype -> accumulator
-- dtype (or "default") -> kernel.
local kernels = {}

local function kernel_for(name, spec, x_dtype, out_dtype, accumulate, b_dtype)
  local by_op = kernels[name]
  if not by_op then by_op = {}; kernels[name] = by_op end
  local by_x = by_op[x_dtype]
  if not by_x then by_x = {}; by_op[x_dtype] = by_x end
  local by_out = by_x[out_dtype]
  if not by_out then by_out = {}; by_x[out_dtype] = by_out end
  local key = accumulate or "default"
  local by_acc = by_out[key]
  if b_dtype then
    if not by_acc then by_acc = {}; by_out[key] = by_acc end
    if by_acc[b_dtype] then return by_acc[b_dtype] end
  elseif by_acc then
    return by_acc
  end
  local acc = spec.arg and x_dtype or (accumulate or out_dtype)
  if spec.op == "any" or spec.op == "all" then
    acc = nil
  end
  -- the accumulator's C type: float for float16 and bfloat16 (their compute type)
  local acc_c = acc and DTYPES[acc].compute
  local in_params, map = x_dtype .. " x", spec.map
  if b_dtype then
    in_params = ("%s a, %s b"):format(x_dtype, b_dtype)
  end
  if acc_c then
    map = map:gsub("%f[%w_]A%f[^%w_]", acc_c)
  end
  local post = spec.post and spec.post:gsub("%f[%w_]A%f[^%w_]", acc_c) or nil
  local kernel = reduction.reduction(in_params, out_dtype .. " s", map, spec.op, post, nil,
                                     "gpurun_" .. name, { reduce_type = acc })
  kernel.extra_shape_keys = EXTRA_SHAPE_KEYS
  if b_dtype then
    by_acc[b_dtype] = kernel
  else
    by_out[key] = kernel
  end
  return kernel
end

-- The options, checked; returns them and whether they hold a shape.
local function read_options(fname, n, options, accumulates)
  if options == nil then
    return nil, false, nil
  end
  if not common.is_plain_table(options) then
    bad_argument(fname, n, "options table expected, got %s", type_name(options))
  end
  local unknown = options_rule.unknown(options, OPTION_NAMES)
  if unknown then
    bad_argument(fname, n, "%s", unknown)
  end
  local accumulate = rawget(options, "accumulate")
  if accumulate ~= nil then
    if not accumulates then
      bad_argument(fname, n, "options.accumulate does not apply: %s combines values exactly",
                   fname:match("[%w_]+$"))
    end
    if not DTYPES[accumulate] then
      bad_argument(fname, n, "options.accumulate must be a dtype (%s), got %s", common.DTYPE_NAMES,
                   common.quoted(accumulate))
    end
  end
  local shaped = rawget(options, "rows") ~= nil or rawget(options, "cols") ~= nil
                 or rawget(options, "axis") ~= nil or rawget(options, "offsets") ~= nil
  return options, shaped, accumulate
end

-- How many results a shape gives, for a new out: never more than the
-- input has elements (a shape that does not fit the input gets 1, and the
-- reduction's own checks then refuse it).
local function result_count(options, shaped, n)
  if not shaped then
    return 1
  end
  local offsets = rawget(options, "offsets")
  if type_name(offsets) == "gpurun.Buffer" then
    return math.max(#offsets - 1, 0)
  end
  local rows, cols, axis = rawget(options, "rows"), rawget(options, "cols"), rawget(options, "axis")
  if math.type(rows) == "integer" and math.type(cols) == "integer" and rows >= 0 and cols >= 0
     and rows <= n and cols <= n and rows * cols == n then
    return axis == 1 and cols or rows
  end
  return 1
end

local check_target = arguments.check_target

local function check_input(fname, n, x, what)
  arguments.check_buffer(fname, n, x, what, "reductions")
end

-- out: a buffer of a dtype the op can write, or nil (a new one is made).
local function result_buffer(fname, n, spec, target, out, dtype, options, shaped, x)
  if out == nil then
    if type_name(target) == "gpurun.GraphBuilder" then
      bad_argument(fname, n, "out is needed on a GraphBuilder: no buffer can be made while capturing")
    end
    return gpurun.empty(result_count(options, shaped, #x), dtype)
  end
  if type_name(out) ~= "gpurun.Buffer" then
    bad_argument(fname, n, "gpurun.Buffer or nil expected for out, got %s", type_name(out))
  end
  if not DTYPES[out.dtype] then
    bad_argument(fname, n, "out has dtype %s; reductions write %s", out.dtype, common.DTYPE_NAMES)
  end
  if spec.integer_result and not INTEGER_DTYPES[out.dtype] then
    bad_argument(fname, n, "out must be an integer buffer (a 1-based position), got %s", out.dtype)
  end
  if spec.float_result and not DTYPES[out.dtype].float then
    bad_argument(fname, n, "out must be a float buffer (%s), got %s", FLOAT_NAMES, out.dtype)
  end
  return out
end

-- gpurun.<name>(target, x [, out] [, options]), and for max_abs_diff
-- (target, a, b [, out] [, options]) with b a buffer or a number:
--
--   local out = gpurun.sum(stream, x)           -- a new 1-element buffer (streams only)
--   gpurun.sum(stream, x, out, { accumulate = "float64" })
--
-- target is a Stream or a GraphBuilder. options: accumulate (the dtype
-- values are combined in, for sum, prod, mean, norm and max_abs_diff) and
-- the shape keys of reduction kernels (rows, cols, axis, offsets). Without
-- out, a new buffer is made (one element per segment), which a capture
-- forbids.
local function define(name)
  local spec = OPS[name]
  local fname = "gpurun." .. name
  prebuilt[name] = function(target, x, out, options)
    if options == nil and common.is_plain_table(out) then
      out, options = nil, out
    end
    check_target(fname, target)
    check_input(fname, 2, x, "x")
    local shape, shaped, accumulate = read_options(fname, 4, options, spec.accumulates)
    local dtype = out and type_name(out) == "gpurun.Buffer" and out.dtype
                  or (accumulate and not spec.integer_result and accumulate) or spec.result(x.dtype)
    out = result_buffer(fname, 3, spec, target, out, dtype, shape, shaped, x)
    local kernel = kernel_for(name, spec, x.dtype, out.dtype, accumulate)
    if shaped then
      kernel(target, x, out, shape)
    else
      kernel(target, x, out)
    end
    return out
  end
end

for name in pairs(OPS) do
  define(name)
end

-- max_abs_diff(target, a, b [, out [, options]]) -> out: the largest
-- |a[i] - b[i]| (b a buffer of a's size, or a number), NaN if any
-- difference is NaN, 0 where both are the same infinity.
do
  local fname = "gpurun.max_abs_diff"
  local spec = { map = "(A)a == (A)b ? (A)0 : ((A)a > (A)b ? (A)a - (A)b : (A)b - (A)a)", op = "max",
                 accumulates = true }
  function prebuilt.max_abs_diff(target, a, b, out, options)
    if options == nil and common.is_plain_table(out) then
      out, options = nil, out
    end
    check_target(fname, target)
    check_input(fname, 2, a, "a")
    local b_dtype
    if type(b) == "number" then
      b_dtype = "float64"
    elseif type_name(b) == "gpurun.Scalar" then
      b_dtype, b = "float64", b.value
    else
      check_input(fname, 3, b, "b")
      b_dtype = b.dtype
    end
    local shape, shaped, accumulate = read_options(fname, 5, options, true)
    -- float32 for float32 and narrower floats (their differences are exact
    -- in float32 or nearly so), else float64
    local function narrow(dtype) return DTYPES[dtype].float and DTYPES[dtype].size <= 4 end
    local default = (narrow(a.dtype) and (type(b) == "number" or narrow(b_dtype))) and "float32"
                    or "float64"
    local dtype = out and type_name(out) == "gpurun.Buffer" and out.dtype or accumulate or default
    out = result_buffer(fname, 4, { float_result = true }, target, out, dtype, shape, shaped, a)
    local kernel = kernel_for("max_abs_diff", spec, a.dtype, out.dtype, accumulate or out.dtype, b_dtype)
    if shaped then
      kernel(target, a, b, out, shape)
    else
      kernel(target, a, b, out)
    end
    return out
  end
end

-- Scripts call these while a builder captures: their errors end the
-- capture as gpurun's own do, through gpurun.sum or straight from here.
gpurun.guard(prebuilt)

return prebuilt
