-- The stage kind "kernel": a raw gpurun.Kernel with its LaunchConfig,
-- declared by p:launch. Its pointer arguments' accesses come from the
-- kernel's declaration in its source (const: read; pipeline/access.lua),
-- overridden by reads and writes.
local gpurun = require("gpurun")
local common = require("gpurun.common")
local access = require("gpurun.pipeline.access")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

-- A raw kernel's code is the user's: it follows a kernel, but is launched
-- as after one only if its own code waits (no after_kernel).
local kind = { name = "kernel", method = "launch", launches_kernel = true }

-- What the declaration reads of a gpurun.Kernel, or nil and why it cannot:
-- closed, or a table whose metatable only names it one.
local function kernel_fields(kernel)
  local ok, name, count, params, source = pcall(function()
    return kernel.name, kernel.num_params, kernel:params(), kernel.source
  end)
  if not ok and type(kernel) == "userdata" then
    return nil, common.error_text(name) -- its own message (closed)
  end
  if not ok or type(name) ~= "string" or math.type(count) ~= "integer" or type(params) ~= "table" then
    return nil, ("a gpurun.Kernel expected first, got %s named gpurun.Kernel"):format(type(kernel))
  end
  for position = 1, count do
    if type(params[position]) ~= "table" then
      return nil, ("a gpurun.Kernel expected first, got %s named gpurun.Kernel"):format(type(kernel))
    end
  end
  return { name = name, count = count, params = params, source = source }
end

-- launch(kernel, config, args...) or launch{ kernel, config, args...,
-- name =, reads = { ... }, writes = { ... } }.
function kind.declare(p, ...)
  local spec, count = declare.stage_spec(p, "launch", ...)
  local kernel, config = spec[1], spec[2]
  if type_name(kernel) ~= "gpurun.Kernel" then
    raise(("pipeline '%s': launch: a gpurun.Kernel expected first, got %s"):format(p.name,
          type_name(kernel)))
  end
  local fields, problem = kernel_fields(kernel)
  if not fields then
    raise(("pipeline '%s': launch: %s"):format(p.name, problem))
  end
  if type_name(config) ~= "gpurun.LaunchConfig" then
    raise(("pipeline '%s': launch of '%s': a gpurun.LaunchConfig expected second, got %s"):format(
          p.name, fields.name, type_name(config)))
  end
  local name = spec.name or fields.name
  local what = ("stage '%s'"):format(name)
  if count - 2 ~= fields.count then
    raise(("pipeline '%s': %s: kernel '%s' takes %d arguments, got %d"):format(p.name, what,
          fields.name, fields.count, count - 2))
  end
  local declaration, why = access.declaration(fields.source, fields.name)
  if declaration and #declaration ~= fields.count then
    declaration, why = nil, ("its declaration lists %d parameters, the PTX %d"):format(
      #declaration, fields.count)
  end
  local params = fields.params
  local args, positions = {}, {}
  for position = 1, count - 2 do
    local param_name = declaration and declaration[position].text:match("([%a_][%w_]*)%s*$")
    local arg = declare.argument(p, spec[position + 2], param_name,
                                 ("%s: argument %d"):format(what, position))
    if arg.unknown_name and params[position].kind ~= "aggregate" then
      raise(("pipeline '%s': %s: argument %d, '%s', names no declared data or scalar"):format(
            p.name, what, position, arg.value))
    end
    if not arg.data then
      -- Refused now what the launch would refuse: the argument it would
      -- pass, checked by the launch's own check.
      local value = arg.value
      if arg.scalar then value = launch_arguments.raw_scalar(arg.scalar, params[position]) end
      local ok, err = pcall(kernel.check_argument, kernel, position, value)
      if not ok then
        raise(("pipeline '%s': %s: argument %d: %s"):format(p.name, what, position,
              common.error_text(err)))
      end
    end
    if arg.data then
      if params[position].pointer == false then
        raise(("pipeline '%s': %s: argument %d is data ('%s'), but parameter %d (%s) is not a "
               .. "pointer"):format(p.name, what, position, arg.data.name, position,
               params[position].type or "?"))
      end
      if arg.data.host then
        raise(("pipeline '%s': %s: argument %d ('%s') is host memory; a kernel takes device "
               .. "buffers"):format(p.name, what, position, arg.data.name))
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
  local stage = { name = name, kernel = kernel, config = config, args = args, params = params }
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
                                                       declare.read_overrides(p, spec, what))
  return stage
end

-- What explain() says of an access it inferred: why (the source's
-- declaration of the parameter).
function kind.describe(a)
  return a.how
end

function kind.compile(stage, runnable, state)
  local kernel, config, params, args = stage.kernel, stage.config, stage.params, runnable.args
  for _, arg in ipairs(stage.args) do
    arg.constant = arg.value
  end
  local function scalar_of(scalar, position)
    return launch_arguments.raw_scalar(scalar, params[position])
  end
  runnable.refresh = function() launch_arguments.resolve(state, stage.args, args, scalar_of) end
  runnable.arity = #stage.args
  runnable.launch = function(target)
    gpurun.launch(target, config, kernel, table.unpack(args, 1, runnable.arity))
  end
  -- Its one node takes each scalar at its position, as raw_scalar types it.
  runnable.node_slots = function()
    local slots = {}
    for position, arg in ipairs(stage.args) do
      if arg.scalar then
        slots[position] = { scalar = arg.scalar, param = params[position] }
      end
    end
    return { { kernel = kernel, slots = slots } }
  end
end

-- A raw kernel does not say how its work splits by elements
-- (pipeline/devices.lua).
function kind.split()
  return nil, "a raw kernel"
end

return kind
