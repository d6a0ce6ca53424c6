-- Every device of a machine in one process: each object remembers its
-- device, peer access, copies between devices, and the clear errors when an
-- object is used with another device's stream. What one device allows runs
-- on any GPU host (#gpu); what needs two carries #multigpu.
local gpurun = require("gpurun")

local n = 4096
local function config() return gpurun.LaunchConfig({ grid = 16, block = 256 }) end

-- Compiles the test kernels for the device current now.
local function kernels_on(device)
  device:set_current()
  local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. device.arch })
  local code = gpurun.Program(require("spec.support.kernels").SOURCE, "c++", options):compile("cubin")
  return function(name) return code:get_kernel(name) end
end

local function raises(pattern, f, ...)
  local ok, err = pcall(f, ...)
  assert.is_false(ok, "no error raised")
  assert.matches(pattern, tostring(err), 1, true)
  return err
end

describe("objects on one device", function()
  local device, kernel, stream
  before_each(function()
    if gpurun.device_count() == 0 then return end
    local _
    device, _, kernel = require("spec.support.kernels").setup()
    stream = device:create_stream()
  end)

  it("remember their device: streams, events, buffers, kernels, graphs #gpu", function()
    local buffer = gpurun.zeros(n)
    local event = stream:record()
    assert.are.equal(0, stream.device)
    assert.are.equal(0, event.device)
    assert.are.equal(0, buffer.device)
    assert.are.equal(0, kernel("vec_add").device)
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config(), kernel("vec_add"), buffer, buffer, buffer, gpurun.u64(n))
    builder:end_building()
    local graph = builder:complete()
    assert.are.equal(0, graph.device)
  end)

  it("reach their own device's memory as a peer, and enabling it again is a no-op #gpu", function()
    assert.is_true(device:can_access_peer(device))
    assert.are.equal(device, device:enable_peer_access(device))
    assert.are.equal(device, device:enable_peer_access(device))
  end)

  it("copy between buffers of one device as before #gpu", function()
    local source = gpurun.full(n, 4, "float32")
    local target = gpurun.zeros(n, "float32")
    target:copy_from(source)
    assert.is_true(gpurun.allclose(target, 4, 0, 0))
    local other = gpurun.zeros(n, "float32")
    source:copy_to(other, stream)
    stream:sync()
    assert.is_true(gpurun.allclose(other, 4, 0, 0))
  end)

  it("run scripts/multi_device.lua over the one device there is #gpu", function()
    local process = require("spec.support.process")
    local result = process.gpurun("scripts/multi_device.lua --elements 65536 --iterations 20")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("devices: 1", result.stdout, 1, true)
    assert.matches("device 0: ", result.stdout, 1, true)
    assert.matches("aggregate over 1 device", result.stdout, 1, true)
    assert.matches("result: OK", result.stdout, 1, true)
  end)

  it("run scripts/multi_device.lua --declared over the one device there is #gpu", function()
    local process = require("spec.support.process")
    local result = process.gpurun("scripts/multi_device.lua --elements 65536 --iterations 20 --declared")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("devices: split over 1 device (0)", result.stdout, 1, true)
    assert.matches("aggregate over 1 device, declared", result.stdout, 1, true)
    assert.matches("result: OK (one declaration", result.stdout, 1, true)
  end)
end)

