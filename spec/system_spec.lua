-- gpurun.system over NVML: the one-line message where NVML is missing, the
-- reports read through a stand-in NVML (spec/support/fake_nvml.c) on any
-- machine, and the real NVML's answers on a GPU host.
local gpurun = require("gpurun")
local process = require("spec.support.process")

local FAKE = process.gpurun_bin():match("^(.*)/[^/]*$") .. "/spec/fake_nvml.so"

-- Runs a chunk in a fresh gpurun with env; returns its result.
local function run(chunk, env)
  return process.run(process.quote(process.gpurun_bin()) .. " -e " .. process.quote(chunk), { env = env })
end

describe("gpurun.system", function()
  it("says in one line why NVML cannot be loaded, and that it comes with the driver", function()
    local result = run([[print(require("gpurun").system.nvml_error())
      local ok, err = pcall(require("gpurun").system.get_num_devices)
      assert(not ok); io.stderr:write(err, "\n")]], { GPURUN_NVML_LIBRARY = "/nonexistent/libnvidia-ml.so.1" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("NVML could not be loaded (/nonexistent/libnvidia-ml.so.1: cannot open shared object "
      .. "file: No such file or directory): it comes with the NVIDIA driver; install the driver or set "
      .. "GPURUN_NVML_LIBRARY to the library's path\n", result.stdout)
    assert.matches("^%(command line%):%d+: gpurun%.system%.get_num_devices: NVML could not be loaded %(",
      result.stderr)
    assert.are.equal(1, select(2, result.stderr:gsub("\n", "")))
  end)

  it("says so where NVML is there but cannot start", function()
    local result = run([[print(require("gpurun").system.nvml_error())]],
      { GPURUN_NVML_LIBRARY = FAKE, FAKE_NVML_FAIL_INIT = "1" })
    assert.are.equal("NVML could not be initialised: nvmlInit_v2: NVML_ERROR_DRIVER_NOT_LOADED "
      .. "(fake error)\n", result.stdout)
  end)

  it("reads the versions, the devices and their topology, with nil where NVML has no answer", function()
    local result = run([[
      local system = require("gpurun").system
      assert(system.nvml_error() == nil)
      local report = { versions = { system.get_driver_version_full() },
        kernel = system.get_kernel_mode_driver_version(), nvml = system.get_nvml_version(),
        count = system.get_num_devices(), process = system.get_process_name(1),
        devices = system.devices(), topology = system.topology(),
        ancestor = system.get_topology_common_ancestor(0, system.Device(1)),
        read = system.get_p2p_status(0, 1), write = system.get_p2p_status(0, 1, "write") }
      report.major, report.minor = system.get_driver_version()
      local function dump(value, indent)
        if type(value) ~= "table" then return ("%q"):format(value) end
        local keys = {}
        for k in pairs(value) do keys[#keys + 1] = k end
        table.sort(keys, function(a, b) return tostring(a) < tostring(b) end)
        local parts = {}
        for _, k in ipairs(keys) do parts[#parts + 1] = tostring(k) .. "=" .. dump(value[k]) end
        return "{" .. table.concat(parts, ",") .. "}"
      end
      io.write(dump(report))]], { GPURUN_NVML_LIBRARY = FAKE })
    assert.are.equal(0, result.code, result.stderr)
    local text = result.stdout
    local function has(piece) assert.truthy(text:find(piece, 1, true), piece .. " in " .. text) end
    has("versions={1=13,2=0,3=0}")
    has('kernel="580.65.06"')
    has('nvml="13.580.65.06"')
    has("count=2")
    has('process="gpurun"')
    has("major=13")
    has("minor=0")
    has('ancestor="NODE"')
    has('read="OK"')
    has('write="NOT_SUPPORTED"')
    has('topology={1={1=0,2=1,3="NODE"}}')
    has('1={arch="HOPPER",brand="NVIDIA",clocks={memory=2619,sm=1980},cuda_compute_capability={major=9,minor=0},'
      .. 'index=0,memory_info={free=84825604096,total=85899345920,used=1073741824},name="Fake GPU 0",'
      .. 'pci_bus_id="00000000:19:00.0",pci_info={bus=25,bus_id="00000000:19:00.0",device=0,device_id=590680286,'
      .. 'domain=0},performance_state=0,power_limit=0x1.5ep+9,power_usage=0x1.1dp+6,temperature=34,'
      .. 'uuid="GPU-00000000-1111-2222-3333-444444444444"}')
    -- The second device supports neither temperature, power nor clocks.
    has('2={arch="HOPPER",brand="NVIDIA",clocks={},cuda_compute_capability={major=9,minor=0},index=1,')
    assert.falsy(text:match("2={[^\n]*temperature="))
  end)

  it("refuses a device NVML does not see, naming the count", function()
    local result = run([[print(pcall(require("gpurun").system.Device, 2))]], { GPURUN_NVML_LIBRARY = FAKE })
    assert.truthy(result.stdout:find("gpurun.system.Device: device 2 not found: NVML sees 2 device(s)", 1, true),
      result.stdout .. result.stderr)
  end)

  describe("on a GPU host", function()
    it("sees as many devices as gpurun #gpu", function()
      assert.is_nil(gpurun.system.nvml_error())
      assert.are.equal(gpurun.device_count(), gpurun.system.get_num_devices())
      local major, minor = gpurun.system.get_driver_version()
      local cuda_major, cuda_minor = gpurun.driver_version()
      assert.are.same({ cuda_major, cuda_minor }, { major, minor })
      assert.matches("^%d+%.%d+", gpurun.system.get_kernel_mode_driver_version())
    end)

    it("reports every device with a UUID, a PCI id and positive memory totals #gpu", function()
      local devices = gpurun.system.devices()
      assert.are.equal(gpurun.device_count(), #devices)
      local names = {}
      for ordinal = 0, gpurun.device_count() - 1 do names[gpurun.Device(ordinal).name] = true end
      for i, device in ipairs(devices) do
        assert.are.equal(i - 1, device.index)
        assert.matches("^GPU%-%x%x%x%x%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%-%x%x%x%x%x%x%x%x%x%x%x%x$", device.uuid)
        assert.matches("^%x+:%x%x:%x%x%.%x$", device.pci_bus_id)
        assert.truthy(names[device.name], device.name)
        assert.is_true(math.type(device.memory_info.total) == "integer" and device.memory_info.total > 0)
        assert.is_true(device.memory_info.used >= 0 and device.memory_info.free > 0)
        assert.is_true(device.memory_info.used + device.memory_info.free <= device.memory_info.total)
        assert.is_true(device.cuda_compute_capability.major >= 7)
        if device.temperature then assert.is_true(device.temperature > 0 and device.temperature < 120) end
        if device.power_usage then assert.is_true(device.power_usage > 0) end
        if device.performance_state then assert.is_true(device.performance_state >= 0) end
      end
    end)

    it("gives a topology level for every pair of devices #gpu", function()
      local levels = gpurun.system.topology()
      local count = gpurun.system.get_num_devices()
      assert.are.equal(count * (count - 1) // 2, #levels)
    end)
  end)
end)
