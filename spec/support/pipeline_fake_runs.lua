-- gpurun.pipeline's run, graph, set, wait and timings on the fake GPU of
-- spec/support/fake_gpu.lua, in a process of its own (the fakes replace
-- the module's functions before the pipeline library loads). Run by
-- spec/pipeline_run_spec.lua; prints "pipeline_fake_runs: N checks, 0
-- failed" and exits 1 on a failure.
package.path = "./?.lua;" .. package.path
local gpurun = require("gpurun")
local fake = require("spec.support.fake_gpu")
fake.install(gpurun)
local random_pipeline = require("spec.support.random_pipeline")

local checks, failures = 0, 0
local function check(condition, message)
  checks = checks + 1
  if not condition then
    failures = failures + 1
    io.stdout:write("FAILED: ", message, "\n")
  end
end

-- Stderr as a list, for the notes a pipeline writes.
local notes = {}
local real_stderr = io.stderr
io.stderr = { write = function(_, ...) -- luacheck: ignore 122 (collects the pipeline's notes)
  for _, part in ipairs({ ... }) do notes[#notes + 1] = part end
end }

local kernels = {
  add = fake.object("fadd", { { type = "float32", name = "a" }, { type = "float32", name = "b" },
                              { type = "float32", name = "r", output = true } }, random_pipeline.MODEL.add),
  mix = fake.object("fmix", { { type = "float32", name = "a" }, { type = "float32", name = "b" },
                              { type = "float32", name = "r", output = true } }, random_pipeline.MODEL.mix),
  bump = fake.object("fbump", { { type = "float32", name = "a" },
                                { type = "float32", name = "r", output = true } }, random_pipeline.MODEL.bump),
}

local function same(expected, got)
  for b = 1, #expected do
    for e = 1, #expected[b] do
      if math.abs(expected[b][e] - got[b][e]) > 1e-9 then return false, b, e end
    end
  end
  return true
end

local function in_order(n)
  local order = {}
  for i = 1, n do order[i] = i end
  return order
end

-- ---- random pipelines, as stages and as graphs ----------------------------------------

local stream = fake.stream()
for seed = 1, 150 do
  local case = random_pipeline.new(seed, fake.buffer, { kernels = kernels })
  local p = case.pipeline
  local expected = random_pipeline.run(case, in_order(#case.steps))
  local function results()
    local out = {}
    for b, d in ipairs(case.bases) do out[b] = d.buffer:get_all() end
    return out
  end
  for round = 1, 3 do
    p:run(stream)
    stream:sync()
    local ok, b, e = same(expected, results())
    check(ok, ("seed %d, run %d: base %s element %s differs\n%s"):format(seed, round, tostring(b),
      tostring(e), ok and "" or p:explain()))
  end
  for round = 1, 3 do
    p:graph(stream)
    stream:sync()
    local ok, b, e = same(expected, results())
    check(ok, ("seed %d, replay %d: base %s element %s differs\n%s"):format(seed, round, tostring(b),
      tostring(e), ok and "" or p:explain()))
  end
  check(p.captures == 1 and p.recaptures == 0, ("seed %d: %d captures, %d recaptures"):format(seed,
    p.captures, p.recaptures))
  for _, state in ipairs(case.hosts) do
    check(state.ran == 6, ("seed %d: a host callback ran %s times, not 6"):format(seed, tostring(state.ran)))
  end
  p:close()
end

-- ---- scalars set in place, buffers pointed elsewhere, plans that change -------------

local SOURCE = 'extern "C" __global__ void scale(const float *in, float *out, float alpha, size_t n) {}'
local params = {
  { offset = 0, size = 8, type = "u64", kind = "integer", pointer = "maybe" },
  { offset = 8, size = 8, type = "u64", kind = "integer", pointer = "maybe" },
  { offset = 16, size = 4, type = "f32", kind = "float", pointer = false },
  { offset = 24, size = 8, type = "u64", kind = "integer", pointer = "maybe" },
}
local scale = fake.kernel("scale", SOURCE, params, function(input, out, alpha, n)
  for i = 1, n do out.store[out.offset + i] = fake.value_of(alpha) * input.store[input.offset + i] end
end)
local scale_object = fake.object("fscale", { { type = "float32", name = "x" },
  { type = "float32", name = "alpha" }, { type = "float32", name = "y", output = true } },
  function(x, alpha) return alpha * x end)

local N = 8
local function filled(values)
  local buffer = fake.buffer(#values)
  buffer:set_all(values)
  return buffer
end
local x = filled({ 1, 2, 3, 4, 5, 6, 7, 8 })
local y, z = fake.buffer(N), fake.buffer(N)
local p = gpurun.pipeline{ name = "scalars" }
p:buffer("x", x)
p:buffer("y", y, { filled = false })
local alpha = p:scalar("alpha", 2.0)
p:launch(scale, fake.config, x, y, alpha, N)
p:call(scale_object, y, "alpha", z)
local plan = p:plan()
check(plan.stages[1].accesses[1].how:find("const in the source", 1, true) ~= nil,
  "scale's input is read, from its source: " .. plan.stages[1].accesses[1].how)
check(plan.stages[1].accesses[1].mode == "r" and plan.stages[1].accesses[2].mode == "rw",
  "scale reads x and may read and write y")
check(#plan.edges == 1 and plan.edges[1].hazard == "RAW", "one edge, y read after written")
check(#plan.warnings == 0, "nothing reported: " .. table.concat(plan.warnings, "; "))

local graph = p:graph(stream)
stream:sync()
local function expect(buffer, factor, what)
  local values = buffer:get_all()
  for i = 1, N do
    if math.abs(values[i] - factor * i) > 1e-9 then
      check(false, ("%s: element %d is %s, not %s"):format(what, i, tostring(values[i]), factor * i))
      return
    end
  end
  check(true, what)
end
expect(y, 2, "y = 2 x")
expect(z, 4, "z = 2 y")
p:set("alpha", 3.0)
check(graph.set_arg_calls == 2, ("two nodes set in place, got %s"):format(tostring(graph.set_arg_calls)))
check(p.captures == 1 and p.updates == 0, "no capture for a scalar")
check(p:graph(stream) == graph, "the same graph")
stream:sync()
expect(y, 3, "after set: y = 3 x")
expect(z, 9, "after set: z = 3 y")
-- Stages (not the graph) see the new value too.
p:set(alpha, 0.5)
p:run(stream)
stream:sync()
expect(y, 0.5, "run after set: y = x / 2")

-- Another buffer of the same shape for x: captured again, the graph updated.
local x2 = filled({ 2, 4, 6, 8, 10, 12, 14, 16 })
p:set("x", x2)
check(p.updates == 1 and p.captures == 1, ("updated in place (%d updates, %d captures)"):format(
  p.updates, p.captures))
check(graph.updates == 1, "graph:update ran")
p:graph(stream)
stream:sync()
expect(y, 1, "x2 / 2 = x")
check(#notes == 0, "no note for an update in place: " .. table.concat(notes))

-- A new stage changes the plan's topology: a new capture, said once.
local w = fake.buffer(N)
p:copy(w, z)
p:graph(stream)
stream:sync()
check(p.captures == 2, "a new capture after a new stage")
check(#notes == 1 and notes[1]:find("gpurun.pipeline 'scalars':", 1, true) ~= nil
  and notes[1]:find("said once", 1, true) ~= nil, "one note: " .. table.concat(notes))
expect(w, 0.5, "w = z")
p:fill(w, 0.0)
p:graph(stream)
stream:sync()
check(p.captures == 3 and #notes == 1, "and only once")
local bad_ok = pcall(p.set, p, "x", fake.buffer(4))
check(not bad_ok, "a buffer of another shape is refused")
p:close()

-- ---- streams, waits and timings ------------------------------------------------------

local q = gpurun.pipeline{ name = "timed", timing = true }
local a, b = filled({ 1, 1, 1, 1 }), filled({ 2, 2, 2, 2 })
local r1, r2 = fake.buffer(4), fake.buffer(4)
q:call(kernels.bump, a, r1)  -- two independent branches
q:call(kernels.bump, b, r2)
q:call(kernels.add, r1, r2, a)
local qplan = q:plan()
check(#qplan.streams == 2, "two branches, two streams")
q:run(stream)
local timings = q:timings()
check(#timings == 3, "a timing per unit")
for _, t in ipairs(timings) do
  check(t.ms >= 0 and t.start_ms >= 0 and t.name, "timing fields for " .. tostring(t.name))
end
check(a:get_all()[1] == 5, "a = (a + 1) + (b + 1)")
q:run(stream)
q:wait()
check(a:get_all()[1] == 9, "and again, after wait()")
-- Work queued on the stream before the pipeline comes first on every
-- stream the pipeline uses.
local late = 0
for _ = 1, 20 do
  a:fill(1, stream)
  b:fill(2, stream)
  q:run(stream)
  q:wait()
  if a:get_all()[1] ~= 5 then late = late + 1 end
end
check(late == 0, ("the side stream ran before the work queued ahead of the pipeline %d times"):format(late))
q:close()

-- A stage that raises while it is captured: the error comes out, the
-- pipeline can run again.
local broken = setmetatable({ name = "broken", params = { { type = "float32", name = "r", output = true } } },
  { __call = function() error("broken stage", 0) end })
local e = gpurun.pipeline{ name = "errors" }
e:call(broken, fake.buffer(4))
local ok, err = pcall(e.graph, e, stream)
check(not ok and tostring(err):find("broken stage", 1, true) ~= nil, "the stage's error: " .. tostring(err))
e:close()

-- ---- over two devices ----------------------------------------------------------------

-- Each device runs its slice: where a buffer lives a view of it, on the
-- other device a buffer of its own, copied in before and out after.
local split_x, split_y = filled({ 1, 2, 3, 4, 5, 6, 7, 8 }), fake.buffer(8)
split_y.device = 1
local d = gpurun.pipeline{ name = "split", devices = { 0, 1 }, timing = true }
local t = d:temporary("t", 8)
d:buffer("x", split_x)
d:buffer("y", split_y, { filled = false })
d:copy(t, split_x, { name = "t = x" })
d:copy(split_y, t, { name = "y = t" })
check(d:explain():find("device 1: elements 5..8", 1, true) ~= nil, "explain shows the slices")
d:run()
d:wait()
check(table.concat(split_y:get_all(), ",") == "1,2,3,4,5,6,7,8", "y = x, by slices: " .. table.concat(split_y:get_all(), ","))
check(#d:timings() == 4, "a timing per unit of each device's slice")
split_x:set_all({ 8, 7, 6, 5, 4, 3, 2, 1 })
local graphs = d:graph()
d:wait()
check(#graphs == 2, "a graph per device")
check(table.concat(split_y:get_all(), ",") == "8,7,6,5,4,3,2,1", "and as graphs: " .. table.concat(split_y:get_all(), ","))
local bad_stream = pcall(d.run, d, stream)
check(not bad_stream, "a split pipeline takes no stream")
d:host(function() end)
local split_ok, split_err = pcall(d.run, d)
check(not split_ok and tostring(split_err):find("stage 'host' (a host callback) does not work element by "
  .. "element", 1, true) ~= nil, "a host stage is not split: " .. tostring(split_err))
d:close()

io.stderr = real_stderr -- luacheck: ignore 122 (puts the real one back)
io.stdout:write(("pipeline_fake_runs: %d checks, %d failed\n"):format(checks, failures))
os.exit(failures == 0 and 0 or 1)
