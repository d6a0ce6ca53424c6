-- Typed scalars (gpurun.u64, i32, f32, ...): their type and value, and
-- values their type cannot hold refused.
local gpurun = require("gpurun")

describe("typed scalars", function()
  it("keep their type and value", function()
    assert.are.equal("u64", gpurun.u64(4096).type)
    assert.are.equal(4096, gpurun.u64(4096).value)
    assert.are.equal(8, gpurun.u64(1).size)
    assert.are.equal(4, gpurun.i32(-3).size)
    assert.are.equal(-3, gpurun.i32(-3).value)
    assert.are.equal(0.5, gpurun.f32(0.5).value)
    assert.are.equal(4, gpurun.f32(0.5).size)
    assert.are.equal(2.25, gpurun.f64(2.25).value)
    assert.are.equal(4294967295, gpurun.u32(4294967295).value)
    assert.are.equal(7, gpurun.u64(7.0).value)
    assert.are.equal("gpurun.u64(5)", tostring(gpurun.u64(5)))
  end)

  it("reject values their type cannot hold", function()
    local cases = {
      { gpurun.u32, -1, "-1 out of range for uint32 (0..4294967295)" },
      { gpurun.u32, 1 << 32, "4294967296 out of range for uint32" },
      { gpurun.i32, 1 << 31, "2147483648 out of range for int32 (-2147483648..2147483647)" },
      { gpurun.u64, -1, "-1 out of range for uint64" },
      { gpurun.i64, 1.5, "integer expected for int64, got 1.5" },
      { gpurun.u64, 0 / 0, "integer expected for uint64" },
      { gpurun.u64, "12", "number expected, got string" },
      { gpurun.f32, 1e300, "1e+300 out of range for float32" },
      { gpurun.f64, {}, "number expected, got table" },
      { gpurun.u8, 256, "256 out of range for uint8 (0..255)" },
      { gpurun.i16, -32769, "-32769 out of range for int16 (-32768..32767)" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(case[1], case[2])
      assert.is_false(ok)
      assert.truthy(err:find(case[3], 1, true), ("expected %q in %q"):format(case[3], err))
    end
  end)
end)
