-- gpurun.ProgramOptions: NVRTC's options, checked when made, read-only,
-- in a fixed order. Written in Lua (lua/gpurun/builtin/program_options.lua).
local gpurun = require("gpurun")

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

local expect = require("spec.support.expect")
local error_of = expect.error_of

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
