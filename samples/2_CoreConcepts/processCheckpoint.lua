-- processCheckpoint.lua: a port of NVIDIA cuda-samples' python/2_CoreConcepts/
-- processCheckpoint (cuda.core). A kernel fills a device buffer with a
-- deterministic pattern; the buffer is hashed, this process goes through
-- the driver's whole checkpoint cycle (gpurun.checkpoint: lock, checkpoint,
-- restore, unlock, each timed with the state after it), and the buffer
-- must hash the same afterwards. Where the driver refuses a step (often in
-- a container, and every call under compute-sanitizer) the port prints its
-- reason, returns the process to running, checks the buffer, and says
-- WAIVED.
--
--   gpurun samples/2_CoreConcepts/processCheckpoint.lua [--buffer-mib N]
--     [--lock-timeout-ms MS] [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")

local KERNEL = [[
extern "C" __global__ void fill_pattern(float *out, unsigned long long n)
{
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  // Each element from its index through a few dependent steps: any bit
  // that changed across the checkpoint changes the hash.
  float a = (float)(i % 4099u) * 0.25f + 1.0f;
  float b = (float)(i / 4099u) * 0.125f + 0.5f;
  for (int k = 0; k < 6; ++k) {
    a = a * 1.0001f + b;
    b = b * 0.9999f - a * 1e-5f;
  }
  out[i] = a - b;
}
]]

local cli = args.new("processCheckpoint.lua", "CUDA process checkpoint sample using gpurun.")
cli:integer_option("--device", "CUDA device ID.", 0, 0)
cli:integer_option("--buffer-mib", "GPU buffer size in MiB.", 16, 1)
cli:integer_option("--lock-timeout-ms", "Timeout passed to checkpoint.lock in ms.", 5000, 0)
local options = cli:parse(arg)

-- FNV-1a over the buffer's 8-byte words, as 16 hex digits.
local function hash(bytes)
  local h = -3750763034362895579 -- 0xcbf29ce484222325
  for i = 1, #bytes - 7, 8 do
    h = (h ~ string.unpack("<i8", bytes, i)) * 1099511628211
  end
  return ("%016x"):format(h)
end

local device = cli:open_device(options.device)
print("[Process Checkpoint Sample using gpurun]")
local stat <close> = assert(io.open("/proc/self/stat"))
print(("PID:                %d"):format(stat:read("n")))
print(("Device:             %s"):format(device.name))
print(("Compute Capability: sm_%s"):format(device.arch))
print(("Buffer size:        %d MiB"):format(options.buffer_mib))
print(("Lock timeout:       %d ms"):format(options.lock_timeout_ms))

print()
print("Compiling kernel ...")
local program_options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
local code <close> = gpurun.Program(KERNEL, "c++", program_options):compile("cubin")
local fill = code:get_kernel("fill_pattern")

local n = options.buffer_mib * 1024 * 1024 // 4
local stream <close> = device:create_stream()
local buffer <close> = gpurun.empty(n, "float32")
print("Writing deterministic pattern to GPU buffer ...")
gpurun.launch(stream, gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }, fill, buffer,
  gpurun.u64(n))
stream:sync()
local before_bytes = buffer:to_bytes()
local before = hash(before_bytes)
print(("Buffer hash (before): %s"):format(before))

print()
print("Running checkpoint lifecycle on self ...")
-- The state query is refused where the whole API is (under
-- compute-sanitizer): the process is then running, as it was.
local function state()
  local ok, result = pcall(gpurun.checkpoint.state)
  return ok and result or nil, not ok and result or nil
end
local initial, refused = state()
refused = refused and "state refused: " .. refused
local timings = { { "initial", nil, initial or "-" } }
for _, step in ipairs(refused and {} or { "lock", "checkpoint", "restore", "unlock" }) do
  local start = gpurun.perf_counter()
  local ok, message = pcall(gpurun.checkpoint[step],
    step == "lock" and { timeout_ms = options.lock_timeout_ms } or nil)
  if not ok then
    refused = ("%s refused: %s"):format(step, message)
    break
  end
  timings[#timings + 1] = { step, (gpurun.perf_counter() - start) * 1000, state() or "-" }
end

print()
local header = ("%-14s%18s%18s"):format("step", "duration (ms)", "state after")
print(header)
print(("-"):rep(#header))
local total = 0
for _, t in ipairs(timings) do
  total = total + (t[2] or 0)
  print(("%-14s%18s%18s"):format(t[1], t[2] and ("%.3f"):format(t[2]) or "-", t[3]))
end
print(("-"):rep(#header))
print(("%-14s%18.3f%18s"):format("total", total, ""))

if refused then
  -- Back to running, from wherever the refusal left the process.
  if state() == "checkpointed" then gpurun.checkpoint.restore() end
  if state() == "locked" then gpurun.checkpoint.unlock() end
  print()
  print(refused)
end

local after_bytes = buffer:to_bytes()
print()
print(("Buffer hash (before): %s"):format(before))
print(("Buffer hash (after):  %s"):format(hash(after_bytes)))
if after_bytes ~= before_bytes then
  print()
  print("FAIL: GPU buffer contents changed across checkpoint/restore.")
  os.exit(1, true)
end
print()
if refused then
  print("WAIVED: the driver refused the checkpoint; the buffer is unchanged and the process runs on.")
else
  print("PASS: GPU buffer contents survived checkpoint/restore.")
end
print()
print("Done")
