-- A generated kernel's call arguments, read against its parameters: what
-- gpurun.elementwise kernels and gpurun.reduction kernels share. A kernel
-- here is a table with `kind` ("elementwise kernel", "reduction kernel"),
-- `name`, `params` ({ name, type, variable, output, result }), `arity`,
-- `input_count`, `type_variables`, and the tables this module fills and
-- reuses: `bound` (type variable -> dtype for the call in progress),
-- `variants` (the tree of signatures seen), `scalars` (the typed scalars
-- made for the call in progress) and `arguments` (converted arguments).

local gpurun = require("gpurun")
local common = require("gpurun.common")
local options_rule = require("gpurun.options")

local DTYPES = common.DTYPES
local raise = common.raise

local arguments = {}

local SCALAR_TAG = {}  -- dtype -> the lookup key of a scalar of it
-- An 8- or 16-bit integer dtype -> the 32-bit one of its kind, whose typed
-- scalar it takes too (gpurun.i32 for int8).
local WIDE_SCALAR = {}
for dtype, info in pairs(DTYPES) do
  SCALAR_TAG[dtype] = dtype .. " scalar"
  for wide, wide_info in pairs(DTYPES) do
    if not info.float and info.size < 4 and wide_info.kind == info.kind and wide_info.size == 4 then
      WIDE_SCALAR[dtype] = wide
    end
  end
end

local type_name = common.type_name

-- Raises "<kind> '<name>' input 2 (float32 b): <what>".
function arguments.param_error(kernel, index, fmt, ...)
  local param = kernel.params[index]
  raise(("%s '%s' %s %d (%s %s): "):format(kernel.kind, kernel.name,
        param.output and "output" or "input", param.output and index - kernel.input_count or index,
        param.type, param.name) .. fmt:format(...))
end
local param_error = arguments.param_error

-- What carried a dtype, for messages only (building it allocates).
local function carrier(dtype, scalar_type)
  return scalar_type and "gpurun." .. scalar_type or "a " .. dtype .. " buffer"
end

-- Binds or checks the dtype of argument `index`: `dtype` is what the buffer
-- or the typed scalar (of scalar_type) carries.
local function match_dtype(kernel, index, dtype, scalar_type)
  local param = kernel.params[index]
  if param.variable then
    local bound = kernel.bound[param.type]
    if bound == nil then
      if DTYPES[dtype] and DTYPES[dtype].kind == "complex" then
        param_error(kernel, index, "%s cannot be %s: generated kernels take real dtypes, not "
                    .. "complex ones", param.type, dtype)
      end
      kernel.bound[param.type] = dtype
    elseif bound ~= dtype then
      param_error(kernel, index, "%s is %s, but %s is %s here", param.type, bound,
                  carrier(dtype, scalar_type), dtype)
    end
  elseif param.type ~= dtype then
    param_error(kernel, index, "expected %s, got %s", param.type, carrier(dtype, scalar_type))
  end
end

-- The dtype a typed scalar of `dtype` counts as for a parameter of
-- param_dtype: its own, or param_dtype for the 32-bit scalar of an 8- or
-- 16-bit integer's kind.
local function scalar_dtype_for(param_dtype, dtype)
  if param_dtype and WIDE_SCALAR[param_dtype] == dtype then
    return param_dtype
  end
  return dtype
end

function arguments.dtype_of(kernel, index)
  local param = kernel.params[index]
  return param.variable and kernel.bound[param.type] or param.type
end
local dtype_of = arguments.dtype_of

-- A number as the typed scalar its parameter takes, made by gpurun's one
-- rule (the scalar's constructor, base/dtype.c's), or an error that gives
-- the constructor's reason ("300 out of range for uint8 (0..255)").
function arguments.scalar_for(kernel, index, value)
  local scalar, why = common.typed_scalar(value, dtype_of(kernel, index))
  if not scalar then
    param_error(kernel, index, "%s", why)
  end
  return scalar
end
local scalar_for = arguments.scalar_for

