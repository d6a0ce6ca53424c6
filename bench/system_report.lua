-- bench/system_report.lua: what gpurun.system costs once NVML is open, in
-- ms: every device's report (system.devices(), about fifteen NVML calls a
-- device), one device's, and the topology of every pair; then the first
-- call of the process, which opens NVML. One line per case, `name: N ms`,
-- medians of --reps calls; docs/benchmark.md has the cases.
--
--   build/gpurun bench/system_report.lua [--reps 101]
--
-- Where NVML cannot be loaded it says why and exits 1.

local gpurun = require("gpurun")
local args = require("gpurun.args")
local median = require("gpurun.bench").median

local cli = args.new("system_report.lua", "What gpurun.system's reports cost once NVML is open, in ms.")
cli:integer_option("--reps", "Timed calls per case (the median is printed).", 101)
local options = cli:parse(arg)

local system = gpurun.system
local clock = gpurun.perf_counter

local start = clock()
local problem = system.nvml_error()
local open_ms = (clock() - start) * 1e3
if problem then
  io.stderr:write("system_report.lua: ", problem, "\n")
  os.exit(1, true)
end

local function ms_per_call(call)
  local runs = {}
  for r = 1, options.reps do
    local before = clock()
    call()
    runs[r] = (clock() - before) * 1e3
  end
  return median(runs)
end

local count = system.get_num_devices()
print(("devices: %d (%s, NVML %s)"):format(count, system.get_kernel_mode_driver_version(),
  system.get_nvml_version()))
print(("every device's report: %.3f ms"):format(ms_per_call(system.devices)))
if count > 0 then
  print(("one device's report: %.3f ms"):format(ms_per_call(function() return system.Device(0) end)))
end
print(("topology of every pair: %.3f ms"):format(ms_per_call(system.topology)))
print(("opening NVML (first call): %.3f ms"):format(open_ms))
