-- gpurun.Generator (gpurun.default_rng): xoshiro256** seeded through
-- splitmix64, the same numbers for the same seed, in tables and buffers.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains

local function assert_error(fragment, f, ...)
  assert_contains(fragment, error_of(f, ...))
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
      -- (One assertion per dtype: luassert's per call cost would be most of
      -- the spec's time.)
      local sum, outside, off_step = 0, {}, {}
      for i, v in ipairs(values) do
        if not (v >= 0 and v < 1) then outside[#outside + 1] = ("[%d] = %.17g"):format(i, v) end
        if v / step % 1 ~= 0 then off_step[#off_step + 1] = ("[%d] = %.17g"):format(i, v) end
        sum = sum + v
      end
      assert.are.equal("", table.concat(outside, ", ", 1, math.min(#outside, 8)), dtype .. ": outside [0, 1)")
      assert.are.equal("", table.concat(off_step, ", ", 1, math.min(#off_step, 8)), dtype .. ": not a multiple of 2^-digits")
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
      local seen, distinct, wrong = {}, 0, nil
      for _, v in ipairs(values) do
        if math.type(v) ~= "integer" or not (v >= low and v < high) then wrong = wrong or v end
        if not seen[v] then seen[v], distinct = true, distinct + 1 end
      end
      assert.is_nil(wrong, ("%s: %s is no integer in [%d, %d)"):format(dtype, tostring(wrong), low, high))
      assert.are.equal(high - low, distinct, dtype)
    end
    local a = gpurun.default_rng(5):integers(1000, math.mininteger, math.maxinteger, "int64"):to_table()
    local b = gpurun.default_rng(5):integers(1000, math.mininteger, math.maxinteger, "int64"):to_table()
    assert.are.same(a, b)
    assert.are.equal("int32", gpurun.default_rng(5):integers(4, 0, 2).dtype)
  end)
end)
