-- Device buffers (gpurun.empty, zeros, full, array and gpurun.Buffer), the
-- seeded generator (gpurun.default_rng) and the result checks (compare,
-- allclose).
local gpurun = require("gpurun")
local process = require("spec.support.process")

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

-- An independent splitmix64 and xoshiro256**, in Lua's wrapping 64-bit
-- integers, to pin the generator's numbers down.
local function splitmix64(seed)
  local x = seed
  return function()
    x = x + 0x9e3779b97f4a7c15
    local z = x
    z = (z ~ (z >> 30)) * 0xbf58476d1ce4e5b9
    z = (z ~ (z >> 27)) * 0x94d049bb133111eb
    return z ~ (z >> 31)
  end
end

local function reference_rng(seed)
  local seeder = splitmix64(seed)
  local s = { seeder(), seeder(), seeder(), seeder() }
  local function rotl(v, k) return (v << k) | (v >> (64 - k)) end
  return function()
    local result = rotl(s[2] * 5, 7) * 9
    local t = s[2] << 17
    s[3] = s[3] ~ s[1]
    s[4] = s[4] ~ s[2]
    s[2] = s[2] ~ s[3]
    s[1] = s[1] ~ s[4]
    s[3] = s[3] ~ t
    s[4] = rotl(s[4], 45)
    return result
  end
end

