-- Runs samples/2_CoreConcepts/processCheckpoint.lua against stand-ins for
-- the GPU and the driver's checkpoint calls, so that its refusal paths run
-- on a machine without either. REFUSE names the checkpoint call that the
-- stand-in driver refuses ("state", "lock", ...; none: all succeed).
local gpurun = require("gpurun")

local REFUSE = os.getenv("REFUSE")
local PATTERN = ("\1\2\3\4"):rep(64)
local closable = { __close = function() end }
local state = "running"

local function call(name, driver_name, after)
  return function()
    if REFUSE == name then
      error("cuCheckpointProcess" .. driver_name .. ": CUDA_ERROR_NOT_SUPPORTED (operation not supported)", 0)
    end
    if after then state = after end
    return state
  end
end

gpurun.device_count = function() return 1 end
gpurun.driver_error = function() return nil end
gpurun.Device = function()
  return { name = "Stand-in GPU", arch = "90", set_current = function() end,
           create_stream = function() return setmetatable({ sync = function() end }, closable) end }
end
gpurun.Program = function()
  return { compile = function() return setmetatable({ get_kernel = function() return {} end }, closable) end }
end
gpurun.launch = function() end
gpurun.LaunchConfig = function(config) return config end
gpurun.u64 = function(value) return value end
gpurun.empty = function() return setmetatable({ to_bytes = function() return PATTERN end }, closable) end
gpurun.checkpoint = { state = call("state", "GetState"), lock = call("lock", "Lock", "locked"),
                      checkpoint = call("checkpoint", "Checkpoint", "checkpointed"),
                      restore = call("restore", "Restore", "locked"), unlock = call("unlock", "Unlock", "running") }

-- The port reads its options from the global arg, as a script run by gpurun does.
_G.arg = { [0] = "processCheckpoint.lua" }
dofile("samples/2_CoreConcepts/processCheckpoint.lua")
