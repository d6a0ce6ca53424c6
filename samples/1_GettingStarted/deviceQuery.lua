-- deviceQuery.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- deviceQuery (cuda.core). Lists every CUDA device's properties, read as
-- driver attributes by name (Device:get_attribute), in the layout of the
-- classic deviceQuery; with two devices or more, which pairs can reach each
-- other's memory (peer access). gpurun has no CUDA runtime library, so the
-- version line gives the driver's and NVRTC's versions.
--
--   gpurun samples/1_GettingStarted/deviceQuery.lua [--no-p2p]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local LABEL_WIDTH = 47
local MIB = 1024 * 1024

-- CUDA cores per multiprocessor by compute capability, as the CUDA samples'
-- helper_cuda.h tabulates them; 0 for a capability it does not list.
local CORES_PER_SM = {
  ["3.0"] = 192, ["3.2"] = 192, ["3.5"] = 192, ["3.7"] = 192,
  ["5.0"] = 128, ["5.2"] = 128, ["5.3"] = 128,
  ["6.0"] = 64, ["6.1"] = 128, ["6.2"] = 128,
  ["7.0"] = 64, ["7.2"] = 64, ["7.5"] = 64,
  ["8.0"] = 64, ["8.6"] = 128, ["8.7"] = 128, ["8.9"] = 128,
  ["9.0"] = 128, ["10.0"] = 128, ["10.1"] = 128, ["10.3"] = 128,
  ["11.0"] = 128, ["12.0"] = 128, ["12.1"] = 128,
}

local COMPUTE_MODES = {
  [0] = "Default (multiple host threads can use the device at once)",
  [1] = "Exclusive (one host thread in one process can use the device)",
  [2] = "Prohibited (no host thread can use the device)",
  [3] = "Exclusive Process (many threads of one process can use the device)",
}

local cli = args.new("deviceQuery.lua", "Lists the properties of the CUDA devices in the system.")
cli:flag("--no-p2p", "Skip the peer-to-peer access table.")
local options = cli:parse(arg)

local function property(label, value)
  print(("  %-" .. LABEL_WIDTH .. "s%s"):format(label, tostring(value)))
end

local function yes_no(value)
  return value ~= 0 and "Yes" or "No"
end

