-- A generated kernel's call arguments, read against its parameters: what
-- gpurun.elementwise kernels and gpurun.reduction kernels share. A kernel
-- here is a table with `kind` ("elementwise kernel", "reduction kernel"),
-- `name`, `params` ({ name, type, variable, output, result }), `arity`,
-- `input_count`, `type_variables`, and the tables this module fills and
-- reuses: `bound` (type variable -> dtype for the call in progress),
-- `variants` (the tree of signatures seen) and `arguments` (converted
-- arguments). Buffers of inputs and of outputs that are not `result`s
-- must all have one size, n; a `result` output (a reduction's one value
-- per segment) is sized by its kernel instead.

local gpurun = require("gpurun")
local source = require("gpurun.compute.elementwise_source")

local DTYPES = source.DTYPES
local raise = source.raise

local arguments = {}

local SCALAR_DTYPE = { f32 = "float32", f64 = "float64", i32 = "int32", u32 = "uint32",
                       i64 = "int64", u64 = "uint64" }
local SCALAR_TAG = {}  -- dtype -> the lookup key of a scalar of it
for dtype in pairs(DTYPES) do
  SCALAR_TAG[dtype] = dtype .. " scalar"
end

local function type_name(value)
  local meta = getmetatable(value)
  return type(meta) == "table" and type(meta.__name) == "string" and meta.__name or type(value)
end
arguments.type_name = type_name

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
      kernel.bound[param.type] = dtype
    elseif bound ~= dtype then
      param_error(kernel, index, "%s is %s, but %s is %s here", param.type, bound,
                  carrier(dtype, scalar_type), dtype)
    end
  elseif param.type ~= dtype then
    param_error(kernel, index, "expected %s, got %s", param.type, carrier(dtype, scalar_type))
  end
end

-- A typed scalar for an int8 or uint8 parameter comes as i32 or u32.
local function scalar_dtype_for(param_dtype, scalar_type)
  local dtype = SCALAR_DTYPE[scalar_type]
  if (param_dtype == "int8" and dtype == "int32") or (param_dtype == "uint8" and dtype == "uint32") then
    return param_dtype
  end
  return dtype
end

function arguments.dtype_of(kernel, index)
  local param = kernel.params[index]
  return param.variable and kernel.bound[param.type] or param.type
end
local dtype_of = arguments.dtype_of

-- A Lua number as its parameter takes it (a float, or an exact integer in
-- range), or an error.
function arguments.number_for(kernel, index, value)
  local dtype = dtype_of(kernel, index)
  local info = DTYPES[dtype]
  if info.float then
    if dtype == "float32" and value == value and math.abs(value) ~= math.huge
       and math.abs(value) > 3.4028234663852886e38 then
      param_error(kernel, index, "%s is out of float32 range", tostring(value))
    end
    return value + 0.0
  end
  local integer = math.tointeger(value)
  if integer == nil then
    param_error(kernel, index, "%s is not an integer", tostring(value))
  end
  if integer < info.min or integer > info.max then
    param_error(kernel, index, "%d is out of %s range", integer, dtype)
  end
  return integer
end
local number_for = arguments.number_for

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
-- passed), the device, whether a Lua number is among them, and the first
-- `result` buffer's parameter index.
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
      param_error(kernel, index, "an output must be a gpurun.Buffer, got %s", kind)
    elseif kind == "gpurun.Scalar" then
      local wanted = param.variable and bound[param.type] or param.type
      local scalar_type = arg.type
      match_dtype(kernel, index, scalar_dtype_for(wanted, scalar_type), scalar_type)
    elseif kind == "number" then
      numbers = true
    else
      param_error(kernel, index, "a gpurun.Buffer, a gpurun scalar or a number "
                  .. "expected, got %s", kind)
    end
  end
  if numbers then
    for index = 1, kernel.arity do
      local param = kernel.params[index]
      local arg = select(index, ...)
      if type(arg) == "number" then
        if param.variable and not bound[param.type] then
          param_error(kernel, index, "a Lua number does not say what %s is: pass a "
                      .. "buffer or a typed scalar (gpurun.f32(x), ...) for a %s parameter",
                      param.type, param.type)
        end
        number_for(kernel, index, arg)
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
            kernel.kind, kernel.name, variable, source.DTYPE_NAMES))
    end
    signature.bindings[variable] = dtype
  end
  for index, param in ipairs(kernel.params) do
    signature.dtypes[index] = param.variable and signature.bindings[param.type] or param.type
  end
  return signature
end

-- Typed scalars for int8/uint8 parameters are range-checked here; the rest
-- is gpurun's own launch check.
function arguments.check_small_scalars(kernel, ...)
  for index = 1, kernel.input_count do
    local arg = select(index, ...)
    local info = DTYPES[dtype_of(kernel, index)]
    if info.passed_as and type_name(arg) == "gpurun.Scalar" then
      local value = arg.value
      if value < info.min or value > info.max then
        param_error(kernel, index, "%d is out of %s range", value,
                    dtype_of(kernel, index))
      end
    end
  end
end

-- The arguments with every Lua number replaced by its typed scalar, in a
-- table the kernel reuses.
function arguments.converted(kernel, ...)
  local list = kernel.arguments
  for index = 1, kernel.arity do
    local arg = select(index, ...)
    if type(arg) == "number" then
      arg = gpurun[DTYPES[dtype_of(kernel, index)].scalar](number_for(kernel, index, arg))
    end
    list[index] = arg
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

return arguments
