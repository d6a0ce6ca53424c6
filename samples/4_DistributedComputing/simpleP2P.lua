-- simpleP2P.lua: a port of NVIDIA cuda-samples' python/4_DistributedComputing/
-- simpleP2P (cuda.core). Peer-to-peer memory between two GPUs: it finds the
-- first pair of devices that can reach each other's memory, makes a memory
-- pool on each and lets the other device use it (MemoryPool:set_access),
-- times 100 copies bouncing one buffer between the two (streams ordered by
-- events), then runs a kernel on each GPU that reads the other GPU's buffer
-- and writes its own, and checks on the host that every element came back
-- multiplied by 4. With fewer than two GPUs, or no pair with peer access,
-- it says it waives the test and exits 2, as the original.
--
--   gpurun samples/4_DistributedComputing/simpleP2P.lua [--num_elements N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local grouped = require("gpurun.samples.digits").grouped

local INT_MAX = 2147483647
local COPIES = 100
local THREADS = 512
local PATTERN_PERIOD = 4096 -- the host data is i % 4096
local EXIT_WAIVED = 2
local RULE = string.rep("=", 70)

local KERNEL = [[
extern "C" __global__ void SimpleKernel(const float *src, float *dst, int n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n; i += stride)
        dst[i] = 2.0f * src[i];
}
]]

local cli = args.new("simpleP2P.lua",
  "Demonstrate peer-to-peer (P2P) memory access between multiple GPUs with CUDA")
cli:integer_option("--num_elements", "Number of elements in arrays (default: 16777216 = 64MB)",
                   16 * 1024 * 1024, 1)
local options = cli:parse(arg)
if options.num_elements > INT_MAX then
  cli:usage_error(("--num_elements must fit the kernel's int, got %d"):format(options.num_elements))
end
local n = options.num_elements