-- Why a launch refuses `value` for `param` when it is not a buffer (a
-- typed scalar or a Lua number are what it takes), or nil: read()'s and
-- scalar_for's rules, also for a check ahead of the launch
-- (gpurun.pipeline's declarations). A type variable's binding is left to
-- the launch, which sees the buffers.
function arguments.value_problem(param, value)
  local kind = type_name(value)
  if param.output then
    return ("an output must be a gpurun.Buffer, got %s"):format(kind)
  end
  if kind ~= "gpurun.Scalar" and kind ~= "number" then
    return ("a gpurun.Buffer, a gpurun scalar or a number expected, got %s"):format(kind)
  end
  if param.variable or not DTYPES[param.type] then
    return nil
  end
  if kind == "number" then
    local _, why = common.typed_scalar(value, param.type)
    return why
  end
  local ok, dtype, scalar_type, number = pcall(function() return value.dtype, value.type, value.value end)
  if not ok or not DTYPES[dtype] then
    return "a gpurun.Scalar whose dtype cannot be read"
  end
  local as = scalar_dtype_for(param.type, dtype)
  if as ~= param.type then
    return ("expected %s, got %s"):format(param.type, carrier(dtype, scalar_type))
  end
  if as ~= dtype then
    local _, why = common.typed_scalar(number, as)
    return why
  end
  return nil
end

-- Refuses a call with the wrong number of arguments (`extra`: how many
-- more it may take, a reduction's shape table).
function arguments.check_count(kernel, count, extra)
  if count ~= kernel.arity and not (extra and count == kernel.arity + extra) then
    local names = {}
    for index, param in ipairs(kernel.params) do
      names[index] = param.name
    end
    raise(("%s '%s' takes %d argument%s (%s%s), got %d")
          :format(kernel.kind, kernel.name, kernel.arity, kernel.arity == 1 and "" or "s",
                  table.concat(names, ", "), extra and ", then a shape table if any" or "", count))
  end
end

-- First pass over the arguments: their kinds, dtypes, sizes and the type
-- variables they bind. Returns n (nil when no buffer but results is
-- passed), the device, and whether a Lua number (or a 32-bit scalar for a
-- narrower parameter) is among them: then kernel.scalars holds the typed
-- scalars that converted() passes in their place. Buffers of inputs and of
-- outputs that are not `result`s must all have one size, n; a `result`
-- output (a reduction's one value per segment) is sized by its kernel
-- instead.
function arguments.read(kernel, ...)
  local bound = kernel.bound
  for _, variable in ipairs(kernel.type_variables) do
    bound[variable] = nil
  end
  local n, device, numbers, first, first_buffer
  for index = 1, kernel.arity do
    local param = kernel.params[index]
    local arg = select(index, ...)
    local kind = type_name(arg)
    if kind == "gpurun.Buffer" then
      local dtype = arg.dtype
      match_dtype(kernel, index, dtype)
      if device == nil then
        device, first_buffer = arg.device, param
      elseif arg.device ~= device then
        param_error(kernel, index, "is on device %d, but %s is on device %d",
                    arg.device, first_buffer.name, device)
      end
      if not param.result then
        local size = #arg
        if n == nil then
          n, first = size, param
        elseif size ~= n then
          param_error(kernel, index, "has %d elements, but %s has %d",
                      size, first.name, n)
        end
      end
    elseif param.output then
      param_error(kernel, index, "%s", arguments.value_problem(param, arg))
    elseif kind == "gpurun.Scalar" then
      local wanted = param.variable and bound[param.type] or param.type
      local dtype = scalar_dtype_for(wanted, arg.dtype)
      match_dtype(kernel, index, dtype, arg.type)
      numbers = numbers or dtype ~= arg.dtype -- a 32-bit scalar to narrow
    elseif kind == "number" then
      numbers = true
    else
      param_error(kernel, index, "%s", arguments.value_problem(param, arg))
    end
  end
  if numbers then
    for index = 1, kernel.arity do
      local param = kernel.params[index]
      local arg = select(index, ...)
      kernel.scalars[index] = nil
      if type(arg) == "number" then
        if param.variable and not bound[param.type] then
          param_error(kernel, index, "a Lua number does not say what %s is: pass a "
                      .. "buffer or a typed scalar (gpurun.f32(x), ...) for a %s parameter",
                      param.type, param.type)
        end
        kernel.scalars[index] = scalar_for(kernel, index, arg)
      elseif type_name(arg) == "gpurun.Scalar" and arg.dtype ~= dtype_of(kernel, index) then
        kernel.scalars[index] = scalar_for(kernel, index, arg.value)
      end
    end
  end
  return n, device, numbers
end

-- The variant for this call's signature: a tree with one level per
-- parameter, keyed by dtype (or "<dtype> scalar"), so that finding it
-- builds no string. A new one is made by generate(kernel, signature) ->
-- a table, to which `signature` is added.
function arguments.find_variant(kernel, generate, ...)
  local node = kernel.variants
  for index = 1, kernel.arity do
    local dtype = dtype_of(kernel, index)
    local tag = type_name(select(index, ...)) == "gpurun.Buffer" and dtype or SCALAR_TAG[dtype]
    local child = node[tag]
    if not child then
      child = {}
      node[tag] = child
    end
    node = child
  end
  local variant = node.variant
  if not variant then
    local signature = { dtypes = {}, scalar = {}, bindings = {} }
    for index = 1, kernel.arity do
      signature.dtypes[index] = dtype_of(kernel, index)
      signature.scalar[index] = type_name(select(index, ...)) ~= "gpurun.Buffer" or nil
    end
    for _, variable in ipairs(kernel.type_variables) do
      signature.bindings[variable] = kernel.bound[variable]
    end
    variant = generate(kernel, signature)
    variant.signature = signature
    variant.devices = variant.devices or {}
    node.variant = variant
  end
  return variant
end

-- The signature of buffers of the declared dtypes, type variables bound by
-- `bindings` ({ T = "float64" }), for source_for.
function arguments.declared_signature(kernel, bindings)
  local signature = { dtypes = {}, scalar = {}, bindings = {} }
  for _, variable in ipairs(kernel.type_variables) do
    local dtype = bindings and bindings[variable]
    if not DTYPES[dtype] then
      raise(("%s '%s': source_for needs a dtype for %s (one of %s)"):format(
            kernel.kind, kernel.name, variable, common.DTYPE_NAMES))
    end
    signature.bindings[variable] = dtype
  end
  for index, param in ipairs(kernel.params) do
    signature.dtypes[index] = param.variable and signature.bindings[param.type] or param.type
  end
  return signature
end

-- The arguments with every Lua number (and 32-bit scalar for a narrower
-- parameter) replaced by the typed scalar read() made, in a table the
-- kernel reuses.
function arguments.converted(kernel, ...)
  local list, scalars = kernel.arguments, kernel.scalars
  for index = 1, kernel.arity do
    list[index] = scalars[index] or select(index, ...)
    scalars[index] = nil
  end
  return table.unpack(list, 1, kernel.arity)
end

-- Whether every buffer among the arguments is `bytes`-aligned.
function arguments.aligned(kernel, bytes, ...)
  for index = 1, kernel.arity do
    local arg = select(index, ...)
    if type_name(arg) == "gpurun.Buffer" and arg.ptr % bytes ~= 0 then
      return false
    end
  end
  return true
end

-- Checks the parameter list, names unique, and collects the type
-- variables. `what` starts the messages.
function arguments.collect(kernel, what)
  local seen, variables = {}, {}
  for _, param in ipairs(kernel.params) do
    if seen[param.name] then
      raise(("%s: parameter name '%s' is used twice"):format(what, param.name))
    end
    seen[param.name] = true
    if param.variable and not variables[param.type] then
      variables[param.type] = true
      kernel.type_variables[#kernel.type_variables + 1] = param.type
    end
  end
  kernel.arity = #kernel.params
end

-- A library call's options table checked against the keys it knows: the
-- table, or {} for nil.
function arguments.check_options(fname, n, options, known)
  if options == nil then return {} end
  if not common.is_plain_table(options) then
    common.bad_argument(fname, n, "options table expected, got %s", type_name(options))
  end
  local why = options_rule.unknown(options, known)
  if why then common.bad_argument(fname, n, "%s", why) end
  return options
end

-- The stream a library call goes on: options.stream (a Stream, or a
-- GraphBuilder that is building), else the current stream.
function arguments.stream_option(fname, n, options)
  local target = options and rawget(options, "stream")
  if target == nil then target = gpurun.current_stream() end
  if target == nil then
    common.bad_argument(fname, n, "no stream: pass { stream = s } or call gpurun.set_current_stream(s)")
  end
  local kind = type_name(target)
  if kind ~= "gpurun.Stream" and kind ~= "gpurun.GraphBuilder" then
    common.bad_argument(fname, n, "options.stream must be a gpurun.Stream or gpurun.GraphBuilder, got %s",
                        kind)
  end
  return target
end

-- The target argument (1) of a function that launches: a Stream or a
-- GraphBuilder.
function arguments.check_target(fname, target)
  local kind = type_name(target)
  if kind ~= "gpurun.Stream" and kind ~= "gpurun.GraphBuilder" then
    common.bad_argument(fname, 1, "gpurun.Stream or gpurun.GraphBuilder expected, got %s", kind)
  end
  if kind == "gpurun.Stream" then
    local _ = target.device -- a closed stream raises here, before the other arguments
  end
end

-- Why a buffer of `dtype` cannot be one the generators take, or nil;
-- `takers` says who in the message ("reductions take ...").
function arguments.dtype_problem(what, dtype, takers)
  if not DTYPES[dtype] then
    return ("%s has dtype %s; %s take %s"):format(what, dtype, takers, common.DTYPE_NAMES)
  end
  if DTYPES[dtype].kind == "complex" then
    return ("%s has dtype %s; %s take real dtypes, not complex ones"):format(what, dtype, takers)
  end
  return nil
end

-- Argument n, an open Buffer of a dtype the generators know.
function arguments.check_buffer(fname, n, value, what, takers)
  if type_name(value) ~= "gpurun.Buffer" then
    common.bad_argument(fname, n, "gpurun.Buffer expected for %s, got %s", what, type_name(value))
  end
  local _ = #value -- a closed buffer raises here
  local why = arguments.dtype_problem(what, value.dtype, takers)
  if why then common.bad_argument(fname, n, "%s", why) end
end

return arguments
