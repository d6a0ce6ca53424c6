-- Data in and out of buffers without tables: ranges of a buffer, views,
-- raw bytes, page-locked PinnedBuffers (asynchronous copies on a stream and
-- inside a graph) and Lua files streamed through pinned staging.
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

-- The little-endian bytes of a list of int32 values.
local function int32_bytes(values)
  local parts = {}
  for i, v in ipairs(values) do parts[i] = string.pack("<i4", v) end
  return table.concat(parts)
end

describe("buffer ranges and bytes", function()
  local device
  before_each(function()
    device = kernels.setup()
  end)

  it("fill, copy and read ranges counted from 1 #gpu", function()
    local buffer <close> = gpurun.array(range(1, 10), "int32")
    buffer:fill(0, 3, 4) -- elements 3..6
    assert.are.same({ 1, 2, 0, 0, 0, 0, 7, 8, 9, 10 }, buffer:to_table())
    buffer:fill(-1, 9) -- from 9 to the end
    assert.are.same({ 0, 0, 7, 8 }, buffer:to_table(5, 4))
    assert.are.same({ -1, -1 }, buffer:to_table(9))
    buffer:copy_from({ 100, 200 }, 2) -- as many as the table holds
    assert.are.same({ 1, 100, 200, 0 }, buffer:to_table(1, 4))
    local other <close> = gpurun.zeros(3, "int32")
    buffer:copy_to(other, 2) -- elements 2..4 of buffer
    assert.are.same({ 100, 200, 0 }, other:to_table())
    buffer:copy_from(other, 8, 3)
    assert.are.same({ 100, 200, 0 }, buffer:to_table(8, 3))
    assert_contains("3 elements from element 9 run past the last (10)", error_of(buffer.copy_from, buffer, other, 9))
  end)

  it("take the stream after the range #gpu", function()
    local stream <close> = device:create_stream()
    local buffer <close> = gpurun.zeros(1024, "float32")
    buffer:fill(2, 513, 512, stream)
    buffer:fill(1, 1, 512, stream)
    assert.are.same({ 1, 2 }, buffer:to_table(512, 2, stream))
    assert.are.same({ 2 }, buffer:to_table(1024, stream)) -- a stream where the count would be
    assert.are.equal(string.pack("<ff", 1, 2), buffer:to_bytes(512, 2, stream))
  end)

  it("move raw elements as strings, checking their length #gpu", function()
    local values = { 0, 1, -1, 2147483647, -2147483648, 12345 }
    local buffer <close> = gpurun.from_bytes(int32_bytes(values), "int32")
    assert.are.equal(6, #buffer)
    assert.are.equal("int32", buffer.dtype)
    assert.are.same(values, buffer:to_table())
    assert.are.equal(int32_bytes(values), buffer:to_bytes())
    assert.are.equal(int32_bytes({ 1, -1 }), buffer:to_bytes(2, 2))
    buffer:copy_from(int32_bytes({ 7, 8 }), 5)
    assert.are.same({ 7, 8 }, buffer:to_table(5))
    buffer:copy_from(int32_bytes({ 6, 5, 4, 3, 2, 1 }))
    assert.are.same({ 6, 5, 4, 3, 2, 1 }, buffer:to_table())
    assert_contains("string of 24 bytes (6 int32 elements) expected, got 4 bytes",
      error_of(buffer.copy_from, buffer, "abcd"))

    local doubles <close> = gpurun.from_bytes(string.pack("<dd", 0.5, -1e300), "float64")
    assert.are.same({ 0.5, -1e300 }, doubles:to_table())
    local bytes <close> = gpurun.from_bytes("\0\1\254\255", "uint8")
    assert.are.same({ 0, 1, 254, 255 }, bytes:to_table())
    local big = string.rep(string.pack("<f", 1.5), 1 << 20)
    local large <close> = gpurun.from_bytes(big)
    assert.is_true(gpurun.allclose(large, 1.5, 0, 0))
    assert.are.equal(big, large:to_bytes())
  end)
end)

describe("buffer views", function()
  local device, kernel
  before_each(function()
    local _
    device, _, kernel = kernels.setup()
  end)

  it("share memory with their base, from a 1-based first element #gpu", function()
    local base <close> = gpurun.array(range(1, 16), "float32")
    local view = base:view(5, 4)
    assert.are.equal(4, #view)
    assert.are.equal(base, view.base)
    assert.is_nil(base.base)
    assert.are.equal(base.ptr + 4 * 4, view.ptr)
    assert.are.equal(16, view.nbytes)
    assert.are.equal("float32", view.dtype)
    assert.are.same({ 5, 6, 7, 8 }, view:to_table())
    view:fill(0)
    assert.are.same({ 4, 0, 0, 0, 0, 9 }, base:to_table(4, 6))
    view:set(1, 42)
    assert.are.equal(42, base[5])
    assert.matches("gpurun.Buffer%(float32, 4, a view from element 5%)", tostring(view))
    local rest = base:view(13) -- to the end
    assert.are.same({ 13, 14, 15, 16 }, rest:to_table())
    local inner = view:view(2, 2) -- a view of a view is a view of the base
    assert.are.equal(base, inner.base)
    assert.are.equal(base.ptr + 5 * 4, inner.ptr)
  end)

  it("pass their own pointer to a kernel #gpu", function()
    local stream <close> = device:create_stream()
    local a <close> = gpurun.full(64, 1, "float32")
    local out <close> = gpurun.zeros(64, "float32")
    local half = out:view(33, 32)
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 1, block = 32 }), kernel("vec_add"),
      a:view(1, 32), a:view(33, 32), half, gpurun.u64(32))
    stream:sync()
    assert.are.same(0, out:get(32, stream))
    assert.is_true(gpurun.allclose(half, 2, 0, 0))
    assert.is_true(gpurun.allclose(out:view(1, 32), 0, 0, 0))
  end)

  it("keep their base alive and close with it, freeing nothing themselves #gpu", function()
    collectgarbage()
    local free_before = gpurun.mem_info()
    local view
    do
      local base = gpurun.full(1 << 24, 3, "float32")
      view = base:view(2, 10)
    end
    collectgarbage(); collectgarbage()
    assert.are.same({ 3, 3 }, view:to_table(1, 2)) -- the base is still alive
    view:close()
    view:close()
    assert_contains("attempt to use a closed gpurun.Buffer", error_of(view.to_table, view))

    local base = gpurun.full(16, 1, "float32")
    local a, b = base:view(1, 8), base:view(9)
    base:close()
    assert_contains("attempt to use a closed gpurun.Buffer (the buffer this is a view of was closed)",
      error_of(a.fill, a, 0))
    assert_contains("attempt to use a closed gpurun.Buffer", error_of(function() return b.size end))
    local stream <close> = device:create_stream()
    assert_contains("kernel 'vec_add' parameter 1 (.u64): attempt to use a closed gpurun.Buffer",
      error_of(gpurun.launch, stream, gpurun.LaunchConfig({ grid = 1, block = 8 }),
        kernel("vec_add"), a, a, b, gpurun.u64(8)))
    view = nil
    collectgarbage(); collectgarbage()
    assert.is_true(gpurun.mem_info() >= free_before - (1 << 20))
  end)

  it("count their graph uses for their base, which then refuses to close #gpu", function()
    local stream <close> = device:create_stream()
    local base = gpurun.zeros(64, "float32")
    local ones <close> = gpurun.full(64, 1, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 32 })
    local add = kernel("vec_add")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, config, add, ones, ones, base:view(33), gpurun.u64(32))
    builder:end_building()
    local graph = builder:complete()
    builder:close()
    assert_contains("gpurun.Buffer is used by 1 graph(s) or graph builder(s)", error_of(base.close, base))
    base = nil
    collectgarbage(); collectgarbage() -- the graph keeps the view, the view keeps the base
    graph:launch(stream)
    stream:sync()
    graph:close()
  end)
