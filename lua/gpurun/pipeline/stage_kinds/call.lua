-- The stage kind "call": a kernel object with params (gpurun.elementwise
-- kernels and pipelines, reductions), declared by p:call and called as
-- kernel(target, args...). An input is read, an output written (read and
-- written when its operation reads it first); an elementwise kernel whose
-- operation is one `out = expression` may fuse with its neighbours.
local common = require("gpurun.common")
local arguments = require("gpurun.compute.arguments")
local access = require("gpurun.pipeline.access")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "call", method = "call", launches_kernel = true }

-- Elementwise kernels and their pipelines are generated with the wait for
-- the kernel before (compute/elementwise_source.lua's GRID_DEPENDENCY).
function kind.after_kernel(stage)
  return access.is_elementwise_kernel(stage.kernel) or access.is_elementwise_pipeline(stage.kernel)
end

-- Why the call would refuse scalar s for `param` when it runs (the
-- value it holds now), or nil.
local function scalar_problem(param, scalar)
  if param.variable then
    if not scalar.dtype then
      return ("scalar '%s' goes to parameter %s of type %s: give the scalar a dtype "
              .. "(p:scalar(name, value, dtype))"):format(scalar.name, param.name, param.type)
    end
    return nil
  end
  if not common.DTYPES[param.type] then
    return nil
  end
  local why = select(2, common.typed_scalar(scalar.value, param.type))
  return why and ("scalar '%s': %s"):format(scalar.name, why)
end

-- Refuses at declaration what the call would refuse when it runs: each
-- argument checked as the kernel object's launch checks it
-- (gpurun.compute.arguments), buffers' dtypes and sizes against its
-- parameters for an elementwise kernel. Returns the element count.
local function check_args(p, kernel, args, what, elementwise_kernel)
  local count
  for position, param in ipairs(kernel.params) do
    local arg = args[position]
    if arg.unknown_name then
      raise(("pipeline '%s': %s: argument %d (%s), '%s', names no declared data or scalar"):format(
            p.name, what, position, param.name, arg.value))
    end
    if param.output and not arg.data then
      raise(("pipeline '%s': %s: output %s must be data (a buffer, temporary or view), got %s")
            :format(p.name, what, param.name, type_name(arg.value)))
    end
    local why
    if arg.scalar then
      why = scalar_problem(param, arg.scalar)
    elseif not arg.data then
      why = arguments.value_problem(param, arg.value)
    end
    if why then
      raise(("pipeline '%s': %s: argument %d (%s %s): %s"):format(p.name, what, position,
            param.type, param.name, why))
    end
    if arg.data and arg.data.host then
      raise(("pipeline '%s': %s: %s ('%s') is host memory; the kernel takes device buffers")
            :format(p.name, what, param.name, arg.data.name))
    end
    if elementwise_kernel and arg.data then
      local d = arg.data
      if not param.variable and param.type ~= d.dtype then
        raise(("pipeline '%s': %s: %s is %s, but '%s' is %s"):format(p.name, what, param.name,
              param.type, d.name, tostring(d.dtype)))
      end
      if count and d.count ~= count then
        raise(("pipeline '%s': %s: '%s' has %d elements, but the kernel's other buffers %d")
              :format(p.name, what, d.name, d.count, count))
      end
      count = d.count
    end
  end
  return count
end

-- Why `kernel` is not a kernel object with params ({ name, type }
-- tables), or nil.
local function kernel_problem(kernel)
  if type(kernel) ~= "table" or not getmetatable(kernel) then
    return type_name(kernel)
  end
  local ok, params = pcall(function() return kernel.params end)
  if not ok or type(params) ~= "table" then
    return "a table without params"
  end
  for index, param in ipairs(params) do
    if type(param) ~= "table" or type(param.name) ~= "string" or type(param.type) ~= "string" then
      return ("a table whose params[%d] is not { name, type }"):format(index)
    end
  end
  return nil
end

-- call(kernel, args...) or call{ kernel, args..., name =, reads =, writes = }.
function kind.declare(p, ...)
  local spec, count = declare.stage_spec(p, "call", ...)
  local kernel = spec[1]
  local problem = kernel_problem(kernel)
  if problem then
    raise(("pipeline '%s': call: a kernel object with params (gpurun.elementwise, a reduction) "
           .. "expected first, got %s"):format(p.name, problem))
  end
  local name = spec.name or (type(kernel.name) == "string" and kernel.name) or "call"
  local what = ("stage '%s'"):format(name)
  if count - 1 ~= #kernel.params then
    local names = {}
    for index, param in ipairs(kernel.params) do names[index] = param.name end
    raise(("pipeline '%s': %s: %s takes %d arguments (%s), got %d"):format(p.name, what,
          common.quoted(kernel.name), #kernel.params, table.concat(names, ", "), count - 1))
  end
  local args, positions = {}, {}
  for position, param in ipairs(kernel.params) do
    args[position] = declare.argument(p, spec[position + 1], param.name,
                                      ("%s: argument %d (%s)"):format(what, position, param.name))
    if args[position].data then
      positions[#positions + 1] = position
    end
  end
  local elementwise_kernel = access.is_elementwise_kernel(kernel)
  local n = check_args(p, kernel, args, what, elementwise_kernel)
  local inferred = {}
  for position, item in pairs(access.from_params(kernel.params, positions)) do
    item.data = args[position].data
    inferred[#inferred + 1] = item
  end
  local state = declare.kernel_state(p, kernel)
  if state then
    inferred[#inferred + 1] = { data = state, mode = "w",
                                how = "the kernel's own temporaries: one call at a time" }
  end
  local stage = { name = name, kernel = kernel, args = args }
  stage.accesses, stage.declared = declare.accesses_of(p, name, inferred,
                                                       declare.read_overrides(p, spec, what))
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
  return stage
end

function kind.compile(stage, runnable, state)
  local kernel, args = stage.kernel, runnable.args
  for position, arg in ipairs(stage.args) do
    if arg.value ~= nil then
      arg.constant = launch_arguments.call_constant(arg.value, kernel.params[position])
    end
  end
  local function scalar_of(scalar, position)
    return launch_arguments.typed(scalar, launch_arguments.call_dtype(scalar, kernel.params[position]))
  end
  runnable.refresh = function() launch_arguments.resolve(state, stage.args, args, scalar_of) end
  runnable.arity = #stage.args
  runnable.object = kernel
  if runnable.unit.programmatic then
    runnable.launch = function(target)
      kernel:launch_after_kernel(target, table.unpack(args, 1, runnable.arity))
    end
  else
    runnable.launch = function(target) kernel(target, table.unpack(args, 1, runnable.arity)) end
  end
end

-- split(stage) -> declare_on(slice), which declares the stage again on a
-- device's slice (pipeline/devices.lua), or nil and why it cannot split:
-- elementwise kernels and pipelines split by elements (a reduction, or a
-- pipeline holding one, reduces over all of them).
function kind.split(stage)
  local kernel = stage.kernel
  if access.keeps_state(kernel) or not (access.is_elementwise_kernel(kernel)
                                        or access.is_elementwise_pipeline(kernel)) then
    return nil, "a kernel object that is not elementwise"
  end
  return function(slice)
    local spec = { kernel, name = stage.name }
    spec.reads, spec.writes = slice:declared(stage)
    for position, arg in ipairs(stage.args) do
      spec[position + 1] = arg.data and slice.map[arg.data] or arg.scalar and slice.map[arg.scalar]
        or arg.value
    end
    return kind.declare(slice.pipeline, spec)
  end
end

return kind
