-- The capture rule for gpurun's code written in Lua: the module's Lua parts
-- (their exports and methods, the methods of the elementwise kernels,
-- pipelines and reduction kernels they make, the reductions' and scans'
-- functions) and the Lua library that scripts call while a builder
-- captures (gpurun.dist, gpurun.bench). Every Lua entry point must run under
-- the C guard (runtime/error.c's gpurun_push_guarded: internal.guard for
-- the parts, gpurun.guard for the library), which ends every capture on any
-- error, a plain error() or one Lua raises.
local gpurun = require("gpurun")
local catalog = require("spec.support.api_catalog")

-- gpurun_push_guarded's closure: a C function whose one upvalue is the
-- Lua function it runs.
local function is_guarded(f)
  local info = debug.getinfo(f, "Su")
  if info.what ~= "C" or info.nups ~= 1 then return false end
  local _, inner = debug.getupvalue(f, 1)
  return type(inner) == "function"
end

local function written_in_lua(f)
  return type(f) == "function" and debug.getinfo(f, "S").what == "Lua"
end

-- Every function value of t (not following __index), by "prefix.name".
local function functions_of(t, prefix, into)
  for _, key in ipairs(catalog.sorted_keys(t)) do
    local value = rawget(t, key)
    if type(value) == "function" then into[#into + 1] = { label = prefix .. key, f = value } end
  end
  return into
end

-- The Lua entry points a script can reach, found in the live module.
local function entry_points()
  local list = {}
  functions_of(gpurun, "gpurun.", list)
  local registry = debug.getregistry()
  for _, key in ipairs(catalog.sorted_keys(registry)) do
    local type_name = key:match("^gpurun%.(%u[%w_]*)$")
    local metatable = registry[key]
    if type_name and type(metatable) == "table" then
      functions_of(metatable, type_name .. ".", list)
      if type(rawget(metatable, "methods")) == "table" then
        functions_of(metatable.methods, type_name .. ":", list)
      end
    end
  end
  -- The elementwise kernels' and pipelines' classes, loaded on first use.
  gpurun.elementwise("float32 a", "float32 r", "r = a", "loaded")
  functions_of(require("gpurun.compute.elementwise").Kernel, "elementwise kernel:", list)
  functions_of(require("gpurun.compute.elementwise_pipeline").ElementwisePipeline, "elementwise pipeline:",
               list)
  -- The reductions', scans' and select's functions and classes, loaded on first use too.
  local reduction, scan = require("gpurun.compute.reduction"), require("gpurun.compute.scan")
  functions_of(reduction, "reduction.", list)
  functions_of(reduction.Kernel, "reduction kernel:", list)
  functions_of(require("gpurun.compute.launch_plans").LaunchPlans, "launch plans:", list)
  functions_of(require("gpurun.compute.prebuilt"), "prebuilt.", list)
  functions_of(scan, "scan.", list)
  functions_of(scan.Kernel, "scan kernel:", list)
  -- The declared pipelines' classes, loaded on first use too.
  gpurun.pipeline()
  local types = require("gpurun.pipeline.types")
  functions_of(types.Pipeline, "pipeline:", list)
  functions_of(types.SplitPipeline, "split pipeline:", list)
  functions_of(types.Data, "pipeline data:", list)
  functions_of(types.Scalar, "pipeline scalar:", list)
  functions_of(require("gpurun.dist"), "dist.", list)
  functions_of(require("gpurun.bench"), "bench.", list)
  return list
end

-- Lua functions that cannot raise while capturing, each with why.
local UNGUARDED = {}

-- With no GPU: every such entry point is found, and one that is not guarded
-- fails.
describe("the capture rule for gpurun's Lua code", function()
  it("guards every Lua entry point of the module and of the library scripts capture with", function()
    local unguarded, seen = {}, 0
    for _, entry in ipairs(entry_points()) do
      seen = seen + 1
      if written_in_lua(entry.f) and not UNGUARDED[entry.label] then
        unguarded[#unguarded + 1] = entry.label .. " is written in Lua and not guarded"
      end
    end
    assert.is_true(seen > 100, ("found only %d entry points"):format(seen))
    assert.are.same({}, unguarded)
    -- And what the guarded ones run is Lua indeed: the check above sees them.
    assert.is_true(is_guarded(gpurun.ProgramOptions))
    assert.is_true(is_guarded(gpurun.load))
    assert.is_true(is_guarded(require("gpurun.bench").capture))
    assert.is_true(is_guarded(require("gpurun.dist").init))
  end)

  it("gpurun.guard guards a function and a table's Lua functions, leaving C functions", function()
    local plain = function(x) return x + 1 end
    local guarded = gpurun.guard(plain)
    assert.is_true(is_guarded(guarded))
    assert.are.equal(3, guarded(2))
    local ok, message = pcall(guarded, nil)
    assert.is_false(ok)
    assert.matches("attempt to perform arithmetic on a nil value", message) -- unchanged
    local t = { f = plain, c = math.floor, n = 5 }
    assert.are.equal(t, gpurun.guard(t))
    assert.is_true(is_guarded(t.f))
    assert.are.equal(math.floor, t.c)
    assert.are.equal(5, t.n)
    local again = t.f
    gpurun.guard(t)
    assert.are.equal(again, t.f) -- not guarded twice
  end)
end)

-- The #gpu rows raise through each kind while a builder captures and check
-- that the builder is abandoned, a plain launch on the stream works right
-- after, and the builder begins again. (spec/bad_input_spec.lua runs its
-- rows for every public function and method the same way.)
describe("an error raised by gpurun's Lua code while a builder captures", function()
  local kernels = require("spec.support.kernels")
  local device, kernel, stream, a, n, config

  before_each(function()
    local _
    device, _, kernel = kernels.setup()
    stream = device:create_stream()
    n = 256
    a = gpurun.zeros(n, "float32")
    config = gpurun.LaunchConfig({ grid = 1, block = 256 })
  end)
  after_each(function()
    stream:close()
  end)

  -- Runs row.setup(stream) first (allocations cannot happen in a capture),
  -- then row.fail(builder, stream, what setup returned) while the builder
  -- captures: it must raise.
  local function follows_the_rule(row)
    local made = table.pack((row.setup or function() end)(stream))
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    local ok, err = pcall(row.fail, builder, stream, table.unpack(made, 1, made.n))
    assert.is_false(ok, "expected an error")
    assert.are.equal("abandoned", builder.state, tostring(err))
    if row.expected then assert.matches(row.expected, tostring(err)) end
    gpurun.launch(stream, config, kernel("vec_add"), a, a, a, gpurun.u64(n))
    stream:sync()
    assert.is_true(gpurun.allclose(a, 0, 0, 0))
    builder:begin_building()
    builder:end_building()
    assert.are.equal("built", builder.state)
  end

  local function zeros(...)
    local list = {}
    for i, count in ipairs({ ... }) do list[i] = gpurun.zeros(count, i == 4 and "float64" or "float32") end
    return table.unpack(list)
  end

  local ROWS = {
    { "an elementwise kernel's first call on a builder", expected = "elementwise kernel 'first_call'",
      setup = function() return gpurun.elementwise("float32 x, float32 y", "float32 r", "r = x + y",
        "first_call"), zeros(16, 16, 16) end,
      fail = function(builder, _, add, x, y, r) add(builder, x, y, r, 5) end }, -- one argument too many
    { "a prepared elementwise kernel given a float64 buffer", expected = "elementwise kernel 'prepared'",
      setup = function()
        local scale = gpurun.elementwise("float32 x", "float32 r", "r = 2 * x", "prepared")
        local x, r, _, wide = zeros(16, 16, 16, 16)
        scale:prepare(x, r)
        return scale, wide, r
      end,
      fail = function(builder, _, scale, wide, r) scale(builder, wide, r) end },
    { "an elementwise kernel given buffers of two sizes", expected = "elementwise kernel 'two_sizes'",
      setup = function()
        local copy = gpurun.elementwise("float32 x", "float32 r", "r = x", "two_sizes")
        local x, r, same = zeros(16, 32, 16)
        copy:prepare(x, same)
        return copy, x, r
      end,
      fail = function(builder, _, copy, x, r) copy(builder, x, r) end },
    { "an elementwise pipeline's launch",
      setup = function() return gpurun.elementwise_pipeline("float32 x", { "float32 r = x + 1" }, "r", "pipe") end,
      fail = function(builder, _, pipe) pipe(builder, "not a buffer") end },
    { "a reduction kernel's first call on a builder", expected = "reduction kernel 'first_reduction' is compiled",
      setup = function() return gpurun.reduction("float32 x", "float32 s", "x", "sum", nil, nil,
        "first_reduction"), zeros(16, 1) end,
      fail = function(builder, _, total, x, out) total(builder, x, out) end },
    { "a prebuilt reduction without out on a builder", expected = "out is needed on a GraphBuilder",
      setup = function() return zeros(16) end,
      fail = function(builder, _, x) gpurun.sum(builder, x) end },
    { "a scan's check of its options", expected = "unknown option 'itmes'",
      setup = function() return zeros(16, 16) end,
      fail = function(builder, _, x, y) gpurun.inclusive_scan(builder, x, y, "sum", { itmes = 3 }) end },
    { "select's check of its predicate", expected = "predicate: a C expression",
      setup = function() return zeros(16), gpurun.zeros(1, "int64") end,
      fail = function(builder, _, x, count) gpurun.select(builder, x, "", x, count) end },
    { "gpurun.ProgramOptions", expected = "unknown option 'bogus'",
      fail = function() gpurun.ProgramOptions{ bogus = true } end },
    { "a ProgramOptions written to", expected = "read%-only",
      setup = function() return gpurun.ProgramOptions{} end,
      fail = function(_, _, options) options.std = "c++20" end },
    { "Graph:to_dot", expected = "title must be a string",
      setup = function(s)
        local other = s:create_graph_builder()
        other:begin_building()
        other:end_building()
        return other:complete()
      end,
      fail = function(_, _, graph) graph:to_dot({ title = 5 }) end },
    { "gpurun.load", expected = "cannot open", fail = function() gpurun.load("/nonexistent/x.npy") end },
    { "Buffer:save", expected = "cannot open", fail = function() a:save("/nonexistent/dir/x.npy") end },
    { "gpurun.guard's own argument check", fail = function() gpurun.guard(5) end },
    { "a guarded function's plain Lua error", expected = "attempt to index a nil value",
      fail = function() gpurun.guard(function() local t = nil; return t.x end)() end },
    { "bench.capture's check of its options", expected = "iterations must be a positive integer",
      fail = function(_, s) require("gpurun.bench").capture(s, function() end, { iterations = 0 }) end },
    { "bench.run's check of its options", expected = "unknown option 'itres'",
      fail = function(_, s) require("gpurun.bench").run(s, function() end, { itres = 3 }) end },
    { "dist.init's check of its options", expected = "unknown option 'devise'",
      fail = function() require("gpurun.dist").init({ devise = 0 }) end },
    { "a dist collective given a bad buffer",
      fail = function() require("gpurun.dist").all_reduce("not a buffer", "sum") end },
  }

  for _, row in ipairs(ROWS) do
    it(row[1] .. " ends the capture, and the builder begins again #gpu", function()
      follows_the_rule(row)
    end)
  end
end)
