-- gpurun.PinnedBuffer: page-locked host memory, its asynchronous copies on a
-- stream and inside a graph.
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")

local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local function range(first, last)
  local t = {}
  for i = first, last do t[#t + 1] = i end
  return t
end

describe("gpurun.PinnedBuffer", function()
  local device
  before_each(function()
    device = kernels.setup()
  end)

  it("holds elements the host reads and writes directly #gpu", function()
    local pinned <close> = gpurun.pinned(8, "int16")
    assert.are.equal(8, #pinned)
    assert.are.equal(8, pinned.size)
    assert.are.equal(16, pinned.nbytes)
    assert.are.equal("int16", pinned.dtype)
    assert.is_true(pinned.ptr ~= 0)
    pinned:fill(7)
    pinned[1] = -32768
    pinned:set(8, 32767)
    assert.are.equal(-32768, pinned[1])
    assert.are.equal(32767, pinned:get(8))
    assert.are.same({ -32768, 7, 7, 7, 7, 7, 7, 32767 }, pinned:to_table())
    pinned:copy_from({ 1, 2 }, 3)
    assert.are.same({ 1, 2 }, pinned:to_table(3, 2))
    pinned:copy_from(string.pack("<i2<i2", -5, 5), 7)
    assert.are.equal(string.pack("<i2<i2", -5, 5), pinned:to_bytes(7))
    assert_contains("bad argument #3 to 'PinnedBuffer.__newindex' (40000 out of range for int16",
      error_of(function() pinned[2] = 40000 end))
    assert.are.equal(7, pinned[2]) -- unchanged
    assert.matches("gpurun.PinnedBuffer%(int16, 8%)", tostring(pinned))
    pinned:close()
    pinned:close()
    assert_contains("attempt to use a closed gpurun.PinnedBuffer", error_of(function() return pinned[1] end))
  end)

  it("holds float16 and bfloat16 elements, stored as their typed scalars store them #gpu", function()
    for _, dtype in ipairs({ "float16", "bfloat16" }) do
      local scalar = gpurun[gpurun.dtypes[dtype].scalar]
      local values = { 1 / 3, -0.1, 2 ^ -24, 1 + 2 ^ -11, 0, -0.0, math.huge, 1e4 }
      local pinned <close> = gpurun.pinned(#values, dtype)
      assert.are.equal(2 * #values, pinned.nbytes)
      pinned:copy_from(values)
      local bytes = {}
      for i, v in ipairs(values) do
        bytes[i] = scalar(v).bytes
        assert.are.equal(scalar(v).value, pinned[i], dtype .. " element " .. i)
      end
      assert.are.equal(table.concat(bytes), pinned:to_bytes(), dtype)
      pinned[1] = 0.5
      assert.are.equal(0.5, pinned:get(1))
      assert_contains("out of range for " .. dtype, error_of(function() pinned[2] = 1e39 end))
      local device_copy <close> = gpurun.array(values, dtype)
      assert.are.equal(table.concat(bytes, "", 2), device_copy:to_bytes(2), dtype)
      assert.are.same(pinned:to_table(2), device_copy:to_table(2), dtype)
    end
  end)

  it("copies to and from buffers on a stream without waiting, and waits when the host looks #gpu", function()
    local stream <close> = device:create_stream()
    local n = 1 << 22
    local source <close> = gpurun.pinned(n, "float32")
    source:fill(2.5)
    local buffer <close> = gpurun.zeros(n, "float32")
    local back <close> = gpurun.pinned(n, "float32")
    back:fill(0)
    buffer:copy_from(source, stream) -- queued
    buffer:copy_to(back, stream)     -- queued behind it
    assert.are.equal(2.5, back[n])   -- waits for the copy into back
    assert.is_true(gpurun.allclose(buffer, 2.5, 0, 0))
    -- A range of the buffer against a PinnedBuffer of that size.
    local small <close> = gpurun.pinned(4, "float32")
    small:copy_from({ 1, 2, 3, 4 })
    buffer:copy_from(small, 5, stream)
    buffer:copy_to(back, stream)
    assert.are.same({ 2.5, 1, 2, 3, 4, 2.5 }, back:to_table(4, 6))
    -- Writing the host memory waits for the copy queued from it.
    source:fill(1)
    buffer:copy_from(source, stream)
    source:fill(9) -- after the copy has read the ones
    stream:sync()
    assert.is_true(gpurun.allclose(buffer, 1, 0, 0))
  end)

  it("copies with no stream by waiting for the device, and on the current stream #gpu", function()
    local pinned <close> = gpurun.pinned(1000, "int64")
    pinned:copy_from(range(1, 1000))
    local buffer <close> = gpurun.zeros(1000, "int64")
    buffer:copy_from(pinned)
    assert.are.equal(1000, buffer:get(1000))
    local stream <close> = device:create_stream()
    gpurun.set_current_stream(stream)
    buffer:fill(-1)
    buffer:copy_to(pinned)
    assert.are.equal(-1, pinned[500])
    gpurun.set_current_stream(nil)
  end)

  it("is kept alive by a graph that copies it, whose replays move the data #gpu", function()
    local stream <close> = device:create_stream()
    local n = 4096
    local input = gpurun.pinned(n, "float32")
    local output = gpurun.pinned(n, "float32")
    input:fill(3)
    output:fill(0)
    local work <close> = gpurun.zeros(n, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    work:copy_from(input, builder)
    work:copy_to(output, builder)
    builder:end_building()
    local graph = builder:complete()
    builder:close()
    assert.are.equal(2, graph.node_count)
    assert_contains("gpurun.PinnedBuffer is used by 1 graph(s) or graph builder(s)", error_of(input.close, input))
    input = nil -- luacheck: ignore 311 (the collection below is the test)
    collectgarbage(); collectgarbage() -- the graph keeps it
    for _ = 1, 8 do gpurun.pinned(n, "float32"):fill(-1) end -- memory handed out again
    graph:launch(stream)
    stream:sync()
    assert.are.equal(3, output[1])
    assert.are.equal(3, output[n])
    output:fill(0)
    graph:launch(stream)
    stream:sync()
    assert.are.same({ 3, 3 }, output:to_table(n - 1))
    graph:close()
    output:close()
  end)

  it("frees its memory: 2,000 cycles of 1 MiB #gpu", function()
    local stream <close> = device:create_stream()
    local buffer <close> = gpurun.zeros(1 << 18, "float32")
    for _ = 1, 2000 do
      local pinned <close> = gpurun.pinned(1 << 18, "float32")
      buffer:copy_to(pinned, stream) -- closed while the copy may still run: the close waits
    end
    for _ = 1, 200 do
      local pinned = gpurun.pinned(1 << 18, "float32")
      buffer:copy_to(pinned, stream) -- dropped: the collector frees it after the copy
    end
    collectgarbage(); collectgarbage()
    stream:sync()
  end)
end)
