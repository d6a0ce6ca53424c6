-- The PTX a fatbin carries (src/base/fatbin.c), which types its kernels'
-- parameters as PTX given as PTX does. C with no Lua face: tests/fatbin_test
-- reads fatbins built here (compressed as nvcc does by default, and not)
-- and damages them (the sanitizer job runs it under ASan); from Lua, a
-- damaged fatbin is still taken, typed by the driver's sizes.
local gpurun = require("gpurun")
local fatbins = require("spec.support.fatbins")
local files = require("spec.support.files")
local process = require("spec.support.process")
local shell = require("gpurun.shell")
local q = process.quote

local SOURCE = [[
extern "C" __global__ void scale(float *x, float factor, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) x[i] *= factor;
}
extern "C" __global__ void mix(double *y, double d, int k, unsigned short h) { y[k] = h + d; }
]]

-- The PTX (NVRTC's) and fatbins of SOURCE, built once: compressed as nvcc
-- does by default ("zstd"), not at all ("plain") and in the older format
-- ("speed").
local built
local function build()
  if built then return built end
  local dir = files.temporary_folder()
  local made = fatbins.build(dir, SOURCE, "90", { "default", "none", "speed" })
  built = { dir = dir, ptx = made.ptx, zstd = made.default, plain = made.none, speed = made.speed }
  return built
end

local function test_binary()
  return shell.dirname(process.gpurun_bin()) .. "/tests/fatbin_test"
end

local function signatures(path)
  return process.run(q(test_binary()) .. " --signatures " .. q(path))
end

describe("a fatbin's PTX", function()
  local missing = fatbins.missing()

  teardown(function()
    if built then files.remove_folder(built.dir) end
  end)

  it("gives the same signatures as the PTX of the same source, compressed or not", function()
    if missing then pending(missing) return end
    local code = build()
    local from_ptx = signatures(code.ptx)
    assert.are.equal(0, from_ptx.code, from_ptx.stderr)
    assert.matches(".entry scale(\n.param .u64 p0,\n.param .f32 p1,\n.param .u64 p2)", from_ptx.stdout, 1, true)
    assert.matches(".entry mix(\n.param .u64 p0,\n.param .f64 p1,\n.param .u32 p2,\n.param .u16 p3)",
      from_ptx.stdout, 1, true)
    for _, kind in ipairs{ "zstd", "plain" } do
      local from_fatbin = signatures(code[kind])
      assert.are.equal(0, from_fatbin.code, from_fatbin.stderr)
      assert.are.equal(from_ptx.stdout, from_fatbin.stdout, kind)
    end
    local speed = signatures(code.speed)
    assert.are.equal(1, speed.code)
    assert.matches("no PTX: its PTX is compressed in a format gpurun does not read", speed.stderr, 1, true)
  end)

  it("is read within the bytes and the caps from damaged fatbins (fatbin_test)", function()
    if missing then pending(missing) return end
    assert.is_true(shell.file_exists(test_binary()), "not built: " .. test_binary())
    local code = build()
    local result = process.run(q(test_binary()) .. " " .. q(code.zstd) .. " " .. q(code.plain))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    local count = result.stdout:match("^fatbin_test: (%d+) checks, 0 failed\n$")
    assert.is_truthy(count, result.stdout)
    assert.is_true(tonumber(count) > 1000)
  end)

  it("refuses a fatbin whose code gpurun cannot check as the driver would read it", function()
    if missing then pending(missing) return end
    local code = build()
    local bytes = files.read(code.zstd)
    -- The first entry is the PTX: its uncompressed size (at 56) made huge,
    -- then its zstd frame (after the 80-byte entry header) damaged.
    local entry = 17
    local huge = bytes:sub(1, entry + 55) .. string.pack("<I8", 1 << 40) .. bytes:sub(entry + 64)
    local damaged = bytes:sub(1, entry + 79) .. ("\255"):rep(16) .. bytes:sub(entry + 96)
    for _, case in ipairs{
      { huge, "is damaged: its entry 1 (at byte 16) says its code unpacks to 1099511627776 bytes" },
      { damaged, "is damaged: its entry 1 (at byte 16): its compressed code is not a zstd frame" },
      { files.read(code.speed), "is compressed in a format gpurun cannot check (nvcc --compress-mode=speed)" },
    } do
      local ok, message = pcall(gpurun.ObjectCode.from_fatbin, case[1])
      assert.is_false(ok)
      assert.matches(case[2], message, 1, true)
    end
    assert.are.equal(#bytes, #gpurun.ObjectCode.from_fatbin(bytes).code)
  end)

end)
