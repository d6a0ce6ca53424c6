-- gpurun.ObjectCode: what Program:compile returns, and finding kernels in it
-- (which needs a device).
local gpurun = require("gpurun")
local process = require("spec.support.process")
local q = process.quote

local VEC = [[
extern "C" __global__ void vec_add(const float *a, const float *b, float *c, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
extern "C" __global__ void vec_mul(const float *a, const float *b, float *c, unsigned long long n)
{
    unsigned long long i = blockIdx.x * (unsigned long long)blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] * b[i];
}
]]

local TEMPLATE = [[
template <typename T> __global__ void scale(T *x, T factor) { x[threadIdx.x] *= factor; }
]]

local NO_DRIVER = { GPURUN_CUDA_DRIVER = "/nonexistent/libcuda.so.1" }

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

-- Runs a Lua chunk in a fresh gpurun (no device made current there).
local function run_chunk(chunk, env)
  return process.gpurun("-e " .. q(chunk), { env = env })
end

describe("gpurun.ObjectCode", function()
  it("raises on use after close, and closes twice", function()
    local code = gpurun.Program(VEC, "c++", { arch = "90" }):compile("ptx")
    code:close()
    code:close()
    assert.are.equal("gpurun.ObjectCode(closed)", tostring(code))
    assert.matches("attempt to use a closed gpurun.ObjectCode", error_of(function() return code.code end))
    assert.matches("attempt to use a closed gpurun.ObjectCode", error_of(code.get_kernel, code, "vec_add"))
  end)

  it("made by a finalizer while the state closes, leaves nothing behind", function()
    -- The state's close sets no finalizer for objects made then: the code's
    -- memory must be Lua's (an ASan build reported the signatures' block).
    local result = run_chunk([[
      local g = require("gpurun")
      setmetatable({}, { __gc = function()
        local code = g.Program('extern "C" __global__ void late(int *x) { *x = 1; }', "c++",
          { arch = "90" }):compile("ptx")
        io.stdout:write(code.size > 0 and "compiled\n" or "empty\n")
      end })
      os.exit(0, true)
    ]], { GPURUN_NO_CACHE = "1" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert.are.equal("compiled\n", result.stdout)
  end)

  it("says why get_kernel cannot work without a driver", function()
    local result = run_chunk([[
      local g = require("gpurun")
      local code = g.Program(']] .. VEC:gsub("\n", " ") .. [[', "c++", { arch = "90" }):compile("cubin")
      print(select(2, pcall(code.get_kernel, code, "vec_add")))
    ]], NO_DRIVER)
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^the CUDA driver could not be loaded: /nonexistent/libcuda.so.1", result.stdout)
  end)

  it("says why get_kernel cannot work without a current device #gpu", function()
    local result = run_chunk([[
      local g = require("gpurun")
      local code = g.Program(']] .. VEC:gsub("\n", " ") .. [[', "c++", { arch = "90" }):compile("cubin")
      print(select(2, pcall(code.get_kernel, code, "vec_add")))
    ]])
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("no current CUDA device: call gpurun.Device(id):set_current() first", result.stdout, 1, true)
  end)

  describe("on a device", function()
    local device
    before_each(function()
      device = gpurun.Device(0)
      device:set_current()
    end)

    it("finds kernels in a cubin and in PTX #gpu", function()
      local options = { arch = "sm_" .. device.arch }
      for _, target in ipairs({ "cubin", "ptx" }) do
        local code = gpurun.Program(VEC, "c++", options):compile(target)
        local kernel = code:get_kernel("vec_add")
        assert.are.equal("vec_add", kernel.name)
        assert.are.equal(4, kernel.num_params)
        assert.are.equal("vec_mul", code:get_kernel("vec_mul").name)
      end
    end)

    it("compiles for the current device when no arch is given #gpu", function()
      local code = gpurun.Program(VEC, "c++"):compile("cubin")
      assert.are.equal("\127ELF", code.code:sub(1, 4))
      assert.are.equal(4, code:get_kernel("vec_add").num_params)
      assert.matches("%.target sm_" .. device.arch, gpurun.Program(VEC, "c++"):compile("ptx").code)
    end)

    it("finds a kernel by its name expression #gpu", function()
      local code = gpurun.Program(TEMPLATE, "c++", { arch = "sm_" .. device.arch })
        :compile("cubin", { name_expressions = { "scale<float>" } })
      local kernel = code:get_kernel("scale<float>")
      assert.are.equal("scale<float>", kernel.name)
      assert.are.equal(2, kernel.num_params)
    end)

    it("lists the kernels it has when one is missing #gpu", function()
      local code = gpurun.Program(VEC, "c++", { arch = "sm_" .. device.arch }):compile("cubin")
      local message = error_of(code.get_kernel, code, "vec_sub")
      assert.matches("kernel 'vec_sub' not found in the cubin of vec_add.cu; it has: vec_add, vec_mul",
        message, 1, true)
    end)

    it("leaves its kernels unusable once closed #gpu", function()
      local code = gpurun.Program(VEC, "c++", { arch = "sm_" .. device.arch }):compile("cubin")
      local kernel = code:get_kernel("vec_add")
      code:close()
      assert.matches("attempt to use a closed gpurun.ObjectCode",
        error_of(function() return kernel.num_params end))
    end)
  end)
end)
