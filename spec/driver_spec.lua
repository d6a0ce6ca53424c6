-- The driver is opened on first use: without it gpurun runs plain Lua, counts
-- zero devices and raises one clear error for anything that needs it.
local gpurun = require("gpurun")
local process = require("spec.support.process")

local NO_DRIVER = { GPURUN_CUDA_DRIVER = "/nonexistent/libcuda.so.1" }

describe("without a CUDA driver", function()
  it("is not linked against libcuda (the driver is opened on first use)", function()
    local result = process.run("readelf -d " .. process.quote(process.gpurun_bin()))
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("NEEDED", result.stdout)
    assert.is_nil(result.stdout:find("libcuda", 1, true))
  end)

  it("runs plain Lua and counts zero devices", function()
    local result = process.gpurun("-e 'local g = require(\"gpurun\"); print(g.device_count(), 1 + 1)'",
      { env = NO_DRIVER })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("0\t2\n", result.stdout)
  end)

  it("raises one clear error for calls that need the driver", function()
    local result = process.gpurun("-e 'local g = require(\"gpurun\"); "
      .. "for _, f in ipairs({g.Device, g.driver_version}) do "
      .. "print(select(2, pcall(f))) end; print(g.driver_error())'", { env = NO_DRIVER })
    assert.are.equal(0, result.code, result.stderr)
    local expected = "the CUDA driver could not be loaded: /nonexistent/libcuda.so.1: "
      .. "cannot open shared object file: No such file or directory"
    assert.are.equal((expected .. "\n"):rep(3), result.stdout)
  end)

  it("says so in -v", function()
    local result = process.gpurun("-v", { env = NO_DRIVER })
    assert.are.equal(0, result.code)
    assert.matches("CUDA driver: not available %(the CUDA driver could not be loaded: ", result.stdout)
  end)

  it("still compiles with NVRTC", function()
    local result = process.gpurun("-e 'print(require(\"gpurun\").nvrtc_version())'", { env = NO_DRIVER })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^%d+\t%d+\n$", result.stdout)
  end)
end)

describe("device_count", function()
  it("never raises and returns a non-negative integer", function()
    local count = gpurun.device_count()
    assert.is_true(math.type(count) == "integer" and count >= 0)
  end)
end)

describe("CUDA error messages", function()
  it("have the shape 'call: CUDA_ERROR_NAME (description)' #gpu", function()
    assert.are.equal("cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY (out of memory)",
      gpurun.format_cuda_error("cuMemAlloc", 2))
    assert.are.equal("cuInit: CUDA_ERROR_NO_DEVICE (no CUDA-capable device is detected)",
      gpurun.format_cuda_error("cuInit", 100))
  end)

  it("name the call and the code even when the driver cannot describe it", function()
    local message = process.gpurun("-e 'print(require(\"gpurun\").format_cuda_error(\"cuMemAlloc\", 2))'",
      { env = NO_DRIVER }).stdout
    assert.are.equal("cuMemAlloc: CUDA error 2 (unknown to this driver)\n", message)
  end)

  it("add what gpurun was doing to a failed call #gpu", function()
    local dev = gpurun.Device(0)
    dev:set_current()
    local ok, err = pcall(gpurun.empty, 1 << 46, "uint8")
    assert.is_false(ok)
    assert.matches("^cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY %(out of memory%) while allocating", err)
  end)
end)