describe("objects on two devices", function()
  local first, second
  before_each(function()
    if gpurun.device_count() < 2 then return end
    first, second = gpurun.Device(0), gpurun.Device(1)
    first:set_current()
  end)

  it("refuse a buffer operation while another device is current, naming both #multigpu", function()
    local buffer = gpurun.zeros(n)
    second:set_current()
    raises("gpurun.Buffer lives on device 0 but device 1 is current", buffer.fill, buffer, 1)
    raises("Device:sync: device 0 is not current (device 1 is)", first.sync, first)
  end)

  it("copy from and to a buffer of another device, with and without a stream #multigpu", function()
    local on_first = gpurun.full(n, 3, "float32")
    second:set_current()
    local on_second = gpurun.zeros(n, "float32")
    on_second:copy_from(on_first)
    assert.is_true(gpurun.allclose(on_second, 3, 0, 0))
    local stream = second:create_stream()
    on_second:fill(8, stream)
    on_second:copy_to(on_first, stream)
    stream:sync()
    first:set_current()
    assert.is_true(gpurun.allclose(on_first, 8, 0, 0))
  end)

  it("record events on a stream of another device in that device's context #multigpu", function()
    second:set_current()
    local stream = second:create_stream()
    first:set_current()
    local start, stop = stream:record(), stream:record()
    assert.are.equal(1, start.device)
    assert.is_true(stop:elapsed_ms(start) >= 0)
    local mine = first:create_stream():record()
    raises("Stream:record: the event belongs to device 0 but the stream to device 1", stream.record, stream, mine)
    raises("the events belong to different devices (0 and 1)", mine.elapsed_ms, mine, start)
  end)

  it("refuse to launch a kernel made on another device, naming both #multigpu", function()
    local kernel = kernels_on(first)
    second:set_current()
    local stream = second:create_stream()
    local buffer = gpurun.zeros(n)
    raises("kernel 'vec_add' belongs to device 0 (get_kernel ran with it current) but the launch "
      .. "goes to a stream of device 1", gpurun.launch, stream, config(), kernel("vec_add"), buffer,
      buffer, buffer, gpurun.u64(n))
    local own = kernels_on(second)
    gpurun.launch(stream, config(), own("vec_add"), buffer, buffer, buffer, gpurun.u64(n))
    stream:sync()
  end)

  it("refuse another device's buffer unless peer access is on #multigpu", function()
    local on_first = gpurun.full(n, 2, "float32")
    local kernel = kernels_on(second)
    local stream = second:create_stream()
    local out = gpurun.zeros(n)
    raises("kernel 'vec_add' parameter 1: the gpurun.Buffer lives on device 0, which the kernel's "
      .. "device 1 cannot reach", gpurun.launch, stream, config(), kernel("vec_add"), on_first,
      on_first, out, gpurun.u64(n))
    if second:can_access_peer(first) then
      assert.are.equal(second, second:enable_peer_access(first))
      assert.are.equal(second, second:enable_peer_access(first)) -- idempotent
      gpurun.launch(stream, config(), kernel("vec_add"), on_first, on_first, out, gpurun.u64(n))
      stream:sync()
      assert.is_true(gpurun.allclose(out, 4, 0, 0))
    else
      raises("cannot access device 0's memory", second.enable_peer_access, second, first)
    end
  end)

  it("build a graph on another device's stream and replay it only there #multigpu", function()
    local kernel = kernels_on(second)
    local stream = second:create_stream()
    local a, out = gpurun.full(n, 1.5, "float32"), gpurun.zeros(n, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config(), kernel("vec_add"), a, a, out, gpurun.u64(n))
    builder:end_building()
    first:set_current()
    local graph = builder:complete() -- instantiated in device 1's context
    assert.are.equal(1, graph.device)
    graph:launch(stream)
    stream:sync()
    raises("the graph was captured on device 1 and replays only there; the stream belongs to device 0",
      graph.launch, graph, first:create_stream())
    second:set_current()
    assert.is_true(gpurun.allclose(out, 3, 0, 0))
  end)

  it("run scripts/multi_device.lua over every device #multigpu", function()
    local process = require("spec.support.process")
    local result = process.gpurun("scripts/multi_device.lua --elements 1048576 --iterations 20")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("devices: " .. gpurun.device_count(), result.stdout, 1, true)
    assert.matches("device 1: ", result.stdout, 1, true)
    assert.matches("result: OK", result.stdout, 1, true)
  end)

  it("run scripts/multi_device.lua --declared over every device #multigpu", function()
    local process = require("spec.support.process")
    local result = process.gpurun("scripts/multi_device.lua --elements 1048577 --iterations 20 --declared")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("device 1: elements", result.stdout, 1, true)
    assert.matches("result: OK (one declaration", result.stdout, 1, true)
  end)
end)
