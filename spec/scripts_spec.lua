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

describe("scripts/cudagraphs.lua --per-graph", function()
  it("adds a third timing line for K passes per graph, and the figure to the JSON #gpu", function()
    local result = run_script("scripts/cudagraphs.lua", { "--elements", "4096", "--iters", "50",
      "--per-graph", "10" })
    assert.are.equal(0, result.code, result.stderr)
    local patterns = expected_shape(50)
    patterns[#patterns + 1] = "^Graph replay %(10 per graph%): " .. 50 .. TIMING
    table.move(CUDAGRAPHS_TAIL, 1, #CUDAGRAPHS_TAIL, #patterns + 1, patterns)
    assert_lines(patterns, result.stdout)
    local json = run_script("scripts/cudagraphs.lua", { "--elements", "4096", "--iters", "20",
      "--per-graph", "10", "--json" })
    assert.are.equal(0, json.code, json.stderr)
    local figures = cjson.decode(json.stdout)
    assert.are.equal(10, figures.per_graph_iterations)
    assert_timing(figures, "per_graph", 20)
    assert.is_true(figures.checks_passed)
  end)

  it("refuses a K below 1", function()
    local result = run_script("scripts/cudagraphs.lua", { "--per-graph", "0" })
    assert.are.equal(2, result.code)
    assert.matches("%-%-per%-graph", result.stderr)
  end)
end)

describe("scripts/dag.lua", function()
  it("runs two branches on two streams and as one graph, and updates the graph in place #gpu", function()
    local folder = os.tmpname()
    os.remove(folder)
    local dot = folder .. ".dot"
    local result = run_script("scripts/dag.lua", { "--elements", "10000", "--iters", "20", "--dot", dot })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert_lines({
      "^Device: %S.*$",
      "^Compute Capability: %d+%.%d+$",
      "^$",
      "^Two streams:   20" .. TIMING,
      "^Graph replay:  20" .. TIMING,
      "^Graph speedup: %d+%.%d%dx$",
      "^Graph: 4 nodes %(.*memcpy.*%)$",
      "^Graph, b_copy inside: 20" .. TIMING,
      "^b_copy: 39%.06 KiB held by hand for the whole run; the graph that makes it inside peaks at "
        .. "%d+%.?%d* %a+ of graph memory$",
      "^$",
      "^Graph updated in place from a new capture: alpha 2 %-> 6, verified$",
      "^Graph's scale node set in place: alpha %-> 0%.5, verified$",
      "^Graph drawn: " .. dot:gsub("%p", "%%%0") .. "$",
      "^$",
      "^Done$",
    }, result.stdout)
    local file = assert(io.open(dot))
    local text = file:read("a")
    file:close()
    os.remove(dot)
    assert.matches("^digraph", text)
    for _, name in ipairs({ "scale", "shift", "combine", "memcpy" }) do
      assert.truthy(text:find(name, 1, true), name)
    end
  end)

  it("writes its figures as JSON #gpu", function()
    local result = run_script("scripts/dag.lua", { "--elements", "1000", "--iters", "5", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(4, figures.graph_nodes)
    assert_timing(figures, "individual", 5)
    assert_timing(figures, "graph", 5)
    assert_timing(figures, "graph_temporary", 5)
    assert.are.equal(4000, figures.b_copy_bytes)
    assert.is_true(figures.graph_temporary_peak_bytes >= 4000)
    assert.is_true(figures.checks_passed)
  end)
end)

describe("scripts/dag.lua --profile", function()
  it("prints each node's time and the critical path #gpu", function()
    local result = run_script("scripts/dag.lua", { "--elements", "10000", "--iters", "20", "--profile" })
    assert.are.equal(0, result.code, result.stderr)
    local text = result.stdout
    assert.truthy(text:find("graph:profile, medians of 20 replays", 1, true), text)
    assert.truthy(text:find("critical path (*): ", 1, true), text)
    assert.truthy(text:find("replay: instrumented ", 1, true), text)
    result = run_script("scripts/dag.lua", { "--elements", "1000", "--iters", "5", "--profile", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(4, #figures.profile_node_us)
    for _, us in ipairs(figures.profile_node_us) do assert.is_true(us > 0) end
    assert.is_true(figures.profile_critical_us > 0 and figures.profile_plain_us > 0)
  end)
end)

describe("scripts/dag.lua --declared", function()
  it("builds the same DAG from the declaration, with the same results #gpu", function()
    local folder = os.tmpname()
    os.remove(folder)
    local dot = folder .. ".dot"
    local result = run_script("scripts/dag.lua", { "--elements", "10000", "--iters", "20", "--declared",
      "--dot", dot })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    assert_lines({
      "^Device: %S.*$",
      "^Compute Capability: %d+%.%d+$",
      "^Declared: 4 stages, 2 streams, 1 waits between them, inferred from what each stage reads and writes$",
      "^$",
      "^Two streams:   20" .. TIMING,
      "^Graph replay:  20" .. TIMING,
      "^Graph speedup: %d+%.%d%dx$",
      "^Graph: 4 nodes %(memcpy, shift, scale, combine%)$",
      "^$",
      "^Graph's scale node set in place by the pipeline: alpha 2 %-> 6, verified$",
      "^Graph updated in place for a new buffer of a's shape %(graph:update%), verified$",
      "^Graph drawn: " .. dot:gsub("%p", "%%%0") .. "$",
      "^$",
      "^Done$",
    }, result.stdout)
    local file = assert(io.open(dot))
    local text = file:read("a")
    file:close()
    os.remove(dot)
    for _, name in ipairs({ "scale", "shift", "combine", "memcpy" }) do
      assert.truthy(text:find(name, 1, true), name)
    end
  end)

  it("has the hand-built graph's node count in its JSON #gpu", function()
    local result = run_script("scripts/dag.lua", { "--elements", "1000", "--iters", "5", "--json", "--declared" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(4, figures.graph_nodes)
    assert.are.equal(2, figures.declared_streams)
    assert.is_true(figures.checks_passed)
  end)
end)

describe("scripts/pipeline.lua", function()
  it("plans, runs, replays and sets the declared sample with a second branch #gpu", function()
    local folder = os.tmpname()
    os.remove(folder)
    local dot = folder .. ".dot"
    local result = run_script("scripts/pipeline.lua", { "--elements", "65536", "--iters", "20", "--dot", dot })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    local out = result.stdout
    for _, part in ipairs({
        "pipeline 'sample': ", "fusion groups:", "one kernel 'sample_add_mul_sub', writes r3; r1, r2 in registers",
        "stream 2: scale", "Timeline of one run, stage by stage", "Stage by stage: 20 iters",
        "Graph replay:   20 iters", "alpha 0.5 -> 1.5 set in the graph in place (no new capture), verified",
        "Plan drawn: " .. dot, "\nDone\n" }) do
      assert.truthy(out:find(part, 1, true), part .. "\n" .. out)
    end
    local file = assert(io.open(dot))
    local text = file:read("a")
    file:close()
    os.remove(dot)
    assert.matches("^digraph", text)
  end)

  it("writes its plan, timeline and timings as JSON #gpu", function()
    local result = run_script("scripts/pipeline.lua", { "--elements", "4096", "--iters", "5", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.is_true(figures.checks_passed)
    assert.are.equal(2, #figures.plan.streams >= 2 and 2 or #figures.plan.streams)
    assert.is_true(#figures.timeline >= 4)
    assert_timing(figures, "stages", 5)
    assert_timing(figures, "graph", 5)
  end)

  it("refuses a bad option with a usage error", function()
    local result = run_script("scripts/pipeline.lua", { "--elements", "0" })
    assert.are.equal(2, result.code)
    assert.matches("%-%-elements", result.stderr)
  end)
end)

describe("scripts/converge.lua", function()
  it("iterates to the tolerance in one graph and from Lua, with the same steps #gpu", function()
    local result = run_script("scripts/converge.lua", { "--points", "16", "--tol", "1e-3", "--iters", "2" })
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("", result.stderr)
    local steps = result.stdout:match("\n16 points, tolerance 0%.001: (%d+) steps on the device")
    assert.truthy(steps, result.stdout)
    assert.matches("One graph %(while node%):  2" .. TIMING:sub(1, -2), result.stdout)
    assert.matches("Lua loop, a read a step: 2" .. TIMING:sub(1, -2), result.stdout)
    assert.matches("\nDone\n$", result.stdout)
  end)

  it("stops at --max-iters and agrees with the host there too #gpu", function()
    local result = run_script("scripts/converge.lua", { "--points", "64", "--tol", "1e-9",
      "--max-iters", "50", "--iters", "1", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal(50, figures.steps)
    assert.are.equal(50, figures.host_steps)
    assert.is_true(figures.checks_passed)
  end)

  it("decides by hand with --hand-written, and cancels a loop that never ends #gpu", function()
    local result = run_script("scripts/converge.lua", { "--points", "16", "--tol", "1e-3", "--iters", "1",
      "--hand-written", "--cancel-after", "20", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    local figures = cjson.decode(result.stdout)
    assert.are.equal("kernel", figures.decision)
    assert.is_true(figures.checks_passed)
    assert.are.equal("number", type(figures.cancel_ms))
    assert.are.equal("number", type(figures.idle_sync_us))
    result = run_script("scripts/converge.lua", { "--points", "16", "--tol", "1e-3", "--iters", "1", "--json" })
    assert.are.equal(0, result.code, result.stderr)
    assert.matches("^max_abs_diff%(u, w%) > ", cjson.decode(result.stdout).decision)
  end)

  it("refuses a tolerance that is not positive", function()
    local result = run_script("scripts/converge.lua", { "--tol", "0" })
    assert.are.equal(2, result.code)
    assert.matches("%-%-tol: expected a positive number, got 0", result.stderr)
  end)
end)
