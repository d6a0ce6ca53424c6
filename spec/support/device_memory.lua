-- What the specs that check freeing read: the device's free memory
-- (gpurun.mem_info), which every process on the GPU moves, the sanitizer
-- runs that share it during tools/gpu-check.sh among them. A leak stays,
-- so one try in three that ends where it began is enough.
local gpurun = require("gpurun")

local device_memory = {}

-- settles(what, cycle [, tolerance]): runs cycle() up to three times until
-- free memory ends within tolerance bytes (default 4 MiB) of where that
-- try began; raises naming what and each try's move otherwise.
function device_memory.settles(what, cycle, tolerance)
  tolerance = tolerance or 4 << 20
  local moves = {}
  for attempt = 1, 3 do
    collectgarbage("collect")
    local before = gpurun.mem_info()
    cycle()
    local moved = before - gpurun.mem_info()
    if math.abs(moved) <= tolerance then
      return
    end
    moves[attempt] = ("%.1f"):format(moved / (1 << 20))
  end
  error(("free memory moved by %s MiB after %s (three tries)"):format(table.concat(moves, ", "), what), 2)
end

return device_memory
