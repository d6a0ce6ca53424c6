-- No race through gpurun.pipeline: hundreds of random pipelines (random
-- reads and writes over buffers and overlapping views, fusion on and off,
-- one to four streams), each checked against running its stages in
-- declaration order on the host.
local gpurun = require("gpurun")
local random_pipeline = require("spec.support.random_pipeline")
local schedule = require("gpurun.pipeline.schedule")

local SEEDS = 300
local GPU_SEEDS = 200

local conflicting = random_pipeline.conflicting

-- reach[i][j]: j can be reached from i through `next_of` (1..n).
local function closure(n, next_of)
  local reach = {}
  for i = n, 1, -1 do
    local set = {}
    for _, j in ipairs(next_of[i]) do
      set[j] = true
      for k in pairs(reach[j]) do set[k] = true end
    end
    reach[i] = set
  end
  return reach
end

-- Units in an order of the schedule: a unit runs after the one before it
-- on its stream and after the units it waits for.
local function schedule_successors(plan)
  local next_of = {}
  for u = 1, #plan.units do next_of[u] = {} end
  for _, list in ipairs(plan.streams) do
    for position = 2, #list do
      local before = next_of[list[position - 1]]
      before[#before + 1] = list[position]
    end
  end
  for u, unit in ipairs(plan.units) do
    for _, w in ipairs(unit.waits) do
      next_of[w][#next_of[w] + 1] = u
    end
  end
  return next_of
end

-- The stages in a random order the schedule allows (units whole).
local function random_order(plan, next_of, random)
  local count = {}
  for u = 1, #plan.units do count[u] = 0 end
  for u = 1, #plan.units do
    for _, v in ipairs(next_of[u]) do count[v] = count[v] + 1 end
  end
  local ready, order = {}, {}
  for u = 1, #plan.units do
    if count[u] == 0 then ready[#ready + 1] = u end
  end
  while #ready > 0 do
    local pick = random(#ready)
    local u = table.remove(ready, pick)
    for _, index in ipairs(plan.units[u].stages) do order[#order + 1] = index end
    for _, v in ipairs(next_of[u]) do
      count[v] = count[v] - 1
      if count[v] == 0 then ready[#ready + 1] = v end
    end
  end
  assert(#order == #plan.unit_of, "the schedule has a cycle")
  return order
end

local function in_order(n)
  local order = {}
  for i = 1, n do order[i] = i end
  return order
end

-- Checks every ordering a plan must have; returns the plan.
local function check_plan(case, seed)
  local p = case.pipeline
  local plan = schedule.of(p)
  local n = #p.stages
  -- Edges go forward, and their closure orders every conflicting pair.
  local next_stage = {}
  for i = 1, n do next_stage[i] = {} end
  local edges = plan.edges
  for k = 1, #edges.from do
    local from, to = edges.from[k], edges.to[k]
    assert(from < to, ("seed %d: edge %d -> %d runs backwards"):format(seed, from, to))
    next_stage[from][#next_stage[from] + 1] = to
  end
  local reach = closure(n, next_stage)
  local units_reach = closure(#plan.units, schedule_successors(plan))
  for i = 1, n do
    for j = i + 1, n do
      if conflicting(p.stages[i], p.stages[j]) then
        if not reach[i][j] then
          error(("seed %d: stages %d (%s) and %d (%s) conflict but no edge path orders them\n%s")
            :format(seed, i, p.stages[i].name, j, p.stages[j].name, p:explain()))
        end
        local ui, uj = plan.unit_of[i], plan.unit_of[j]
        if ui ~= uj and not units_reach[ui][uj] then
          error(("seed %d: stages %d (%s) and %d (%s) conflict but the schedule does not order "
            .. "their units %d and %d\n%s"):format(seed, i, p.stages[i].name, j, p.stages[j].name,
            ui, uj, p:explain()))
        end
      end
    end
  end
  -- A fused unit holds elementwise stages only, on data that are the
  -- same or apart.
  for _, group in ipairs(plan.groups) do
    for _, index in ipairs(group.stages) do
      assert(p.stages[index].fusion, ("seed %d: stage %d fused but not fusable"):format(seed, index))
    end
  end
  return plan
end

-- With no GPU, the plan itself: every pair of stages that touch
-- overlapping memory, one of them writing, is ordered by a path of the
-- plan's edges, and by its schedule (each stream's order and the waits
-- between streams); and running the units in random orders that schedule
-- allows gives what the declaration order gives. On a GPU (#gpu), the same
-- pipelines run as stages on streams and as replayed graphs, and their
-- buffers must hold what the host computed.
describe("gpurun.pipeline has no races", function()
  it(("orders every hazard of %d random pipelines, in the DAG and in the schedule"):format(SEEDS), function()
    local stats = { stages = 0, fused = 0, multi_stream = 0 }
    for seed = 1, SEEDS do
      local case = random_pipeline.new(seed)
      local plan = check_plan(case, seed)
      stats.stages = stats.stages + #case.pipeline.stages
      stats.fused = stats.fused + #plan.groups
      if #plan.streams > 1 then stats.multi_stream = stats.multi_stream + 1 end
    end
    -- The generator does make what the checks are about.
    assert.is_true(stats.fused > SEEDS / 4, "few fusion groups: " .. stats.fused)
    assert.is_true(stats.multi_stream > SEEDS / 4, "few pipelines on several streams: " .. stats.multi_stream)
  end)

  it("orders every hazard of 40 random pipelines of up to 150 stages", function()
    for seed = 1001, 1040 do
      check_plan(random_pipeline.new(seed, nil, { max_stages = 150 }), seed)
    end
  end)

  it(("gives the declaration order's results in random orders of the schedule, %d pipelines"):format(SEEDS), function()
    for seed = 1, SEEDS do
      local case = random_pipeline.new(seed)
      local plan = schedule.of(case.pipeline)
      local expected = random_pipeline.run(case, in_order(#case.steps))
      local next_of = schedule_successors(plan)
      math.randomseed(seed * 7919)
      for _ = 1, 5 do
        local got = random_pipeline.run(case, random_order(plan, next_of, math.random))
        assert.are.same(expected, got, ("seed %d"):format(seed))
      end
    end
  end)

  -- The GPU half: the same pipelines over real buffers.
  local function gpu_case(seed, stream, how)
    local case = random_pipeline.new(seed, function(count) return gpurun.empty(count, "float32") end)
    local p = case.pipeline
    local expected = random_pipeline.run(case, in_order(#case.steps))
    if how == "graph" then
      p:graph(stream)
    else
      p:run(stream)
    end
    stream:sync()
    for b, d in ipairs(case.bases) do
      local got = d.buffer:to_table(stream)
      for e = 1, #got do
        if math.abs(got[e] - expected[b][e]) > 1e-5 * math.max(1, math.abs(expected[b][e])) then
          error(("seed %d (%s): %s[%d] is %s, the host says %s\n%s"):format(seed, how, d.name, e,
            tostring(got[e]), tostring(expected[b][e]), p:explain()))
        end
      end
    end
    for _, state in ipairs(case.hosts) do
      assert.are.equal(1, state.ran, ("seed %d (%s): a host callback ran %s times"):format(seed, how,
        tostring(state.ran)))
    end
    p:close()
    for _, d in ipairs(case.bases) do d.buffer:close() end
  end

  it(("gives the host's results on the GPU, stage by stage, %d pipelines #gpu"):format(GPU_SEEDS), function()
    local device = gpurun.Device(0)
    device:set_current()
    local stream <close> = device:create_stream()
    for seed = 1, GPU_SEEDS do gpu_case(seed, stream, "run") end
  end)

  it(("gives the host's results on the GPU as replayed graphs, %d pipelines #gpu"):format(GPU_SEEDS), function()
    local device = gpurun.Device(0)
    device:set_current()
    local stream <close> = device:create_stream()
    for seed = 1, GPU_SEEDS do gpu_case(seed, stream, "graph") end
  end)
end)
