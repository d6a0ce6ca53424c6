-- ProgramOptions, Program and ObjectCode: NVRTC needs no GPU, so everything
-- up to get_kernel runs on every machine; finding kernels needs a device.
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

describe("gpurun.ProgramOptions", function()
  it("turns every option into NVRTC options, in a fixed order", function()
    local options = gpurun.ProgramOptions{
      extra = { "-ftz=true" }, relocatable_device_code = true, max_register_count = 64,
      use_fast_math = true, debug = true, line_info = true, include_paths = { "/a", "/b" },
      defines = { "FIRST", "SECOND=2", ZED = "z", ALPHA = 1, FLAG = true },
      arch = "sm_90", std = "c++17",
    }
    assert.are.same({
      "--std=c++17", "--gpu-architecture=sm_90",
      "-DFIRST", "-DSECOND=2", "-DALPHA=1", "-DFLAG", "-DZED=z",
      "--include-path=/a", "--include-path=/b",
      "--generate-line-info", "--device-debug", "--use_fast_math", "--maxrregcount=64",
      "--relocatable-device-code=true", "-ftz=true",
    }, options:as_list())
  end)

  it("gives no options for no settings, and none for false flags", function()
    assert.are.same({}, gpurun.ProgramOptions():as_list())
    assert.are.same({}, gpurun.ProgramOptions{ debug = false, use_fast_math = false }:as_list())
  end)

  it("reads an arch as sm_XX, XX, an integer or compute_XX", function()
    local function arch_option(arch)
      return gpurun.ProgramOptions{ arch = arch }:as_list()[1]
    end
    assert.are.equal("--gpu-architecture=sm_90", arch_option("sm_90"))
    assert.are.equal("--gpu-architecture=sm_90", arch_option("90"))
    assert.are.equal("--gpu-architecture=sm_90", arch_option(90))
    assert.are.equal("--gpu-architecture=compute_90", arch_option("compute_90"))
    assert.are.equal("--gpu-architecture=sm_90a", arch_option("sm_90a"))
    assert.are.equal("sm_90", gpurun.ProgramOptions{ arch = 90 }.arch)
  end)

  it("takes a single string where a list is expected", function()
    local options = gpurun.ProgramOptions{ include_paths = "/inc", extra = "-G" }
    assert.are.same({ "--include-path=/inc", "-G" }, options:as_list())
  end)

  it("has readable fields that are copies", function()
    local options = gpurun.ProgramOptions{ std = "c++17", arch = "90", debug = false,
                                           defines = { A = "1" } }
    assert.are.equal("c++17", options.std)
    assert.are.equal("sm_90", options.arch)
    assert.is_false(options.debug)
    assert.is_nil(options.line_info)
    assert.are.same({ A = "1" }, options.defines)
    options.defines.B = "2"
    options:as_list()[1] = "changed"
    assert.are.same({ A = "1" }, options.defines)
    assert.are.same({ "--std=c++17", "--gpu-architecture=sm_90", "-DA=1" }, options:as_list())
  end)

  it("is read-only", function()
    local options = gpurun.ProgramOptions{}
    assert.matches("gpurun.ProgramOptions is read%-only", error_of(function() options.arch = "90" end))
  end)

  it("names the key of an unknown option or a wrong type", function()
    local cases = {
      { { archh = "90" }, "unknown option 'archh' %(known: std, arch," },
      { { [1] = "x" }, "unknown option: a number key" },
      { { std = 17 }, "'std' must be a C%+%+ standard such as \"c%+%+17\", got number" },
      { { std = "gnu++17" }, "'std' must be a C%+%+ standard such as \"c%+%+17\", got \"gnu%+%+17\"" },
      { { arch = "sm90" }, "'arch' must be an architecture such as \"sm_90\".*got \"sm90\"" },
      { { arch = 9.5 }, "'arch' must be an architecture.*got number" },
      { { defines = "X" }, "'defines' must be a table" },
      { { defines = { X = {} } }, "'defines.X' must be a string, a number or true, got table" },
      { { defines = { X = false } }, "'defines.X' must be a string, a number or true, got boolean" },
      { { defines = { [5] = "X" } }, "'defines' keys must be macro names or list positions" },
      { { defines = { "" } }, "'defines%[1%]' must be a macro name" },
      { { defines = { ["A=B"] = "1" } }, "'defines' has a bad macro name 'A=B'" },
      { { include_paths = 3 }, "'include_paths' must be a string or a list of strings, got number" },
      { { include_paths = { "/a", 2 } }, "'include_paths%[2%]' must be a non%-empty string, got number" },
      { { line_info = 1 }, "'line_info' must be a boolean, got number" },
      { { debug = "yes" }, "'debug' must be a boolean, got \"yes\"" },
      { { use_fast_math = {} }, "'use_fast_math' must be a boolean, got table" },
      { { max_register_count = 0 }, "'max_register_count' must be an integer from 1 to 255" },
      { { max_register_count = 32.5 }, "'max_register_count' must be an integer from 1 to 255" },
      { { max_register_count = "32" }, "'max_register_count' must be an integer from 1 to 255, got \"32\"" },
      { { relocatable_device_code = "true" }, "'relocatable_device_code' must be a boolean" },
      { { extra = { true } }, "'extra%[1%]' must be a non%-empty string, got boolean" },
    }
    for _, case in ipairs(cases) do
      local message = error_of(gpurun.ProgramOptions, case[1])
      assert.matches("gpurun.ProgramOptions: " .. case[2], message)
    end
    assert.matches("table expected, got string", error_of(gpurun.ProgramOptions, "sm_90"))
  end)

  it("raises on use after close, and closes twice", function()
    local options = gpurun.ProgramOptions{ arch = "90" }
    options:close()
    options:close()
    assert.are.equal("gpurun.ProgramOptions(closed)", tostring(options))
    assert.matches("attempt to use a closed gpurun.ProgramOptions", error_of(options.as_list, options))
    assert.matches("attempt to use a closed gpurun.ProgramOptions",
      error_of(gpurun.Program, VEC, "c++", options))
  end)
end)

