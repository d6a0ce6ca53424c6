-- gpurun.Program: NVRTC needs no GPU, so compiling runs on every machine.
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

local function error_of(f, ...)
  local ok, message = pcall(f, ...)
  assert.is_false(ok, "expected an error")
  return tostring(message)
end

-- Runs a Lua chunk in a fresh gpurun (no device made current there).
local function run_chunk(chunk, env)
  return process.gpurun("-e " .. q(chunk), { env = env })
end

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
    assert.matches("bad argument #1 to 'Program:compile' %(\"ptx\", \"cubin\" or \"ltoir\" expected, got \"elf\"%)",
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
      local _ <close> = program -- closed as the block ends
    end
    program:close()
    assert.are.equal("gpurun.Program(closed)", tostring(program))
    assert.matches("attempt to use a closed gpurun.Program", error_of(function() return program.source end))
    assert.matches("attempt to use a closed gpurun.Program", error_of(program.compile, program, "ptx"))
  end)
end)
