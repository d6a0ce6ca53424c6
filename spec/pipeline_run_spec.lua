-- gpurun.pipeline's run, graph, set, wait and timings, with no GPU: the
-- fake GPU of spec/support/fake_gpu.lua runs the stream work in random
-- interleavings that respect the waits, and replays graphs in random
-- orders their dependencies allow. The script runs in a process of its own
-- (spec/support/pipeline_fake_runs.lua), since its fakes replace gpurun's
-- functions. The real GPU's turn is in spec/pipeline_gpu_spec.lua.
local process = require("spec.support.process")

describe("gpurun.pipeline on a fake GPU", function()
  it("runs random pipelines as stages and graphs, sets scalars in place, updates and re-plans", function()
    local result = process.run(process.quote(process.gpurun_bin()) .. " spec/support/pipeline_fake_runs.lua")
    assert.are.equal(0, result.code, result.stdout .. result.stderr)
    local count = result.stdout:match("pipeline_fake_runs: (%d+) checks, 0 failed\n$")
    assert.truthy(count, result.stdout .. result.stderr)
    assert.is_true(tonumber(count) > 1000)
  end)
end)
