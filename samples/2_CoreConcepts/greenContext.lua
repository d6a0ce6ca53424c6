-- greenContext.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- greenContext (cuda.core). A short, latency-critical kernel is launched
-- just after a long kernel that fills the GPU, and its launch-to-finish time
-- is measured with events: alone on the device, beside the long kernel on
-- two streams of the primary context (it waits for SMs), and with the SMs
-- split between two green contexts (device.resources.sm:split,
-- device:create_context, ctx:create_stream), where it runs at once on its
-- own partition, there alone first. The critical kernel's output must be
-- the same in every run.
--
--   gpurun samples/2_CoreConcepts/greenContext.lua [--split LONG,CRITICAL]
--     [--delay-us US] [--delay-waves N] [--delay-blocks N] [--critical-n N]
--     [--critical-iters N] [--launch-gap-ms MS] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local KERNELS = [[
extern "C" __global__ void delay_kernel(unsigned long long cycles)
{
  // Holds its SM for `cycles` clock ticks.
  const long long until = clock64() + (long long)cycles;
  while (clock64() < until) { }
}

extern "C" __global__ void critical_kernel(float *out, int n, int iters)
{
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // A chain of dependent steps the compiler cannot fold: `iters` comes at
  // run time.
  float x = 1.0f + (float)(i & 1023) * 1e-4f, y = 0.25f;
  for (int k = 0; k < iters; ++k) {
    x = fmaf(x, 0.999999f, y);
    y = fmaf(y, 1.000001f, -x * 1e-7f);
  }
  out[i] = x + y;
}
]]

local cli = args.new("greenContext.lua", "Green Context sample using gpurun.")
cli:integer_option("--device", "CUDA device ID.", 0, 0)
cli:converted_option("--split", "SM split as 'LONG,CRITICAL', e.g. '112,16'. Default: auto.", nil, function(text)
  local long, critical = text:match("^%s*(%d+)%s*,%s*(%d+)%s*$")
  if not long then return nil, "must look like 'A,B', got '" .. text .. "'" end
  return { tonumber(long), tonumber(critical) }
end)
cli:integer_option("--delay-us", "Per-block busy-wait duration of the delay kernel, in microseconds.", 2000, 1)
cli:integer_option("--delay-waves", "Waves of the delay kernel; sets the default --delay-blocks.", 16, 1)
cli:integer_option("--delay-blocks", "Blocks of the delay kernel (default: --delay-waves x SM count).", nil, 1)
cli:integer_option("--critical-n", "Work size of the critical kernel.", 1 << 22, 1)
cli:integer_option("--critical-iters", "Inner iterations of the critical kernel.", 1024, 1)
cli:number_option("--launch-gap-ms", "Host delay between launching the long and critical kernels, in ms.", 1.0)
local options = cli:parse(arg)
local long_count, critical_count = table.unpack(options.split or {})
if options.critical_n > 2147483647 then cli:usage_error("--critical-n must fit the kernel's int") end

local device = cli:open_device(options.device)
local sm = device.resources.sm
local total, step = sm.sm_count, sm.min_partition_size
print("[Green Context Sample using gpurun]")
print(("Device: %s"):format(device.name))
print(("Compute Capability: sm_%s"):format(device.arch))
print(("Total SMs:                 %d"):format(total))
print(("Min. SM partition size:    %d"):format(step))
print(("SM co-scheduled alignment: %d"):format(sm.coscheduled_alignment))