-- The float32 bytes of (i % 4096) * scale for i = 0 .. count - 1.
local function pattern_bytes(count, scale)
  local period = {}
  for i = 0, PATTERN_PERIOD - 1 do period[#period + 1] = string.pack("<f", i * scale) end
  local whole = table.concat(period)
  return whole:rep(count // PATTERN_PERIOD) .. whole:sub(1, 4 * (count % PATTERN_PERIOD))
end

local function yes_no(flag) return flag and "Yes" or "No" end

-- "[1]": the devices other than the pool's own that may use the pool.
local function accessible_by(pool, devices)
  local ids = {}
  for _, device in ipairs(devices) do
    if device.id ~= pool.device and pool:get_access(device) ~= "none" then ids[#ids + 1] = device.id end
  end
  return "[" .. table.concat(ids, ", ") .. "]"
end

cli:open_device(0)
print("\n" .. RULE)
print("simpleP2P - gpurun Sample")
print(RULE)
print("\nStarting...")

print("\nChecking for multiple GPUs...")
local count = gpurun.device_count()
print("CUDA-capable device count: " .. count)
if count < 2 then
  print("Two or more GPUs with Peer-to-Peer access capability are required, waiving this sample.")
  os.exit(EXIT_WAIVED, true)
end

local devices = {}
for i = 0, count - 1 do devices[#devices + 1] = gpurun.Device(i) end

print("\nChecking GPU(s) for support of peer to peer memory access...")
local first, second
for i = 1, count do
  for j = 1, count do
    if i ~= j then
      local i_to_j = devices[i]:can_access_peer(devices[j])
      local j_to_i = devices[j]:can_access_peer(devices[i])
      print(("> Peer access from %s (GPU%d) -> %s (GPU%d): %s"):format(devices[i].name, i - 1,
        devices[j].name, j - 1, yes_no(i_to_j)))
      print(("> Peer access from %s (GPU%d) -> %s (GPU%d): %s"):format(devices[j].name, j - 1,
        devices[i].name, i - 1, yes_no(j_to_i)))
      if i_to_j and j_to_i then
        first, second = devices[i], devices[j]
        break
      end
    end
  end
  if first then break end
end
if not first then
  print("\nTwo or more GPUs with Peer-to-Peer access capability are required.")
  print("Peer to Peer access is not available amongst GPUs in the system, waiving test.")
  os.exit(EXIT_WAIVED, true)
end
local id0, id1 = first.id, second.id
print(("\nUsing GPU%d (%s) and GPU%d (%s)"):format(id0, first.name, id1, second.name))

local bytes = n * 4
print(("\nAllocating buffers (%dMB on GPU%d, GPU%d and CPU Host)..."):format(bytes // (1024 * 1024), id0, id1))
-- A pool on each GPU that the other may use; the buffers come from them
-- in stream order, so each device's stream is made first.
first:set_current()
local stream0 <close> = first:create_stream()
local pool0 <close> = gpurun.MemoryPool{ device = first }
pool0:set_access(second, "rw")
local g0 <close> = gpurun.empty(n, "float32", { pool = pool0, stream = stream0 })
second:set_current()
local stream1 <close> = second:create_stream()
local pool1 <close> = gpurun.MemoryPool{ device = second }
pool1:set_access(first, "rw")
local g1 <close> = gpurun.empty(n, "float32", { pool = pool1, stream = stream1 })
print(("  Peer access enabled: GPU%d <-> GPU%d"):format(id0, id1))
print(("  Peer access status: MR0 accessible by %s, MR1 accessible by %s"):format(
  accessible_by(pool0, devices), accessible_by(pool1, devices)))
first:set_current()
local h0 <close> = gpurun.pinned(n, "float32")
stream0:sync()
stream1:sync()
print("  Memory allocated successfully")

print("\nMeasuring P2P bandwidth...")
print(("  Performing %d ping-pong copies between GPUs..."):format(COPIES))
-- One event per stream, recorded again after each copy; each copy waits
-- for the other stream's last.
local done0 <close> = gpurun.Event{ timing = false }
second:set_current()
local done1 <close> = gpurun.Event{ timing = false }
local start = stream0:record()
local last1 = false
for i = 0, COPIES - 1 do
  if i % 2 == 0 then
    first:set_current()
    if last1 then stream0:wait(done1) end
    g0:copy_to(g1, stream0)
    stream0:record(done0)
  else
    second:set_current()
    stream1:wait(done0)
    g1:copy_to(g0, stream1)
    stream1:record(done1)
    last1 = true
  end
end
if last1 then stream0:wait(done1) end
local stop = stream0:record()
stop:sync()
local ms = stop:elapsed_ms(start)
print(("  P2P bandwidth: %.2f GB/s"):format(1.0 / (ms / 1000.0) * (COPIES * bytes) / 1024.0 ^ 3))

print(("\nPreparing host buffer and memcpy to GPU%d..."):format(id0))
h0:copy_from(pattern_bytes(n, 1))
first:set_current()
g0:copy_from(h0, stream0)
stream0:sync()
print("  Data initialized and copied to GPU")

print("\nCompiling CUDA kernel...")
local function compile_for(device)
  device:set_current()
  local program <close> = gpurun.Program(KERNEL, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  return program:compile("cubin")
end
local code0 <close> = compile_for(first)
local kernel0 = code0:get_kernel("SimpleKernel")
local code1 <close> = compile_for(second)
local kernel1 = code1:get_kernel("SimpleKernel")
print("  Kernels compiled successfully")

local config = gpurun.LaunchConfig{ grid = (n + THREADS - 1) // THREADS, block = THREADS }
print(("\nRun kernel on GPU%d, taking source data from GPU%d and writing to GPU%d..."):format(id1, id0, id1))
second:set_current()
gpurun.launch(stream1, config, kernel1, g0, g1, n)
stream1:sync()
print("  Kernel execution complete")

print(("\nRun kernel on GPU%d, taking source data from GPU%d and writing to GPU%d..."):format(id0, id1, id0))
first:set_current()
gpurun.launch(stream0, config, kernel0, g1, g0, n)
stream0:sync()
print("  Kernel execution complete")

print(("\nCopy data back to host from GPU%d and verify results..."):format(id0))
g0:copy_to(h0, stream0)
stream0:sync()

print("\nChecking results...")
print(("  Comparing %s elements..."):format(grouped(n)))
-- Two kernels, each doubling: every element is (i % 4096) * 4, exactly.
local got = h0:to_bytes()
local passed = got == pattern_bytes(n, 4)
if passed then
  print("Test PASSED")
  print("  [PASS] Validation PASSED")
else
  local wrong, max_error, shown = 0, 0, {}
  for i = 0, n - 1 do
    local value = string.unpack("<f", got, 4 * i + 1)
    local expected = (i % PATTERN_PERIOD) * 4.0
    local difference = math.abs(value - expected)
    local close = difference <= 1e-6 + 1e-5 * math.abs(expected) -- false for NaN, as numpy.isclose
    if not close then
      wrong = wrong + 1
      if #shown < 10 then
        shown[#shown + 1] = ("    Error @ element %d: got %s, expected %s"):format(i, value, expected)
      end
    end
    if difference > max_error or difference ~= difference then max_error = difference end
  end
  print(("Test FAILED - Max error: %s"):format(max_error))
  print("  [FAIL] Validation FAILED")
  print(("  Number of mismatches: %d"):format(wrong))
  for _, line in ipairs(shown) do print(line) end
end

print("\nDisabling peer access...")
pool0:set_access(second, "none")
pool1:set_access(first, "none")
print(("  Peer access revoked: MR0 accessible by %s, MR1 accessible by %s"):format(
  accessible_by(pool0, devices), accessible_by(pool1, devices)))

print("\n" .. RULE)
print(passed and "simpleP2P completed successfully!" or "simpleP2P FAILED!")
print(RULE .. "\n")
print("Shutting down...")
if not passed then os.exit(1, true) end
