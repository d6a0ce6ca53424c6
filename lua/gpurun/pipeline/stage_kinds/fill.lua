-- The stage kind "fill": Buffer:fill of device data, declared by p:fill.
local common = require("gpurun.common")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "fill", method = "fill" }

-- fill(destination, value [, options]).
function kind.declare(p, destination, value, options)
  options = declare.stage_options(p, options, "fill")
  local dst = declare.resolve_data(p, destination, "fill destination")
  local name = options.name or ("fill %s"):format(dst.name)
  if type(value) ~= "number" then
    raise(("pipeline '%s': stage '%s': the fill value must be a number, got %s"):format(p.name,
          name, type_name(value)))
  end
  if dst.host then
    raise(("pipeline '%s': stage '%s': '%s' is host memory; fills are device work"):format(
          p.name, name, dst.name))
  end
  -- Refused now what Buffer:fill would refuse when it runs: a value its
  -- dtype does not hold (gpurun's one rule, through the typed scalar).
  local why = select(2, common.typed_scalar(value, dst.dtype))
  if why then
    raise(("pipeline '%s': stage '%s': the fill value for '%s': %s"):format(p.name, name, dst.name,
          why))
  end
  local stage = { name = name, dst = dst, value = value }
  stage.accesses, stage.declared = declare.accesses_of(p, name,
    { { data = dst, mode = "w", how = "fill" } },
    declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

function kind.compile(stage, runnable, state)
  local dst, value, args = stage.dst, stage.value, runnable.args
  runnable.refresh = function() args[1] = launch_arguments.buffer_of(state, dst) end
  runnable.launch = function(target) args[1]:fill(value, target) end
end

-- A fill splits by elements: each device fills its slice.
function kind.split(stage)
  return function(slice)
    local reads, writes = slice:declared(stage)
    return kind.declare(slice.pipeline, slice.map[stage.dst], stage.value,
                        { name = stage.name, reads = reads, writes = writes })
  end
end

return kind
