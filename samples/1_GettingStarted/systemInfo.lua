-- systemInfo.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- systemInfo (cuda.core.system over NVML). Prints the driver's and NVML's
-- versions, the current process's name, every GPU as NVML reports it
-- (name, UUID, compute capability, architecture, brand, memory, PCI
-- address, temperature, performance state) and, with two GPUs or more,
-- the topology and peer-to-peer status of each pair. Reads NVML only: it
-- makes no CUDA context.
--
--   gpurun samples/1_GettingStarted/systemInfo.lua [--no-topology]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local system = gpurun.system

local cli = args.new("systemInfo.lua", "Print CUDA system / NVML information via gpurun.system.")
cli:flag("--no-topology", "Skip cross-device topology/P2P queries.")
local options = cli:parse(arg)

local problem, code = args.device_problem(0, gpurun.device_count(), gpurun.driver_error())
if problem then
  io.stderr:write("systemInfo.lua: ", problem, "\n")
  os.exit(code, true)
end

local function print_header(title)
  print()
  print(("="):rep(70))
  print(title)
  print(("="):rep(70))
end

local function format_bytes(bytes)
  local size = bytes + 0.0
  for _, unit in ipairs({ "B", "KiB", "MiB", "GiB", "TiB" }) do
    if size < 1024 then return ("%.2f %s"):format(size, unit) end
    size = size / 1024
  end
  return ("%.2f PiB"):format(size)
end

-- label: value, or label: unavailable (why) where NVML has no answer.
local function line(label, value, format)
  if value == nil then
    print(("%s: unavailable (not supported on this device)"):format(label))
  else
    print(("%s: " .. (format or "%s")):format(label, value))
  end
end

-- This process's id, as Python's os.getpid() gives it.
local function pid()
  local stat = assert(io.open("/proc/self/stat"))
  local id = stat:read("n")
  stat:close()
  return id
end

local function print_driver_info()
  print_header("Driver / NVML")
  print(("CUDA driver version: %d.%d"):format(system.get_driver_version()))
  print(("CUDA driver version (full): (%d, %d, %d)"):format(system.get_driver_version_full()))
  print("NVML version: " .. system.get_nvml_version())
  local ok, branch = pcall(system.get_driver_branch)
  if ok and branch then
    print("Driver branch: " .. branch)
  else
    print(("Driver branch: unavailable (%s)"):format(ok and "this NVML cannot say" or branch))
  end
  print("Current process: " .. tostring(system.get_process_name(pid())))
end

local function print_device_info(device)
  print(("\n-- Device %d --"):format(device.index))
  line("Name", device.name)
  line("UUID", device.uuid)
  local cc = device.cuda_compute_capability
  line("Compute capability", cc and ("%d.%d"):format(cc.major, cc.minor))
  line("Architecture", device.arch)
  line("Brand", device.brand)
  local memory = device.memory_info
  line("Memory", memory and ("total=%s, used=%s, free=%s"):format(format_bytes(memory.total),
    format_bytes(memory.used), format_bytes(memory.free)))
  local pci = device.pci_info
  line("PCI", pci and ("domain=%04x bus=%02x device=%02x id=%s"):format(pci.domain, pci.bus,
    pci.device, pci.bus_id))
  line("Temperature (GPU sensor)", device.temperature, "%d C")
  line("Performance state", device.performance_state)
end

local function print_topology(devices)
  if #devices < 2 then return end
  print_header("GPU topology and peer-to-peer")
  for i = 1, #devices - 1 do
    for j = i + 1, #devices do
      local d0, d1 = devices[i], devices[j]
      local function name(value) return value or "unavailable (not supported)" end
      print(("Device %d <-> Device %d: topology=%s, p2p_read=%s, p2p_write=%s"):format(d0.index,
        d1.index, name(system.get_topology_common_ancestor(d0, d1)),
        name(system.get_p2p_status(d0, d1, "read")), name(system.get_p2p_status(d0, d1, "write"))))
    end
  end
end

print_driver_info()
local devices = system.devices()
print_header(("Devices detected: %d"):format(#devices))
if #devices == 0 then
  print("No CUDA-capable devices found.")
  os.exit(0)
end
for _, device in ipairs(devices) do print_device_info(device) end
if not options.no_topology then print_topology(devices) end
print("\nDone")
