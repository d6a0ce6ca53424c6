-- gpurun.nvtx (src/types/nvtx.c): NVTX ranges and marks, what they cost with no
-- tool attached, and what a tool sees: spec/support/nvtx_recorder.c is a
-- minimal NVTX tool, built here with the C compiler and loaded the way
-- Nsight loads its own (NVTX_INJECTION64_PATH), that writes down every push,
-- pop and mark. Nothing here needs a GPU: bench.run and bench.capture run on
-- stand-in streams and builders.
local nvtx = require("gpurun.nvtx")
local process = require("spec.support.process")
local q = process.quote

-- A call to range_push, range_pop or mark without a tool costs a C call
-- and a return through NVTX's null function pointer: tens of nanoseconds.
-- The bound leaves room for sanitizer builds and a busy machine.
local BOUND_US = 1.0

describe("gpurun.nvtx", function()
  it("has range_push, range_pop, mark and with_range", function()
    for _, name in ipairs{ "range_push", "range_pop", "mark", "with_range" } do
      assert.are.equal("function", type(nvtx[name]), name)
    end
    assert.are.same({}, { nvtx.range_push("spec"), nvtx.mark("spec mark"), nvtx.range_pop() })
  end)

  it("refuses names that are not strings and a with_range without a function", function()
    for _, call in ipairs{
      function() nvtx.range_push() end,
      function() nvtx.range_push({}) end,
      function() nvtx.mark(nil) end,
      function() nvtx.with_range(nil, print) end,
      function() nvtx.with_range("x") end,
      function() nvtx.with_range("x", 42) end,
    } do
      assert.has_error(call)
    end
    local ok, message = pcall(nvtx.with_range, "x", "not a function")
    assert.is_false(ok)
    assert.matches("bad argument #2 .*function expected, got string", message)
  end)

  it("returns what the function returns, given the arguments after it", function()
    assert.are.same({ n = 3, 3, nil, "c" }, table.pack(nvtx.with_range("r", function(a, b, c)
      return a + 2, b, c
    end, 1, nil, "c")))
    assert.are.equal(0, select("#", nvtx.with_range("r", function() end)))
  end)

  it("lets an error through untouched", function()
    local object = { reason = "mine" }
    local ok, raised = pcall(nvtx.with_range, "r", error, object)
    assert.is_false(ok)
    assert.are.equal(object, raised)
    ok, raised = pcall(nvtx.with_range, "r", function() error("boom", 0) end)
    assert.are.same({ false, "boom" }, { ok, raised })
  end)

  it(("costs under %g us a call with no tool attached"):format(BOUND_US), function()
    local clock = require("gpurun").perf_counter
    local push, pop, mark = nvtx.range_push, nvtx.range_pop, nvtx.mark
    local batch, per_call = 10000, {}
    for b = 1, 21 do
      local start = clock()
      for _ = 1, batch do
        push("spec range")
        mark("spec mark")
        pop()
      end
      per_call[b] = (clock() - start) * 1e6 / (3 * batch)
    end
    local median = require("gpurun.bench").median(per_call)
    assert.is_true(median < BOUND_US, ("median %.3f us per call"):format(median))
  end)
end)

-- The recorder tool, built once for this file; nil when there is no C
-- compiler or no NVTX header (then the specs below are pending).
local function build_recorder()
  local cuda = os.getenv("CUDA_HOME") or "/usr/local/cuda"
  local header = io.open(cuda .. "/include/nvtx3/nvToolsExt.h")
  if not header then
    return nil, "no NVTX headers under " .. cuda
  end
  header:close()
  local library = os.tmpname() .. ".so"
  local command = ("cc -shared -fPIC -Wall -Wextra -Werror -I%s spec/support/nvtx_recorder.c "
                   .. "-o %s 2>&1"):format(q(cuda .. "/include"), q(library))
  local pipe = io.popen(command)
  local output = pipe:read("a")
  if not pipe:close() then
    return nil, "cc failed: " .. output
  end
  return library
end

local recorder, recorder_problem = build_recorder()

-- Runs `source` in a child gpurun with the recorder attached; -> what the
-- child printed, and the recorded lines.
local function record(source)
  local script, record_path = os.tmpname(), os.tmpname()
  local file = assert(io.open(script, "w"))
  file:write(source)
  file:close()
  local result = process.gpurun(q(script), { env = { NVTX_INJECTION64_PATH = recorder,
                                                      GPURUN_NVTX_RECORD = record_path } })
  local lines = {}
  file = io.open(record_path)
  if file then
    for line in file:lines() do
      lines[#lines + 1] = line
    end
    file:close()
  end
  os.remove(script)
  os.remove(record_path)
  return result, lines
end

-- Stand-ins that bench.run and bench.capture can drive without a GPU.
local STAND_INS = [[
local bench = require("gpurun.bench")
local stream = { sync = function() end }
local closer = { __close = function() end }
function stream:create_graph_builder()
  return setmetatable({
    begin_building = function() end,
    end_building = function() end,
    complete = function() return { upload = function() end } end,
  }, closer)
end
]]

local with_recorder = recorder and it or pending
local reason = recorder and "" or (" (" .. tostring(recorder_problem) .. ")")

describe("gpurun.nvtx seen by a tool", function()
  teardown(function()
    if recorder then
      os.remove(recorder)
    end
  end)

  with_recorder("records pushes, pops and marks by name" .. reason, function()
    local result, lines = record([[
local nvtx = require("gpurun.nvtx")
nvtx.range_push("outer")
nvtx.mark("inside")
nvtx.with_range("inner", function() end)
nvtx.range_pop()
]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.same({ "push outer", "mark inside", "push inner", "pop", "pop" }, lines)
  end)

  with_recorder("closes a with_range whose function raised" .. reason, function()
    local result, lines = record([[
local nvtx = require("gpurun.nvtx")
print(pcall(nvtx.with_range, "failing", error, "boom", 0))
nvtx.mark("after")
]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("false\tboom\n", result.stdout)
    assert.are.same({ "push failing", "pop", "mark after" }, lines)
  end)

  with_recorder("puts every phase of bench.run and bench.capture in a range" .. reason, function()
    local result, lines = record(STAND_INS .. [[
bench.run(stream, function() end, { iters = 3, warmup = 2, repeats = 2, name = "demo" })
bench.capture(stream, function() end)
]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.same({
      "push demo: warmup", "pop",
      "push demo: timed", "pop",
      "push demo: timed", "pop",
      "push bench.capture: capture", "pop",
      "push bench.capture: complete", "pop",
      "push bench.capture: upload", "pop",
    }, lines)
  end)

  with_recorder("closes the capture range when the pipeline raises" .. reason, function()
    local result, lines = record(STAND_INS .. [[
print(pcall(bench.capture, stream, function() error("bad pipeline", 0) end))
]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("false\tbad pipeline\n", result.stdout)
    assert.are.same({ "push bench.capture: capture", "pop" }, lines)
  end)
end)
