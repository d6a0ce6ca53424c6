-- The stage kind "host": a Lua function run on the main thread at its
-- point of the stream order (gpurun.HostCallback), declared by p:host.
local gpurun = require("gpurun")
local common = require("gpurun.common")
local declare = require("gpurun.pipeline.declare")

local raise = common.raise
local type_name = common.type_name

local kind = { name = "host", method = "host" }

-- host(fn [, options]): fn() runs while the script waits for the
-- pipeline; it must not call into the GPU. Without reads or writes it is a
-- barrier: it reads and writes every declared data.
function kind.declare(p, fn, options)
  options = declare.stage_options(p, options, "host")
  if type(fn) ~= "function" then
    raise(("pipeline '%s': host: a function expected, got %s"):format(p.name, type_name(fn)))
  end
  local name = options.name or "host"
  local declared = declare.read_overrides(p, options, ("stage '%s'"):format(name))
  local stage = { name = name, fn = fn, barrier = next(declared) == nil }
  stage.accesses, stage.declared = declare.accesses_of(p, name, {}, declared)
  return stage
end

-- The accesses the schedule sees: a barrier's are every data the
-- pipeline has when it is planned.
function kind.accesses(p, stage)
  if not stage.barrier then
    return stage.accesses
  end
  local list = {}
  for _, d in ipairs(p.data) do
    list[#list + 1] = { data = d, mode = "rw", maybe_read = true,
                        how = "a host callback without reads or writes: a barrier" }
  end
  return list
end

function kind.compile(stage, runnable, state)
  local callback = gpurun.HostCallback(stage.fn)
  state.callbacks[#state.callbacks + 1] = callback
  runnable.refresh = function() end
  runnable.launch = function(target) callback:launch(target) end
end

-- Host work is not split across devices.
function kind.split()
  return nil, "a host callback"
end

return kind
