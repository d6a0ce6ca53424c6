-- scripts/cudagraphs.lua and scripts/stencil2d.lua end to end, as a user
-- runs them: exit code, every line of the output, the JSON figures.

local gpurun = require("gpurun")
local cjson = require("cjson")
local process = require("spec.support.process")

local function run_script(script, argv)
  local words = { process.quote(script) }
  for _, word in ipairs(argv or {}) do
    words[#words + 1] = process.quote(word)
  end
  return process.gpurun(table.concat(words, " "))
end

local function lines_of(text)
  local lines = {}
  for line in text:gmatch("([^\n]*)\n") do
    lines[#lines + 1] = line
  end
  return lines
end

local TIMING = " iters in %d+%.%d%d%d%ds  %(%d+%.%d%d us/iter%)$"

-- The cuda.core sample's output, line by line, after the script's own
-- header lines.
local function expected_shape(iters, header)
  local patterns = {
    "^Device: %S.*$",
    "^Compute Capability: %d+%.%d+$",
  }
  for _, pattern in ipairs(header or {}) do
    patterns[#patterns + 1] = pattern
  end
  for _, pattern in ipairs{
    "^$",
    "^Individual launches: " .. iters .. TIMING,
    "^$",
    "^Building CUDA graph%.%.%.$",
    "^Graph replay:       " .. iters .. TIMING,
    "^Graph speedup: %d+%.%d%dx$",
  } do
    patterns[#patterns + 1] = pattern
  end
  return patterns
end

local function assert_lines(patterns, stdout)
  local lines = lines_of(stdout)
  assert.are.equal(#patterns, #lines, "line count of:\n" .. stdout)
  for i, pattern in ipairs(patterns) do
    assert.matches(pattern, lines[i], ("line %d of:\n%s"):format(i, stdout))
  end
end

local CUDAGRAPHS_TAIL = {
  "^$",
  "^Graph replay on updated data verified %(same graph, new buffer contents%)$",
  "^$",
  "^Done$",
}

local function cudagraphs_shape(iters)
  local patterns = expected_shape(iters)
  table.move(CUDAGRAPHS_TAIL, 1, #CUDAGRAPHS_TAIL, #patterns + 1, patterns)
  return patterns
end

local function stencil_shape(iters)
  local patterns = expected_shape(iters, {
    "^Grid: %d+ x %d+ elements in %d+ x %d+ blocks of 16 x 16, alpha = %S+$",
  })
  patterns[#patterns + 1] = "^$"
  patterns[#patterns + 1] = "^Done$"
  return patterns
end

local function assert_timing(figures, key, iters)
  local timing = figures[key]
  assert.are.equal("table", type(timing), key)
  assert.are.equal(iters, timing.iters)
  assert.is_true(timing.seconds > 0, key)
  assert.is_true(math.abs(timing.us_per_iter - timing.seconds * 1e6 / iters) < 1e-6, key)
end

describe("scripts/cudagraphs.lua", function()
  for _, elements in ipairs{ 4096, 1000, 1 << 20 } do
    it(("prints the sample's output for --elements %d #gpu"):format(elements), function()
      local result = run_script("scripts/cudagraphs.lua",
                                { "--elements", tostring(elements), "--iters", "20" })
      assert.are.equal(0, result.code, result.stderr)
      assert.are.equal("", result.stderr)
      assert_lines(cudagraphs_shape(20), result.stdout)
    end)
  end

  it("runs 1000 iterations of 4096 elements by default #gpu", function()
    local result = run_script("scripts/cudagraphs.lua")
    assert.are.equal(0, result.code, result.stderr)
    assert_lines(cudagraphs_shape(1000), result.stdout)
  end)

  it("writes its figures as one JSON object with --json #gpu", function()
    local result = run_script("scripts/cudagraphs.lua",
                              { "--elements", "1000", "--iters", "10", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(gpurun.Device(0).name, figures.device)
    assert.are.equal(0, figures.device_id)
    assert.matches("^%d+%.%d+$", figures.compute_capability)
    assert.are.equal(1000, figures.elements)
    assert.are.equal(10, figures.iters)
    assert_timing(figures, "individual", 10)
    assert_timing(figures, "graph", 10)
    local speedup = figures.individual.seconds / figures.graph.seconds
    assert.is_true(math.abs(figures.speedup - speedup) < 1e-9 * speedup)
    assert.is_true(figures.checks_passed)
    assert.are.same({
      ["individual launches"] = true,
      ["graph replay"] = true,
      ["graph replay on updated data"] = true,
    }, figures.checks)
  end)

  if gpurun.device_count() > 0 then
    pending("says plainly that there is no GPU #nogpu (this machine has one)")
  else
    it("says plainly that there is no GPU #nogpu", function()
      local result = run_script("scripts/cudagraphs.lua", { "--elements", "1000" })
      assert.are.equal(1, result.code)
      assert.are.equal("", result.stdout)
      assert.matches("^cudagraphs%.lua: no CUDA GPU available: [^\n]+\n$", result.stderr)
      local reason = gpurun.driver_error() or "no device"
      assert.are.equal("cudagraphs.lua: no CUDA GPU available: " .. reason .. "\n",
                       result.stderr)
    end)
  end
end)

describe("scripts/stencil2d.lua", function()
  it("runs saxpy and the stencil on a 2D grid and checks them #gpu", function()
    local result = run_script("scripts/stencil2d.lua", { "--iters", "20" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert_lines(stencil_shape(20), result.stdout)
  end)

  it("handles sizes that are not multiples of the block and a negative alpha #gpu", function()
    local result = run_script("scripts/stencil2d.lua", { "--width", "100", "--height", "37",
                                                         "--alpha", "-1.5", "--iters", "10" })
    assert.are.equal(0, result.code, result.stderr)
    assert_lines(stencil_shape(10), result.stdout)
    assert.matches("Grid: 100 x 37 elements in 7 x 3 blocks of 16 x 16, alpha = -1.5",
                   result.stdout, 1, true)
  end)

  it("writes its figures as JSON with --json #gpu", function()
    local result = run_script("scripts/stencil2d.lua", { "--width", "64", "--height", "48",
                                                         "--alpha", "0.5", "--iters", "5",
                                                         "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(64, figures.width)
    assert.are.equal(48, figures.height)
    assert.are.equal(0.5, figures.alpha)
    assert_timing(figures, "individual", 5)
    assert_timing(figures, "graph", 5)
    assert.is_true(figures.checks_passed)
  end)

  if gpurun.device_count() > 0 then
    pending("says plainly that there is no GPU #nogpu (this machine has one)")
  else
    it("says plainly that there is no GPU #nogpu", function()
      local result = run_script("scripts/stencil2d.lua")
      assert.are.equal(1, result.code)
      assert.are.equal("", result.stdout)
      assert.matches("^stencil2d%.lua: no CUDA GPU available: [^\n]+\n$", result.stderr)
    end)
  end
end)
