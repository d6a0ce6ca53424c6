-- Finalizers that close an object while gpurun's C code is using it: the
-- fuzzer's --finalizers mode does this at random; these cases do it at the
-- first allocation inside one call, every time. Each case runs in a child
-- gpurun, so a crash fails the case instead of the suite. Each call must
-- raise a one-line error (or succeed), and the process must go on working.
local process = require("spec.support.process")
local kernels = require("spec.support.kernels")
local q = process.quote

-- The trap: with the collector stopped, garbage with a __gc is made and the
-- stack grown; the collector is restarted with parameters that make one
-- step a whole cycle, so the first allocation that steps it (the first
-- table, userdata or string the next call makes) runs the finalizer there.
-- The child checks that the finalizer had not run before the call and had
-- after it.
local TRAP = [=[
local gpurun = require("gpurun")
local ran = false
local function arm(action)
  collectgarbage("incremental", 100, 1000, 30)
  collectgarbage("collect")
  collectgarbage("stop")
  ran = false
  do setmetatable({}, { __gc = function() ran = true; action() end }) end
  local function deep(n) if n > 0 then return deep(n - 1) + 1 end return 0 end
  deep(100)
  collectgarbage("restart")
end
local function closer(object) return function() pcall(object.close, object) end end
-- Runs call(...) with object's close armed; prints whether it raised and why.
local function trapped(object, call, ...)
  arm(closer(object))
  if ran then os.exit(3) end -- the finalizer ran before the call: no test
  local results = table.pack(pcall(call, ...))
  collectgarbage("generational")
  if not ran then os.exit(4) end -- it never ran: no test either
  io.write(tostring(results[1]), "\t", tostring(results[2]):gsub("\n.*", ""), "\n")
  return table.unpack(results, 1, results.n)
end
]=]

local function run_child(body)
  local path = os.tmpname() .. ".lua"
  local file = assert(io.open(path, "w"))
  file:write(TRAP, body)
  file:close()
  local result = process.gpurun(q(path))
  os.remove(path)
  return result
end

-- A case: the child's body, and the pattern its output must match.
local function expect(body, pattern)
  local result = run_child(body)
  assert(result.code ~= 3, "the finalizer ran before the call: the trap missed\n" .. result.stderr)
  assert(result.code ~= 4, "the finalizer never ran: the trap missed\n" .. result.stderr)
  assert.are.equal(0, result.code, result.stdout .. result.stderr)
  if type(pattern) == "table" then -- any of several outcomes
    for _, one in ipairs(pattern) do
      if result.stdout:match(one) then return end
    end
    error("the output matches none of the outcomes: " .. result.stdout)
  end
  assert.matches(pattern, result.stdout)
end

local GPU_SETUP = ([=[
local device = gpurun.Device(0)
device:set_current()
local stream = device:create_stream()
local options = gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch }
local SOURCE = %q
local code = gpurun.Program(SOURCE, "c++", options):compile("cubin")
local add = code:get_kernel("vec_add")
local config = gpurun.LaunchConfig{ grid = 1, block = 64 }
local a = gpurun.full(64, 1.5, "float32")
local function graph_of(builder)
  builder:begin_building()
  gpurun.launch(builder, config, add, a, a, a, gpurun.u64(64))
  builder:end_building()
  return builder
end
-- The process still works: a launch and a read.
local function still_works()
  local x = gpurun.full(64, 2.0, "float32")
  gpurun.launch(stream, config, add, x, x, x, gpurun.u64(64))
  stream:sync()
  assert(x:get(64) == 4.0, "the launch after the trap computed " .. tostring(x:get(64)))
  print("still works")
end
]=]):format(kernels.SOURCE)

