-- gpurun.Device: what it says of the GPU, one object per ordinal, its
-- streams, attributes by name, and the error for an ordinal not there.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

describe("Device", function()
  local device
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
  end)

  it("describes the GPU #gpu", function()
    assert.is_string(device.name)
    assert.matches("^%d%d+$", device.arch)
    local cc = device.compute_capability
    assert.are.equal(device.arch, cc.major .. cc.minor)
    assert.are.equal(0, device.id)
    assert.is_true(device.total_memory > 1 << 30)
    assert.is_true(device.multiprocessor_count > 0)
    assert.matches("^gpurun.Device%(0, ", tostring(device))
  end)

  it("is one object per ordinal #gpu", function()
    assert.are.equal(gpurun.Device(0), gpurun.Device())
    assert.are.equal(device, gpurun.Device(0))
  end)

  it("raises for ordinals that do not exist #gpu", function()
    assert.has_error(function() gpurun.Device(-1) end,
      ("CUDA device -1 not found: %d device(s) visible"):format(gpurun.device_count()))
    assert.has_error(function() gpurun.Device(gpurun.device_count()) end)
    assert.has_error(function() gpurun.Device("zero") end)
  end)

  it("syncs and creates non-blocking streams #gpu", function()
    device:sync()
    local stream <close> = device:create_stream()
    assert.is_true(stream.handle ~= 0)
    assert.are.equal(0, stream.device)
    stream:sync()
    assert.is_true(stream:query())
  end)

  it("survives the module being opened again #gpu", function()
    local stream <close> = device:create_stream()
    package.loaded.gpurun = nil
    local again = require("gpurun")
    collectgarbage("collect")
    collectgarbage("collect")
    local buffer <close> = again.full(16, 2, "int32")
    stream:sync()
    device:sync()
    assert.are.equal(2, buffer:get(16))
  end)

  it("closes idempotently and refuses use after close #gpu", function()
    local dev = gpurun.Device(0)
    dev:close()
    dev:close()
    assert.has_error(function() return dev.name end, "attempt to use a closed gpurun.Device")
    assert.are_not.equal(dev, gpurun.Device(0))
    gpurun.Device(0):set_current()
  end)
end)

describe("device attributes by name", function()
  it("read CU_DEVICE_ATTRIBUTE_* by its lower-case name or its number #gpu", function()
    local device = gpurun.Device(0)
    device:set_current()
    assert.are.equal(32, device:get_attribute("warp_size"))
    assert.are.equal(device.multiprocessor_count, device:get_attribute("multiprocessor_count"))
    assert.are.equal(device:get_attribute(97), device:get_attribute("max_shared_memory_per_block_optin"))
    assert.are.equal(device.compute_capability.major, device:get_attribute("compute_capability_major"))
    assert_contains("unknown device attribute 'warp'", error_of(device.get_attribute, device, "warp"))
  end)
end)

describe("the Device error", function()
  it("names the missing ordinal and how many devices are visible #gpu", function()
    local ok, err = pcall(gpurun.Device, 99)
    assert.is_false(ok)
    assert.matches("CUDA device 99 not found: %d+ device%(s%) visible", err)
  end)
end)
