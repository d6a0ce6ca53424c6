-- gpurun.system: the driver and every GPU as NVML sees them, with
-- cuda.core.system's names (get_driver_version, get_num_devices, Device,
-- get_topology_common_ancestor, get_p2p_status). The NVML calls are C's
-- (types/nvml.c); here are the checks, the units and NVML's numbers as
-- names. NVML opens on the first call that needs it; a query NVML does not
-- support on a device is a nil field.
--
-- A part of the `gpurun` module (see program_options.lua for the protocol).
return function(internal)
  local core = package.loaded["gpurun.nvml_core"] -- types/nvml.c, opened before the Lua parts
  local raise, type_name = internal.raise, internal.type_name

  -- NVML's enumerations, by the names nvml.h gives them less the prefix.
  local ARCHITECTURES = { [2] = "KEPLER", [3] = "MAXWELL", [4] = "PASCAL", [5] = "VOLTA",
    [6] = "TURING", [7] = "AMPERE", [8] = "ADA", [9] = "HOPPER", [10] = "BLACKWELL" }
  local BRANDS = { [0] = "UNKNOWN", "QUADRO", "TESLA", "NVS", "GRID", "GEFORCE", "TITAN",
    "NVIDIA_VAPPS", "NVIDIA_VPC", "NVIDIA_VCS", "NVIDIA_VWS", "NVIDIA_CLOUD_GAMING",
    "QUADRO_RTX", "NVIDIA_RTX", "NVIDIA", "GEFORCE_RTX", "TITAN_RTX" }
  local TOPOLOGY_LEVELS = { [0] = "INTERNAL", [10] = "SINGLE", [20] = "MULTIPLE",
    [30] = "HOSTBRIDGE", [40] = "NODE", [50] = "SYSTEM" }
  local P2P_STATUSES = { [0] = "OK", "CHIPSET_NOT_SUPPORTED", "GPU_NOT_SUPPORTED",
    "IOH_TOPOLOGY_NOT_SUPPORTED", "DISABLED_BY_REGKEY", "NOT_SUPPORTED", "UNKNOWN" }
  local P2P_CAPS = { read = 0, write = 1, nvlink = 2, atomics = 3, pci = 4 }
  local P2P_CAPS_TEXT = "read, write, nvlink, atomics or pci"

  local function named(names, value)
    if value == nil then return nil end
    return names[value] or ("UNKNOWN(%d)"):format(value)
  end

  local function loaded(name)
    local why = core.load()
    if why then raise(name .. ": " .. why) end
  end

  -- The device index (NVML's, 0-based) argument `position` gives, an
  -- index or a report of Device's; checked before NVML is opened.
  local function device_argument(name, position, ...)
    local value = select(position, ...)
    if type(value) == "table" and math.type(rawget(value, "index")) == "integer" then
      value = rawget(value, "index") -- a report is a plain table: no metamethod runs
    end
    if math.type(value) ~= "integer" then
      raise(("bad argument #%d to '%s' (device index or report of gpurun.system.Device expected, got %s)")
        :format(position, name, math.type(value) == "float" and "a number with a fraction"
          or type_name(select("#", ...) >= position and 1 or 0, value)))
    end
    return value
  end

  -- Opens NVML and refuses an index it does not see.
  local function existing(name, ...)
    loaded(name)
    local devices = core.device_count()
    for _, index in ipairs({ ... }) do
      if index < 0 or index >= devices then
        raise(("%s: device %d not found: NVML sees %d device(s)"):format(name, index, devices))
      end
    end
  end

  local system = {}

  -- nvml_error() -> nil where NVML opens, else the reason. Never raises.
  function system.nvml_error()
    return core.load()
  end

  -- get_driver_version() -> major, minor of the CUDA version the driver runs.
  function system.get_driver_version()
    loaded("gpurun.system.get_driver_version")
    local _, _, cuda = core.versions()
    return cuda // 1000, cuda % 1000 // 10
  end

  -- get_driver_version_full() -> major, minor, patch.
  function system.get_driver_version_full()
    loaded("gpurun.system.get_driver_version_full")
    local _, _, cuda = core.versions()
    return cuda // 1000, cuda % 1000 // 10, cuda % 10
  end

  -- get_kernel_mode_driver_version() -> "580.65.06"
  function system.get_kernel_mode_driver_version()
    loaded("gpurun.system.get_kernel_mode_driver_version")
    return (core.versions())
  end

  -- get_nvml_version() -> "13.580.65.06"
  function system.get_nvml_version()
    loaded("gpurun.system.get_nvml_version")
    local _, version = core.versions()
    return version
  end

  -- get_driver_branch() -> "r580_00", or nil where this NVML cannot say.
  function system.get_driver_branch()
    loaded("gpurun.system.get_driver_branch")
    return core.driver_branch()
  end

  function system.get_num_devices()
    loaded("gpurun.system.get_num_devices")
    return core.device_count()
  end

  -- get_process_name(pid) -> its name, or nil where NVML knows none.
  function system.get_process_name(...)
    local pid = ...
    if math.type(pid) ~= "integer" or pid < 0 or pid > 0xffffffff then
      raise(("bad argument #1 to 'gpurun.system.get_process_name' (process id expected, got %s)")
        :format(math.type(pid) and tostring(pid) or type_name(select("#", ...), pid)))
    end
    loaded("gpurun.system.get_process_name")
    return core.process_name(pid)
  end

  -- Device(index) -> the device's report, read now: a table of plain values.
  function system.Device(...)
    local index = device_argument("gpurun.system.Device", 1, ...)
    existing("gpurun.system.Device", index)
    local raw = core.device(index)
    local report = {
      index = index, name = raw.name, uuid = raw.uuid, pci_bus_id = raw.pci_bus_id,
      arch = named(ARCHITECTURES, raw.arch), brand = named(BRANDS, raw.brand),
      temperature = raw.temperature, performance_state = raw.performance_state,
      power_usage = raw.power_usage_mw and raw.power_usage_mw / 1000,
      power_limit = raw.power_limit_mw and raw.power_limit_mw / 1000,
      clocks = { sm = raw.clock_sm, memory = raw.clock_memory },
    }
    if raw.pci_bus_id then
      report.pci_info = { domain = raw.pci_domain, bus = raw.pci_bus, device = raw.pci_device,
        device_id = raw.pci_device_id, bus_id = raw.pci_bus_id }
    end
    if raw.memory_total then
      report.memory_info = { total = raw.memory_total, used = raw.memory_used, free = raw.memory_free }
    end
    if raw.cc_major then
      report.cuda_compute_capability = { major = raw.cc_major, minor = raw.cc_minor }
    end
    return report
  end

  -- devices() -> every device's report, in NVML's order.
  function system.devices()
    loaded("gpurun.system.devices")
    local reports = {}
    for index = 0, core.device_count() - 1 do reports[index + 1] = system.Device(index) end
    return reports
  end

  -- get_topology_common_ancestor(a, b) -> "INTERNAL", "SINGLE", "MULTIPLE",
  -- "HOSTBRIDGE", "NODE" or "SYSTEM", or nil.
  function system.get_topology_common_ancestor(...)
    local name = "gpurun.system.get_topology_common_ancestor"
    local first, second = device_argument(name, 1, ...), device_argument(name, 2, ...)
    existing(name, first, second)
    return named(TOPOLOGY_LEVELS, core.topology(first, second))
  end

  -- get_p2p_status(a, b [, "read"]) -> "OK" or why not, or nil.
  function system.get_p2p_status(...)
    local name = "gpurun.system.get_p2p_status"
    local first, second = device_argument(name, 1, ...), device_argument(name, 2, ...)
    local caps = select(3, ...)
    if caps ~= nil and P2P_CAPS[caps] == nil then
      raise(("bad argument #3 to '%s' (%s expected, got %s)"):format(name, P2P_CAPS_TEXT,
        type(caps) == "string" and ("'%s'"):format(caps) or type_name(1, caps)))
    end
    existing(name, first, second)
    return named(P2P_STATUSES, core.p2p_status(first, second, P2P_CAPS[caps or "read"]))
  end

  -- topology() -> { { a, b, level }, ... } for every pair of devices.
  function system.topology()
    loaded("gpurun.system.topology")
    local levels = {}
    local count = core.device_count()
    for a = 0, count - 2 do
      for b = a + 1, count - 1 do
        levels[#levels + 1] = { a, b, named(TOPOLOGY_LEVELS, core.topology(a, b)) }
      end
    end
    return levels
  end

  return { system = internal.guard(system) }
end