end)

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
    input = nil
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

describe("files", function()
  local device
  before_each(function()
    device = kernels.setup()
  end)

  it("stream into and out of buffers through pinned staging, from the file's position #gpu", function()
    local n = (5 << 20) + 3 -- past two 8 MiB chunks of float32, not a whole number of them
    local path = os.tmpname()
    local buffer <close> = gpurun.default_rng(7):random(n, "float32")
    local file = assert(io.open(path, "wb"))
    file:write("HEAD")
    buffer:copy_to(file)
    file:write("TAIL")
    file:close()
    file = assert(io.open(path, "rb"))
    assert.are.equal("HEAD", file:read(4))
    local back <close> = gpurun.zeros(n, "float32")
    back:copy_from(file)
    assert.are.equal("TAIL", file:read("a"))
    file:close()
    assert.is_true(gpurun.allclose(back, buffer, 0, 0))

    file = assert(io.open(path, "rb"))
    file:seek("set", 4)
    local part <close> = gpurun.zeros(10, "float32")
    part:copy_from(file, 1, 10)
    assert.are.same(buffer:to_table(1, 10), part:to_table())
    file:close()

    file = assert(io.open(path, "rb"))
    local tail <close> = gpurun.zeros(n, "float32")
    file:seek("set", 12)
    assert_contains(("Buffer:copy_from: reading the file: it ended after %d of %d bytes"):format(n * 4 - 4, n * 4),
      error_of(tail.copy_from, tail, file))
    file:close()
    os.remove(path)
  end)
end)
