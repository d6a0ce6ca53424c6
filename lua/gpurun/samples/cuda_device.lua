-- The C++ samples' device choice (helper_cuda.h's findCudaDevice): open the
-- device that --device names and print the line the originals print.
--
--   local device = require("gpurun.samples.cuda_device").open(cli, options.device)
local cuda_device = {}

-- open(cli, id) -> the opened gpurun.Device, after its line is printed.
function cuda_device.open(cli, id)
  local device = cli:open_device(id)
  local cc = device.compute_capability
  print(("GPU Device %d: \"%s\" with compute capability %d.%d\n"):format(id, device.name, cc.major, cc.minor))
  return device
end

return cuda_device
