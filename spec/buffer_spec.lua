-- Device buffers: gpurun.empty, zeros, full, array and gpurun.Buffer, its
-- ranges, raw bytes, views and files.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local kernels = require("spec.support.kernels")
local assert_contains = require("spec.support.expect").contains
local device_memory = require("spec.support.device_memory")

local DTYPES = { "float32", "float64", "int32", "uint32", "int64", "uint64", "int8", "uint8", "int16", "uint16",
  "float16", "bfloat16" }
local SIZES = { float32 = 4, float64 = 8, int32 = 4, uint32 = 4, int64 = 8, uint64 = 8, int8 = 1, uint8 = 1,
  int16 = 2, uint16 = 2, float16 = 2, bfloat16 = 2 }
local MiB = 1 << 20

-- The message of the error f raises; fails the spec when f does not raise.
local function error_of(f, ...)
  local ok, err = pcall(f, ...)
  assert(not ok, "expected an error, got none")
  return tostring(err)
end

local function assert_error(fragment, f, ...)
  local err = error_of(f, ...)
  assert(err:find(fragment, 1, true),
    ("expected an error containing %q, got %q"):format(fragment, err))
end

local function float32(value)
  return (string.unpack("<f", string.pack("<f", value)))
end

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

describe("gpurun buffers without a device", function()
  it("reject unknown dtypes, listing the valid ones", function()
    local list = "(expected one of: float32, float64, int32, uint32, int64, uint64, int8, uint8, int16, uint16, float16, bfloat16, complex64, complex128)"
    assert_error("bad argument #2 to 'gpurun.empty' (unknown dtype 'float8' " .. list, gpurun.empty, 4, "float8")
    assert_error("unknown dtype 'f32'", gpurun.zeros, 4, "f32")
    assert_error("bad argument #3 to 'gpurun.full' (unknown dtype 'bool'", gpurun.full, 4, 1, "bool")
    assert_error("bad argument #2 to 'gpurun.array' (unknown dtype 'double'", gpurun.array, { 1 }, "double")
    assert_error("bad argument #2 to 'gpurun.empty' (dtype name expected, got number)", gpurun.empty, 4, 32)
  end)

  it("reject element counts that are not positive integers", function()
    local expected = "bad argument #1 to 'gpurun.empty' (positive element count expected, got "
    assert_error(expected .. "0)", gpurun.empty, 0)
    assert_error(expected .. "-3)", gpurun.empty, -3)
    assert_error(expected .. "1.5)", gpurun.empty, 1.5)
    assert_error(expected .. "string)", gpurun.empty, "8")
    assert_error(expected .. "no value)", gpurun.empty)
    assert_error("positive element count expected", gpurun.zeros, 0 / 0)
    assert_error("bad argument #1 to 'gpurun.empty' (element count 1e+30 too large)", gpurun.empty, 1e30)
    assert_error("element count 4611686018427387904 too large for float64 (the byte size overflows size_t)",
      gpurun.empty, 1 << 62, "float64")
    assert_error("positive element count expected, got 0", gpurun.full, 0, 1)
  end)

  it("reject values that do not fit the dtype, before touching a device", function()
    assert_error("bad argument #2 to 'gpurun.full' (300 out of range for uint8 (0..255))", gpurun.full, 4, 300, "uint8")
    assert_error("-1 out of range for uint8 (0..255)", gpurun.full, 4, -1, "uint8")
    assert_error("-129 out of range for int8 (-128..127)", gpurun.full, 4, -129, "int8")
    assert_error("2147483648 out of range for int32 (-2147483648..2147483647)", gpurun.full, 4, 1 << 31, "int32")
    assert_error("4294967296 out of range for uint32 (0..4294967295)", gpurun.full, 4, 1 << 32, "uint32")
    assert_error("-1 out of range for uint64", gpurun.full, 4, -1, "uint64")
    assert_error("integer expected for int32, got 1.5", gpurun.full, 4, 1.5, "int32")
    assert_error("integer expected for int64, got", gpurun.full, 4, 0 / 0, "int64")
    assert_error("inf out of range for int64", gpurun.full, 4, math.huge, "int64")
    assert_error("1.844674407371e+19 out of range for uint64", gpurun.full, 4, 2.0 ^ 64, "uint64")
    assert_error("1e+300 out of range for float32", gpurun.full, 4, 1e300)
    assert_error("bad argument #2 to 'gpurun.full' (number expected, got string)", gpurun.full, 4, "1")
    assert_error("number expected, got nil", gpurun.full, 4, nil, "float64")
  end)

  it("check every element of an array before touching a device", function()
    assert_error("bad argument #1 to 'gpurun.array' (element 3: number expected, got string)",
      gpurun.array, { 1, 2, "3" }, "int32")
    assert_error("element 2: integer expected for int32, got 2.5", gpurun.array, { 1, 2.5 }, "int32")
    assert_error("element 1: 256 out of range for uint8 (0..255)", gpurun.array, { 256 }, "uint8")
    assert_error("element 2: number expected, got nil", gpurun.array, { 1, nil, 3 }, "float32")
    assert_error("bad argument #1 to 'gpurun.array' (non-empty sequence expected, got an empty table)",
      gpurun.array, {})
    assert_error("bad argument #1 to 'gpurun.array' (table expected, got number)", gpurun.array, 5)
  end)

  it("raise a clear error when no device is current", function()
    -- A fresh process, since other specs make a device current in this one.
    local code = [[
      local gpurun = require("gpurun")
      local calls = {
        function() return gpurun.empty(4) end,
        function() return gpurun.zeros(4, "int32") end,
        function() return gpurun.full(4, 1.5, "float64") end,
        function() return gpurun.array({ 1, 2 }) end,
        function() return gpurun.default_rng(1):random(4) end,
        function() return gpurun.default_rng(1):integers(4, 0, 9) end,
      }
      for _, call in ipairs(calls) do print((select(2, pcall(call)))) end
    ]]
    local result = process.gpurun("-e " .. process.quote(code))
    assert.are.equal(0, result.code, result.stderr)
    local lines = {}
    for line in result.stdout:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal(6, #lines, result.stdout)
    -- Without a driver, that is the reason given; with one, the missing set_current.
    local expected = gpurun.driver_error()
      or "no current CUDA device: call gpurun.Device(id):set_current() first"
    for _, line in ipairs(lines) do
      assert.is_truthy(line:find(expected, 1, true), line)
    end
  end)

end)

describe("gpurun.Buffer", function()
  local device
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
  end)
  after_each(function()
    gpurun.set_current_stream(nil)
  end)

  -- Values at the edges of each dtype, and what reading them back gives.
  local EDGES = {
    float32 = { 0, 1.5, -2.25, 1e-45, 3.4028234663852886e38, -3.4028235e38, 0.1, math.huge, -math.huge },
    float64 = { 0, 0.1, -1e308, 5e-324, math.pi, math.huge, -math.huge },
    int32 = { 0, -1, 7, -2147483648, 2147483647 },
    uint32 = { 0, 1, 4294967295, 2147483648 },
    int64 = { 0, -1, math.mininteger, math.maxinteger, 1 << 40 },
    uint64 = { 0, 1, math.maxinteger, 1 << 40 },
    int8 = { 0, -1, -128, 127 },
    uint8 = { 0, 1, 128, 255 },
    int16 = { 0, -1, -32768, 32767 },
    uint16 = { 0, 1, 32768, 65535 },
    -- the largest finite, the least subnormal, a value that rounds, a tie to even
    float16 = { 0, 1.5, -2.25, 65504, -65519, 2 ^ -24, 0.1, 1 + 2 ^ -11, math.huge, -math.huge },
    bfloat16 = { 0, 1.5, -2.25, 0x1.fep127, 2 ^ -133, 0.1, 1 + 2 ^ -8, math.huge, -math.huge },
  }
  -- What the 16-bit floats hold of those: rounded to nearest even.
  local ROUNDED = {
    float16 = { 0.0, 1.5, -2.25, 65504.0, -65504.0, 2 ^ -24, 0.0999755859375, 1.0, math.huge, -math.huge },
    bfloat16 = { 0.0, 1.5, -2.25, 0x1.fep127, 2 ^ -133, 0.10009765625, 1.0, math.huge, -math.huge },
  }

  local function expected_of(dtype, values)
    local expected = {}
    for i, v in ipairs(values) do
      if dtype == "float16" or dtype == "bfloat16" then
        expected[i] = gpurun[gpurun.dtypes[dtype].scalar](v).value -- as a typed scalar stores it
      elseif dtype == "float32" then
        expected[i] = float32(v)
      elseif dtype == "float64" then
        expected[i] = v + 0.0
      else
        expected[i] = math.tointeger(v)
      end
    end
    return expected
  end

  it("round-trips every dtype through array, copy_from, to_table, get and [] #gpu", function()
    for _, dtype in ipairs(DTYPES) do
      local values = EDGES[dtype]
      local expected = expected_of(dtype, values)
      if ROUNDED[dtype] then assert.are.same(ROUNDED[dtype], expected, dtype) end
      local buffer = gpurun.array(values, dtype)
      assert.are.equal(#values, #buffer)
      assert.are.equal(#values, buffer.size)
      assert.are.equal(dtype, buffer.dtype)
      assert.are.equal(#values * SIZES[dtype], buffer.nbytes)
      local back = buffer:to_table()
      assert.are.same(expected, back, dtype)
      local kind = gpurun.dtypes[dtype].float and "float" or "integer"
      for i = 1, #values do
        assert.are.equal(kind, math.type(back[i]), dtype)
        assert.are.equal(expected[i], buffer[i], dtype)
        assert.are.equal(expected[i], buffer:get(i), dtype)
      end
      local reversed = {}
      for i = #values, 1, -1 do reversed[#reversed + 1] = values[i] end
      buffer:copy_from(reversed)
      assert.are.same(expected_of(dtype, reversed), buffer:to_table(), dtype)
      buffer:close()
    end
  end)

  it("keeps NaN, and accepts floats with integral values for integer dtypes #gpu", function()
    local nan = gpurun.array({ 0 / 0, 1 }, "float64"):get(1)
    assert.is_true(nan ~= nan)
    local nan32 = gpurun.array({ 0 / 0 }, "float32")[1]
    assert.is_true(nan32 ~= nan32)
    assert.are.same({ 3, -4 }, gpurun.array({ 3.0, -4.0 }, "int8"):to_table())
    -- uint64 values above math.maxinteger come back as floats
    local big = gpurun.array({ 2.0 ^ 63, 2.0 ^ 64 - 2048 }, "uint64"):to_table()
    assert.are.same({ 2.0 ^ 63, 2.0 ^ 64 - 2048 }, big)
    assert.are.equal("float", math.type(big[1]))
  end)

  it("describes itself #gpu", function()
    local buffer = gpurun.empty(4096)
    assert.are.equal("gpurun.Buffer(float32, 4096)", tostring(buffer))
    assert.are.equal("float32", buffer.dtype)
    assert.are.equal(16384, buffer.nbytes)
    assert.are.equal("integer", math.type(buffer.ptr))
    assert.is_true(buffer.ptr ~= 0)
    assert.are.equal(0, buffer.device)
    assert.is_nil(buffer.no_such_field)
    assert.are.equal("gpurun.Buffer(uint8, 3)", tostring(gpurun.zeros(3, "uint8")))
  end)

  it("fills every dtype, including 8-byte patterns cuMemsetD32 cannot repeat #gpu", function()
    local cases = {
      { "float32", 2.5 }, { "float64", 1.5 }, { "float64", -0.0 }, { "int32", -7 }, { "uint32", 4000000000 },
      { "int64", -1 }, { "int64", (1 << 40) + 3 }, { "uint64", math.maxinteger }, { "int8", -128 }, { "uint8", 200 },
      { "int16", -300 }, { "uint16", 60000 }, { "float16", 0.1 }, { "float16", -65504 }, { "bfloat16", -3.5 },
      { "bfloat16", 2 ^ -133 },
    }
    for _, case in ipairs(cases) do
      local dtype, value = case[1], case[2]
      -- a count that is no power of two, so the last doubling copy is partial
      for _, n in ipairs({ 1, 5, 100003 }) do
        local buffer = gpurun.empty(n, dtype)
        assert.are.equal(buffer, buffer:fill(value))
        local back = buffer:to_table()
        local expected = expected_of(dtype, { value })[1]
        for i = 1, n do
          if back[i] ~= expected then
            error(("%s fill(%s) over %d elements: element %d is %s"):format(dtype, value, n, i, back[i]))
          end
        end
        buffer:close()
      end
    end
  end)

  it("makes zeros and full buffers #gpu", function()
    for _, dtype in ipairs(DTYPES) do
      local zeros = gpurun.zeros(1000, dtype)
      local full = gpurun.full(1000, 100, dtype)
      assert.is_true(gpurun.allclose(zeros, 0, 0, 0), dtype)
      assert.is_true(gpurun.allclose(full, 100, 0, 0), dtype)
      assert.are.equal(0, zeros[1000])
      assert.are.equal(100, full[1])
    end
    assert.are.equal("float32", gpurun.zeros(1).dtype)
    assert.are.equal((1 << 33) + 1, gpurun.full(3, (1 << 33) + 1, "int64")[3])
  end)

  it("copies between buffers of the same count and dtype #gpu", function()
    local source = gpurun.array({ 1, 2, 3, 4 }, "int32")
    local destination = gpurun.zeros(4, "int32")
    assert.are.equal(destination, destination:copy_from(source))
    assert.are.same({ 1, 2, 3, 4 }, destination:to_table())
    source:fill(9)
    source:copy_to(destination)
    assert.are.same({ 9, 9, 9, 9 }, destination:to_table())
    assert_error("bad argument #1 to 'Buffer:copy_from' (gpurun.Buffer of 4 int32 elements expected, got 5 int32 elements)",
      function() destination:copy_from(gpurun.zeros(5, "int32")) end)
    assert_error("gpurun.Buffer of 4 int32 elements expected, got 4 float32 elements",
      function() destination:copy_from(gpurun.zeros(4, "float32")) end)
    assert_error("bad argument #1 to 'Buffer:copy_to' (gpurun.Buffer of 4 int32 elements expected, got 3 int32 elements)",
      function() source:copy_to(gpurun.zeros(3, "int32")) end)
    assert_error("bad argument #1 to 'Buffer:copy_from' (table of 4 elements expected, got 3)",
      function() destination:copy_from({ 1, 2, 3 }) end)
    assert_error("bad argument #1 to 'Buffer:copy_from' (string of 16 bytes (4 int32 elements) expected, got 4 bytes)",
      function() destination:copy_from("1234") end)
    assert_error("bad argument #1 to 'Buffer:copy_to' (gpurun.Buffer, gpurun.PinnedBuffer or file expected, got table)",
      function() source:copy_to({}) end)
  end)

  it("refuses out-of-range values and leaves the buffer as it was #gpu", function()
    local bytes = gpurun.array({ 1, 2, 3 }, "uint8")
    assert_error("bad argument #1 to 'Buffer:fill' (300 out of range for uint8 (0..255))", function() bytes:fill(300) end)
    assert_error("bad argument #1 to 'Buffer:copy_from' (element 3: -1 out of range for uint8 (0..255))",
      function() bytes:copy_from({ 4, 5, -1 }) end)
    assert_error("bad argument #2 to 'Buffer:set' (integer expected for uint8, got 0.5)", function() bytes:set(1, 0.5) end)
    assert.are.same({ 1, 2, 3 }, bytes:to_table())
    local ints = gpurun.zeros(2, "int32")
    assert_error("integer expected for int32, got 1.5", function() ints:fill(1.5) end)
    assert_error("out of range for float32", function() gpurun.zeros(2):fill(-1e39) end)
    assert.are.same({ 0, 0 }, ints:to_table())
  end)

  it("reads and writes single elements, refusing indices out of range #gpu", function()
    local buffer = gpurun.array({ 10, 20, 30 }, "int64")
    assert.are.equal(20, buffer:get(2))
    assert.are.equal(buffer, buffer:set(2, -5))
    assert.are.equal(-5, buffer[2])
    assert.are.equal(30, buffer[3.0])
    assert_error("bad argument #1 to 'Buffer:get' (element index 0 out of range (1..3))", function() return buffer:get(0) end)
    assert_error("bad argument #1 to 'Buffer:get' (element index 4 out of range (1..3))", function() return buffer:get(4) end)
    assert_error("bad argument #1 to 'Buffer:set' (element index -1 out of range (1..3))", function() return buffer:set(-1, 1) end)
    assert_error("bad argument #2 to 'Buffer.__index' (element index 4 out of range (1..3))", function() return buffer[4] end)
    assert_error("bad argument #1 to 'Buffer:get' (integer element index expected, got 1.5)", function() return buffer:get(1.5) end)
    assert_error("bad argument #1 to 'Buffer:get' (integer element index expected, got nil)", function() return buffer:get() end)
    assert.are.same({ 10, -5, 30 }, buffer:to_table())
  end)

  it("orders its work on the current stream or on an explicit one #gpu", function()
    local n = 100000
    local stream <close> = device:create_stream()
    gpurun.set_current_stream(stream)
    local a = gpurun.zeros(n, "float64")
    a:fill(2.5)
    local b = gpurun.empty(n, "float64")
    b:copy_from(a)
    assert.is_true(gpurun.allclose(b, 2.5, 0, 0))
    assert.are.equal(2.5, b[n])
    gpurun.set_current_stream(nil)

    local other <close> = device:create_stream()
    a:fill(-1, other)
    a:copy_to(b, other)
    local values = b:to_table(other)
    assert.are.equal(-1, values[1])
    assert.are.equal(-1, values[n])
    b:set(500, 7, other)
    assert.are.equal(7, b:get(500, other))
    b:copy_from(gpurun.default_rng(1):random_table(n), other)
    assert.are.same(gpurun.default_rng(1):random_table(n), b:to_table(other))

    other:close()
    assert_error("attempt to use a closed gpurun.Stream", function() a:fill(1, other) end)
    assert_error("gpurun.Stream expected", function() a:fill(1, "stream") end)
  end)

  it("refuses to run on a stream that is being captured, and ends the capture #gpu", function()
    local stream <close> = device:create_stream()
    local a = gpurun.zeros(16, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    assert_error("Buffer:fill: the stream is being captured by a GraphBuilder", function() a:fill(1, stream) end)
    assert.are.equal("abandoned", builder.state)
    a:fill(2, stream)
    assert.are.equal(2, a:get(16, stream))
  end)

  it("closes idempotently and refuses use after close #gpu", function()
    local buffer = gpurun.full(8, 1)
    local other = gpurun.zeros(8)
    buffer:close()
    buffer:close()
    assert.are.equal("gpurun.Buffer(closed)", tostring(buffer))
    local closed = "attempt to use a closed gpurun.Buffer"
    assert_error(closed, function() buffer:fill(1) end)
    assert_error(closed, function() return buffer:to_table() end)
    assert_error(closed, function() return buffer[1] end)
    assert_error(closed, function() return #buffer end)
    assert_error(closed, function() return buffer.dtype end)
    assert_error(closed, function() return buffer.ptr end)
    assert_error(closed, function() other:copy_from(buffer) end)
    assert_error(closed, function() buffer:copy_to(other) end)
    assert_error(closed, function() return gpurun.allclose(buffer, 1) end)
    assert_error(closed, function() return gpurun.compare(other, buffer) end)
    do
      local scoped <close> = gpurun.zeros(4)
      buffer = scoped
    end
    assert_error(closed, function() return buffer:get(1) end)
  end)

  it("frees what it allocates: 10,000 cycles leave free memory where it was #gpu", function()
    gpurun.empty(MiB):close() -- let the allocator set itself up first
    local settles = device_memory.settles
    settles("closing", 10000 << 18, function()
      for _ = 1, 10000 do
        local buffer = gpurun.empty(1 << 16, "float32")
        buffer:close()
      end
    end)
    settles("collecting", 160 << 24, function()
      for _ = 1, 160 do
        gpurun.empty(4 * MiB, "float32") -- 16 MiB each, left to the collector
      end
      collectgarbage("collect")
      collectgarbage("collect")
    end)
  end)

  it("raises a driver error naming the size when allocation fails #gpu", function()
    local _, total = gpurun.mem_info()
    local count = total // 4 * 2 -- twice the device's memory
    assert_error(("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory) while allocating "), gpurun.empty, count)
    assert_error((" for %d float32 elements"):format(count), gpurun.empty, count)
  end)
end)

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
    -- The 1 GiB base is freed once its last view goes.
    device_memory.settles("a view of a dropped base, closed and collected", 1 << 30, function()
      local view
      do
        local base = gpurun.full(1 << 28, 3, "float32")
        view = base:view(2, 10)
      end
      collectgarbage(); collectgarbage()
      assert.are.same({ 3, 3 }, view:to_table(1, 2)) -- the base is still alive
      view:close()
      view:close()
      assert_contains("attempt to use a closed gpurun.Buffer", error_of(view.to_table, view))
      view = nil -- luacheck: ignore 311 (the collection below is the test)
      collectgarbage(); collectgarbage()
    end)

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
    base = nil -- luacheck: ignore 311 (the collection below is the test)
    collectgarbage(); collectgarbage() -- the graph keeps the view, the view keeps the base
    graph:launch(stream)
    stream:sync()
    graph:close()
  end)
end)

describe("files", function()
  before_each(function()
    kernels.setup()
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
