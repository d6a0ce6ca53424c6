-- gpurun.report: the sample's text lines, or one JSON object of the same
-- figures.
local report = require("gpurun.report")
local check = require("gpurun.check")
local cjson = require("cjson")

describe("gpurun.report", function()
  local device = { name = "NVIDIA H200", compute_capability = { major = 9, minor = 0 } }
  local individual = { iters = 1000, seconds = 0.01182, us_per_iter = 11.82 }
  local graph = { iters = 1000, seconds = 0.00402, us_per_iter = 4.02 }

  local function passing_checks()
    local checks = check.new("t.lua", function() end)
    checks:tables("graph replay", { 8, 8 }, 8, 0, 0)
    return checks
  end

  -- The sample's run, through the report.
  local function write_sample(out, checks)
    out:device(device, 0)
    out:field("elements", 4096)
    out:field("iters", 1000)
    out:timing("individual", "\nIndividual launches: ", individual)
    out:say("\nBuilding CUDA graph...")
    out:timing("graph", "Graph replay:       ", graph)
    out:speedup("Graph speedup: ", individual, graph)
    out:say("\nGraph replay on updated data verified (same graph, new buffer contents)")
    out:say("\nDone")
    return out:finish(checks)
  end

  local function capture(json)
    local written = {}
    local out = report.new{ json = json, write = function(text) written[#written + 1] = text end }
    return out, written
  end

  it("writes the sample's text", function()
    local out, written = capture(false)
    assert.are.equal(0, write_sample(out, passing_checks()))
    assert.are.equal(table.concat({
      "Device: NVIDIA H200",
      "Compute Capability: 9.0",
      "",
      "Individual launches: 1000 iters in 0.0118s  (11.82 us/iter)",
      "",
      "Building CUDA graph...",
      "Graph replay:       1000 iters in 0.0040s  (4.02 us/iter)",
      "Graph speedup: 2.94x",
      "",
      "Graph replay on updated data verified (same graph, new buffer contents)",
      "",
      "Done",
      "",
    }, "\n"), table.concat(written))
  end)

  it("writes one JSON object of the same figures, and nothing else", function()
    local out, written = capture(true)
    assert.are.equal(0, write_sample(out, passing_checks()))
    assert.are.equal(1, #written)
    assert.matches("^{.*}\n$", written[1])
    local figures = cjson.decode(written[1])
    assert.are.equal("NVIDIA H200", figures.device)
    assert.are.equal(0, figures.device_id)
    assert.are.equal("9.0", figures.compute_capability)
    assert.are.equal(4096, figures.elements)
    assert.are.equal(1000, figures.iters)
    assert.are.same(individual, figures.individual)
    assert.are.same(graph, figures.graph)
    assert.is_true(math.abs(figures.speedup - 0.01182 / 0.00402) < 1e-12)
    assert.is_true(figures.checks_passed)
    assert.are.same({ ["graph replay"] = true }, figures.checks)
  end)

  it("ends with exit code 1 and checks_passed false when a check failed", function()
    local checks = check.new("t.lua", function() end)
    checks:tables("graph replay", { 8, 7 }, 8, 0, 0)
    local out, written = capture(true)
    assert.are.equal(1, out:finish(checks))
    local figures = cjson.decode(written[1])
    assert.is_false(figures.checks_passed)
    assert.are.same({ ["graph replay"] = false }, figures.checks)
  end)

  it("groups an integer's digits in threes, as Python's \"{:,}\"", function()
    local cases = { [0] = "0", [999] = "999", [1000] = "1,000", [1048576] = "1,048,576",
                    [-1000] = "-1,000", [-100000] = "-100,000", [123456789] = "123,456,789" }
    for n, text in pairs(cases) do assert.are.equal(text, report.with_commas(n)) end
  end)

  it("leaves out a speedup it cannot measure", function()
    local out, written = capture(false)
    out:speedup("Graph speedup: ", individual, { iters = 1000, seconds = 0, us_per_iter = 0 })
    assert.are.same({}, written)
    assert.is_nil(out.figures.speedup)
  end)
end)
