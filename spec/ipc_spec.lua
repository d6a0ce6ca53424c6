-- Sharing between processes: descriptors refused before anything is read
-- past their end, gpurun.ipc's messages between two processes and its
-- errors (no socket, a peer that closes early, a timeout, a foreign
-- message), and on a GPU a pool, a buffer and an event shared with a child
-- gpurun, with pool:set_access on the one device there is.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains
local q = process.quote

-- A descriptor as base/ipc_descriptor.c lays one out, with the fields given.
local function descriptor(fields)
  fields = fields or {}
  return string.pack("<c8I2I2I4I4I4c16I8I8c64", fields.magic or "gpurunIP", fields.version or 1,
    fields.kind or 2, fields.length or 120, fields.device or 0, fields.dtype or 0,
    fields.pool_id or ("\0"):rep(16), fields.count or 4, fields.bytes or 16, ("\0"):rep(64))
end

local function scratch_socket()
  local path = os.tmpname()
  os.remove(path)
  return path .. ".sock"
end

-- Starts `script` in a gpurun child (in the background); finish() -> its
-- stdout, and whether it exited 0.
local function child(script, ...)
  local file_name = os.tmpname()
  local file = assert(io.open(file_name, "w"))
  file:write(script)
  file:close()
  local words = { process.gpurun_command(), q(file_name) }
  for _, word in ipairs({ ... }) do words[#words + 1] = q(word) end
  local pipe = assert(io.popen(table.concat(words, " ") .. " 2>&1", "r"))
  return function()
    local output = pipe:read("a")
    local ok = pipe:close()
    os.remove(file_name)
    return output, ok
  end
end

local function python3()
  local pipe = io.popen("command -v python3")
  local path = pipe and pipe:read("l")
  if pipe then pipe:close() end
  return path ~= "" and path or nil
end

describe("IPC descriptors", function()
  it("refuses a truncated, foreign, newer or oversized one with one line", function()
    local sound = descriptor()
    for _, case in ipairs({
      { sound:sub(1, 64), "bad IPC descriptor: truncated: 64 of 120 bytes" },
      { sound:sub(1, 9), "bad IPC descriptor: truncated: 9 of 120 bytes" },
      { "", "bad IPC descriptor: not a gpurun IPC descriptor (0 bytes without its magic)" },
      { descriptor({ magic = "CUDAIPC1" }), "not a gpurun IPC descriptor (120 bytes without its magic)" },
      { descriptor({ version = 7 }), "descriptor version 7, this gpurun reads version 1" },
      { descriptor({ length = 1 << 31 }), "its length field says 2147483648 bytes" },
      { sound .. ("\0"):rep(1 << 20), "trailing bytes: 1048696 of 120 bytes" },
      { descriptor({ kind = 0 }), "unknown descriptor kind 0" },
    }) do
      local message = error_of(gpurun.Buffer.from_ipc, case[1])
      assert_contains("bad argument #1 to 'gpurun.Buffer.from_ipc' (", message)
      assert_contains(case[2], message)
      assert.is_nil(message:find("\n", 1, true))
    end
  end)

  it("refuses one of another kind, naming both", function()
    assert_contains("IPC descriptor of a event expected, got one of a buffer",
      error_of(gpurun.Event.from_ipc, descriptor()))
    assert_contains("IPC descriptor of a pool expected, got one of a event",
      error_of(gpurun.MemoryPool.from_allocation_handle, gpurun.IPCAllocationHandle(2), descriptor({ kind = 3 })))
  end)

  it("refuses one naming a device that is not there (a stand-in driver with none)", function()
    local cuda = os.getenv("CUDA_HOME") or "/usr/local/cuda"
    local driver = os.tmpname() .. ".so"
    local built = process.run(("cc -shared -fPIC -Wall -Wextra -Werror -I%s spec/support/fake_libcuda.c -o %s")
      :format(q(cuda .. "/include"), q(driver)))
    assert.are.equal(0, built.code, built.stderr)
    local script = ([[
      local gpurun = require("gpurun")
      local d = %q
      print(select(2, pcall(gpurun.Buffer.from_ipc, d)))
      print(select(2, pcall(gpurun.Event.from_ipc, d:sub(1, 10) .. "\3" .. d:sub(12))))
    ]]):format(descriptor({ device = 5 }))
    local result = process.gpurun("-e " .. q(script), { env = { GPURUN_CUDA_DRIVER = driver,
      GPURUN_FAKE_CUDA_INIT = "1" } })
    os.remove(driver)
    assert.are.equal(0, result.code, result.stderr)
    assert_contains("bad argument #1 to 'gpurun.Buffer.from_ipc' (the descriptor names CUDA device 5: 0 "
      .. "device(s) visible)", result.stdout)
    assert_contains("bad argument #1 to 'gpurun.Event.from_ipc' (the descriptor names CUDA device 5",
      result.stdout)
  end)
end)

describe("gpurun.ipc", function()
  it("carries strings and a file descriptor from one process to another", function()
    local path = scratch_socket()
    local finish = child([[
      local gpurun = require("gpurun")
      local values = gpurun.ipc.receive(arg[1], { timeout = 20, import = false })
      print(#values, values[1], #values[2], values[3].descriptor, math.type(values[3].fd))
      values[3]:close()
    ]], path)
    local handle <close> = gpurun.IPCAllocationHandle(2, "pool bytes")
    gpurun.ipc.send(path, { "descriptor", ("\0"):rep(1000), handle }, { timeout = 20 })
    local output, ok = finish()
    assert.is_true(ok, output)
    assert.are.equal("3\tdescriptor\t1000\tpool bytes\tinteger\n", output)
    assert.is_nil(io.open(path), "the receiver removes its socket")
  end)

  it("says so when no socket is there, within the timeout", function()
    local path = scratch_socket()
    local start = gpurun.perf_counter()
    local message = error_of(gpurun.ipc.send, path, { "x" }, { timeout = 0.2 })
    assert_contains("gpurun.ipc.send: no receiver at '" .. path .. "' within 0.2 s (no such socket): start "
      .. "gpurun.ipc.receive there first, or pass a longer timeout", message)
    assert.is_true(gpurun.perf_counter() - start < 5)
  end)

  it("ends a receive with no sender at its timeout", function()
    local path = scratch_socket()
    local start = gpurun.perf_counter()
    assert_contains("gpurun.ipc.receive: no sender connected to '" .. path .. "' within 0.2 s",
      error_of(gpurun.ipc.receive, path, { timeout = 0.2 }))
    assert.is_true(gpurun.perf_counter() - start < 5)
    assert.is_nil(io.open(path), "the socket is removed on the way out")
  end)

  it("tells the sender when the receiver goes away without confirming", function()
    local path = scratch_socket()
    -- A receiver that takes the bytes and dies: gpurun on the raw socket
    -- would confirm, so a shell one-liner stands in for a crashing peer.
    local py = python3()
    if not py then return pending("python3 is not installed") end
    local peer = assert(io.popen(("%s -c %s %s"):format(py, q([[
import os, socket, sys
s = socket.socket(socket.AF_UNIX); s.bind(sys.argv[1]); s.listen(1)
c, _ = s.accept(); c.recv(100); c.close(); os.unlink(sys.argv[1])
]]), q(path))))
    local message = error_of(gpurun.ipc.send, path, { "x" }, { timeout = 20 })
    peer:close()
    assert_contains("gpurun.ipc.send: the receiver at '" .. path .. "' closed the connection", message)
  end)

  it("tells the receiver when the sender closes early, or sends what is not gpurun's", function()
    local py = python3()
    if not py then return pending("python3 is not installed") end
    for _, case in ipairs({
      { [[c.send(b"\x10\x00\x00\x00ab")]], "gpurun.ipc.receive: the sender closed the connection after 2 of 16 bytes" },
      { [[c.send(b"\xff\xff\xff\xff")]], "the message announces 4294967295 bytes, more than the 16777216" },
      { [[c.send(b"\x04\x00\x00\x00abcd"); c.recv(1)]], "gpurun.ipc.receive: not a gpurun.ipc message: no magic" },
      { [[c.send(b"\x0e\x00\x00\x00gpurunMS\x01\x00\x02\x00\x00\x00"); c.recv(1)]],
        "not a gpurun.ipc message: truncated at value 1" },
    }) do
      local path = scratch_socket()
      local receiver = child([[
        local gpurun = require("gpurun")
        print(select(2, pcall(gpurun.ipc.receive, arg[1], { timeout = 20 })))
      ]], path)
      local sent = process.run(("%s -c %s %s"):format(py, q(([[
import socket, sys, time
for _ in range(2000):
    try:
        c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); break
    except OSError:
        time.sleep(0.01)
%s
c.close()
]]):format(case[1])), q(path)))
      assert.are.equal(0, sent.code, sent.stderr)
      local output = receiver()
      assert_contains(case[2], output)
    end
  end)
end)

-- The child's side of the GPU specs: it receives the pool, the buffer's
-- descriptor, an event and a second pool's buffer descriptor, waits for
-- the parent's write on its own stream through the event, sums what it
-- reads, writes 2 * i back and answers with its findings.
local CHILD = [[
local gpurun = require("gpurun")
local to_child, to_parent = arg[1], arg[2]
local device = gpurun.Device(0):set_current()
local stream <close> = device:create_stream()
local values = gpurun.ipc.receive(to_child, { timeout = 60 })
local pool <close> = values[1]
local buffer <close> = gpurun.Buffer.from_ipc(values[2], pool)
local event <close> = gpurun.Event.from_ipc(values[3])
stream:wait(event)
local seen = buffer:to_table(1, buffer.size, stream)
local sum = 0
for i = 1, #seen do sum = sum + seen[i] end
local other_pool = select(2, pcall(gpurun.Buffer.from_ipc, values[4], pool))
local allocate = select(2, pcall(gpurun.empty, 4, "float32", { pool = pool, stream = stream }))
local doubled = {}
for i = 1, buffer.size do doubled[i] = 2 * i end
buffer:copy_from(doubled, stream)
stream:sync()
buffer:close()
gpurun.ipc.send(to_parent, { tostring(sum), other_pool, allocate, tostring(pool.is_imported) },
  { timeout = 60 })
]]

describe("sharing with another process", function()
  local device
  before_each(function() device = gpurun.Device(0):set_current() end)

  it("shares a pool's buffer with a child, which sees the write within one event wait #gpu", function()
    local n = 1 << 16
    local stream <close> = device:create_stream()
    local pool <close> = gpurun.MemoryPool{ ipc = true }
    local other <close> = gpurun.MemoryPool{ ipc = true }
    assert.is_true(pool.ipc)
    assert.is_false(pool.is_imported)
    local buffer <close> = gpurun.empty(n, "float32", { pool = pool, stream = stream })
    local stranger <close> = gpurun.empty(4, "float32", { pool = other, stream = stream })
    local event <close> = gpurun.Event{ ipc = true }
    assert.is_true(event.ipc)
    assert.is_false(event.timing)
    -- Queued and not waited for: the child's stream waits on the event.
    buffer:fill(1.5, stream)
    stream:record(event)
    local to_child, to_parent = scratch_socket(), scratch_socket()
    local finish = child(CHILD, to_child, to_parent)
    gpurun.ipc.send(to_child, { pool, buffer:ipc_descriptor(), event:ipc_descriptor(),
      stranger:ipc_descriptor() }, { timeout = 60 })
    local answer = gpurun.ipc.receive(to_parent, { timeout = 60 })
    local output, ok = finish()
    assert.is_true(ok, output)
    assert.are.equal(tostring(1.5 * n), answer[1])
    assert_contains("the buffer comes from another pool than the one given", answer[2])
    assert_contains("gpurun.MemoryPool(device 0, imported) allocates nothing", answer[3])
    assert.are.equal("true", answer[4])
    local back = buffer:to_table(1, 3)
    assert.are.same({ 2, 4, 6 }, back)
  end)

  it("refuses to share what cannot be shared #gpu", function()
    local stream <close> = device:create_stream()
    local plain <close> = gpurun.MemoryPool()
    local shared <close> = gpurun.MemoryPool{ ipc = true }
    assert_contains("MemoryPool:get_allocation_handle: gpurun.MemoryPool(device 0) is not shareable "
      .. "(make it with gpurun.MemoryPool{ ipc = true })", error_of(plain.get_allocation_handle, plain))
    local default = device:memory_pool()
    assert_contains("is not shareable", error_of(default.get_allocation_handle, default))
    local from_plain <close> = gpurun.empty(4, "float32", { pool = plain, stream = stream })
    assert_contains("only a buffer allocated from a pool made with gpurun.MemoryPool{ ipc = true } "
      .. "can be shared (this one is from a pool without ipc)", error_of(from_plain.ipc_descriptor, from_plain))
    local cu <close> = gpurun.empty(4, "float32")
    assert_contains("(this one is not from a pool)", error_of(cu.ipc_descriptor, cu))
    local buffer <close> = gpurun.empty(8, "float32", { pool = shared, stream = stream })
    local view = buffer:view(2, 4)
    assert_contains("a view cannot be shared", error_of(view.ipc_descriptor, view))
    assert_contains("is not an imported pool", error_of(gpurun.Buffer.from_ipc, buffer:ipc_descriptor(), shared))
    local timing <close> = gpurun.Event()
    assert_contains("the event was not made with gpurun.Event{ ipc = true }",
      error_of(timing.ipc_descriptor, timing))
    local handle <close> = shared:get_allocation_handle()
    assert.are.equal(120, #handle.descriptor)
    assert.is_true(handle.fd >= 0)
    assert_contains("bad argument #1 to 'gpurun.Event.from_ipc' (the descriptor names CUDA device 63",
      error_of(gpurun.Event.from_ipc, descriptor({ kind = 3, device = 63 })))
    stream:sync()
  end)

  it("sets other devices' access to a pool, and keeps its own device's #gpu", function()
    local pool <close> = gpurun.MemoryPool()
    assert.are.equal("rw", pool:get_access(0))
    assert.are.equal(pool, pool:set_access(0, "rw"))
    assert.are.equal(pool, pool:set_access(device, "rw"))
    assert_contains("lives on device 0, which always has \"rw\" access to it",
      error_of(pool.set_access, pool, 0, "r"))
    assert_contains([[bad argument #2 to 'MemoryPool:set_access' ("rw", "r" or "none" expected, got 'x')]],
      error_of(pool.set_access, pool, 0, "x"))
    local count = gpurun.device_count()
    assert_contains(("bad argument #1 to 'MemoryPool:set_access' (CUDA device %d not found: %d device(s) "
      .. "visible)"):format(count, count), error_of(pool.set_access, pool, count, "rw"))
    if count > 1 then
      pool:set_access(1, "rw")
      assert.are.equal("rw", pool:get_access(1))
      pool:set_access(1, "none")
      assert.are.equal("none", pool:get_access(1))
    end
  end)

  -- In a child: peer access that another spec enabled in this process would
  -- let the launches through whatever the pool allows.
  it("lets kernels on another device take the pool's buffers while set_access allows #gpu #multigpu", function()
    if not gpurun.Device(1):can_access_peer(gpurun.Device(0)) then
      pending("device 1 cannot reach device 0's memory")
      return
    end
    local finish = child([[
      local gpurun = require("gpurun")
      local first, second = gpurun.Device(0), gpurun.Device(1)
      first:set_current()
      local pool = gpurun.MemoryPool({ device = 0 })
      local a = gpurun.full(256, 1.5, "float32", { pool = pool })
      local b = gpurun.full(256, 2.0, "float32", { pool = pool })
      local out = gpurun.zeros(256, "float32", { pool = pool })
      first:sync()
      second:set_current()
      local stream = second:create_stream()
      local options = gpurun.ProgramOptions({ arch = "sm_" .. second.arch })
      local code = gpurun.Program(arg[1], "c++", options):compile("cubin")
      local add = code:get_kernel("vec_add")
      local config = gpurun.LaunchConfig({ grid = 1, block = 256 })
      local function try() return pcall(gpurun.launch, stream, config, add, a, b, out, gpurun.u64(256)) end
      local before_ok, before = try()
      pool:set_access(1, "rw")
      local granted_ok = try()
      stream:sync()
      pool:set_access(1, "none")
      local after_ok, after = try()
      first:set_current()
      local values = out:to_table()
      print(before_ok, before, granted_ok, after_ok, after, values[1], values[256])
    ]], require("spec.support.kernels").SOURCE)
    local output, ok = finish()
    assert.is_true(ok, output)
    local refusal = "the gpurun.Buffer lives on device 0, which the kernel's device 1 cannot reach"
    local fields = {}
    for field in output:gmatch("[^\t\n]+") do fields[#fields + 1] = field end
    assert.are.equal("false", fields[1], output)
    assert_contains(refusal, fields[2])
    assert.are.equal("true", fields[3], output)
    assert.are.equal("false", fields[4], output)
    assert_contains(refusal, fields[5])
    assert.are.same({ "3.5", "3.5" }, { fields[6], fields[7] })
  end)
end)
