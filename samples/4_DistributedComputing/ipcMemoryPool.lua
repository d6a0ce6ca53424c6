-- ipcMemoryPool.lua: a port of NVIDIA cuda-samples' python/4_DistributedComputing/
-- ipcMemoryPool (cuda.core). Two processes share one GPU buffer: the parent
-- makes a pool with ipc = true, allocates from it and writes i + 100, then
-- starts a child gpurun (this script with --child) and sends it the pool
-- (its file descriptor over a Unix socket, SCM_RIGHTS), the buffer's
-- descriptor and an IPC event recorded after the write. The child imports
-- them, waits on the event, checks the parent's pattern, writes -i and
-- answers; the parent checks the child's pattern. Where the platform or the
-- device cannot share pools it says so and exits cleanly, as the original.
--
--   gpurun samples/4_DistributedComputing/ipcMemoryPool.lua [--elements N] [--device ID]
--     [--timeout SECONDS]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local shell = require("gpurun.shell")

local PARENT_SEED, CHILD_SEED = 100, -1

local cli = args.new("ipcMemoryPool.lua", "Share a GPU buffer between two processes via CUDA IPC.")
cli:integer_option("--elements", "Number of float32 elements in the shared buffer.", 1024, 1)
cli:integer_option("--device", "CUDA device ID.", 0, 0)
cli:number_option("--timeout", "Seconds each side waits for the other.", 30)
cli:converted_option("--child", "(internal) run as the child, with this socket folder.", nil,
  function(text) return text end)
local options = cli:parse(arg)

-- The pattern the buffer holds after `who` wrote it, its first five values.
local function expected(i, who)
  return who == "parent" and (i - 1) + PARENT_SEED or (i - 1) * CHILD_SEED
end

local function first_values(buffer)
  local t = buffer:to_table(1, math.min(5, buffer.size))
  for i = 1, #t do t[i] = ("%g"):format(t[i]) end
  return "[" .. table.concat(t, " ") .. "]"
end

local function matches(buffer, who)
  local values = buffer:to_table()
  for i = 1, #values do
    if values[i] ~= expected(i, who) then return false, i end
  end
  return true
end

local function pattern(n, who)
  local t = {}
  for i = 1, n do t[i] = expected(i, who) end
  return t
end

local device = cli:open_device(options.device)
local stream <close> = device:create_stream()

if options.child then
  local pid = assert(io.open("/proc/self/stat")):read("n")
  local received = gpurun.ipc.receive(options.child .. "/to-child", { timeout = options.timeout })
  local pool <close> = received[1]
  local buffer <close> = gpurun.Buffer.from_ipc(received[2], pool)
  local written <close> = gpurun.Event.from_ipc(received[3])
  stream:wait(written) -- the parent's write, ordered before this stream's work
  stream:sync()
  print(("[child pid=%d] received buffer: is_imported=%s, size=%d"):format(pid,
    tostring(pool.is_imported), buffer.nbytes))
  local ok, at = matches(buffer, "parent")
  if not ok then
    print(("[child] ERROR: parent's pattern did not match expectation at element %d"):format(at))
    gpurun.ipc.send(options.child .. "/to-parent", { "fail" }, { timeout = options.timeout })
    os.exit(1, true)
  end
  buffer:copy_from(pattern(buffer.size, "child"), stream)
  stream:sync()
  buffer:close() -- before the parent frees its memory
  gpurun.ipc.send(options.child .. "/to-parent", { "done" }, { timeout = options.timeout })
  return
end

print(("Device %d: %s (sm_%s)"):format(options.device, device.name, device.arch))
-- Bit 1 of the pool handle types: POSIX file descriptors.
if device:get_attribute("memory_pools_supported") ~= 1
    or device:get_attribute("mempool_supported_handle_types") & 1 == 0 then
  print("Device does not support CUDA memory pools shared as POSIX file descriptors.")
  print()
  print("CUDA IPC is not available on this system; exiting cleanly.")
  return
end

local n = options.elements
local nbytes = n * 4
local pool <close> = gpurun.MemoryPool{ ipc = true, max_size = math.max(nbytes * 4, 1 << 20) }
print(("Created IPC-enabled MemoryPool (ipc=%s)"):format(tostring(pool.ipc)))
local buffer <close> = gpurun.empty(n, "float32", { pool = pool, stream = stream })
buffer:copy_from(pattern(n, "parent"), stream)
local written <close> = gpurun.Event{ ipc = true }
stream:record(written)
stream:sync()
print(("Parent wrote pattern (first 5 values): %s"):format(first_values(buffer)))

local folder = os.tmpname()
os.remove(folder)
assert(os.execute("mkdir -m 700 " .. shell.quote(folder)))
local interpreter = assert(shell.interpreter(), "cannot tell which gpurun runs this script")
local script = debug.getinfo(1, "S").source:sub(2)
local child = assert(io.popen(("%s %s --child %s --elements %d --device %d --timeout %s"):format(
  shell.quote(interpreter), shell.quote(script), shell.quote(folder), n, options.device,
  options.timeout), "r"))
local sent, why = pcall(gpurun.ipc.send, folder .. "/to-child",
  { pool, buffer:ipc_descriptor(), written:ipc_descriptor() }, { timeout = options.timeout })
local answer, message
if sent then
  answer, message = pcall(gpurun.ipc.receive, folder .. "/to-parent", { timeout = options.timeout })
end
local child_output = child:read("a")
local _, _, code = child:close()
os.remove(folder)
io.write(child_output)
print(("Parent sent buffer to child; child exited with %s"):format(tostring(code)))

if not sent or not answer or message[1] ~= "done" or code ~= 0 then
  print(("Child failed: %s"):format(not sent and why or not answer and message
    or ("msg=%s, exitcode=%s"):format(tostring(message[1]), tostring(code))))
  os.exit(1, true)
end
print(("Parent sees child's pattern (first 5 values): %s"):format(first_values(buffer)))
if matches(buffer, "child") then
  print("IPC round-trip: OK")
else
  print("IPC round-trip: FAILED")
  os.exit(1, true)
end