describe("gpurun buffers without a device", function()
  it("reject unknown dtypes, listing the valid ones", function()
    local list = "(expected one of: float32, float64, int32, uint32, int64, uint64, int8, uint8, int16, uint16, float16, bfloat16)"
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

  it("compare and allclose name a first argument that is neither a buffer nor a sequence", function()
    assert_error("bad argument #1 to 'gpurun.compare' (gpurun.Buffer or table of numbers expected, got number)", gpurun.compare, 1, 1)
    assert_error("bad argument #1 to 'gpurun.allclose' (gpurun.Buffer or table of numbers expected, got string)", gpurun.allclose, "1", 1)
    assert_error("bad argument #1 to 'gpurun.allclose' (gpurun.Buffer or table of numbers expected, got no value)", gpurun.allclose)
  end)
end)

describe("gpurun.Generator without a device", function()
  it("is xoshiro256** seeded through splitmix64", function()
    assert.are.equal(0xe220a8397b1dcdaf, splitmix64(0)()) -- the published first output for seed 0
    for _, seed in ipairs({ 0, 1, 42, -7, math.maxinteger }) do
      local next_u64 = reference_rng(seed)
      local values = gpurun.default_rng(seed):random_table(1000)
      for i = 1, 1000 do
        assert.are.equal((next_u64() >> 11) * 2.0 ^ -53, values[i])
      end
    end
  end)

  it("gives the same numbers for the same seed and different ones otherwise", function()
    local a = gpurun.default_rng(1234):random_table(4096)
    local b = gpurun.default_rng(1234):random_table(4096)
    local c = gpurun.default_rng(1235):random_table(4096)
    assert.are.same(a, b)
    local differ = 0
    for i = 1, 4096 do
      assert.is_true(a[i] >= 0 and a[i] < 1)
      assert.are.equal("float", math.type(a[i]))
      if a[i] ~= c[i] then differ = differ + 1 end
    end
    assert.is_true(differ > 4000)
  end)

  it("continues the sequence from call to call", function()
    local whole = gpurun.default_rng(9):random_table(300)
    local rng = gpurun.default_rng(9)
    local first, second = rng:random_table(100), rng:random_table(200)
    for i = 1, 100 do assert.are.equal(whole[i], first[i]) end
    for i = 1, 200 do assert.are.equal(whole[100 + i], second[i]) end
  end)

  it("gives float32 tables rounded exactly as float32 buffers hold them", function()
    local next_u64 = reference_rng(5)
    local values = gpurun.default_rng(5):random_table(1000, "float32")
    for i = 1, 1000 do
      local expected = (next_u64() >> 40) * 2.0 ^ -24
      assert.are.equal(expected, values[i])
      assert.are.equal(float32(values[i]), values[i])
    end
  end)

  it("checks its arguments before touching a device", function()
    local rng = gpurun.default_rng(0)
    assert_error("bad argument #1 to 'gpurun.default_rng' (integer seed expected, got no value)", gpurun.default_rng)
    assert_error("integer seed expected, got 1.5", gpurun.default_rng, 1.5)
    assert_error("bad argument #1 to 'Generator:random' (positive element count expected, got 0)", function() return rng:random(0) end)
    assert_error("bad argument #2 to 'Generator:random' (float dtype (float32, float64, float16, bfloat16) expected, got int32", function() return rng:random(4, "int32") end)
    assert_error("unknown dtype 'float8'", function() return rng:random(4, "float8") end)
    assert_error("bad argument #4 to 'Generator:integers' (integer dtype expected, got float32", function() return rng:integers(4, 0, 2, "float32") end)
    assert_error("bad argument #3 to 'Generator:integers' (high (5) must be greater than low (5))", function() return rng:integers(4, 5, 5) end)
    assert_error("range [0, 300) does not fit uint8 (0..255)", function() return rng:integers(4, 0, 300, "uint8") end)
    assert_error("range [-1, 3) does not fit uint32", function() return rng:integers(4, -1, 3, "uint32") end)
    assert_error("float dtype (float32, float64, float16, bfloat16) expected, got uint8", function() return rng:random_table(4, "uint8") end)
  end)

  it("closes idempotently and refuses use after close", function()
    local rng = gpurun.default_rng(3)
    assert.are.equal("gpurun.Generator(seed=3)", tostring(rng))
    rng:close()
    rng:close()
    assert.are.equal("gpurun.Generator(closed)", tostring(rng))
    assert_error("attempt to use a closed gpurun.Generator", function() return rng:random_table(2) end)
    do
      local scoped <close> = gpurun.default_rng(4)
      rng = scoped
    end
    assert_error("attempt to use a closed gpurun.Generator", function() return rng:random_table(2) end)
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
    collectgarbage("collect")
    local before = gpurun.mem_info()
    for _ = 1, 10000 do
      local buffer = gpurun.empty(1 << 16, "float32")
      buffer:close()
    end
    local after = gpurun.mem_info()
    assert.is_true(math.abs(before - after) <= 4 * MiB,
      ("free memory moved by %.1f MiB after closing"):format((before - after) / MiB))
    for _ = 1, 100 do
      gpurun.empty(4 * MiB, "float32") -- 16 MiB each, left to the collector
    end
    collectgarbage("collect")
    collectgarbage("collect")
    after = gpurun.mem_info()
    assert.is_true(math.abs(before - after) <= 4 * MiB,
      ("free memory moved by %.1f MiB after collecting"):format((before - after) / MiB))
  end)

  it("raises a driver error naming the size when allocation fails #gpu", function()
    local _, total = gpurun.mem_info()
    local count = total // 4 * 2 -- twice the device's memory
    assert_error(("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory) while allocating "), gpurun.empty, count)
    assert_error((" for %d float32 elements"):format(count), gpurun.empty, count)
  end)
end)

describe("gpurun.Generator", function()
  before_each(function()
    gpurun.Device(0):set_current()
  end)

  it("makes the same buffers from the same seed, matching random_table #gpu", function()
    local n = 3 * (1 << 20) + 17 -- several staging chunks and a partial one
    for _, dtype in ipairs({ "float32", "float64", "float16", "bfloat16" }) do
      local a = gpurun.default_rng(77):random(n, dtype)
      local b = gpurun.default_rng(77):random(n, dtype)
      assert.are.equal(dtype, a.dtype)
      assert.are.equal(n, #a)
      assert.is_true(gpurun.allclose(a, b, 0, 0))
      local c = gpurun.default_rng(78):random(n, dtype)
      assert.is_true(gpurun.compare(a, c, 0, 0).mismatches > n * 0.99)
      local expected = gpurun.default_rng(77):random_table(n, dtype)
      local got = a:to_table()
      for i = 1, n, 997 do assert.are.equal(expected[i], got[i]) end
      assert.are.equal(expected[n], got[n])
    end
    assert.are.equal("float32", gpurun.default_rng(1):random(4).dtype)
  end)

  it("draws uniform floats in [0, 1) #gpu", function()
    for _, dtype in ipairs({ "float64", "float32", "float16", "bfloat16" }) do
      local values = gpurun.default_rng(2):random(1 << 16, dtype):to_table()
      local step = 2 ^ -gpurun.dtypes[dtype].digits -- every value a multiple of it, exact in the dtype
      local sum = 0
      for _, v in ipairs(values) do
        assert.is_true(v >= 0 and v < 1, dtype)
        assert.are.equal(0, v / step % 1, dtype)
        sum = sum + v
      end
      assert.is_true(math.abs(sum / #values - 0.5) < 0.01, dtype)
    end
  end)

  it("draws integers in [low, high) for every integer dtype #gpu", function()
    local cases = {
      { "int32", -5, 5 }, { "uint32", 0, 10 }, { "int64", -3, 7 }, { "uint64", 100, 110 },
      { "int8", -128, 128 }, { "uint8", 0, 256 }, { "int16", -1000, 1000 }, { "uint16", 65000, 65536 },
    }
    for _, case in ipairs(cases) do
      local dtype, low, high = case[1], case[2], case[3]
      local values = gpurun.default_rng(11):integers(20000, low, high, dtype):to_table()
      local seen, distinct = {}, 0
      for _, v in ipairs(values) do
        assert.are.equal("integer", math.type(v))
        assert.is_true(v >= low and v < high, ("%s: %d outside [%d, %d)"):format(dtype, v, low, high))
        if not seen[v] then seen[v], distinct = true, distinct + 1 end
      end
      assert.are.equal(high - low, distinct, dtype)
    end
    local a = gpurun.default_rng(5):integers(1000, math.mininteger, math.maxinteger, "int64"):to_table()
    local b = gpurun.default_rng(5):integers(1000, math.mininteger, math.maxinteger, "int64"):to_table()
    assert.are.same(a, b)
    assert.are.equal("int32", gpurun.default_rng(5):integers(4, 0, 2).dtype)
  end)
end)

describe("gpurun.compare and gpurun.allclose", function()
  before_each(function()
    gpurun.Device(0):set_current()
  end)

  it("follow numpy's isclose, NaN never close #gpu", function()
    local x = gpurun.array({ 1, 2, 3 }, "float64")
    assert.is_true(gpurun.allclose(x, gpurun.array({ 1, 2, 3 }, "float32")))
    assert.is_true(gpurun.allclose(x, gpurun.array({ 1, 2, 3.00002 }), 1e-5, 0))
    assert.is_false(gpurun.allclose(x, gpurun.array({ 1, 2, 3.0001 }), 1e-5, 0))
    assert.is_true(gpurun.allclose(gpurun.full(10, 2), 2))
    assert.is_false(gpurun.allclose(gpurun.full(10, 2), 2.001))
    assert.is_true(gpurun.allclose(gpurun.full(10, 2), 2.001, 0, 0.01))
    assert.is_true(gpurun.allclose(gpurun.array({ 1, 2 }, "int32"), gpurun.array({ 1, 2 }, "uint8"), 0, 0))
    -- infinities are close only to themselves
    assert.is_true(gpurun.allclose(gpurun.array({ math.huge, -math.huge }), gpurun.array({ math.huge, -math.huge })))
    assert.is_false(gpurun.allclose(gpurun.array({ math.huge }), gpurun.array({ -math.huge })))
    assert.is_false(gpurun.allclose(gpurun.array({ math.huge }), 1e30, 1, 1))

    local with_nan = gpurun.array({ 1, 0 / 0, 3 })
    assert.is_false(gpurun.allclose(with_nan, gpurun.array({ 1, 2, 3 })))
    local r = gpurun.compare(with_nan, gpurun.array({ 1, 2, 3 }))
    assert.are.equal(1, r.nan)
    assert.are.equal(1, r.mismatches)
    assert.are.equal(2, r.worst_index)
    local both = gpurun.compare(with_nan, gpurun.array({ 1, 0 / 0, 3 }))
    assert.are.equal(1, both.mismatches)
    assert.are.equal(0, both.nan)
    assert.is_false(gpurun.allclose(with_nan, 0 / 0, 1, 1))
  end)

  it("reports the element furthest past its tolerance #gpu", function()
    local r = gpurun.compare(gpurun.array({ 1, 2, 3, 4, 5 }), gpurun.array({ 1, 2.1, 3, 4.5, 5 }), 0, 0.01)
    assert.are.equal(5, r.count)
    assert.are.equal(2, r.mismatches)
    assert.are.equal(0, r.nan)
    assert.are.equal(4, r.worst_index)
    assert.are.equal(4, r.worst_actual)
    assert.are.equal(4.5, r.worst_expected)
    assert.are.equal(0.5, r.worst_abs_diff)
    assert.are.equal(0, r.rtol)
    assert.are.equal(0.01, r.atol)
    -- the largest excess, not the largest difference: 1000 vs 1001.5 is
    -- 0.4985 past its tolerance, 1 vs 1.8 is 0.7982 past
    local x = gpurun.array({ 1000, 1 }, "float64")
    local relative = gpurun.compare(x, gpurun.array({ 1001.5, 1.8 }, "float64"), 1e-3, 0)
    assert.are.equal(2, relative.mismatches)
    assert.are.equal(2, relative.worst_index)
    -- all passing: the largest difference
    local passing = gpurun.compare(gpurun.array({ 1, 2, 3 }, "float64"), gpurun.array({ 1, 2.00001, 3.000001 }, "float64"), 1e-5, 0)
    assert.are.equal(0, passing.mismatches)
    assert.are.equal(2, passing.worst_index)
    local exact = gpurun.compare(gpurun.full(4, 7, "int32"), 7)
    assert.are.equal(0, exact.mismatches)
    assert.are.equal(1, exact.worst_index)
    assert.are.equal(0, exact.worst_abs_diff)
  end)

  it("check their arguments #gpu", function()
    local x = gpurun.zeros(4)
    assert_error("bad argument #2 to 'gpurun.compare' (gpurun.Buffer of 4 elements expected, got 5)",
      gpurun.compare, x, gpurun.zeros(5))
    assert_error("bad argument #2 to 'gpurun.allclose' (gpurun.Buffer or number expected, got table)",
      gpurun.allclose, x, { 0, 0, 0, 0 })
    assert_error("bad argument #3 to 'gpurun.allclose' (non-negative relative tolerance expected)",
      gpurun.allclose, x, 0, -1)
    assert_error("bad argument #4 to 'gpurun.allclose' (non-negative absolute tolerance expected)",
      gpurun.allclose, x, 0, 0, 0 / 0)
  end)

  it("check 2^26 elements, finding a mismatch in the last chunk #gpu", function()
    local n = 1 << 26
    local a = gpurun.full(n, 1.5, "float32")
    local b = gpurun.full(n, 1.5, "float32")
    assert.is_true(gpurun.allclose(a, b))
    b:set(n - 5, 2)
    assert.is_false(gpurun.allclose(a, b))
    local r = gpurun.compare(a, b)
    assert.are.equal(n, r.count)
    assert.are.equal(1, r.mismatches)
    assert.are.equal(n - 5, r.worst_index)
    assert.are.equal(2, r.worst_expected)
    a:close()
    b:close()
  end)
end)
