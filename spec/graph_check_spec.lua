-- The race check of graphs built by hand: the checker on recorded node
-- lists (no GPU), the accesses made of a graph's facts (copies, fills,
-- views, allocations), random DAGs against the declared-pipeline planner,
-- what a kernel's code says it writes (its source, its PTX: NVRTC, no GPU),
-- and on a GPU (#gpu) the graphs of the scripts, a missing join, the
-- builder's check, complete{ check = true } and the picture.
local gpurun = require("gpurun")
local race_check = require("gpurun.graph.race_check")
local accesses = require("gpurun.graph.accesses")
local kernel_access = require("gpurun.graph.kernel_access")
local ptx_access = require("gpurun.graph.ptx_access")
local schedule = require("gpurun.pipeline.schedule")
local random_pipeline = require("spec.support.random_pipeline")
local process = require("spec.support.process")

local function a(mode, lo, hi, label)
  return { key = "m", lo = lo, hi = hi, mode = mode, label = label or "x" }
end

local function node(name, deps, list, extra)
  local n = { kind = "kernel", name = name, dependencies = deps, accesses = list }
  for k, v in pairs(extra or {}) do n[k] = v end
  return n
end

-- The races as { "i-j HAZARD label" } for comparing.
local function pairs_of(races)
  local out = {}
  for _, r in ipairs(races) do
    out[#out + 1] = ("%d-%d %s %s"):format(r.first.index, r.second.index, r.hazard, r.label)
  end
  return out
end

describe("race_check on recorded node lists", function()
  -- x = scale(a); y = shift(b); r = combine(x, y): dag.lua's shape.
  local function dag(join)
    return {
      node("scale", {}, { a("r", 0, 100, "a"), a("w", 100, 200, "x") }),
      node("shift", {}, { a("r", 200, 300, "b"), a("w", 300, 400, "y") }),
      node("combine", join, { a("r", 100, 200, "x"), a("r", 300, 400, "y"), a("w", 400, 500, "r") }),
    }
  end

  it("finds nothing in a DAG whose edges order every conflict", function()
    local races, unchecked = race_check.check(dag({ 1, 2 }))
    assert.are.same({}, races)
    assert.are.same({}, unchecked)
  end)

  it("flags a removed edge with both nodes, the buffer and the hazard", function()
    local races = race_check.check(dag({ 1 }))
    assert.are.same({ "2-3 RAW y" }, pairs_of(races))
    local race = races[1]
    assert.are.equal("shift", race.first.name)
    assert.are.equal("combine", race.second.name)
    assert.are.equal("kernel", race.first.kind)
    assert.are.equal(300, race.lo)
    assert.are.equal(400, race.hi)
    assert.matches("node 2 %(kernel shift%) and node 3 %(kernel combine%), unordered: RAW %(read after "
      .. "write%) on y", race_check.describe(race))
  end)

  it("names write after read and write after write", function()
    local races = race_check.check({
      node("reader", {}, { a("r", 0, 8) }),
      node("writer", {}, { a("w", 0, 8) }),
      node("writer2", {}, { a("rw", 0, 8) }),
    })
    assert.are.same({ "1-2 WAR x", "1-3 WAR x", "2-3 RAW x" }, pairs_of(races))
    races = race_check.check({ node("w1", {}, { a("rw", 0, 8) }), node("w2", {}, { a("w", 0, 8) }) })
    assert.are.same({ "1-2 WAW x" }, pairs_of(races))
  end)

  it("does not flag reads beside reads", function()
    assert.are.same({}, race_check.check({
      node("r1", {}, { a("r", 0, 8) }), node("r2", {}, { a("r", 0, 8) }), node("r3", {}, { a("r", 4, 12) }),
    }))
  end)

  it("orders through paths, not only direct edges", function()
    local nodes = { node("w", {}, { a("w", 0, 8) }) }
    for i = 2, 50 do nodes[i] = node("step" .. i, { i - 1 }, {}) end
    nodes[51] = node("r", { 50 }, { a("r", 0, 8) })
    assert.are.same({}, race_check.check(nodes))
    nodes[51].dependencies = {}
    assert.are.same({ "1-51 RAW x" }, pairs_of(race_check.check(nodes)))
  end)

  it("takes byte ranges as they are: adjacent ranges do not overlap, other keys never", function()
    assert.are.same({}, race_check.check({
      node("left", {}, { a("w", 0, 64) }), node("right", {}, { a("w", 64, 128) }),
      node("empty", {}, { a("w", 32, 32) }),
      node("other", {}, { { key = "n", lo = 0, hi = 128, mode = "w", label = "z" } }),
    }))
    local races = race_check.check({ node("left", {}, { a("w", 0, 65) }), node("right", {}, { a("w", 64, 128) }) })
    assert.are.same({ "1-2 WAW x" }, pairs_of(races))
    assert.are.equal(64, races[1].lo)
    assert.are.equal(65, races[1].hi)
  end)

  it("reports every pair when nodes share one access table, each side naming its own node", function()
    local w = a("w", 0, 8, "u")
    local races = race_check.check({ node("one", {}, { w }), node("two", {}, { w }),
      node("three", {}, { w }) })
    assert.are.same({ "1-2 WAW u", "1-3 WAW u", "2-3 WAW u" }, pairs_of(races))
    assert.are.same({ "one", "two" }, { races[1].first.name, races[1].second.name })
    assert.are.same({ "two", "three" }, { races[3].first.name, races[3].second.name })
  end)

  it("orders a body's nodes with the outside as their conditional node is", function()
    local nodes = {
      node("before", {}, { a("w", 0, 8, "u") }),                 -- 1
      { kind = "conditional", dependencies = { 1 }, accesses = {} }, -- 2
      node("beside", {}, { a("w", 0, 8, "u") }),                 -- 3: unordered with 2
      node("after", { 2 }, { a("r", 0, 8, "u") }),               -- 4
      node("relax", {}, { a("rw", 0, 8, "u") }, { conditional = 2, branch = 1 }),   -- 5
      node("decide", {}, { a("r", 0, 8, "u") }, { conditional = 2, branch = 1 }),   -- 6: unordered with 5
      node("other", {}, { a("w", 0, 8, "u") }, { conditional = 2, branch = 2 }),    -- 7: another body
    }
    local got = pairs_of(race_check.check(nodes))
    assert.are.same({ "1-3 WAW u", "3-4 RAW u", "3-5 RAW u", "3-6 RAW u", "3-7 WAW u", "5-6 RAW u" }, got)
    local races = race_check.check(nodes)
    local inner = races[#races]
    assert.are.equal(2, inner.first.conditional)
    assert.are.equal(2, inner.first.top)
    assert.matches("body 1 of node 2", race_check.node_text(inner.first))
    -- Ordered inside the body: only the outside's races stay.
    nodes[6].dependencies = { 5 }
    nodes[3].dependencies = { 2 }
    nodes[4].dependencies = { 2, 3 }
    assert.are.same({}, race_check.check(nodes))
  end)

  it("checks nested bodies against the nodes around each level", function()
    local nodes = {
      { kind = "conditional", dependencies = {}, accesses = {} },                           -- 1
      node("outer", {}, { a("w", 0, 8) }),                                                  -- 2
      { kind = "conditional", dependencies = {}, accesses = {}, conditional = 1, branch = 1 }, -- 3
      node("mid", { 3 }, { a("r", 0, 8) }, { conditional = 1, branch = 1 }),                -- 4
      node("deep", {}, { a("w", 0, 8) }, { conditional = 3, branch = 1 }),                 -- 5
    }
    assert.are.same({ "2-4 RAW x", "2-5 WAW x" }, pairs_of(race_check.check(nodes)))
    nodes[1].dependencies = { 2 }
    assert.are.same({}, race_check.check(nodes))
  end)

  it("lists nodes whose accesses are unknown and leaves them out", function()
    local races, unchecked = race_check.check({
      node("w", {}, { a("w", 0, 8) }),
      node("lib", {}, { a("w", 0, 8) }, { unknown = "a library's kernel" }),
    })
    assert.are.same({}, races)
    assert.are.same({ { index = 2, kind = "kernel", name = "lib", why = "a library's kernel" } }, unchecked)
  end)

  it("refuses what is not a graph", function()
    local function fails(nodes, pattern)
      local ok, err = pcall(race_check.check, nodes)
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    fails(42, "a list of nodes expected, got number")
    fails({ { kind = "kernel" } }, "node 1 is not")
    fails({ node("a", { 2 }, {}), node("b", { 1 }, {}) }, "cycle through node")
    fails({ node("a", { 1 }, {}) }, "depends on 1, not another node")
    fails({ node("a", { 3 }, {}) }, "depends on 3")
    fails({ { kind = "conditional", dependencies = {} }, node("b", { 1 }, {}, { conditional = 1, branch = 1 }) },
      "in another graph")
    fails({ node("a", {}, { { key = "m", lo = 0, hi = 8, mode = "x" } }) }, "access 1 is not")
  end)
end)

describe("accesses made of a graph's facts", function()
  local function modes(map)
    return function(kernel)
      local out = {}
      for p, mode in pairs(map[kernel] or {}) do out[p] = { mode = mode, how = "spec" } end
      return out
    end
  end
  local K1, K2 = { name = "k1" }, { name = "k2" }

  it("gives copies and fills their exact bytes", function()
    local facts = { buffers = { { object = "buf", address = 1000, bytes = 400 } }, nodes = {
      { kind = "memset", dependencies = {}, dst = { address = 1000, bytes = 100 } },
      { kind = "memcpy", dependencies = {}, src = { address = 1200, bytes = 100 },
        dst = { address = 1100, bytes = 100 } },
      { kind = "memset", dependencies = {}, dst = { address = 1250, bytes = 10 } },
    } }
    local races = accesses.check(facts, modes({}))
    assert.are.same({ "2-3 WAR buf at 0x3e8" }, pairs_of(races))
    assert.are.equal(1250, races[1].lo)
    assert.are.equal(1260, races[1].hi)
    assert.are.equal("buf", races[1].buffer)
  end)

  it("gives a kernel the whole buffer or view each argument points into", function()
    -- a base of 256 bytes, its halves as views.
    local buffers = { { object = "base", address = 4096, bytes = 256 },
                      { object = "low", address = 4096, bytes = 128 },
                      { object = "high", address = 4224, bytes = 128 } }
    local function facts(first, second)
      return { buffers = buffers, nodes = {
        { kind = "kernel", kernel = K1, dependencies = {}, arguments = { first, 7 } },
        { kind = "kernel", kernel = K1, dependencies = {}, arguments = { second, 7 } },
      } }
    end
    local m = modes({ [K1] = { "rw", "r" } })
    -- The high half against the high half: a race; apart from the low one: none.
    assert.are.same({ "1-2 RAW high at 0x1080" }, pairs_of(accesses.check(facts(4224, 4224), m)))
    -- The low view starts where its base does: taken as the base (the larger), so that it overlaps.
    assert.are.same({ "1-2 RAW base at 0x1000" }, pairs_of(accesses.check(facts(4096, 4224), m)))
    -- An address inside a buffer: from there to its end.
    assert.are.same({}, accesses.check({ buffers = { buffers[3] }, nodes = {
      { kind = "kernel", kernel = K1, dependencies = {}, arguments = { 4224 } },
      { kind = "memset", dependencies = {}, dst = { address = 4096, bytes = 128 } },
    } }, m))
    -- An argument that is no buffer's (a count): nothing.
    assert.are.same({}, accesses.check(facts(5, 5), m))
    -- Read-only arguments beside each other: nothing.
    assert.are.same({}, accesses.check(facts(4224, 4224), modes({ [K1] = { "r" } })))
  end)

  it("leaves out disabled nodes and lists kernels it cannot read", function()
    local facts = { buffers = { { object = "b", address = 64, bytes = 64 } }, nodes = {
      { kind = "memset", dependencies = {}, dst = { address = 64, bytes = 64 }, enabled = false },
      { kind = "kernel", dependencies = {}, kernel = K2, arguments = { 64 } },
      { kind = "kernel", dependencies = {}, name = "cublas_gemm" },
      { kind = "kernel", dependencies = {}, kernel = K2, opaque = "a TensorMap argument" },
      { kind = "host", dependencies = {} },
      { kind = "semaphore_wait", dependencies = {} },
    } }
    local races, unchecked = accesses.check(facts, modes({ [K2] = { "w" } }))
    assert.are.same({}, races)
    assert.are.same({ 3, 4, 6 }, { unchecked[1].index, unchecked[2].index, unchecked[3].index })
    assert.matches("not launched from a gpurun.Kernel", unchecked[1].why)
  end)

  it("takes allocation and free nodes as writes of their memory", function()
    local facts = { buffers = {}, nodes = {
      { kind = "mem_alloc", dependencies = {}, address = 8192, bytes = 64 },
      { kind = "kernel", dependencies = { 1 }, kernel = K1, arguments = { 8192 } },
      { kind = "mem_free", dependencies = { 1 }, address = 8192 },
    } }
    local races = accesses.check(facts, modes({ [K1] = { "r" } }))
    assert.are.same({ "2-3 WAR graph allocation at 0x2000" }, pairs_of(races))
    facts.nodes[3].dependencies = { 2 }
    assert.are.same({}, accesses.check(facts, modes({ [K1] = { "r" } })))
  end)
end)

-- The planner's stages as a DAG with its edges: clean; without one edge,
-- exactly the conflicting pairs no path orders any more.
describe("race_check against the declared-pipeline planner", function()
  local SEEDS = 300

  local conflicting = random_pipeline.conflicting

  local function nodes_of(stages, edges, skip)
    local nodes = {}
    for i, stage in ipairs(stages) do
      local list = {}
      for _, x in ipairs(stage.accesses) do
        list[#list + 1] = { key = x.data.key, lo = x.data.lo, hi = x.data.hi, mode = x.mode, label = x.data.name }
      end
      nodes[i] = { kind = stage.kind.name, name = stage.name, dependencies = {}, accesses = list }
    end
    for k = 1, #edges.from do
      if k ~= skip then
        local deps = nodes[edges.to[k]].dependencies
        deps[#deps + 1] = edges.from[k]
      end
    end
    return nodes
  end

  local function unordered_conflicts(stages, nodes)
    local reach = {}
    for i = 1, #nodes do
      local set = {}
      for _, d in ipairs(nodes[i].dependencies) do
        set[d] = true
        for k in pairs(reach[d]) do set[k] = true end
      end
      reach[i] = set
    end
    local out = {}
    for i = 1, #stages do
      for j = i + 1, #stages do
        if not reach[j][i] and conflicting(stages[i], stages[j]) then out[#out + 1] = i .. "-" .. j end
      end
    end
    return out
  end

  local function race_pairs(races)
    local seen, out = {}, {}
    for _, r in ipairs(races) do
      local key = r.first.index .. "-" .. r.second.index
      if not seen[key] then
        seen[key] = true
        out[#out + 1] = key
      end
    end
    return out
  end

  it(("agrees with the planner's hazards on %d random pipelines"):format(SEEDS), function()
    local dropped, alone = 0, 0
    for seed = 1, SEEDS do
      local case = random_pipeline.new(seed)
      local stages = case.pipeline.stages
      local plan = schedule.of(case.pipeline)
      local edges = plan.edges
      assert.are.same({}, race_check.check(nodes_of(stages, edges)), ("seed %d: the planner's DAG"):format(seed))
      math.randomseed(seed * 31)
      for _ = 1, math.min(3, #edges.from) do
        local k = math.random(#edges.from)
        local nodes = nodes_of(stages, edges, k)
        local races = race_check.check(nodes)
        local expected = unordered_conflicts(stages, nodes)
        assert.are.same(expected, race_pairs(races), ("seed %d, edge %d dropped"):format(seed, k))
        local from, to = edges.from[k], edges.to[k]
        local named = false
        for _, r in ipairs(races) do
          if r.first.index == from and r.second.index == to and r.second.label == edges.data[k]
              and r.hazard == edges.hazard[k] then
            named = true
          end
        end
        -- An edge another path implies leaves nothing unordered.
        if #expected > 0 then
          local pair = from .. "-" .. to
          local found = false
          for _, p in ipairs(expected) do found = found or p == pair end
          if found then
            assert.is_true(named, ("seed %d: edge %d -> %d (%s %s) not named"):format(seed, from, to,
              edges.hazard[k], edges.data[k]))
            dropped = dropped + 1
            if #expected == 1 then alone = alone + 1 end
          end
        end
      end
    end
    -- The draws do drop edges nothing else implies, some of them alone.
    assert.is_true(dropped > SEEDS / 2, "few dropped edges were needed: " .. dropped)
    assert.is_true(alone > SEEDS / 10, "few dropped edges left one pair: " .. alone)
  end)
end)

describe("what a kernel's code says it writes", function()
  local SOURCE = [[
extern "C" __global__ void k(const float *a, float *b, float *c, int n, float **pp, float *d, float **q,
                             const float *e) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) { b[i] = a[i] + c[i] + d[i] + e[i]; atomicAdd(c, 1.0f); pp[0][i] = 1.0f; q[i] = d; }
}
extern "C" __global__ void looped(float *out, const float *in, int n) {
  for (int i = 0; i < n; i++) { float *p = out + i * 2; if (in[i] > 0) p[1] = in[i]; }
}
]]

  local function ptx()
    local options = gpurun.ProgramOptions{ arch = "sm_90" }
    return gpurun.Program(SOURCE, "c++", options):compile("ptx").code
  end

  it("reads the PTX: stores, atomics and escapes write; loads only read", function()
    local text = ptx()
    local modes, why = ptx_access.params(text, "k")
    assert.are.same({ "r", "rw", "rw", "r", "r", "rw", "rw", "r" }, modes)
    assert.matches("written through %(st%.global", why[2])
    assert.matches("atom", why[3])
    assert.matches("stored to memory", why[6])
    assert.are.same({ "rw", "r", "r" }, (ptx_access.params(text, "looped")))
    assert.is_nil((ptx_access.params(text, "missing")))
  end)

  it("reads the source's const before the PTX, and what set_access declares before both", function()
    local kernel = { name = "k", num_params = 8, source = SOURCE }
    local m = kernel_access.of(kernel)
    assert.are.equal("r", m[1].mode)
    assert.matches("const in the source", m[1].how)
    assert.are.equal("rw", m[5].mode) -- float ** is not const: the source cannot say more
    -- Without source, the PTX decides.
    local text = ptx()
    local bare = { name = "k", num_params = 8 }
    m = kernel_access.of(bare, function() return { code_type = "ptx", code = text } end)
    assert.are.equal("r", m[5].mode)
    assert.matches("^PTX", m[5].how)
    -- Nothing known: every pointer may write.
    m = kernel_access.of({ name = "k", num_params = 2 }, function() return { code_type = "cubin" } end)
    assert.are.equal("rw", m[1].mode)
    assert.matches("may write", m[1].how)
    -- Declared: wins.
    local declared = { name = "k", num_params = 8, source = SOURCE }
    kernel_access.declare(declared, kernel_access.check_declaration({ [2] = "w", [3] = "r" }, 8, "K"))
    m = kernel_access.of(declared)
    assert.are.equal("w", m[2].mode)
    assert.are.equal("r", m[3].mode)
    assert.matches("set_access", m[3].how)
    assert.are.equal("r", m[1].mode)
  end)

  it("refuses a declaration that is not one", function()
    local function fails(modes, pattern)
      local ok, err = pcall(kernel_access.check_declaration, modes, 3, "Kernel:set_access")
      assert.is_false(ok)
      assert.matches(pattern, tostring(err))
    end
    fails("r", "table of access modes expected, got string")
    fails({ "x" }, "parameter 1: \"r\", \"w\", \"rw\" or false expected")
    fails({ [4] = "r" }, "keys are parameter positions 1 to 3, got 4")
    fails({ name = "r" }, "keys are parameter positions")
  end)
end)

describe("Graph:check and GraphBuilder:check on the GPU", function()
  local SOURCE = [[
extern "C" __global__ void produce(float *out, float value, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = value;
}
extern "C" __global__ void consume(const float *in, float *out, unsigned int n) {
  unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) out[i] = in[i] * 2.0f;
}
]]
  local N = 1024
  local device, stream, produce, consume, config

  local function setup()
    device = gpurun.Device(0)
    device:set_current()
    stream = device:create_stream()
    local code = gpurun.Program(SOURCE, "c++", gpurun.ProgramOptions{ arch = "sm_" .. device.arch })
      :compile("cubin")
    produce, consume = code:get_kernel("produce"), code:get_kernel("consume")
    config = gpurun.LaunchConfig{ grid = (N + 255) // 256, block = 256 }
  end

  -- produce x on a fork, consume it on the main builder: joined first or not.
  local function capture(join)
    local x, y = gpurun.empty(N, "float32"), gpurun.empty(N, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local main, side = builder:split(2)
    gpurun.launch(side, config, produce, x, 1.5, N)
    if join then gpurun.join(main, side) end
    gpurun.launch(main, config, consume, x, y, N)
    if not join then gpurun.join(main, side) end
    builder:end_building()
    return builder, x, y
  end

  it("finds nothing in a joined fork, and the missing join in a graph and its builder #gpu", function()
    setup()
    local builder = capture(true)
    assert.are.same({}, (builder:check()))
    local graph = builder:complete()
    assert.are.same({}, (graph:check()))
    graph:close()
    builder:close()

    local x
    builder, x = capture(false)
    local races = builder:check()
    assert.are.equal(1, #races)
    local race = races[1]
    -- (The nodes come in the driver's order: the hazard is named in it.)
    local names = { race.first.name, race.second.name }
    table.sort(names)
    assert.are.same({ "consume", "produce" }, names)
    assert.are.equal(race.first.name == "produce" and "RAW" or "WAR", race.hazard)
    assert.are.equal(x, race.buffer)
    assert.are.equal(x.ptr, race.lo)
    assert.are.equal(x.ptr + x.nbytes, race.hi)
    assert.matches("unordered: " .. race.hazard, race.message)
    local ok, err = pcall(builder.check, builder, { raise = true })
    assert.is_false(ok)
    assert.matches("GraphBuilder:check: 1 race: node %d+ %(kernel %a+%) and node %d+", tostring(err))
    -- However racy, the raised line names 8 races and counts the rest.
    local racy = stream:create_graph_builder()
    racy:begin_building()
    local forks = { racy:split(6) }
    for _, fork in ipairs(forks) do gpurun.launch(fork, config, produce, x, 1.0, N) end
    gpurun.join(table.unpack(forks))
    racy:end_building()
    assert.are.equal(15, #racy:check())
    ok, err = pcall(racy.check, racy, { raise = true })
    assert.is_false(ok)
    local _, named = tostring(err):gsub("unordered", "")
    assert.are.equal(8, named)
    assert.matches("GraphBuilder:check: 15 races: .*; and 7 more %(check%(%) lists them all%)$", tostring(err))
    racy:close()
    -- complete{ check = true } refuses; the builder is still built, and completes without it.
    ok, err = pcall(builder.complete, builder, { check = true })
    assert.is_false(ok)
    assert.matches("GraphBuilder:complete: 1 race", tostring(err))
    assert.are.equal("built", builder.state)
    graph = builder:complete()
    races = graph:check()
    assert.are.equal(1, #races)
    local dot = graph:to_dot{ races = true }
    assert.matches('%-> n%d+ %[color="#d62728".-label="' .. race.hazard .. ' gpurun%.Buffer', dot)
    assert.are.equal(graph:to_dot(), graph:to_dot{ races = {} })
    graph:close()
    builder:close()
    stream:close()
  end)

  it("takes Kernel:set_access and reads a kernel's source #gpu", function()
    setup()
    local m = consume:access()
    assert.are.equal("r", m[1].mode)
    assert.are.equal("rw", m[2].mode)
    assert.are.equal(produce, produce:set_access{ "w" })
    assert.are.equal("w", produce:access()[1].mode)
    -- Both only read x once produce is declared to read it: no race.
    produce:set_access{ "r" }
    local builder = capture(false)
    assert.are.same({}, (builder:check()))
    produce:set_access{}
    assert.are.equal(1, #builder:check())
    builder:close()
    stream:close()
  end)

  it("checks conditional bodies: a body's kernel unordered with the outside #gpu", function()
    setup()
    local x, y = gpurun.empty(N, "float32"), gpurun.empty(N, "float32")
    local builder = stream:create_graph_builder()
    builder:begin_building()
    local main, side = builder:split(2)
    local condition = main:create_condition(1)
    local body = main:if_then(condition)
    body:begin_building()
    gpurun.launch(body, config, produce, x, 2.0, N)
    x:fill(0, body)
    body:end_building()
    gpurun.launch(side, config, consume, x, y, N)
    gpurun.join(main, side)
    builder:end_building()
    local races = builder:check()
    assert.are.equal(2, #races)
    for _, race in ipairs(races) do
      assert.are.equal(x, race.buffer)
      -- The top level comes first: the body's node is the second.
      assert.is_nil(race.first.conditional)
      assert.is_not_nil(race.second.conditional)
    end
    assert.are.same({ "WAR", "WAR" }, { races[1].hazard, races[2].hazard })
    -- Inside the body the fill follows the kernel: no race between them.
    local graph = builder:complete()
    assert.are.equal(2, #graph:check())
    assert.matches("nodes %d+ and %d+", graph:to_dot{ races = true })
    graph:close()
    builder:close()
    stream:close()
  end)

  it("refuses a builder that has nothing built #gpu", function()
    setup()
    local builder = stream:create_graph_builder()
    local ok, err = pcall(builder.check, builder)
    assert.is_false(ok)
    assert.matches("GraphBuilder:check: nothing built to check %(it is idle%)", tostring(err))
    builder:close()
    stream:close()
  end)

  local SCRIPTS = {
    { "scripts/dag.lua", "--elements", "1000", "--iters", "5" },
    { "scripts/dag.lua", "--elements", "1000", "--iters", "5", "--declared" },
    { "scripts/cudagraphs.lua", "--elements", "4096", "--iters", "20" },
    { "scripts/cudagraphs.lua", "--elements", "4096", "--iters", "20", "--per-graph", "3" },
    { "scripts/converge.lua", "--points", "16", "--tol", "1e-3", "--iters", "2" },
    { "scripts/stencil2d.lua", "--iters", "20" },
    { "scripts/pipeline.lua", "--elements", "4096", "--iters", "5" },
  }
  for _, argv in ipairs(SCRIPTS) do
    it(("finds no race in the graphs of %s #gpu"):format(table.concat(argv, " ")), function()
      local words = {}
      for k, word in ipairs(argv) do words[k] = process.quote(word) end
      local result = process.gpurun(table.concat(words, " "), { env = { GPURUN_GRAPH_CHECK = "1" } })
      assert.are.equal(0, result.code, result.stderr)
    end)
  end

  it("makes complete() raise on a race with GPURUN_GRAPH_CHECK set #gpu", function()
    local script = os.tmpname()
    local file = assert(io.open(script, "w"))
    file:write([[
local gpurun = require("gpurun")
local device = gpurun.Device(0); device:set_current()
local stream = device:create_stream()
local code = gpurun.Program(]] .. ("%q"):format(SOURCE) .. [[, "c++",
  gpurun.ProgramOptions{ arch = "sm_" .. device.arch }):compile("cubin")
local produce, consume = code:get_kernel("produce"), code:get_kernel("consume")
local config = gpurun.LaunchConfig{ grid = 4, block = 256 }
local x, y = gpurun.empty(1024, "float32"), gpurun.empty(1024, "float32")
local builder = stream:create_graph_builder()
builder:begin_building()
local main, side = builder:split(2)
gpurun.launch(side, config, produce, x, 1.5, 1024)
gpurun.launch(main, config, consume, x, y, 1024)
gpurun.join(main, side)
builder:end_building()
builder:complete()
]])
    file:close()
    local result = process.gpurun(process.quote(script), { env = { GPURUN_GRAPH_CHECK = "1" } })
    local clean = process.gpurun(process.quote(script), { env = { GPURUN_GRAPH_CHECK = "0" } })
    os.remove(script)
    assert.are.equal(1, result.code)
    assert.matches("GraphBuilder:complete: 1 race: .- %(checked because GPURUN_GRAPH_CHECK is set%)", result.stderr)
    assert.are.equal(0, clean.code, clean.stderr)
  end)
end)
