-- How a stage's arguments become what its launch takes: data as the
-- buffers behind them (a temporary's from the pool while a run or capture
-- makes it, a view made once per base buffer), scalars as typed scalars
-- made once per value. The stage kinds' compile functions use these.
local gpurun = require("gpurun")
local common = require("gpurun.common")

local raise = common.raise
local DTYPES = common.DTYPES

local launch_arguments = {}

-- The typed scalar of `dtype` for a scalar's value, made once per value.
function launch_arguments.typed(scalar, dtype)
  local value = scalar.typed[dtype]
  if value == nil then
    local make = gpurun[DTYPES[dtype].scalar]
    local number = scalar.value
    if not DTYPES[dtype].float then
      number = math.tointeger(number) or raise(("scalar '%s' is %s, not an integer (a %s "
        .. "parameter takes it)"):format(scalar.name, tostring(number), dtype))
    end
    value = make(number)
    scalar.typed[dtype] = value
  end
  return value
end
local typed = launch_arguments.typed

-- The buffer behind data, in `state` (a compiled schedule's: its temporaries
-- and views).
function launch_arguments.buffer_of(state, data)
  if data.buffer then
    return data.buffer
  elseif not data.parent then
    local buffer = state.temps[data]
    if not buffer then
      raise(("temporary '%s' has no memory now (fusion keeps it in registers, or a pool makes it "
             .. "only while the pipeline runs)"):format(data.name))
    end
    return buffer
  end
  local base = launch_arguments.buffer_of(state, data.parent)
  local cached = state.views[data]
  if cached and cached.base == base then
    return cached.view
  end
  local view = base:view(data.offset + 1, data.count)
  state.views[data] = { base = base, view = view }
  return view
end
local buffer_of = launch_arguments.buffer_of

-- A raw kernel's scalar: typed when the scalar has a dtype, else the Lua
-- number (an integral float as an integer where the parameter is one).
function launch_arguments.raw_scalar(scalar, param)
  if scalar.dtype then
    return typed(scalar, scalar.dtype)
  end
  if param.kind ~= "integer" then
    return scalar.value
  end
  return math.tointeger(scalar.value) or scalar.value
end

-- The dtype a kernel object's parameter takes a scalar as.
function launch_arguments.call_dtype(scalar, param)
  if param.variable then
    if not scalar.dtype then
      raise(("scalar '%s' goes to parameter %s of type %s: give the scalar a dtype "
             .. "(p:scalar(name, value, dtype))"):format(scalar.name, param.name, param.type))
    end
    return scalar.dtype
  end
  return param.type
end

-- A constant number for a kernel object's parameter, typed once (a Lua
-- number would make a typed scalar at every call).
function launch_arguments.call_constant(value, param)
  if type(value) == "number" and not param.variable and DTYPES[param.type] then
    local dtype = DTYPES[param.type]
    local number = dtype.float and value or math.tointeger(value)
    if number ~= nil then
      return gpurun[dtype.scalar](number)
    end
  end
  return value
end

-- Fills `into` with arguments as a launch takes them: data as buffers,
-- scalars through scalar_of(scalar, position), constants as they are.
function launch_arguments.resolve(state, args, into, scalar_of)
  for position, arg in ipairs(args) do
    if arg.data then
      into[position] = buffer_of(state, arg.data)
    elseif arg.scalar then
      into[position] = scalar_of(arg.scalar, position)
    else
      into[position] = arg.constant
    end
  end
  return into
end

return launch_arguments
