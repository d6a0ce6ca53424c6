-- Graph:profile: the policy over recorded event times (medians, shares,
-- the critical path, the text, the timeline) on every machine; the
-- instrumented twin of real graphs on a GPU.
local gpurun = require("gpurun")
local bench = require("gpurun.bench")
local profile = require("gpurun.graph.profile")
local timeline = require("gpurun.timeline")

-- A diamond: 1 -> 2 -> 4 and 1 -> 3 -> 4.
local DIAMOND = {
  { index = 1, kind = "memcpy", dependencies = {} },
  { index = 2, kind = "kernel", name = "shift", dependencies = { 1 } },
  { index = 3, kind = "kernel", name = "scale", dependencies = {} },
  { index = 4, kind = "kernel", name = "combine", dependencies = { 2, 3 } },
}

-- Two replays' starts and ends (us after each replay was queued), node by node.
local RECORD = {
  starts = { 10, 12, 10, 20,   5, 7.5, 5, 15 },
  ends   = { 12, 18, 13, 22,   7, 12.5, 9, 18 },
}

describe("Graph:profile's policy", function()
  it("checks its options", function()
    assert.are.equal(profile.DEFAULT_REPLAYS, profile.check_options(nil))
    assert.are.equal(profile.DEFAULT_REPLAYS, profile.check_options({}))
    assert.are.equal(7, profile.check_options({ replays = 7 }))
    local cases = {
      { 5, "table of options expected, got number" },
      { { replays = 0 }, "replays must be an integer from 1 to 10000, got 0" },
      { { replays = 1.5 }, "replays must be an integer from 1 to 10000, got 1.5" },
      { { replays = "3" }, "replays must be an integer from 1 to 10000, got string" },
      { { replay = 3 }, "unknown option 'replay' (known: replays)" },
      { { [1] = 3 }, "unknown option number (known: replays)" },
    }
    for _, case in ipairs(cases) do
      local replays, why = profile.check_options(case[1])
      assert.is_nil(replays)
      assert.are.equal(case[2], why)
    end
  end)

  it("takes medians", function()
    assert.are.equal(0, profile.median({}))
    assert.are.equal(3, profile.median({ 5, 3, 1 }))
    assert.are.equal(2.5, profile.median({ 4, 1, 3, 2 }))
    local list = { 3, 1, 2 }
    profile.median(list)
    assert.are.same({ 3, 1, 2 }, list) -- left as it was
  end)

  it("finds the heaviest path through the DAG", function()
    local path, total = profile.critical_path(DIAMOND, { 1, 5, 2, 1 })
    assert.are.same({ 1, 2, 4 }, path)
    assert.are.equal(7, total)
    path, total = profile.critical_path(DIAMOND, { 1, 1, 9, 1 })
    assert.are.same({ 3, 4 }, path)
    assert.are.equal(10, total)
    path, total = profile.critical_path(DIAMOND, { 0, 0, 0, 0 })
    assert.are.same({ 3, 4 }, path) -- to a node without successors, weighing nothing
    assert.are.equal(0, total)
    path = profile.critical_path({}, {})
    assert.are.same({}, path)
    assert.has_error(function()
      profile.critical_path({ { dependencies = { 2 } }, { dependencies = { 1 } } }, { 1, 1 })
    end, "critical_path: the dependencies form a cycle")
    assert.has_error(function()
      profile.critical_path({ { dependencies = { 3 } } }, { 1 })
    end, "critical_path: node 1 depends on 3, not a node")
  end)

  it("makes recorded times into medians, shares and the critical path", function()
    local result = profile.summarize(DIAMOND, RECORD, { 11, 9, 10 })
    assert.are.equal(2, result.replays)
    -- Node times: 1: 2, 2 -> 2; 2: 6, 5 -> 5.5; 3: 3, 4 -> 3.5; 4: 2, 3 -> 2.5.
    local us = {}
    for i, node in ipairs(result.nodes) do us[i] = node.us end
    assert.are.same({ 2, 5.5, 3.5, 2.5 }, us)
    assert.are.equal(13.5, result.total_us)
    local shares = 0
    for _, node in ipairs(result.nodes) do shares = shares + node.share end
    assert.is_true(math.abs(shares - 1) < 1e-12)
    assert.are.equal(5.5 / 13.5, result.nodes[2].share)
    assert.are.same({ 1, 2, 4 }, result.critical_path)
    assert.are.equal(10, result.critical_us)
    assert.is_true(result.nodes[1].critical and result.nodes[2].critical and result.nodes[4].critical)
    assert.is_false(result.nodes[3].critical)
    -- Starts after each replay's first node: 4: 10 and 10 -> 10; 2: 2, 2.5 -> 2.25.
    assert.are.equal(10, result.nodes[4].start_us)
    assert.are.equal(2.25, result.nodes[2].start_us)
    -- Each replay's span, first start to last end: 12 and 13.
    assert.are.equal(12.5, result.twin_us)
    assert.are.equal(10, result.plain_us)
    assert.are.equal("shift", result.nodes[2].name)
    assert.are.equal("memcpy", result.nodes[1].kind)
  end)

  it("takes what an empty bracket costs off each node's time", function()
    local record = { starts = RECORD.starts, ends = RECORD.ends, empty = { 1.5, 2.5, 4 } }
    local result = profile.summarize(DIAMOND, record, { 10 })
    assert.are.equal(2.5, result.empty_us)
    -- Brackets 2, 5.5, 3.5, 2.5, less 2.5; none below 0.
    local us, brackets = {}, {}
    for i, node in ipairs(result.nodes) do us[i], brackets[i] = node.us, node.bracket_us end
    assert.are.same({ 0, 3, 1, 0 }, us)
    assert.are.same({ 2, 5.5, 3.5, 2.5 }, brackets)
    assert.are.equal(4, result.total_us)
    assert.are.same({ 1, 2, 4 }, result.critical_path)
    assert.are.equal(3, result.critical_us)
    assert.are.equal(0, result.nodes[1].share)
    assert.are.equal(12.5, result.twin_us) -- the twin's replay as it ran
    assert.truthy(profile.format(result):find("node times net of an empty bracket's 2.500 us", 1, true))
  end)

  it("writes the profile as text and as a timeline", function()
    local result = profile.summarize(DIAMOND, RECORD, { 10 })
    local text = profile.format(result)
    assert.truthy(text:find("critical path (*): 1 -> 2 -> 4, 10.000 us; all nodes 13.500 us", 1, true), text)
    assert.truthy(text:find("node times net of an empty bracket's 0.000 us; replay: instrumented 12.500 us,"
      .. " plain 10.000 us (medians of 2)", 1, true), text)
    assert.truthy(text:find("   2* shift (kernel)", 1, true), text)
    assert.truthy(text:find("   3  scale (kernel)", 1, true), text)
    local drawn = timeline.format(result, 20)
    local lines = {}
    for line in drawn:gmatch("[^\n]+") do lines[#lines + 1] = line end
    assert.are.equal(5, #lines, drawn)
    assert.truthy(lines[1]:find("0 .. 12.500 us", 1, true), drawn)
    assert.truthy(lines[5]:find("4 combine", 1, true), drawn)
    assert.truthy(lines[5]:find("*", 1, true), drawn)
    assert.truthy(lines[4]:find("3 scale", 1, true) and not lines[4]:find("*", 1, true), drawn)
  end)

  it("summarizes a graph without nodes", function()
    local result = profile.summarize({}, { starts = {}, ends = {} }, {})
    assert.are.same({}, result.nodes)
    assert.are.same({}, result.critical_path)
    assert.are.equal(0, result.total_us)
    assert.truthy(profile.format(result):find("critical path (*): none", 1, true))
  end)
end)

describe("Graph:profile", function()
  local device, stream, code
  local N = 1 << 16
  before_each(function()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
    if not code then
      code = gpurun.Program(require("gpurun.samples.kernels").source("dag"), "c++",
        gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
    end
  end)
  after_each(function() stream:close() end)

  -- dag.lua's graph: b copied, shifted on one branch, a scaled on the other, joined.
  local function dag_graph(a, b, b_copy, x, y, r)
    local config = gpurun.LaunchConfig{ grid = (N + 255) // 256, block = 256 }
    return bench.capture(stream, function(builder)
      local side
      builder, side = builder:split(2)
      b_copy:copy_from(b, side)
      gpurun.launch(side, config, code:get_kernel("shift"), b_copy, y, 0.5, N)
      gpurun.launch(builder, config, code:get_kernel("scale"), a, x, 2.0, N)
      gpurun.join(builder, side)
      gpurun.launch(builder, config, code:get_kernel("combine"), x, y, r, N)
    end)
  end

  it("times each node of dag.lua's graph along a path of the DAG #gpu", function()
    local a, b = gpurun.full(N, 1.0), gpurun.full(N, 2.0)
    local b_copy, x, y, r = gpurun.zeros(N), gpurun.zeros(N), gpurun.zeros(N), gpurun.zeros(N)
    local graph <close> = dag_graph(a, b, b_copy, x, y, r)
    local nodes = graph:nodes()
    local result = graph:profile(stream, { replays = 5 })
    assert.are.equal(#nodes, #result.nodes)
    assert.are.equal(5, result.replays)
    for i, node in ipairs(result.nodes) do
      assert.are.equal(nodes[i].index, node.index)
      assert.are.equal(nodes[i].kind, node.kind)
      -- A bracket holds its node and the events' own cost; what is left
      -- after an empty bracket's is the node's, 0 at least.
      assert.is_true(node.bracket_us > 0, ("node %d: %s us"):format(i, tostring(node.bracket_us)))
      assert.is_true(node.us >= 0 and node.us <= node.bracket_us)
      assert.is_true(node.share >= 0 and node.share <= 1)
      assert.is_true(node.start_us >= 0)
    end
    assert.is_true(result.plain_us > 0)
    assert.is_true(result.twin_us > 0)
    assert.is_true(result.empty_us > 0)
    -- The critical path is a path of the DAG: each node depends on the one before.
    local path = result.critical_path
    assert.is_true(#path >= 2)
    assert.are.same({}, nodes[path[1]].dependencies)
    for k = 2, #path do
      local found = false
      for _, d in ipairs(nodes[path[k]].dependencies) do found = found or d == path[k - 1] end
      assert.is_true(found, ("node %d does not depend on node %d"):format(path[k], path[k - 1]))
    end
    assert.are.equal("combine", nodes[path[#path]].name)
    -- The graph is as it was, and still replays right.
    assert.are.same(nodes, graph:nodes())
    r:fill(0.0, stream)
    graph:launch(stream)
    assert.are.same({ 4.5, 4.5 }, r:to_table(1, 2, stream))
  end)

  it("refuses a graph with a conditional node, and leaves it as it was #gpu", function()
    local source = [[
      #include <cuda_device_runtime_api.h>
      extern "C" __global__ void set_condition(cudaGraphConditionalHandle c, const int *flag)
      { cudaGraphSetConditional(c, (unsigned int)*flag); }
      extern "C" __global__ void add(int *x, int amount) { *x += amount; }
    ]]
    local cond_code <close> = gpurun.Program(source, "c++",
      gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }):compile("cubin")
    local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
    local x, flag = gpurun.zeros(1, "int32"), gpurun.full(1, 1, "int32")
    local graph <close> = bench.capture(stream, function(builder)
      local condition = builder:create_condition(0)
      gpurun.launch(builder, one, cond_code:get_kernel("set_condition"), condition, flag)
      local body = builder:if_then(condition)
      body:begin_building()
      gpurun.launch(body, one, cond_code:get_kernel("add"), x, 5)
      body:end_building()
      gpurun.launch(builder, one, cond_code:get_kernel("add"), x, 100)
    end)
    local nodes = graph:nodes()
    local ok, err = pcall(graph.profile, graph, stream, { replays = 3 })
    assert.is_false(ok)
    assert.truthy(err:find("Graph:profile: a graph with conditional nodes cannot be profiled", 1, true),
      err)
    assert.are.same(nodes, graph:nodes())
    x:fill(0, stream)
    graph:launch(stream)
    assert.are.equal(105, x:get(1, stream))
  end)

  it("refuses graphs it cannot copy or replay alone #gpu", function()
    local n = 256
    local b = gpurun.full(n, 2.0)
    local y = gpurun.zeros(n)
    local with_memory <close> = bench.capture(stream, function(builder)
      local temporary = gpurun.empty(n, "float32", { stream = builder })
      temporary:copy_from(b, builder)
      y:copy_from(temporary, builder)
      temporary:close()
    end)
    local ok, err = pcall(with_memory.profile, with_memory, stream)
    assert.is_false(ok)
    assert.truthy(err:find("Graph:profile: a graph with memory allocation or free nodes cannot be "
      .. "profiled", 1, true), err)
    local callback <close> = gpurun.HostCallback(function() end)
    local with_host <close> = bench.capture(stream, function(builder) callback:launch(builder) end)
    ok, err = pcall(with_host.profile, with_host, stream)
    assert.is_false(ok)
    assert.truthy(err:find("Graph:profile: a graph with host nodes cannot be profiled", 1, true), err)
  end)
end)