local function describe(id, device)
  local function attribute(name) return device:get_attribute(name) end
  local cc = device.compute_capability
  local capability = ("%d.%d"):format(cc.major, cc.minor)
  print()
  print(("Device %d: %s"):format(id, device.name))
  local driver_major, driver_minor = gpurun.driver_version()
  local nvrtc_major, nvrtc_minor = gpurun.nvrtc_version()
  property("CUDA Driver Version / NVRTC Version", ("%d.%d / %d.%d"):format(driver_major, driver_minor,
    nvrtc_major, nvrtc_minor))
  property("CUDA Capability Major/Minor version number:", capability)
  local total = device.total_memory
  property("Total amount of global memory:", ("%.0f MBytes (%d bytes)"):format(total / MIB, total))
  local sms, cores = device.multiprocessor_count, CORES_PER_SM[capability] or 0
  property(("(%3d) Multiprocessors, (%3d) CUDA Cores/MP:"):format(sms, cores), ("%d CUDA Cores"):format(sms * cores))
  local clock_khz = attribute("clock_rate")
  property("GPU Max Clock rate:", ("%.0f MHz (%.2f GHz)"):format(clock_khz * 1e-3, clock_khz * 1e-6))
  property("Memory Clock rate:", ("%.0f Mhz"):format(attribute("memory_clock_rate") * 1e-3))
  property("Memory Bus Width:", attribute("global_memory_bus_width") .. "-bit")
  if attribute("l2_cache_size") > 0 then
    property("L2 Cache Size:", attribute("l2_cache_size") .. " bytes")
  end
  property("Maximum Texture Dimension Size (x,y,z)", ("1D=(%d), 2D=(%d, %d), 3D=(%d, %d, %d)"):format(
    attribute("maximum_texture1d_width"), attribute("maximum_texture2d_width"),
    attribute("maximum_texture2d_height"), attribute("maximum_texture3d_width"),
    attribute("maximum_texture3d_height"), attribute("maximum_texture3d_depth")))
  property("Maximum Layered 1D Texture Size, (num) layers", ("1D=(%d), %d layers"):format(
    attribute("maximum_texture1d_layered_width"), attribute("maximum_texture1d_layered_layers")))
  property("Maximum Layered 2D Texture Size, (num) layers", ("2D=(%d, %d), %d layers"):format(
    attribute("maximum_texture2d_layered_width"), attribute("maximum_texture2d_layered_height"),
    attribute("maximum_texture2d_layered_layers")))
  property("Total amount of constant memory:", attribute("total_constant_memory") .. " bytes")
  property("Total amount of shared memory per block:", attribute("max_shared_memory_per_block") .. " bytes")
  property("Total shared memory per multiprocessor:", attribute("max_shared_memory_per_multiprocessor") .. " bytes")
  property("Total number of registers available per block:", attribute("max_registers_per_block"))
  property("Warp size:", attribute("warp_size"))
  property("Maximum number of threads per multiprocessor:", attribute("max_threads_per_multiprocessor"))
  property("Maximum number of threads per block:", attribute("max_threads_per_block"))
  property("Max dimension size of a thread block (x,y,z):", ("(%d, %d, %d)"):format(
    attribute("max_block_dim_x"), attribute("max_block_dim_y"), attribute("max_block_dim_z")))
  property("Max dimension size of a grid size    (x,y,z):", ("(%d, %d, %d)"):format(
    attribute("max_grid_dim_x"), attribute("max_grid_dim_y"), attribute("max_grid_dim_z")))
  property("Maximum memory pitch:", attribute("max_pitch") .. " bytes")
  property("Texture alignment:", attribute("texture_alignment") .. " bytes")
  property("Concurrent copy and kernel execution:", ("%s with %d copy engine(s)"):format(
    yes_no(attribute("gpu_overlap")), attribute("async_engine_count")))
  property("Run time limit on kernels:", yes_no(attribute("kernel_exec_timeout")))
  property("Integrated GPU sharing Host Memory:", yes_no(attribute("integrated")))
  property("Support host page-locked memory mapping:", yes_no(attribute("can_map_host_memory")))
  property("Device has ECC support:", attribute("ecc_enabled") ~= 0 and "Enabled" or "Disabled")
  property("Device supports Unified Addressing (UVA):", yes_no(attribute("unified_addressing")))
  property("Device supports Managed Memory:", yes_no(attribute("managed_memory")))
  property("Device supports Compute Preemption:", yes_no(attribute("compute_preemption_supported")))
  property("Supports Cooperative Kernel Launch:", yes_no(attribute("cooperative_launch")))
  property("Device PCI Domain ID / Bus ID / location ID:", ("%d / %d / %d"):format(
    attribute("pci_domain_id"), attribute("pci_bus_id"), attribute("pci_device_id")))
  property("Compute Mode:", "")
  print(("     < %s >"):format(COMPUTE_MODES[attribute("compute_mode")] or "Unknown"))
end

-- Exits with gpurun's one line when there is no GPU at all.
cli:open_device(0)
print("[CUDA Device Query using gpurun]")
local count = gpurun.device_count()
print(("Detected %d CUDA Capable device(s)"):format(count))
local devices = {}
for id = 0, count - 1 do
  devices[id] = gpurun.Device(id)
  describe(id, devices[id])
end

if not options.no_p2p and count >= 2 then
  print()
  print("Peer-to-Peer (P2P) access support:")
  for i = 0, count - 1 do
    for j = 0, count - 1 do
      if i ~= j then
        print(("> Peer access from %s (GPU%d) -> %s (GPU%d) : %s"):format(devices[i].name, i,
          devices[j].name, j, devices[i]:can_access_peer(devices[j]) and "Yes" or "No"))
      end
    end
  end
end
print("\nDone")