-- Both partitions in groups of the minimum size, of one split: the long
-- kernel's context combines the first groups, the critical one's the rest.
if not long_count then
  critical_count = math.max(step, math.min(16, total // 8) // step * step)
  long_count = (total - critical_count) // step * step
end
local problems = {}
if long_count <= 0 or critical_count <= 0 then problems[#problems + 1] = "both partition sizes must be positive" end
if long_count % step ~= 0 or critical_count % step ~= 0 then
  problems[#problems + 1] = ("each size must be a multiple of min_partition_size=%d"):format(step)
end
if long_count + critical_count > total then
  problems[#problems + 1] = ("sum %d exceeds device total of %d SMs"):format(long_count + critical_count, total)
end
if #problems > 0 then
  print("Error: invalid --split value:")
  for _, problem in ipairs(problems) do print("  - " .. problem) end
  os.exit(1, true)
end
print(("SM split (long/critical):  %d / %d"):format(long_count, critical_count))

local delay_blocks = options.delay_blocks or options.delay_waves * total
local delay_cycles = options.delay_us * device:get_attribute("clock_rate") // 1000
print("Workload parameters:")
print(("  delay kernel: %d blocks, %d us/block (~%.1f ms on %d SMs)"):format(delay_blocks, options.delay_us,
  delay_blocks / total * options.delay_us / 1000, total))
print(("  critical kernel: %d elements, %d inner iterations"):format(options.critical_n, options.critical_iters))
print(("  host launch gap: %g ms"):format(options.launch_gap_ms))

print()
print("Compiling kernels ...")
local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
local code <close> = gpurun.Program(KERNELS, "c++", program_options):compile("cubin")
local delay_kernel, critical_kernel = code:get_kernel("delay_kernel"), code:get_kernel("critical_kernel")
local delay_config = gpurun.LaunchConfig{ grid = delay_blocks, block = 1024 } -- one block per SM at a time
local critical_config = gpurun.LaunchConfig{ grid = (options.critical_n + 255) // 256, block = 256 }

local function launch_critical(stream, out)
  gpurun.launch(stream, critical_config, critical_kernel, out, options.critical_n, options.critical_iters)
end

-- The long kernel, the host's gap, then the critical kernel, each between
-- two events on its stream.
local function run_pair(name, long_stream, critical_stream, long_sms, critical_sms, out)
  local long_start, long_end = gpurun.Event(), gpurun.Event()
  local critical_start, critical_end = gpurun.Event(), gpurun.Event()
  long_stream:record(long_start)
  gpurun.launch(long_stream, delay_config, delay_kernel, gpurun.u64(delay_cycles))
  long_stream:record(long_end)
  local gap_end = gpurun.perf_counter() + options.launch_gap_ms / 1000
  repeat until gpurun.perf_counter() >= gap_end
  critical_stream:record(critical_start)
  launch_critical(critical_stream, out)
  critical_stream:record(critical_end)
  long_stream:sync()
  critical_stream:sync()
  return { name = name, long_sms = long_sms, critical_sms = critical_sms, long_ms = long_end - long_start,
           critical_ms = critical_end - critical_start, offset_ms = critical_start - long_start }
end

local n = options.critical_n
local out_alone <close> = gpurun.empty(n, "float32")
local out_baseline <close> = gpurun.empty(n, "float32")
local out_green <close> = gpurun.empty(n, "float32")

-- The critical kernel alone on the stream, between two events.
local function time_alone(name, stream, critical_sms, out)
  local start, stop = gpurun.Event(), gpurun.Event()
  stream:record(start)
  launch_critical(stream, out)
  stream:record(stop)
  stream:sync()
  return { name = name, critical_sms = critical_sms, critical_ms = stop - start }
end

print("Running reference scenario (critical kernel alone) ...")
local alone
do
  local stream <close> = device:create_stream()
  alone = time_alone("crit alone (primary ctx)", stream, total, out_alone)
end

print("Running baseline scenario (primary context) ...")
local baseline
do
  local long_stream <close> = device:create_stream()
  local critical_stream <close> = device:create_stream()
  baseline = run_pair("baseline (primary ctx)", long_stream, critical_stream, total, total, out_baseline)
end

print("Running green context scenario ...")
local green, green_alone
do
  -- The driver may make fewer groups than the SMs hold (it places them on
  -- the GPU's clusters, and a tool attached can take some): then the long
  -- kernel's side has fewer.
  local critical_groups_wanted, groups = critical_count // step, nil
  for asked = (long_count + critical_count) // step, critical_groups_wanted + 1, -1 do
    local ok, made = pcall(sm.split, sm, { count = step, groups = asked })
    if ok then groups = made break end
    if asked == critical_groups_wanted + 1 then error(made, 0) end
  end
  local long_groups, critical_groups = {}, {}
  for i, group in ipairs(groups) do
    table.insert(i <= #groups - critical_groups_wanted and long_groups or critical_groups, group)
  end
  local long_context <close> = device:create_context{ resources = long_groups }
  local critical_context <close> = device:create_context{ resources = critical_groups }
  local long_sms, critical_sms = long_context.resources.sm.sm_count, critical_context.resources.sm.sm_count
  local long_stream, critical_stream = long_context:create_stream(), critical_context:create_stream()
  -- Each kernel's first launch in a context loads its code there: not timed.
  gpurun.launch(long_stream, delay_config, delay_kernel, gpurun.u64(0))
  launch_critical(critical_stream, out_green)
  long_stream:sync()
  critical_stream:sync()
  green_alone = time_alone(("crit alone (green ctx, %d SMs)"):format(critical_sms), critical_stream, critical_sms,
    out_green)
  green = run_pair(("green ctx (%d+%d SMs)"):format(long_sms, critical_sms), long_stream, critical_stream, long_sms,
    critical_sms, out_green)
end

local function ms(value, width)
  return value and ("%" .. width .. ".3f"):format(value) or ("%" .. width .. "s"):format("-")
end
print()
local header = ("%-32s%20s%14s%18s%19s"):format("scenario", "SMs (long/crit)", "long (ms)", "crit total (ms)",
  "crit offset (ms)")
print(header)
print(("-"):rep(#header))
for _, r in ipairs({ alone, green_alone, baseline, green }) do
  print(("%-32s%20s%s%s%s"):format(r.name, (r.long_sms or "-") .. "/" .. r.critical_sms, ms(r.long_ms, 14),
    ms(r.critical_ms, 18), ms(r.offset_ms, 19)))
end
print()
print("long (ms)        : wall time of the delay kernel")
print("crit total (ms)  : launch-to-complete wall time of the critical kernel")
print("crit offset (ms) : when the critical stream started, relative to the long stream start")

print()
print(("Critical-kernel latency speedup (baseline vs green ctx): %.2fx")
  :format(baseline.critical_ms / green.critical_ms))
print(("Green-ctx compute cost vs unconstrained (crit alone):    %.2fx"):format(green.critical_ms / alone.critical_ms))
print(("Baseline time spent waiting for SMs (not computing):     ~%.2f ms"):format(
  math.max(0, baseline.critical_ms - alone.critical_ms)))
print(("Critical latency under load vs alone on the same SMs: green ctx %.2fx, baseline %.2fx"):format(
  green.critical_ms / green_alone.critical_ms, baseline.critical_ms / alone.critical_ms))

for _, other in ipairs({ { "baseline", out_baseline }, { "green ctx", out_green } }) do
  local mismatches = gpurun.compare(other[2], out_alone, 0, 0).mismatches
  if mismatches > 0 then
    print(("FAIL: the critical kernel's output of the %s run differs from its output alone in %d elements")
      :format(other[1], mismatches))
    os.exit(1, true)
  end
end
print("Critical kernel output identical in all three runs: PASSED")
print("\nDone")
