-- The stage kind "copy": Buffer:copy_from (or copy_to a PinnedBuffer)
-- between two data of one size and dtype, declared by p:copy.
local common = require("gpurun.common")
local declare = require("gpurun.pipeline.declare")
local launch_arguments = require("gpurun.pipeline.launch_arguments")

local raise = common.raise

local kind = { name = "copy", method = "copy" }

-- copy(destination, source [, options]).
function kind.declare(p, destination, from, options)
  options = declare.stage_options(p, options, "copy")
  local dst = declare.resolve_data(p, destination, "copy destination")
  local src = declare.resolve_data(p, from, "copy source")
  local name = options.name or ("copy %s <- %s"):format(dst.name, src.name)
  for _, d in ipairs({ dst, src }) do
    if not d.count then
      raise(("pipeline '%s': stage '%s': '%s' is a table; copies take buffers"):format(p.name,
            name, d.name))
    end
  end
  if dst.host and src.host then
    raise(("pipeline '%s': stage '%s': a copy between two host buffers is not GPU work"):format(
          p.name, name))
  end
  if dst.count ~= src.count or dst.dtype ~= src.dtype then
    raise(("pipeline '%s': stage '%s': '%s' is %d x %s and '%s' %d x %s (a copy takes two of one "
           .. "size and dtype: copy views for a part)"):format(p.name, name, dst.name, dst.count,
           tostring(dst.dtype), src.name, src.count, tostring(src.dtype)))
  end
  local stage = { name = name, dst = dst, src = src, count = dst.count }
  stage.accesses, stage.declared = declare.accesses_of(p, name, {
    { data = src, mode = "r", how = "copy source", const = true },
    { data = dst, mode = "w", how = "copy destination" },
  }, declare.read_overrides(p, options, ("stage '%s'"):format(name)))
  return stage
end

function kind.compile(stage, runnable, state)
  local dst, src, args = stage.dst, stage.src, runnable.args
  local buffer_of = launch_arguments.buffer_of
  runnable.refresh = function()
    args[1], args[2] = buffer_of(state, dst), buffer_of(state, src)
  end
  if dst.host then
    runnable.launch = function(target) args[2]:copy_to(args[1], target) end
  else
    runnable.launch = function(target) args[1]:copy_from(args[2], target) end
  end
end

-- A copy splits by elements: each device copies its slices.
function kind.split(stage)
  return function(slice)
    local reads, writes = slice:declared(stage)
    return kind.declare(slice.pipeline, slice.map[stage.dst], slice.map[stage.src],
                        { name = stage.name, reads = reads, writes = writes })
  end
end

return kind
