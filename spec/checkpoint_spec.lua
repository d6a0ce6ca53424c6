-- gpurun.checkpoint: its argument checks, what it says without a driver,
-- with a driver that lacks the feature or refuses it (a stand-in driver,
-- spec/support/fake_libcuda.c), and the whole cycle on a GPU, where a
-- refusal (checkpoints are often unavailable in containers) must name the
-- reason and leave the process running.
local gpurun = require("gpurun")
local process = require("spec.support.process")
local expect = require("spec.support.expect")
local error_of = expect.error_of
local assert_contains = expect.contains
local q = process.quote

describe("gpurun.checkpoint", function()
  it("checks lock's options before anything else", function()
    assert_contains("bad argument #1 to 'gpurun.checkpoint.lock' (unknown option 'timeout' "
      .. "(known: timeout_ms))", error_of(gpurun.checkpoint.lock, { timeout = 1 }))
    assert_contains("option 'timeout_ms' must be 0 (no timeout) to 4294967295, got -1",
      error_of(gpurun.checkpoint.lock, { timeout_ms = -1 }))
    assert_contains("option 'timeout_ms' must be a whole number of milliseconds, got 1.5",
      error_of(gpurun.checkpoint.lock, { timeout_ms = 1.5 }))
    assert_contains("bad argument #1 to 'gpurun.checkpoint.lock'",
      error_of(gpurun.checkpoint.lock, "fast"))
  end)

  it("says why without a driver", function()
    if gpurun.driver_error() == nil then return end
    for _, name in ipairs({ "lock", "checkpoint", "restore", "unlock", "state", "restore_thread_id" }) do
      assert_contains("the CUDA driver could not be loaded", error_of(gpurun.checkpoint[name]))
    end
  end)

  describe("with a stand-in driver", function()
    local driver
    lazy_setup(function()
      local cuda = os.getenv("CUDA_HOME") or "/usr/local/cuda"
      driver = os.tmpname() .. ".so"
      local built = process.run(("cc -shared -fPIC -Wall -Wextra -Werror -I%s "
        .. "spec/support/fake_libcuda.c -o %s"):format(q(cuda .. "/include"), q(driver)))
      assert.are.equal(0, built.code, built.stderr)
    end)
    lazy_teardown(function() os.remove(driver) end)

    local SCRIPT = [[
      local gpurun = require("gpurun")
      for _, name in ipairs({ "lock", "checkpoint", "restore", "unlock", "state", "restore_thread_id" }) do
        local ok, message = pcall(gpurun.checkpoint[name])
        print(name, ok, message)
      end
      print("still running", 1 + 1)
    ]]

    local function run(missing)
      return process.gpurun("-e " .. q(SCRIPT), { env = { GPURUN_CUDA_DRIVER = driver,
        GPURUN_FAKE_CUDA_INIT = "1", GPURUN_FAKE_CUDA_MISSING = missing or "" } })
    end

    it("names the call and the reason of a refusal, and the script goes on", function()
      local result = run()
      assert.are.equal(0, result.code, result.stderr)
      assert.matches("lock\tfalse\tcuCheckpointProcessLock: CUDA_ERROR_NOT_SUPPORTED %(the fake "
        .. "driver[^)]*%) while locking process %d+ for a checkpoint\n", result.stdout)
      assert.matches("restore\tfalse\tcuCheckpointProcessRestore: CUDA_ERROR_NOT_SUPPORTED %b() "
        .. "while restoring process %d+ from its checkpoint\n", result.stdout)
      assert.matches("state\tfalse\tcuCheckpointProcessGetState: ", result.stdout)
      assert.matches("still running\t2\n", result.stdout)
    end)

    it("says which entry point an older driver lacks", function()
      local result = run("cuCheckpointProcessLock,cuGreenCtxCreate")
      assert.are.equal(0, result.code, result.stderr)
      assert_contains("lock\tfalse\tprocess checkpoints need a CUDA driver of version 12.8 or "
        .. "newer: this one has no cuCheckpointProcessLock\n", result.stdout)
      assert_contains("still running\t2\n", result.stdout)
    end)
  end)

  -- A script that ends locked (or checkpointed) must still exit: the
  -- finalizers' CUDA calls would otherwise wait for an unlock forever.
  it("exits when a script ends between lock and unlock #gpu", function()
    local script = [[
      local gpurun = require("gpurun")
      gpurun.Device(0):set_current()
      local buffer = gpurun.zeros(1024, "float32")
      gpurun.checkpoint.lock({ timeout_ms = 5000 })
      pcall(gpurun.checkpoint.checkpoint)
      error("ends while " .. gpurun.checkpoint.state())
    ]]
    local result = process.run("timeout 120 env " .. process.gpurun_command() .. " -e " .. q(script))
    assert.are.equal(1, result.code, result.stderr)
    -- Or the lock was refused (a container), naming why.
    assert.is_truthy(result.stderr:find("ends while %a+") or result.stderr:find("cuCheckpointProcessLock: CUDA_ERROR_"),
      result.stderr)
  end)

  -- Either every step succeeds and the buffer is unchanged, or a step is
  -- refused with the driver's reason and the process runs on (unlocked).
  it("locks, checkpoints, restores and unlocks this process, or says why not #gpu", function()
    local device = gpurun.Device(0)
    device:set_current()
    local buffer = gpurun.array({ 1, 2, 3, 4, 5, 6, 7, 8 }, "float32")
    local before = buffer:to_bytes()
    assert.are.equal("running", gpurun.checkpoint.state())
    local steps = { "lock", "checkpoint", "restore", "unlock" }
    local done = {}
    for _, step in ipairs(steps) do
      local ok, message = pcall(gpurun.checkpoint[step], step == "lock" and { timeout_ms = 5000 } or nil)
      if not ok then
        assert.matches("^[^\n]*cuCheckpointProcess%a+: CUDA_ERROR_[%u_]+ %b() while ", message)
        break
      end
      done[#done + 1] = step
    end
    if #done > 0 and done[#done] ~= "unlock" then
      -- Refused half way: a restore (after a checkpoint) and an unlock let it run on.
      if gpurun.checkpoint.state() == "checkpointed" then gpurun.checkpoint.restore() end
      gpurun.checkpoint.unlock()
    end
    assert.are.equal("running", gpurun.checkpoint.state())
    assert.are.equal(before, buffer:to_bytes())
    device:sync()
  end)
end)
