-- gpurun.HostCallback: a Lua function at a point of a stream's order. The
-- hand-off between the driver's thread and the main thread is C
-- (runtime/state.c) with its unit tests in tests/host_calls_test.c,
-- run here with no GPU; the rest needs a GPU.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local shell = require("gpurun.shell")

local function test_binary()
  return shell.dirname(process.gpurun_bin()) .. "/tests/host_calls_test"
end

local function device_stream()
  local device = gpurun.Device(0)
  device:set_current()
  return device, device:create_stream()
end

describe("gpurun.HostCallback", function()
  it("hands each call from the driver's thread to the main thread (C unit tests)", function()
    assert.is_true(shell.file_exists(test_binary()), "not built: " .. test_binary())
    local result = process.run(process.quote(test_binary()))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("host_calls_test: %d+ checks, 0 failed\n$", result.stdout)
  end)

  it("is made with no GPU, and refuses what is not a function", function()
    local callback <close> = gpurun.HostCallback(function() end)
    assert.are.equal(0, callback.pending)
    assert.are.equal(0, callback.calls)
    assert.matches("gpurun.HostCallback(0 run, 0 queued)", tostring(callback), 1, true)
    local ok, err = pcall(gpurun.HostCallback, "print")
    assert.is_false(ok)
    assert.matches("bad argument #1 to 'gpurun.HostCallback' (function expected, got string)", err, 1, true)
  end)

  it("runs when the script waits for the stream, after the work before it #gpu", function()
    local _, stream = device_stream()
    local buffer <close> = gpurun.zeros(4, "float32")
    local seen
    local callback <close> = gpurun.HostCallback(function() seen = "ran" end)
    buffer:fill(7.0, stream)
    callback:launch(stream)
    assert.are.equal(1, callback.pending)
    assert.is_nil(seen) -- not before the script waits
    stream:sync()
    assert.are.equal("ran", seen)
    assert.are.equal(0, callback.pending)
    assert.are.equal(1, callback.calls)
    stream:close()
  end)

  it("runs the callbacks in the order the GPU reached them #gpu", function()
    local _, stream = device_stream()
    local values <close> = gpurun.zeros(4, "float32")
    local order = {}
    local first <close> = gpurun.HostCallback(function() order[#order + 1] = "first" end)
    local second <close> = gpurun.HostCallback(function() order[#order + 1] = "second" end)
    first:launch(stream)
    values:fill(3.0, stream)
    second:launch(stream)
    -- Reading waits for the stream, which runs both callbacks in order.
    assert.are.same({ 3, 3, 3, 3 }, values:to_table(stream))
    assert.are.same({ "first", "second" }, order)
    stream:close()
  end)

  it("raises its error from the wait that ran it, and the stream goes on #gpu", function()
    local _, stream = device_stream()
    local callback <close> = gpurun.HostCallback(function() error("callback says no", 0) end)
    callback:launch(stream)
    local ok, err = pcall(stream.sync, stream)
    assert.is_false(ok)
    assert.matches("a host callback failed: callback says no", err, 1, true)
    stream:sync() -- nothing is left queued
    assert.are.equal(0, callback.pending)
    stream:close()
  end)

  it("refuses to call into the GPU from inside the function #gpu", function()
    local device, stream = device_stream()
    local inner
    local callback <close> = gpurun.HostCallback(function()
      local ok, err = pcall(gpurun.empty, 4, "float32")
      inner = { ok, err }
      -- (Not a wait: the stream, which does not wait for the callback, may
      -- be done by now, and a wait for work done returns.)
      local ok2, err2 = pcall(device.create_stream, device)
      inner[3], inner[4] = ok2, err2
    end)
    callback:launch(stream)
    stream:sync()
    assert.is_false(inner[1])
    assert.matches("a host callback must not call into the GPU", inner[2], 1, true)
    assert.is_false(inner[3])
    assert.matches("a host callback must not call into the GPU", inner[4], 1, true)
    stream:close()
  end)

  it("refuses to close while runs are queued, and frees memory closed meanwhile later #gpu", function()
    local _, stream = device_stream()
    local callback = gpurun.HostCallback(function() end)
    callback:launch(stream)
    local ok, err = pcall(callback.close, callback)
    assert.is_false(ok)
    assert.matches("gpurun.HostCallback has 1 run(s) queued on the GPU", err, 1, true)
    -- Memory freed with a run pending: the driver's thread does not wait
    -- for the main thread, so the free does not deadlock.
    local doomed = gpurun.zeros(1 << 20, "float32")
    doomed:close()
    stream:sync()
    callback:close()
    stream:close()
  end)

  -- The GPU fuzzer hung here when the driver's thread waited for the main
  -- thread: the driver calls below then waited for the driver's thread. In
  -- a child with a timeout, so that a hang fails this spec alone.
  it("lets the script make streams, memory and code while runs are pending #gpu", function()
    local script = os.tmpname()
    local file = assert(io.open(script, "w"))
    file:write([=[
local gpurun = require("gpurun")
local device = gpurun.Device(0):set_current()
local stream <close> = device:create_stream()
local ran = 0
local callback <close> = gpurun.HostCallback(function() ran = ran + 1 end)
for _ = 1, 5 do
  callback:launch(stream)
  device:create_stream():close()
  gpurun.zeros(1 << 16, "float32"):close()
  gpurun.pinned(4096, "float32"):close()
  local code <close> = gpurun.Program('extern "C" __global__ void k() {}', "c++",
    { arch = "sm_" .. device.arch }):compile("cubin")
  code:get_kernel("k"):close()
end
stream:sync()
print("ran " .. ran)
]=])
    file:close()
    local result = process.run(process.gpurun_command("timeout 120") .. " " .. process.quote(script))
    os.remove(script)
    assert.are_not.equal(124, result.code, "hung: timeout ended it\n" .. result.stderr)
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.are.equal("ran 5\n", result.stdout)
  end)

  it("is a host node in a graph, run at each replay #gpu", function()
    local _, stream = device_stream()
    local count = 0
    local callback <close> = gpurun.HostCallback(function() count = count + 1 end)
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    callback:launch(builder)
    builder:end_building()
    local graph <close> = builder:complete()
    local kinds = {}
    for _, node in ipairs(graph:nodes()) do kinds[#kinds + 1] = node.kind end
    assert.are.same({ "host" }, kinds)
    for _ = 1, 3 do graph:launch(stream) end
    assert.are.equal(3, callback.pending)
    stream:sync()
    assert.are.equal(3, count)
    local ok, err = pcall(callback.close, callback)
    assert.is_false(ok)
    assert.matches("is used by 2 graph(s) or graph builder(s)", err, 1, true)
    graph:close()
    builder:close()
    stream:close()
  end)

  it("waits in Event:sync and Device:sync too #gpu", function()
    local device, stream = device_stream()
    local ran = 0
    local callback <close> = gpurun.HostCallback(function() ran = ran + 1 end)
    callback:launch(stream)
    local event = stream:record()
    event:sync()
    assert.are.equal(1, ran)
    callback:launch(stream)
    device:sync()
    assert.are.equal(2, ran)
    event:close()
    stream:close()
  end)
end)