describe("a finalizer closing an object in the middle of a call", function()
  it("is caught by the trap: it runs inside the next call, not before (Program:compile)", function()
    expect([[
local program = gpurun.Program('extern "C" __global__ void k(float *x) { x[0] = 1.0f; }', "c++",
  { arch = "sm_90" })
trapped(program, program.compile, program, "ptx")
print(select(2, pcall(program.compile, program, "ptx")))
]], "^false\tattempt to use a closed gpurun%.Program\nattempt to use a closed gpurun%.Program\n$")
  end)

  describe("on a device", function()
    it("PinnedBuffer:to_table: its memory unmapped under the copy #gpu", function()
      expect(GPU_SETUP .. [[
local pinned = gpurun.pinned(1 << 20, "float32")
pinned:fill(1.0)
trapped(pinned, pinned.to_table, pinned)
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.PinnedBuffer\nstill works\n$")
    end)

    it("Graph:set_args: its kept list and nodes let go while keeping the buffer #gpu", function()
      expect(GPU_SETUP .. [[
local graph = graph_of(stream:create_graph_builder()):complete()
local b = gpurun.zeros(64, "float32")
trapped(graph, graph.set_args, graph, 1, b, b, b, gpurun.u64(64))
b:close() -- counted for no graph
still_works()
]], -- A few arguments are packed on the C stack, and keeping a buffer
    -- (lua_rawseti) does not step the collector, so the graph may close
    -- just after the call instead, as for set_arg.
    { "^false\t[^\n]*attempt to use a closed gpurun%.Graph\nstill works\n$",
      "^true\tgpurun%.Graph%(closed%)\nstill works\n$" })
    end)

    it("Graph:set_arg: its kept list let go while keeping the buffer #gpu", function()
      expect(GPU_SETUP .. [[
local graph = graph_of(stream:create_graph_builder()):complete()
local b = gpurun.zeros(64, "float32")
trapped(graph, graph.set_arg, graph, 1, 3, b)
b:close() -- counted for no graph
still_works()
]], -- The collector steps at the first API call that checks it: keeping a
    -- buffer (lua_rawseti) does not, so the graph may close just after the
    -- call instead. Either way b is counted by no graph and closes.
    { "^false\t[^\n]*attempt to use a closed gpurun%.Graph\nstill works\n$",
      "^true\tgpurun%.Graph%(closed%)\nstill works\n$" })
    end)

    it("Graph:nodes: its nodes destroyed while listing them #gpu", function()
      expect(GPU_SETUP .. [[
local graph = graph_of(stream:create_graph_builder()):complete()
trapped(graph, graph.nodes, graph)
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.Graph\nstill works\n$")
    end)

    it("Graph:update: the builder's graph destroyed while reading its nodes #gpu", function()
      expect(GPU_SETUP .. [[
local graph = graph_of(stream:create_graph_builder()):complete()
local builder = graph_of(stream:create_graph_builder())
trapped(builder, graph.update, graph, builder)
graph:launch(stream)
stream:sync()
still_works()
]], "^false\t[^\n]*the GraphBuilder was closed or built again during the update; the graph "
        .. "replays as before\nstill works\n$")
    end)

    it("GraphBuilder:complete: the builder closed while its graph is taken #gpu", function()
      expect(GPU_SETUP .. [[
local builder = graph_of(stream:create_graph_builder())
trapped(builder, builder.complete, builder)
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.GraphBuilder\nstill works\n$")
    end)

    it("GraphBuilder:complete: the upload stream closed while the graph is made #gpu", function()
      expect(GPU_SETUP .. [[
local builder = graph_of(stream:create_graph_builder())
local other = device:create_stream()
trapped(other, builder.complete, builder, { device_launch = true, upload_stream = other })
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.Stream\nstill works\n$")
    end)

    it("ObjectCode:get_kernel: the library unloaded under the new Kernel #gpu", function()
      expect(GPU_SETUP .. [[
local other = gpurun.Program(SOURCE, "c++", options):compile("cubin")
trapped(other, other.get_kernel, other, "vec_add")
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.ObjectCode\nstill works\n$")
    end)

    it("ObjectCode:get_kernel of a missing kernel: the names the driver lent freed #gpu", function()
      expect(GPU_SETUP .. [[
local other = gpurun.Program(SOURCE, "c++", options):compile("cubin")
other:get_kernel("vec_add") -- loaded
trapped(other, other.get_kernel, other, "no_such_kernel")
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.ObjectCode\nstill works\n$")
    end)

    it("Stream:record: the stream destroyed before the record #gpu", function()
      expect(GPU_SETUP .. [[
local other = device:create_stream()
trapped(other, other.record, other)
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.Stream\nstill works\n$")
    end)

    it("GraphBuilder:split, record, create_condition: the builder closed mid-call #gpu", function()
      expect(GPU_SETUP .. [[
for _, method in ipairs({ "split", "record", "create_condition" }) do
  local builder = stream:create_graph_builder()
  builder:begin_building()
  trapped(builder, builder[method], builder, method == "split" and 2 or nil)
  local _, state = pcall(function() return builder.state end) -- closed: raises, so not building
  assert(state ~= "building", method .. " left the builder building")
end
still_works()
]], "^false\t[^\n]*\nfalse\t[^\n]*\nfalse\t[^\n]*\nstill works\n$")
    end)

    it("GraphBuilder:begin_building: the builder closed as it begins leaves no capture #gpu", function()
      expect(GPU_SETUP .. [[
local builder = stream:create_graph_builder()
trapped(builder, builder.begin_building, builder)
stream:sync() -- refused while the stream is being captured
still_works()
]], "^false\t[^\n]*attempt to use a closed gpurun%.GraphBuilder\nstill works\n$")
    end)
  end)
end)
