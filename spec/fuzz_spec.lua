-- The fuzzer (tools/fuzz.lua): random calls into the whole gpurun API with
-- random arguments, in child gpurun processes, so that a crash kills only
-- the child and the failure can name the seed and the command that replays
-- it. 100,000 calls without a GPU (the driver made unloadable, so that
-- every machine sees the same), 100,000 with device 0 current, and 20,000
-- of each with finalizers that close objects while gpurun is using them;
-- and every function given fake objects in every argument (--fakes).
--
-- GPURUN_FUZZ_SEED and GPURUN_FUZZ_CALLS (per child) override the seed and
-- the size of a run, to replay one or to fuzz longer.
local gpurun = require("gpurun")
local catalog = require("spec.support.api_catalog")
local process = require("spec.support.process")

local CHILDREN = 10
local CALLS = math.tointeger(tonumber(os.getenv("GPURUN_FUZZ_CALLS") or "")) or 10000
local BASE_SEED = math.tointeger(tonumber(os.getenv("GPURUN_FUZZ_SEED") or "")) or 20240611
local NO_DRIVER = "/nonexistent/gpurun-fuzz/libcuda.so.1"
-- A child that runs this long has hung: it is killed and fails, naming its
-- seed, instead of holding up the suite.
local CHILD_SECONDS = math.tointeger(tonumber(os.getenv("GPURUN_FUZZ_CHILD_SECONDS") or "")) or 300
local TIMEOUT = os.execute("command -v timeout >/dev/null 2>&1")
  and ("timeout -k 10 %d "):format(CHILD_SECONDS) or ""

local function read_and_remove(path)
  local file = io.open(path, "rb")
  local text = file and file:read("a") or ""
  if file then file:close() end
  os.remove(path)
  return text
end

