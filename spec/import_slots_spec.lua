-- Redirecting a library's imports through its offset table
-- (src/base/import_slots.c) is C with no Lua face: its tests are
-- tests/import_slots_test.c, built beside gpurun; this spec runs them.
local process = require("spec.support.process")
local shell = require("gpurun.shell")
local q = process.quote

local function test_binary()
  return shell.dirname(process.gpurun_bin()) .. "/tests/import_slots_test"
end

describe("import slots", function()
  it("are redirected, and left as they were when mprotect refuses, even for a while", function()
    assert.is_true(shell.file_exists(test_binary()), "not built: " .. test_binary())
    local result = process.run(q(test_binary()))
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    assert.matches("import_slots_test: %d+ checks, 0 failed\n$", result.stdout)
  end)
end)
