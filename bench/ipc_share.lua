-- bench/ipc_share.lua: what sharing a pool's buffers with another process
-- costs. The parent exports --buffers buffers of a MemoryPool{ ipc = true }
-- and sends them with the pool to a child gpurun (this script, --child),
-- which imports each and closes it. Printed: us per buffer to export, to
-- import and to close an import (medians of --reps), the pool's export and
-- import once, and a write's round trip: the parent fills a buffer and
-- records an IPC event, the child waits on it and reads the first element.
--
--   build/gpurun bench/ipc_share.lua [--buffers 1000] [--reps 5] [--elements 1024]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local bench = require("gpurun.bench")
local shell = require("gpurun.shell")

local cli = args.new("ipc_share.lua", "Export and import cost of buffers shared with a child process.")
cli:integer_option("--buffers", "Buffers exported and imported per repetition.", 1000, 1)
cli:integer_option("--reps", "Repetitions (the median is reported).", 5, 1)
cli:integer_option("--elements", "float32 elements per buffer.", 1024, 1)
cli:converted_option("--child", "(internal) run as the child, with this socket folder.", nil,
  function(text) return text end)
local options = cli:parse(arg)
local TIMEOUT = 120

local device = cli:open_device(0)
local stream <close> = device:create_stream()
local clock = gpurun.perf_counter

if options.child then
  local folder = options.child
  local start = clock()
  local values = gpurun.ipc.receive(folder .. "/pool", { timeout = TIMEOUT })
  local pool_import_us = (clock() - start) * 1e6
  local pool <close> = values[1]
  local import_us, close_us = {}, {}
  for rep = 1, options.reps do
    local descriptors = gpurun.ipc.receive(folder .. "/rep" .. rep, { timeout = TIMEOUT })
    local imported = {}
    start = clock()
    for i, d in ipairs(descriptors) do imported[i] = gpurun.Buffer.from_ipc(d, pool) end
    import_us[rep] = (clock() - start) * 1e6 / #descriptors
    start = clock()
    for _, b in ipairs(imported) do b:close() end
    close_us[rep] = (clock() - start) * 1e6 / #descriptors
    gpurun.ipc.send(folder .. "/back", { "closed" }, { timeout = TIMEOUT })
  end
  local trip = gpurun.ipc.receive(folder .. "/trip", { timeout = TIMEOUT })
  local shared <close> = gpurun.Buffer.from_ipc(trip[1], pool)
  local written <close> = gpurun.Event.from_ipc(trip[2])
  gpurun.ipc.send(folder .. "/back", { "ready" }, { timeout = TIMEOUT })
  gpurun.ipc.receive(folder .. "/go", { timeout = TIMEOUT })
  stream:wait(written)
  local first = shared:to_table(1, 1, stream)[1]
  gpurun.ipc.send(folder .. "/back", { tostring(first), tostring(bench.median(import_us)),
    tostring(bench.median(close_us)), tostring(pool_import_us) }, { timeout = TIMEOUT })
  shared:close()
  return
end

local folder = os.tmpname()
os.remove(folder)
assert(os.execute("mkdir -m 700 " .. shell.quote(folder)))
local script = debug.getinfo(1, "S").source:sub(2)
local child = assert(io.popen(("%s %s --child %s --reps %d"):format(
  shell.quote(assert(shell.interpreter(), "cannot tell which gpurun runs this")),
  shell.quote(script), shell.quote(folder), options.reps), "r"))

local pool <close> = gpurun.MemoryPool{ ipc = true }
local start = clock()
local handle = pool:get_allocation_handle()
local pool_export_us = (clock() - start) * 1e6
gpurun.ipc.send(folder .. "/pool", { handle }, { timeout = TIMEOUT })
handle:close()
local buffers = {}
for i = 1, options.buffers do
  buffers[i] = gpurun.empty(options.elements, "float32", { pool = pool, stream = stream })
end
stream:sync()
local export_us = {}
for rep = 1, options.reps do
  local descriptors = {}
  start = clock()
  for i, b in ipairs(buffers) do descriptors[i] = b:ipc_descriptor() end
  export_us[rep] = (clock() - start) * 1e6 / #buffers
  gpurun.ipc.send(folder .. "/rep" .. rep, descriptors, { timeout = TIMEOUT })
  gpurun.ipc.receive(folder .. "/back", { timeout = TIMEOUT })
end
local written <close> = gpurun.Event{ ipc = true }
gpurun.ipc.send(folder .. "/trip", { buffers[1]:ipc_descriptor(), written:ipc_descriptor() },
  { timeout = TIMEOUT })
gpurun.ipc.receive(folder .. "/back", { timeout = TIMEOUT })
start = clock()
buffers[1]:fill(42.0, stream)
stream:record(written)
gpurun.ipc.send(folder .. "/go", { "go" }, { timeout = TIMEOUT })
local answer = gpurun.ipc.receive(folder .. "/back", { timeout = TIMEOUT })
local trip_us = (clock() - start) * 1e6
local output = child:read("a")
local ok = child:close()
os.remove(folder)
if not ok then error("the child failed:\n" .. output) end
for _, b in ipairs(buffers) do b:close() end

print(("ipc_share: %s, %d buffers of %d float32, medians of %d reps"):format(device.name,
  options.buffers, options.elements, options.reps))
print(("  export (Buffer:ipc_descriptor)      %10.2f us/buffer"):format(bench.median(export_us)))
print(("  import (Buffer.from_ipc)            %10.2f us/buffer"):format(tonumber(answer[2])))
print(("  close an import                     %10.2f us/buffer"):format(tonumber(answer[3])))
print(("  export + import                     %10.2f us/buffer"):format(bench.median(export_us)
  + tonumber(answer[2])))
print(("  pool export / import, once          %10.2f / %.2f us"):format(pool_export_us, tonumber(answer[4])))
print(("  write -> child sees it (one event wait, two messages) %8.1f us, value %s"):format(trip_us, answer[1]))
if tonumber(answer[1]) ~= 42 then
  print("FAIL: the child read " .. answer[1] .. ", not 42")
  os.exit(1, true)
end