-- Runs the commands, `jobs` at a time, through one shell per batch.
-- Returns { code, stdout, stderr } per command.
local function run_parallel(commands, jobs)
  local results = {}
  for first = 1, #commands, jobs do
    local parts, files = {}, {}
    for i = first, math.min(first + jobs - 1, #commands) do
      local out, err, code = os.tmpname(), os.tmpname(), os.tmpname()
      files[i] = { out, err, code }
      parts[#parts + 1] = ("( %s </dev/null >%s 2>%s; echo $? >%s ) &"):format(commands[i],
        process.quote(out), process.quote(err), process.quote(code))
    end
    os.execute(table.concat(parts, " ") .. " wait")
    for i = first, math.min(first + jobs - 1, #commands) do
      local out, err, code = files[i][1], files[i][2], files[i][3]
      results[i] = {
        stdout = read_and_remove(out),
        stderr = read_and_remove(err),
        code = math.tointeger(tonumber((read_and_remove(code):match("%d+")))),
      }
    end
  end
  return results
end

local function exit_text(code)
  if code == nil then return "no exit status" end
  if code == 124 or code == 137 then
    return ("exit status %d (still running after %d s: hung, and killed)"):format(code, CHILD_SECONDS)
  end
  if code > 128 then return ("exit status %d (killed by signal %d: crashed)"):format(code, code - 128) end
  return ("exit status %d"):format(code)
end

-- Runs `children` fuzz children from BASE_SEED, asserts each made CALLS
-- calls and exited 0, and prints the totals.
local function fuzz(label, flags, env_prefix, jobs, children)
  children = children or CHILDREN
  local bin = process.quote(process.gpurun_bin())
  local commands, replays = {}, {}
  for i = 1, children do
    local seed = BASE_SEED + i - 1
    local args = ("tools/fuzz.lua --seed %d --calls %d%s"):format(seed, CALLS, flags)
    commands[i] = env_prefix .. TIMEOUT .. bin .. " " .. args
    replays[i] = env_prefix .. bin .. " " .. args .. " --trace 2>&1 | tail -n 30"
  end
  local started = gpurun.perf_counter()
  local results = run_parallel(commands, jobs)
  local totals = { calls = 0, errors = 0, skipped = 0, crashes = 0 }
  local failures = {}
  for i, result in ipairs(results) do
    local seed = BASE_SEED + i - 1
    local calls, errors, skipped, violations =
      result.stdout:match("calls (%d+) errors (%d+) skipped (%d+) violations (%d+)")
    calls, errors, skipped = tonumber(calls), tonumber(errors), tonumber(skipped)
    totals.calls = totals.calls + (calls or 0)
    totals.errors = totals.errors + (errors or 0)
    totals.skipped = totals.skipped + (skipped or 0)
    if result.code == nil or result.code > 128 then totals.crashes = totals.crashes + 1 end
    if result.code ~= 0 or calls ~= CALLS or tonumber(violations) ~= 0 then
      failures[#failures + 1] = ("fuzz child with seed %d (%s): %s, %s calls made of %d\n%s%s"
        .. "replay with: %s"):format(seed, label, exit_text(result.code), tostring(calls), CALLS,
        result.stdout, result.stderr:sub(-3000), replays[i])
    end
  end
  io.write(("\nfuzz (%s): %d calls, %d errors raised, %d skipped by the guard, %d crashes "
    .. "(seeds %d..%d, %.1f s)\n"):format(label, totals.calls, totals.errors, totals.skipped,
    totals.crashes, BASE_SEED, BASE_SEED + children - 1, gpurun.perf_counter() - started))
  -- Now as well as in the report: a run cut short by a time limit keeps them.
  for _, failure in ipairs(failures) do io.write(failure, "\n") end
  io.flush()
  assert(#failures == 0, table.concat(failures, "\n\n"))
  assert.are.equal(children * CALLS, totals.calls)
end

describe("the fuzzer", function()
  it("draws from a catalog that names the whole API", function()
    local problems = catalog.differences(gpurun)
    for _, problem in ipairs(catalog.pipeline_differences(gpurun.pipeline())) do
      problems[#problems + 1] = problem
    end
    for _, problem in ipairs(catalog.system_differences(gpurun.system)) do
      problems[#problems + 1] = problem
    end
    assert(#problems == 0, table.concat(problems, "\n"))
  end)

  it("draws every function of gpurun.system, through a stand-in NVML", function()
    local fake = process.gpurun_bin():match("^(.*)/[^/]*$") .. "/spec/fake_nvml.so"
    local result = process.run(("GPURUN_CUDA_DRIVER=%s GPURUN_NVML_LIBRARY=%s %s tools/fuzz.lua --seed %d "
      .. "--calls 20000 --stats"):format(process.quote(NO_DRIVER), process.quote(fake), process.quote(process.gpurun_bin()), BASE_SEED))
    assert.are.equal(0, result.code, result.stdout .. result.stderr:sub(-3000))
    for _, name in ipairs(catalog.sorted_keys(catalog.system)) do
      local calls = tonumber(result.stderr:match("\ngpurun%.system%." .. name .. "%s+(%d+) calls"))
      assert(calls and calls > 0, "gpurun.system." .. name .. " was never drawn")
    end
  end)

  it("draws every method of a pipeline, and none gives an internal error", function()
    local result = process.run(("GPURUN_CUDA_DRIVER=%s %s tools/fuzz.lua --seed %d --calls 20000 --stats")
      :format(process.quote(NO_DRIVER), process.quote(process.gpurun_bin()), BASE_SEED))
    assert.are.equal(0, result.code, result.stdout .. result.stderr:sub(-3000))
    for _, name in ipairs(catalog.sorted_keys(catalog.pipeline)) do
      local calls = tonumber(result.stderr:match("\npipeline:" .. name .. "%s+(%d+) calls"))
      assert(calls and calls > 0, "pipeline:" .. name .. " was never drawn")
    end
  end)

  -- Every function and method of the catalog and the pipeline's methods,
  -- given a fake object in each argument (self included), by each of the
  -- object-faking strategies, the other arguments plausible: every error is
  -- one of gpurun's one-line messages, never an internal Lua error.
  it("tells Lua's own 'attempt to' errors from gpurun's closed-object message", function()
    local fakes = require("spec.support.fake_objects")
    assert.is_nil(fakes.internal("pipeline 'p': launch: attempt to use a closed gpurun.Kernel"))
    assert.are.equal("an internal Lua error", fakes.internal("x.lua:3: attempt to index a nil value"))
    assert.are.equal("an internal Lua error", fakes.internal("attempt to use a closed file"))
  end)

  it("refuses fake objects in every argument of every function with its own messages, with no driver", function()
    local command = ("GPURUN_CUDA_DRIVER=%s %s%s tools/fuzz.lua --fakes --calls 10 --seed %d")
      :format(process.quote(NO_DRIVER), TIMEOUT, process.quote(process.gpurun_bin()), BASE_SEED)
    local result = run_parallel({ command }, 1)[1]
    local calls, violations = result.stdout:match("calls (%d+) errors %d+ skipped %d+ violations (%d+)")
    assert(calls, ("tools/fuzz.lua --fakes: %s\n%s%s"):format(exit_text(result.code), result.stdout,
      result.stderr:sub(-3000)))
    local failures = {}
    for line in result.stderr:gmatch("[^\n]+") do
      if line:find("^fuzz: violation: ") then failures[#failures + 1] = line end
    end
    io.write(("\nfuzz (fakes): %d calls\n"):format(tonumber(calls)))
    assert(#failures == 0 and tonumber(violations) == 0, ("%d failure(s) with fake objects:\n%s")
      :format(tonumber(violations), table.concat(failures, "\n", 1, math.min(#failures, 40))))
    assert.are.equal(0, result.code, exit_text(result.code))
  end)

  it("lets Graph:set_arg go ahead only where no replay can leave the buffers #gpu", function()
    local guard = require("spec.support.fuzz_guard")
    local kernels = require("spec.support.kernels")
    local device, _, kernel = kernels.setup()
    local stream <close> = device:create_stream()
    local x <close> = gpurun.zeros(256, "float32")
    local small <close> = gpurun.zeros(1, "float32")
    local builder <close> = stream:create_graph_builder()
    builder:begin_building()
    gpurun.launch(builder, gpurun.LaunchConfig({ grid = 1, block = 256 }), kernel("scale_shift"), x, 2, 0, 256)
    builder:end_building()
    local graph <close> = builder:complete()
    local index = graph:nodes()[1].index
    local entry = { label = "Graph:set_arg", spec = {} }
    local function allowed(...)
      local args = table.pack(graph, ...)
      return guard.allowed(entry, args, args.n)
    end
    assert.is_true(allowed(index, 2, 5.0)) -- the scale: no address changes
    assert.is_false(allowed(index, 1, small)) -- 256 threads write past one element
    assert.is_false(allowed(index, 4, 4097)) -- a count past the buffer
    assert.is_true(allowed(index, 9, 1)) -- no such position: refused
    assert.is_true(allowed(index, 1, "not a pointer")) -- refused
    assert.is_true(allowed(index + 1, 1, small)) -- no such node: refused
  end)

  it("survives 100,000 random calls with no driver", function()
    -- One child per processor: on a GPU host's many cores the 100,000
    -- calls take a tenth of the time they take two at a time.
    fuzz("no GPU", "", "GPURUN_CUDA_DRIVER=" .. process.quote(NO_DRIVER) .. " ",
      math.max(2, math.min(CHILDREN, process.cores())))
  end)

  it("survives 100,000 random calls with a device current #gpu", function()
    fuzz("GPU", " --gpu", "", 4)
  end)

  -- Finalizers that close the arguments of the call in progress, run by the
  -- collector at any allocation inside gpurun. Which allocation that is
  -- depends on the collector's timing, so a failure replays only with the
  -- same binary and environment (and --trace may move it).
  it("survives finalizers closing objects in the middle of calls, with no driver", function()
    fuzz("no GPU, finalizers", " --finalizers", "GPURUN_CUDA_DRIVER=" .. process.quote(NO_DRIVER) .. " ", 2, 2)
  end)

  it("survives finalizers closing objects in the middle of calls #gpu", function()
    fuzz("GPU, finalizers", " --gpu --finalizers", "", 2, 2)
  end)
end)
