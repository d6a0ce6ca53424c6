-- gpurun.LaunchConfig: grids and blocks as integers or {x, y, z}, and what
-- no device can run refused when it is made.
local gpurun = require("gpurun")

describe("LaunchConfig", function()
  it("accepts integers and {x, y, z} tables", function()
    local config = gpurun.LaunchConfig({ grid = 16, block = 256 })
    assert.are.same({ 16, 1, 1 }, config.grid)
    assert.are.same({ 256, 1, 1 }, config.block)
    assert.are.equal(0, config.shmem_size)
    local config2 = gpurun.LaunchConfig({ grid = { 4, 3 }, block = { x = 16, y = 16 }, shmem_size = 1024 })
    assert.are.same({ 4, 3, 1 }, config2.grid)
    assert.are.same({ 16, 16, 1 }, config2.block)
    assert.are.equal(1024, config2.shmem_size)
    assert.matches("gpurun.LaunchConfig%(grid={4,3,1}, block={16,16,1}, shmem_size=1024%)", tostring(config2))
  end)

  it("rejects what no device can run", function()
    local cases = {
      { { grid = 0, block = 1 }, "grid.x must be between 1 and 2147483647, got 0" },
      { { grid = 1, block = 0 }, "block.x must be between 1 and 1024, got 0" },
      { { grid = 1, block = 2048 }, "block.x must be between 1 and 1024, got 2048" },
      { { grid = 1, block = { 64, 32 } }, "block of 64 x 32 x 1 = 2048 threads, at most 1024" },
      { { grid = { 1, 70000 }, block = 1 }, "grid.y must be between 1 and 65535" },
      { { grid = -5, block = 1 }, "grid.x must be between 1" },
      { { grid = 1.5, block = 1 }, "grid.x must be an integer, got 1.5" },
      { { grid = 0 / 0, block = 1 }, "grid.x must be an integer" },
      { { grid = math.huge, block = 1 }, "grid.x must be an integer" },
      { { grid = "8", block = 1 }, "grid must be an integer or a table" },
      { { grid = { 1, 2, 3, 4 }, block = 1 }, "grid has 4 entries, at most 3" },
      { { grid = 1 }, "grid and block are required" },
      { { grid = 1, block = 1, shmem = 4 }, "unknown option 'shmem' (known: grid, block, shmem_size," },
      { { grid = 1, block = 1, shmem_size = -1 }, "shmem_size must be an integer number of bytes >= 0" },
    }
    for _, case in ipairs(cases) do
      local ok, err = pcall(gpurun.LaunchConfig, case[1])
      assert.is_false(ok)
      assert.truthy(err:find(case[2], 1, true), ("expected %q in %q"):format(case[2], err))
    end
    assert.has_error(function() gpurun.LaunchConfig(5) end)
  end)
end)
