-- gpurun.Stream: waiting for an event or another stream, the current
-- stream that buffer work goes on, and priorities.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local N = 4096

-- A kernel that keeps the GPU busy, so that work queued behind it shows
-- whether another stream really waited for it.
local busy_kernel
local function busy()
  if not busy_kernel then
    local device = gpurun.Device(0)
    local source = require("gpurun.samples.kernels").source("busy")
    busy_kernel = gpurun.Program(source, "c++", gpurun.ProgramOptions({ arch = "sm_" .. device.arch }))
      :compile("cubin"):get_kernel("busy")
  end
  return busy_kernel
end
local ONE = gpurun.LaunchConfig({ grid = 1, block = 1 })
local BUSY_CYCLES = 40 * 1000 * 1000 -- about 20 ms at 2 GHz

describe("Stream", function()
  local device, stream
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
  end)
  after_each(function()
    stream:close()
  end)

  local function all(buffer, value)
    return gpurun.allclose(buffer, value, 0, 0)
  end

  it("orders work on one stream after an event or another stream #gpu", function()
    local other <close> = device:create_stream()
    local source, target = gpurun.zeros(N, "float32"), gpurun.zeros(N, "float32")
    stream:sync()
    gpurun.launch(stream, ONE, busy(), BUSY_CYCLES)
    source:fill(5, stream)
    local event = stream:record()
    assert.are.equal(other, other:wait(event))
    source:copy_to(target, other)
    other:sync()
    assert.is_true(all(target, 5))

    gpurun.launch(stream, ONE, busy(), BUSY_CYCLES)
    source:fill(7, stream)
    other:wait(stream)
    source:copy_to(target, other)
    other:sync()
    assert.is_true(all(target, 7))
    stream:sync()
  end)

  it("set the current stream for buffer operations #gpu", function()
    local own_stream = device:create_stream()
    gpurun.set_current_stream(own_stream)
    assert.are.equal(own_stream, gpurun.current_stream())
    local buffer <close> = gpurun.full(1000, 3, "int32")
    assert.are.equal(3, buffer:get(1000))
    own_stream:close()
    assert.is_nil(gpurun.current_stream())
    local after = gpurun.full(10, 4, "int32")
    assert.are.equal(4, after:get(10))
    own_stream:close()
    assert.has_error(function() own_stream:sync() end, "attempt to use a closed gpurun.Stream")
    assert.has_error(function() gpurun.set_current_stream(own_stream) end, "attempt to use a closed gpurun.Stream")
  end)
end)

describe("stream priorities", function()
  it("take the device's range, the default the least urgent #gpu", function()
    local device = gpurun.Device(0)
    device:set_current()
    local range = device.stream_priority_range
    assert.are.equal(0, range.least)
    assert.is_true(range.greatest <= range.least)
    local default <close> = device:create_stream()
    assert.are.equal(range.least, default.priority)
    local urgent <close> = device:create_stream({ priority = range.greatest })
    assert.are.equal(range.greatest, urgent.priority)
    local buffer <close> = gpurun.zeros(1024, "int32")
    buffer:fill(7, urgent)
    assert.are.equal(7, buffer:get(1024, urgent))
    assert_contains(("priority %d out of range: this device's stream priorities run from %d (least, the default) to %d")
      :format(range.greatest - 1, range.least, range.greatest),
      error_of(device.create_stream, device, { priority = range.greatest - 1 }))
  end)
end)
