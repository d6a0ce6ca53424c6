-- The PTX signature parser (src/base/ptx_params.c) is C with no Lua face yet: its
-- unit tests are tests/ptx_params_test.c, built beside gpurun; this spec runs
-- them, and checks that the committed NVRTC fixtures still read as the NVRTC
-- in use reads its own output today.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local shell = require("gpurun.shell")
local q = process.quote

local FIXTURES = "tests/fixtures/ptx"

local function test_binary()
  return shell.dirname(process.gpurun_bin()) .. "/tests/ptx_params_test"
end

local function read(path)
  local file = assert(io.open(path, "rb"))
  local text = file:read("a")
  file:close()
  return text
end

local function parsed(path)
  local result = process.run(q(test_binary()) .. " --dump " .. q(path))
  assert.are.equal(0, result.code, result.stderr)
  return result.stdout
end

describe("PTX kernel signatures", function()
  it("pass the C unit tests: syntax, NVRTC's fixtures, NVRTC and the kernel cache", function()
    assert.is_true(shell.file_exists(test_binary()), "not built: " .. test_binary())
    local result = process.run(q(test_binary()) .. " " .. q(FIXTURES))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    local count = result.stdout:match("ptx_params_test: (%d+) checks, 0 failed\n$")
    assert.is_truthy(count, result.stdout)
    assert.is_true(tonumber(count) > 100)
  end)

  it("parse and look up 200,000 kernels in linear time (a quadratic lookup would time out)", function()
    -- Nothing is timed: 200,000 kernels take well under a second; the
    -- quadratic lookup of before took minutes, past the 120 s limit.
    local result = process.run("timeout 120 " .. q(test_binary()) .. " --many 200000")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.are.equal("200000 kernels, 200000 found\n", result.stdout)
  end)

  for _, case in ipairs{
    { "types", "sm_90" }, { "types", "sm_100" }, { "cpp", "sm_90" }, { "cpp", "sm_100" },
    { "cudagraphs", "sm_90" }, { "cudagraphs", "sm_100" },
  } do
    local name, arch = case[1], case[2]
    it(("read the same from today's NVRTC as from the %s.%s fixture"):format(name, arch), function()
      local options = gpurun.ProgramOptions{ std = "c++17", arch = arch,
        include_paths = { (os.getenv("CUDA_HOME") or "/usr/local/cuda") .. "/include" } }
      local program <close> = gpurun.Program(read(FIXTURES .. "/" .. name .. ".cu"), "c++", options)
      local code <close> = program:compile("ptx", { name = name .. ".cu" })
      local fresh = os.tmpname()
      local file = assert(io.open(fresh, "wb"))
      file:write(code.code)
      file:close()
      local today = parsed(fresh)
      os.remove(fresh)
      assert.are.equal(parsed(("%s/%s.%s.ptx"):format(FIXTURES, name, arch)), today,
        "NVRTC's signatures changed: regenerate with gpurun tests/fixtures/ptx/generate.lua")
    end)
  end

  it("agree with cuKernelGetParamInfo for every parameter of every fixture kernel #gpu", function()
    local result = process.run(q(test_binary()) .. " --driver " .. q(FIXTURES))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("every_type: 22 parameters agree with the driver", result.stdout)
    assert.matches("vec_add: 4 parameters agree with the driver", result.stdout)
    assert.matches("ptx_params_test: %d+ checks, 0 failed\n$", result.stdout)
  end)
end)
