-- Which specs can run here. Specs that need a GPU carry `#gpu` in their `it`
-- name; on a machine without a usable GPU they are excluded and counted, and
-- the summary says how many and why.
local gpurun = require("gpurun")

local gpu_tag = { excluded = 0 }

gpu_tag.device_count = gpurun.device_count()
gpu_tag.available = gpu_tag.device_count > 0
if not gpu_tag.available then
  gpu_tag.reason = gpurun.driver_error() or "the CUDA driver reports no device"
end

function gpu_tag.has_tag(name)
  return type(name) == "string" and name:find("#gpu", 1, true) ~= nil
end

-- Specs that need two or more devices carry `#multigpu` (and may carry
-- #gpu too); with fewer visible they are excluded and counted apart.
gpu_tag.multi_excluded = 0
gpu_tag.multi_available = gpu_tag.device_count >= 2
gpu_tag.multi_reason = ("%d CUDA device(s) visible, these need 2 or more"):format(gpu_tag.device_count)

function gpu_tag.has_multi_tag(name)
  return type(name) == "string" and name:find("#multigpu", 1, true) ~= nil
end

return gpu_tag
