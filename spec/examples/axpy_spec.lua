-- The template for testing your own kernels and scripts: copy it into your
-- project's spec/ folder and run `busted --lua=gpurun --helper=gpurun.testing`
-- there. It checks scripts/axpy.lua three ways: its kernel compiles (NVRTC
-- needs no GPU, so a typo fails on every machine), the kernel computes
-- y = a*x + y, and the script runs and finds no wrong element. The last two
-- carry #gpu: without a GPU they are left out, and the run says how many.
require("gpurun.testing") -- assert.buffer_near, assert.buffer_equal, the #gpu rule
local gpurun = require("gpurun")
local shell = require("gpurun.shell")

local SCRIPT = "scripts/axpy.lua"

-- The kernel under test, read from the script so that the two cannot
-- differ; your own code would keep its kernels in a module it requires.
local function kernel_source(path)
  local file = assert(io.open(path, "r"))
  local text = file:read("a")
  file:close()
  return assert(text:match("%[%[\n(.-)%]%]"), "no [[...]] kernel source in " .. path)
end

describe(SCRIPT, function()
  local source = kernel_source(SCRIPT)

  it("has a kernel that compiles for sm_90 without a GPU", function()
    local code = gpurun.Program(source, "c++", { arch = "sm_90" }):compile("ptx")
    assert.matches(".entry axpy(", code.code, 1, true)
  end)

  it("has a kernel that computes y = a*x + y #gpu", function()
    local device = gpurun.Device(0):set_current()
    local axpy = gpurun.Program(source, "c++", { arch = "sm_" .. device.arch })
      :compile("cubin"):get_kernel("axpy")
    local x <close> = gpurun.array({ 1, 2, 3, 4, 5 }, "float32")
    local y <close> = gpurun.array({ 10, 20, 30, 40, 50 }, "float32")
    local stream <close> = device:create_stream()
    gpurun.launch(stream, gpurun.LaunchConfig{ grid = 1, block = 32 }, axpy, 2.0, x, y,
                  gpurun.u64(#x))
    stream:sync()
    assert.buffer_near({ 12, 24, 36, 48, 60 }, y)
    assert.buffer_equal(x:to_table(), x)
  end)

  it("runs and finds no wrong element #gpu", function()
    -- The binary running these specs (gpurun, or lua5.4 with gpurun.so)
    -- runs the script too.
    local command = shell.quote(shell.interpreter() or "gpurun") .. " " .. SCRIPT .. " 2>&1"
    local pipe = assert(io.popen(command))
    local output = pipe:read("a")
    local ok = pipe:close()
    assert.is_true(ok, output)
    assert.matches("^axpy: 1048576 elements, 100 graph replays, [%d.]+ us each, 0 wrong\n$", output)
  end)
end)
