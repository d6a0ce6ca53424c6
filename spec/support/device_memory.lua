-- What the specs that check freeing read: the device memory this process
-- holds, as nvidia-smi reports it per process, so that nothing else on the
-- GPU moves it. Where nvidia-smi is missing or does not list this process
-- (a container's PID namespace), the device's free memory
-- (gpurun.mem_info) stands in, which every process on the GPU moves: a
-- sanitizer run or another suite beside this one moves it by hundreds of
-- MiB while a try runs. A leak stays, so one try in five that ends where
-- it began is enough, and a spec makes each try leak far more than that
-- noise if it leaks at all.
local gpurun = require("gpurun")

local device_memory = {}

local MiB = 1 << 20

local function own_pid()
  local file = io.open("/proc/self/stat")
  if not file then return nil end
  local pid = file:read("n")
  file:close()
  return math.tointeger(pid)
end

-- This process's device memory in bytes (MiB resolution), or nil.
local function own_used(pid)
  local pipe = io.popen("nvidia-smi --query-compute-apps=pid,used_memory --format=csv,noheader,nounits 2>/dev/null")
  if not pipe then return nil end
  local text = pipe:read("a")
  pipe:close()
  for line in text:gmatch("[^\n]+") do
    local listed, mib = line:match("^%s*(%d+)%s*,%s*(%d+)%s*$")
    if math.tointeger(tonumber(listed)) == pid then return math.tointeger(tonumber(mib)) * MiB end
  end
  return nil
end

-- reading() -> bytes in use (greater means more held), and what was read.
local function reader()
  local pid = own_pid()
  if pid and own_used(pid) then
    return function() return own_used(pid) end, "this process's device memory (nvidia-smi)"
  end
  return function()
    local free, total = gpurun.mem_info()
    return total - free
  end, "the device's used memory (every process's)"
end

-- settles(what, leak, cycle): runs cycle() up to five times until the
-- memory in use ends within half of leak bytes (what one try holds on to
-- if it leaks) of where that try began; raises naming what, what was read
-- and each try's move otherwise.
function device_memory.settles(what, leak, cycle)
  local tolerance = leak // 2
  local reading, source = reader()
  local moves = {}
  for attempt = 1, 5 do
    collectgarbage("collect")
    local before = reading()
    cycle()
    local moved = reading() - before
    if math.abs(moved) <= tolerance then
      return
    end
    moves[attempt] = ("%.1f"):format(moved / MiB)
  end
  error(("%s moved by %s MiB after %s (five tries)"):format(source, table.concat(moves, ", "), what), 2)
end

return device_memory