describe("gpurun.Program", function()
  it("takes c++ source with ProgramOptions, a plain table or nothing", function()
    local options = gpurun.ProgramOptions{ arch = "90" }
    local program = gpurun.Program(VEC, "c++", options)
    assert.are.equal(VEC, program.source)
    assert.are.equal("c++", program.code_type)
    assert.are.equal(options, program.options)
    assert.are.same({ "--gpu-architecture=sm_90" },
      gpurun.Program(VEC, "c++", { arch = "90" }).options:as_list())
    assert.are.same({}, gpurun.Program(VEC, "c++").options:as_list())
  end)

  it("rejects other code types, bad options and NUL bytes", function()
    assert.matches("bad argument #2 to 'gpurun%.Program' %(code type \"c%+%+\" expected, got \"ptx\"%)",
      error_of(function() return gpurun.Program(VEC, "ptx") end))
    assert.matches("bad argument #3 to 'gpurun%.Program' %(gpurun.ProgramOptions or table expected, got string%)",
      error_of(function() return gpurun.Program(VEC, "c++", "-G") end))
    assert.matches("gpurun.ProgramOptions: unknown option 'bogus'",
      error_of(function() return gpurun.Program(VEC, "c++", { bogus = 1 }) end))
    assert.matches("source contains a NUL byte",
      error_of(function() return gpurun.Program("a\0b", "c++") end))
  end)

  it("compiles PTX for sm_90 without a GPU", function()
    local code = gpurun.Program(VEC, "c++", { arch = "sm_90" }):compile("ptx")
    assert.are.equal("ptx", code.code_type)
    assert.matches("%.target sm_90", code.code)
    assert.truthy(code.code:find(".entry vec_add", 1, true))
    assert.truthy(code.code:find(".entry vec_mul", 1, true))
    assert.are.equal(#code.code, code.size)
    assert.are.equal("vec_add.cu", code.name) -- its first kernel
    assert.are.equal("boolean", type(code.from_cache))
    assert.are.equal("string", type(code.log))
  end)

  it("compiles a CUBIN for sm_90 without a GPU", function()
    local code = gpurun.Program(VEC, "c++", { arch = "90", std = "c++17" }):compile("cubin")
    assert.are.equal("cubin", code.code_type)
    assert.are.equal("\127ELF", code.code:sub(1, 4))
    assert.are.equal(#code.code, code.size)
  end)

  it("raises with NVRTC's log, line numbers included, on a compile error", function()
    local broken = "// line 1\n__global__ void f(int *x)\n{\n    *x = undefined_name;\n}\n"
    local program = gpurun.Program(broken, "c++", { arch = "90" })
    local message = error_of(function() return program:compile("ptx", { name = "broken.cu" }) end)
    assert.matches("NVRTC compile of 'broken.cu' failed: NVRTC_ERROR_COMPILATION\n", message, 1, true)
    assert.matches("broken.cu(4): error: identifier \"undefined_name\" is undefined", message, 1, true)
    assert.matches("program_spec.lua:%d+: NVRTC compile", message)
  end)

  it("passes defines through to the compiler", function()
    local source = "extern \"C\" __global__ void k(int *x) { *x = VALUE; }\n"
    local program = gpurun.Program(source, "c++", { arch = "90", defines = { VALUE = 12345 } })
    assert.truthy(program:compile("ptx").code:find("12345", 1, true))
    local message = error_of(function()
      return gpurun.Program(source, "c++", { arch = "90" }):compile("ptx")
    end)
    assert.matches("identifier \"VALUE\" is undefined", message, 1, true)
  end)

  it("lowers name expressions and keeps the map", function()
    local code = gpurun.Program(TEMPLATE, "c++", { arch = "90" })
      :compile("ptx", { name_expressions = { "scale<float>", "scale<double>" } })
    local lowered = code.lowered_names
    assert.are.equal("_Z5scaleIfEvPT_S0_", lowered["scale<float>"])
    assert.are.equal("_Z5scaleIdEvPT_S0_", lowered["scale<double>"])
    assert.truthy(code.code:find(".entry " .. lowered["scale<float>"], 1, true))
    lowered["scale<float>"] = "changed"
    assert.are.equal("_Z5scaleIfEvPT_S0_", code.lowered_names["scale<float>"])
  end)

  it("raises for a name expression that names nothing", function()
    local program = gpurun.Program(TEMPLATE, "c++", { arch = "90" })
    local message = error_of(function()
      return program:compile("ptx", { name_expressions = { "missing<int>" } })
    end)
    assert.matches("NVRTC compile of 'scale.cu' failed", message, 1, true)
    assert.matches("missing", message, 1, true)
  end)

  it("checks compile's arguments", function()
    local program = gpurun.Program(VEC, "c++", { arch = "90" })
    assert.matches("bad argument #1 to 'Program:compile' %(\"ptx\" or \"cubin\" expected, got \"elf\"%)",
      error_of(function() return program:compile("elf") end))
    assert.matches("bad argument #2 to 'Program:compile' %(unknown option 'names' %(known: name_expressions, name%)",
      error_of(function() return program:compile("ptx", { names = {} }) end))
    assert.matches("bad argument #2 to 'Program:compile' %(name_expressions must be a list of strings%)",
      error_of(function() return program:compile("ptx", { name_expressions = "vec_add" }) end))
    assert.matches("bad argument #2 to 'Program:compile' %(name_expressions%[2%] must be a non%-empty string%)",
      error_of(function() return program:compile("ptx", { name_expressions = { "a", 2 } }) end))
    assert.matches("bad argument #2 to 'Program:compile' %(name must be a non%-empty string%)",
      error_of(function() return program:compile("ptx", { name = "" }) end))
  end)

  it("refuses a cubin for a virtual architecture", function()
    local message = error_of(function()
      return gpurun.Program(VEC, "c++", { arch = "compute_90" }):compile("cubin")
    end)
    assert.matches("cubin needs a real architecture: compute_90 makes only PTX; use sm_XX", message, 1, true)
  end)

  it("needs an arch for a cubin when no device is current", function()
    local result = run_chunk([[
      local g = require("gpurun")
      print(select(2, pcall(function() return g.Program("__global__ void k() {}", "c++"):compile("cubin") end)))
      print(g.Program("__global__ void k() {}", "c++"):compile("ptx").code_type)
    ]])
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("cubin needs an arch: give ProgramOptions{arch=...} or make a device current\nptx\n",
      result.stdout, 1, true)
  end)

  it("raises on use after close, and closes twice", function()
    local program = gpurun.Program(VEC, "c++")
    do
      local closing <close> = program
    end
    program:close()
    assert.are.equal("gpurun.Program(closed)", tostring(program))
    assert.matches("attempt to use a closed gpurun.Program", error_of(function() return program.source end))
    assert.matches("attempt to use a closed gpurun.Program", error_of(program.compile, program, "ptx"))
  end)
end)

describe("gpurun.ObjectCode", function()
  it("raises on use after close, and closes twice", function()
    local code = gpurun.Program(VEC, "c++", { arch = "90" }):compile("ptx")
    code:close()
    code:close()
    assert.are.equal("gpurun.ObjectCode(closed)", tostring(code))
    assert.matches("attempt to use a closed gpurun.ObjectCode", error_of(function() return code.code end))
    assert.matches("attempt to use a closed gpurun.ObjectCode", error_of(code.get_kernel, code, "vec_add"))
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
