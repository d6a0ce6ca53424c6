-- Launch configurations, typed scalars and checked launches.
local gpurun = require("gpurun")
local expect = require("spec.support.expect")
local kernels = require("spec.support.kernels")

describe("launch", function()
  local device, kernel, stream

  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    gpurun.set_current_stream(stream)
  end)

  after_each(function()
    gpurun.set_current_stream(nil)
    if stream then stream:close() end
  end)

  it("reports the parameter layout #gpu", function()
    local add = kernel("vec_add")
    assert.are.equal("vec_add", add.name)
    assert.are.equal(4, add.num_params)
    -- sm_90 PTX does not mark pointers: a 64-bit integer parameter may be one.
    local u64 = function(offset)
      return { offset = offset, size = 8, type = ".u64", kind = "integer", pointer = "maybe" }
    end
    assert.are.same({ u64(0), u64(8), u64(16), u64(24) }, add:params())
    local scale = kernel("scale_shift") -- (float *x, float scale, int shift, unsigned int n)
    local params = scale:params()
    assert.are.same({ 8, 4, 4, 4 }, { params[1].size, params[2].size, params[3].size, params[4].size })
    assert.are.same({ ".u64", ".f32", ".u32", ".u32" },
      { params[1].type, params[2].type, params[3].type, params[4].type })
    assert.are.same({ "integer", "float", "integer", "integer" },
      { params[1].kind, params[2].kind, params[3].kind, params[4].kind })
    assert.are.same({ false, false }, { params[2].pointer, params[3].pointer })
    assert.is_true(add.max_threads_per_block >= 256)
  end)

  it("computes the right values #gpu", function()
    local n = 1000
    local a, b, out = gpurun.full(n, 1.5, "float32"), gpurun.full(n, 2.0, "float32"), gpurun.zeros(n, "float32")
    local config = gpurun.LaunchConfig({ grid = (n + 255) // 256, block = 256 })
    gpurun.launch(stream, config, kernel("vec_add"), a, b, out, gpurun.u64(n))
    stream:sync()
    assert.is_true(gpurun.allclose(out, 3.5, 0, 0))
    -- plain Lua numbers convert to the parameter's type: a float for float, an integer for int
    gpurun.launch(stream, config, kernel("scale_shift"), out, 2.5, -1, gpurun.u32(n))
    stream:sync()
    assert.is_true(gpurun.allclose(out, 7.75, 0, 0))
    gpurun.launch(stream, config, kernel("scale_shift"), out, gpurun.f32(1), -1.75 // 1 | 0, n)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 5.75, 0, 0))
    gpurun.launch(stream, config, kernel("scale_shift"), out, 0.5, gpurun.i32(3), n)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 5.875, 0, 0))
    gpurun.launch(stream, config, kernel("scale_shift"), out, gpurun.f32(0), 6, n)
    gpurun.launch(stream, config, kernel("scale_shift"), out, gpurun.f32(0.5), gpurun.i32(3), n)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 6.0, 0, 0))
    local doubles = gpurun.zeros(n, "float64")
    gpurun.launch(stream, config, kernel("fill_double"), doubles, 0.1, n)
    stream:sync()
    assert.are.equal(0.1, doubles:get(n))
    local flag = gpurun.zeros(1, "uint8")
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 1, block = 1 }), kernel("byte_flag"), flag, true, 4)
    stream:sync()
    assert.are.equal(5, flag:get(1))
  end)

  it("converts plain numbers by the parameter's real type #gpu", function()
    local n = 1000
    local out = gpurun.full(n, 1.0, "float32")
    local config = gpurun.LaunchConfig({ grid = (n + 255) // 256, block = 256 })
    local scale = kernel("scale_shift") -- x[i] = x[i] * scale + shift, for i < n
    -- 4.0 and 2^1 are floats with integral values: fine for a float or an int
    -- parameter now that the types are known; 4 is an integer for a float.
    gpurun.launch(stream, config, scale, out, 4.0, 2 ^ 1, 2.0 ^ 10 - 24)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 6.0, 0, 0))
    gpurun.launch(stream, config, scale, out, 4, 0, n + 0.0)
    stream:sync()
    assert.is_true(gpurun.allclose(out, 24.0, 0, 0))
    local add = kernel("vec_add")
    local a = gpurun.full(n, 1, "float32")
    gpurun.launch(stream, config, add, a, a, out, 2 ^ 10 - 24) -- size_t n from a float
    stream:sync()
    assert.is_true(gpurun.allclose(out, 2.0, 0, 0))
    -- A float parameter rounds a number to nearest, as gpurun.f32 does, and
    -- refuses only one out of range.
    out:fill(1.0)
    gpurun.launch(stream, config, scale, out, 0.1, 0, n)
    stream:sync()
    assert.are.equal(gpurun.f32(0.1).value, out:get(n))
    local ok, why = pcall(gpurun.launch, stream, config, scale, out, 1e300, 0, n)
    assert.is_false(ok)
    assert.matches("1e%+300 is out of range for float32", why)
  end)

  it("passes float16 and bfloat16 scalars to __half and __nv_bfloat16 parameters #gpu", function()
    local options = gpurun.ProgramOptions({ std = "c++17", arch = "sm_" .. gpurun.Device(0).arch })
    local code <close> = gpurun.Program([[
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void halves(float *out, __half h, __nv_bfloat16 b, unsigned short bits) {
  out[0] = __half2float(h); out[1] = __bfloat162float(b); out[2] = (float)bits;
}]], "c++", options):compile("cubin")
    local halves = code:get_kernel("halves")
    local out <close> = gpurun.zeros(3, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 1 })
    gpurun.launch(stream, config, halves, out, gpurun.f16(0.1), gpurun.bf16(-2.5), gpurun.u16(7))
    stream:sync()
    assert.are.same({ gpurun.f16(0.1).value, -2.5, 7.0 }, out:to_table())
    local plan <close> = halves:bind(config, out, gpurun.f16(3), gpurun.bf16(1 / 3), 1)
    plan:launch(stream)
    stream:sync()
    assert.are.same({ 3.0, gpurun.bf16(1 / 3).value, 1.0 }, out:to_table())
    local function message(...)
      local ok, why = pcall(gpurun.launch, stream, config, halves, out, ...)
      assert.is_false(ok)
      return why
    end
    assert.matches("parameter 2 %(.-%): takes 2 bytes but gpurun.f32 is 4", message(gpurun.f32(1), gpurun.bf16(1), 1))
    assert.matches("parameter 2 %(.-%): a 2%-byte struct or vector takes no number", message(0.5, gpurun.bf16(1), 1))
  end)

  it("launches 2D grids #gpu", function()
    local width, height = 37, 19
    local out = gpurun.zeros(width * height, "int32")
    local config = gpurun.LaunchConfig({ grid = { (width + 15) // 16, (height + 15) // 16 }, block = { 16, 16 } })
    gpurun.launch(stream, config, kernel("write_index_2d"), out, width, height)
    stream:sync()
    local values = out:to_table()
    assert.are.equal(0, values[1])
    assert.are.equal(18 * 1000 + 36, values[width * height])
    assert.are.equal(5 * 1000 + 7, values[5 * width + 7 + 1])
  end)

  it("passes dynamic shared memory #gpu", function()
    local out = gpurun.zeros(128, "float32")
    gpurun.launch(stream, gpurun.LaunchConfig({ grid = 1, block = 128, shmem_size = 128 * 4 }),
      kernel("uses_shared"), out)
    stream:sync()
    assert.are.equal(127, out:get(1))
    assert.are.equal(0, out:get(128))
  end)

  it("checks every argument against the kernel and launches nothing on error #gpu", function()
    local a = gpurun.zeros(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    local add, scale = kernel("vec_add"), kernel("scale_shift")
    local cases = {
      { function() gpurun.launch(stream, config, add, a, a, a) end, "kernel 'vec_add' takes 4 parameters, got 3" },
      { function() gpurun.launch(stream, config, add, a, a, a, 1, 2) end, "takes 4 parameters, got 5" },
      { function() gpurun.launch(stream, config, scale, a, a, 1, 1) end,
        "kernel 'scale_shift' parameter 2 (.f32): a gpurun.Buffer passes as an 8-byte pointer; "
        .. "this parameter is 4 bytes" },
      { function() gpurun.launch(stream, config, scale, a, 1.5, 1 << 40, 1) end,
        "kernel 'scale_shift' parameter 3 (.u32): integer 1099511627776 does not fit a 4-byte parameter" },
      { function() gpurun.launch(stream, config, scale, a, 1.5, 1, gpurun.u64(1)) end,
        "kernel 'scale_shift' parameter 4 (.u32): takes 4 bytes but gpurun.u64 is 8" },
      { function() gpurun.launch(stream, config, scale, a, gpurun.u32(1), 1, 1) end,
        "kernel 'scale_shift' parameter 2 (.f32): floating-point, but gpurun.u32 is an integer" },
      { function() gpurun.launch(stream, config, scale, a, 1.5, gpurun.f32(1), 1) end,
        "kernel 'scale_shift' parameter 3 (.u32): an integer, but gpurun.f32 is floating-point" },
      { function() gpurun.launch(stream, config, scale, a, 1.5, 1.5, 1) end,
        "kernel 'scale_shift' parameter 3 (.u32): 1.5 is not an integer (the parameter is an integer)" },
      { function() gpurun.launch(stream, config, add, a, a, a, "16") end,
        "kernel 'vec_add' parameter 4 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got string" },
      { function() gpurun.launch(stream, config, add, a, a, {}, 1) end, "parameter 3 (.u64): number, boolean" },
      { function() gpurun.launch(stream, config, add, a, a, a, true) end,
        "a boolean passes as a 1-byte integer; this parameter is 8 bytes" },
      { function() gpurun.launch(stream, config, scale, a, 1e300, 1, 1) end,
        "kernel 'scale_shift' parameter 2 (.f32): 1e+300 is out of range for float32" },
      { function() gpurun.launch(stream, config, add, a, a, gpurun.LaunchConfig({ grid = 1, block = 1 }), 1) end,
        "parameter 3 (.u64): number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct expected, got gpurun.LaunchConfig" },
      { function() gpurun.launch(stream, gpurun.LaunchConfig({ grid = 1, block = 16, shmem_size = 1 << 30 }),
          add, a, a, a, 1) end, "may use at most" },
      { function() gpurun.launch(config, config, add) end, "gpurun.Stream or gpurun.GraphBuilder expected" },
      { function() gpurun.launch(stream, {}, add) end, "gpurun.LaunchConfig expected" },
      { function() gpurun.launch(stream, config, "vec_add") end, "gpurun.Kernel expected" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(case[1])
      assert.is_false(ok)
      assert.truthy(err:find(case[2], 1, true), ("expected %q in %q"):format(case[2], err))
    end
    stream:sync()
    assert.is_true(gpurun.allclose(a, 0, 0, 0))
    -- the stream is still usable after every error
    gpurun.launch(stream, config, add, a, a, a, gpurun.u64(16))
    stream:sync()
  end)

  it("checks one argument as a launch does, launching nothing #gpu", function()
    local a = gpurun.zeros(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    local add, scale = kernel("vec_add"), kernel("scale_shift")
    -- What a launch takes, check_argument takes.
    for position, value in ipairs({ a, 1.5, 3, gpurun.u32(16) }) do
      assert.are.equal(scale, scale:check_argument(position, value))
    end
    assert.are.equal(add, add:check_argument(4, gpurun.u64(16)))
    -- What a launch refuses, check_argument refuses with the launch's message.
    local cases = {
      { scale, 2, 1e300 }, { scale, 3, 1.5 }, { scale, 3, 1 << 40 }, { scale, 4, gpurun.u64(1) },
      { scale, 2, gpurun.u32(1) }, { add, 4, "16" }, { add, 3, {} }, { add, 4, true }, { add, 2, print },
    }
    for _, case in ipairs(cases) do
      local k, position, value = case[1], case[2], case[3]
      local args = { a, 1.5, 1, 1 }
      if k == add then args = { a, a, a, 16 } end
      args[position] = value
      local launched, launch_err = pcall(gpurun.launch, stream, config, k, table.unpack(args, 1, 4))
      local checked, check_err = pcall(k.check_argument, k, position, value)
      assert.is_false(launched)
      assert.is_false(checked)
      assert.are.equal(launch_err:match("kernel '.*$"), check_err:match("kernel '.*$"))
    end
    stream:sync()
    assert.is_true(gpurun.allclose(a, 0, 0, 0))
  end)

  it("refuses closed objects #gpu", function()
    local a = gpurun.zeros(16, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 16 })
    local add = kernel("vec_add")
    a:close()
    assert.has_error(function() gpurun.launch(stream, config, add, a, a, a, 16) end,
      "kernel 'vec_add' parameter 1 (.u64): attempt to use a closed gpurun.Buffer")
    local other = device:create_stream()
    other:close()
    local b = gpurun.zeros(16, "float32")
    assert.has_error(function() gpurun.launch(other, config, add, b, b, b, 16) end,
      "attempt to use a closed gpurun.Stream")
  end)

  it("launches plans bound once #gpu", function()
    local n = 4096
    local a, b, out = gpurun.full(n, 2, "float32"), gpurun.full(n, 3, "float32"), gpurun.zeros(n, "float32")
    local config = gpurun.LaunchConfig({ grid = n // 256, block = 256 })
    local plan = kernel("vec_mul"):bind(config, a, b, out, gpurun.u64(n))
    for _ = 1, 10 do plan:launch(stream) end
    stream:sync()
    assert.is_true(gpurun.allclose(out, 6, 0, 0))
    assert.are.equal("vec_mul", plan.kernel.name)
    assert.has_error(function() kernel("vec_mul"):bind(config, a, b) end, "kernel 'vec_mul' takes 4 parameters, got 2")
    out:close()
    assert.has_error(function() plan:launch(stream) end,
      "LaunchPlan of kernel 'vec_mul': a gpurun.Buffer it passes was closed after bind")
    plan:close()
    plan:close()
    assert.has_error(function() plan:launch(stream) end, "attempt to use a closed gpurun.LaunchPlan")
  end)

  it("allocates no Lua memory in 10,000 launches and plan launches #gpu", function()
    local n = 256
    local a, out = gpurun.full(n, 1, "float32"), gpurun.zeros(n, "float32")
    local config = gpurun.LaunchConfig({ grid = 1, block = 256 })
    local add, count = kernel("vec_add"), gpurun.u64(n)
    local plan = add:bind(config, a, a, out, count)
    local launch = gpurun.launch
    launch(stream, config, add, a, a, out, count)
    -- An object gets a metatable of its own at its third method lookup
    -- (runtime/object.c), once: made before the count starts.
    assert.are.equal(0, expect.bytes_allocated(function()
      launch(stream, config, add, a, a, out, count)
      plan:launch(stream)
    end, 10000))
    stream:sync()
  end)
end)
