-- Faults: a kernel that faults, an allocation the device cannot hold, NVRTC
-- fed input far from C++, Ctrl-C in the middle of GPU work. Each case runs in
-- a child gpurun, because a faulted kernel leaves the CUDA context unusable
-- for the rest of its process, and must end with a message and an exit code,
-- never a crash (a crash shows here as 128 + the signal, 139 for SIGSEGV).
local process = require("spec.support.process")
local q = process.quote

-- The children find spec.support.kernels through "./?.lua": the suite runs
-- from the repository root.
local GPU_PRELUDE = [[
local gpurun = require("gpurun")
local kernels = require("spec.support.kernels")
local device, _, kernel = kernels.setup()
]]

local function write_file(text)
  local path = os.tmpname()
  local file = assert(io.open(path, "wb"))
  file:write(text)
  file:close()
  return path
end

-- A hung child would hang the suite; a fault must end the process promptly.
local CHILD_TIME_LIMIT_S = 120

-- Runs `source` as a script in a child gpurun: { stdout, stderr, code }.
local function run_script(source)
  local path = write_file(source)
  local result = process.run(("%s %s"):format(
    process.gpurun_command(("timeout -k 5 %d"):format(CHILD_TIME_LIMIT_S)), q(path)))
  os.remove(path)
  return result
end

local function first_line(text)
  return text:match("^[^\n]*") or ""
end

local STICKY_TAIL = "; the CUDA context is no longer usable %(a kernel faulted%): restart the process\n"
  .. "stack traceback:\n"

describe("a kernel that faults", function()
  it("ends the script with 'context no longer usable' after an out-of-bounds write #gpu", function()
    local result = run_script(GPU_PRELUDE .. [[
      local stream = device:create_stream()
      local x = gpurun.empty(1024, "float32")
      gpurun.launch(stream, gpurun.LaunchConfig{ grid = 1, block = 1 }, kernel("out_of_bounds"), x)
      stream:sync()
      print("after the faulting kernel")
    ]])
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS %([^)\n]+%) "
      .. "while synchronizing a stream" .. STICKY_TAIL, result.stderr)
    assert.are.equal("", result.stdout)
  end)

  -- Scripts hold their buffers and streams in <close> variables: closing
  -- them while the error unwinds must not replace the fault's message (and
  -- its traceback) with one about freeing memory in the dead context.
  it("keeps the fault's message when <close> variables are released after it #gpu", function()
    local result = run_script(GPU_PRELUDE .. [[
      local stream <close> = device:create_stream()
      local x <close> = gpurun.empty(1024, "float32")
      local y <close> = gpurun.zeros(1024, "float32")
      gpurun.launch(stream, gpurun.LaunchConfig{ grid = 1, block = 1 }, kernel("out_of_bounds"), x)
      stream:sync()
      print("after the faulting kernel")
    ]])
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*cuStreamSynchronize: CUDA_ERROR_ILLEGAL_ADDRESS %([^)\n]+%) "
      .. "while synchronizing a stream" .. STICKY_TAIL, result.stderr)
    assert.are.equal("", result.stdout)
  end)

  it("ends the script with 'context no longer usable' after __trap() #gpu", function()
    local result = run_script(GPU_PRELUDE .. [[
      local stream = device:create_stream()
      gpurun.launch(stream, gpurun.LaunchConfig{ grid = 1, block = 32 }, kernel("traps"))
      stream:sync()
      print("after the trapping kernel")
    ]])
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*cuStreamSynchronize: CUDA_ERROR_[%u_]+ %([^)\n]+%) "
      .. "while synchronizing a stream" .. STICKY_TAIL, result.stderr)
    -- __trap() is reported as a launch failure, or by newer drivers as an
    -- illegal instruction; both leave the context unusable.
    local name = result.stderr:match("cuStreamSynchronize: (CUDA_ERROR_[%u_]+)")
    assert.is_truthy(name == "CUDA_ERROR_LAUNCH_FAILED" or name == "CUDA_ERROR_ILLEGAL_INSTRUCTION",
      first_line(result.stderr))
    assert.are.equal("", result.stdout)
  end)
end)

describe("an allocation larger than the device", function()
  it("raises CUDA_ERROR_OUT_OF_MEMORY and leaves the device usable #gpu", function()
    local result = run_script(GPU_PRELUDE .. [[
      local ok, message = pcall(gpurun.empty, 1 << 46, "uint8")
      print(ok)
      print(message)
      local big <close> = gpurun.empty(1 << 30, "uint8")
      local n = 4096
      local a <close> = gpurun.full(n, 1.5, "float32")
      local b <close> = gpurun.full(n, 2, "float32")
      local out <close> = gpurun.zeros(n, "float32")
      local stream <close> = device:create_stream()
      gpurun.launch(stream, gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 },
                    kernel("vec_add"), a, b, out, gpurun.u64(n))
      stream:sync()
      print(gpurun.allclose(out, 3.5, 0, 0))
    ]])
    assert.are.equal(0, result.code, result.stderr)
    local lines = {}
    for line in result.stdout:gmatch("[^\n]*\n") do lines[#lines + 1] = line end
    assert.are.equal(3, #lines, result.stdout)
    assert.are.equal("false\n", lines[1])
    assert.matches("^cuMemAlloc: CUDA_ERROR_OUT_OF_MEMORY %(out of memory%) while allocating "
      .. "64%.00 TiB for 70368744177664 uint8 elements\n$", lines[2])
    assert.are.equal("true\n", lines[3])
  end)
end)

describe("NVRTC given input far from C++", function()
  -- 500,000 lines of 101 bytes: mostly comments, with a kernel in the
  -- middle, and an error on the last line. NVRTC must read all of it.
  it("reports the error at the end of a 50 MB source with its line number", function()
    local result = run_script([[
      local gpurun = require("gpurun")
      local lines = {}
      for i = 1, 500000 do
        lines[i] = ("// line %07d "):format(i) .. ("."):rep(84) .. "\n"
      end
      lines[250000] = 'extern "C" __global__ void middle(int *x) { x[0] = 1; }\n'
      local source = table.concat(lines) .. "this is not C++;\n"
      assert(#source > 50e6, #source)
      gpurun.Program(source, "c++", { arch = "sm_90" }):compile("ptx")
      print("compiled")
    ]])
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*NVRTC compile of 'middle.cu' failed: NVRTC_ERROR_COMPILATION\n"
      .. "middle.cu%(500001%): error: ", result.stderr)
    assert.matches("\nstack traceback:\n", result.stderr)
    assert.are.equal("", result.stdout)
  end)

  -- NVRTC would quote the offending line: a line that long gets brief
  -- diagnostics, and the log keeps its head and tail (docs/kernel-cache.md).
  it("carries a short log in the error when the error is on a 50 MB line", function()
    local result = run_script([[
      local gpurun = require("gpurun")
      local source = '__device__ int s = "' .. ("x"):rep(50e6) .. '";\n'
      gpurun.Program(source, "c++", { arch = "sm_90" }):compile("ptx")
      print("compiled")
    ]])
    -- Plain checks with short messages: a failed match would print stderr.
    local stderr = result.stderr
    assert.are.equal(1, result.code, first_line(stderr))
    assert.is_truthy(stderr:find("^gpurun: [^\n]*NVRTC compile of 'gpurun_program.cu' failed: "
      .. "NVRTC_ERROR_COMPILATION\ngpurun_program.cu%(1%): error: "), first_line(stderr):sub(1, 300))
    assert.is_true(#stderr < 70 * 1024, "stderr holds " .. #stderr .. " bytes")
    assert.is_truthy(stderr:find("\nstack traceback:\n", 1, true), "a traceback follows the log")
    assert.are.equal("", result.stdout)
  end)

  it("raises NVRTC's log for random bytes, to PTX and to CUBIN", function()
    local result = run_script([[
      local gpurun = require("gpurun")
      local failures = 0
      for seed = 1, 20 do
        math.randomseed(seed)
        local bytes = {}
        for i = 1, 65536 do bytes[i] = string.char(math.random(1, 255)) end
        local program = gpurun.Program(table.concat(bytes), "c++", { arch = "sm_90" })
        for _, target in ipairs({ "ptx", "cubin" }) do
          local ok, message = pcall(program.compile, program, target)
          assert(not ok, ("seed %d compiled to %s"):format(seed, target))
          assert(message:find("NVRTC compile of 'gpurun_program.cu' failed: NVRTC_ERROR_COMPILATION\n"
            .. "gpurun_program.cu%(%d+%): ", 1), ("seed %d, %s: %s"):format(seed, target, message:sub(1, 300)))
          failures = failures + 1
        end
      end
      print(failures .. " compiles of random bytes raised NVRTC's log")
    ]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("40 compiles of random bytes raised NVRTC's log\n", result.stdout)
  end)

  it("refuses random bytes that hold NUL bytes before calling NVRTC", function()
    local result = run_script([[
      local gpurun = require("gpurun")
      local refused = 0
      for seed = 1, 20 do
        math.randomseed(seed)
        local bytes = {}
        for i = 1, 65536 do bytes[i] = string.char(math.random(0, 255)) end
        if seed == 1 then bytes[1] = "\0" elseif seed == 2 then bytes[#bytes] = "\0" end
        local source = table.concat(bytes)
        assert(source:find("\0", 1, true), "no NUL byte for seed " .. seed)
        local ok, message = pcall(gpurun.Program, source, "c++", { arch = "sm_90" })
        assert(not ok and message:find("source contains a NUL byte", 1, true),
          ("seed %d: %s"):format(seed, tostring(message)))
        refused = refused + 1
      end
      print(refused .. " sources with NUL bytes refused")
    ]])
    assert.are.equal(0, result.code, result.stderr)
    assert.are.equal("20 sources with NUL bytes refused\n", result.stdout)
  end)
end)

-- A benchmark loop that would run for 10 s, interrupted after about a second
-- of it. Its GPU objects sit in one <close> list whose handler closes them
-- (graph before buffers, which a graph keeps in use) and says so; the driver
-- frees anything else when the process exits.
local BENCHMARK_LOOP = GPU_PRELUDE .. [[
local mode, marker = ...
local resources <close> = setmetatable({}, { __close = function(list)
  for i = #list, 1, -1 do list[i]:close() end
  print(("released %d GPU objects"):format(#list))
  io.stdout:flush()
end })
local function keep(object)
  resources[#resources + 1] = object
  return object
end
local n = 4096
local count = gpurun.u64(n)
local stream = keep(device:create_stream())
local a = keep(gpurun.full(n, 1, "float32"))
local b = keep(gpurun.full(n, 2, "float32"))
local out = keep(gpurun.zeros(n, "float32"))
local config = gpurun.LaunchConfig{ grid = (n + 255) // 256, block = 256 }
local add, mul = kernel("vec_add"), kernel("vec_mul")
local step
if mode == "graph" then
  local builder = keep(stream:create_graph_builder())
  builder:begin_building()
  gpurun.launch(builder, config, add, a, b, out, count)
  gpurun.launch(builder, config, mul, out, b, out, count)
  builder:end_building()
  local graph = keep(builder:complete())
  graph:upload(stream)
  step = function() graph:launch(stream) end
else
  step = function()
    gpurun.launch(stream, config, add, a, b, out, count)
    gpurun.launch(stream, config, mul, out, b, out, count)
  end
end
local started = gpurun.perf_counter()
local iterations = 0
while gpurun.perf_counter() - started < 10 do
  step()
  iterations = iterations + 1
  if iterations % 1000 == 0 then
    stream:sync()
    if iterations == 1000 then -- running: the parent may interrupt now
      local file = assert(io.open(marker, "w"))
      file:write("running\n")
      file:close()
    end
  end
end
stream:sync()
print("the loop ran its 10 s")
]]

-- Starts the loop in the background, waits until it runs, lets it run a
-- second, then interrupts it (process.interrupt).
local function interrupt_benchmark(mode)
  local script, marker = write_file(BENCHMARK_LOOP), os.tmpname()
  os.remove(marker)
  local result = process.interrupt(([[
    %s %s %s %s & pid=$!
    tries=0
    while [ ! -s %s ] && [ $tries -lt 600 ] && kill -0 $pid 2>/dev/null; do
      sleep 0.1; tries=$((tries + 1))
    done
    sleep 1]]):format(process.gpurun_command(), q(script), q(mode), q(marker), q(marker)))
  for _, path in ipairs({ script, marker }) do os.remove(path) end
  return result
end

-- A graph whose while loop never ends: its body never clears the condition.
local ENDLESS_LOOP = [[
local gpurun = require("gpurun")
local marker = ...
local device = gpurun.Device(0)
device:set_current()
local code = gpurun.Program('extern "C" __global__ void spin(int *x) { *x += 1; }', "c++",
  gpurun.ProgramOptions({ arch = "sm_" .. device.arch })):compile("cubin")
local stream = device:create_stream()
local x = gpurun.zeros(1, "int32")
local builder = stream:create_graph_builder()
builder:begin_building()
local body = builder:while_loop(builder:create_condition(1))
body:begin_building()
gpurun.launch(body, gpurun.LaunchConfig({ grid = 1, block = 1 }), code:get_kernel("spin"), x)
body:end_building()
builder:end_building()
local graph = builder:complete()
graph:launch(stream)
local file = assert(io.open(marker, "w"))
file:write("replaying\n")
file:close()
stream:sync()
print("the endless loop ended")
]]

describe("Ctrl-C during GPU work", function()
  it("ends a wait for a replay that never finishes, and exits cleanly #gpu", function()
    local script, marker = write_file(ENDLESS_LOOP), os.tmpname()
    os.remove(marker)
    -- The watchdog ends gpurun if the interrupt did not: a hang fails the
    -- spec instead of stopping the suite.
    local result = process.interrupt(([[
      %s %s %s & pid=$!
      ( sleep 40; kill -KILL $pid 2>/dev/null ) &
      tries=0
      while [ ! -s %s ] && [ $tries -lt 600 ] && kill -0 $pid 2>/dev/null; do
        sleep 0.1; tries=$((tries + 1))
      done
      sleep 0.5]]):format(process.gpurun_command(), q(script), q(marker), q(marker)))
    for _, path in ipairs({ script, marker }) do os.remove(path) end
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*interrupted!\nstack traceback:", result.stderr)
    assert.are.equal("", result.stdout)
    assert.is_true(result.elapsed_ms < 5000, "ended " .. result.elapsed_ms .. " ms after SIGINT")
  end)

  it("stops a loop of kernel launches promptly and releases its objects #gpu", function()
    local result = interrupt_benchmark("launch")
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*interrupted!\nstack traceback:", result.stderr)
    assert.are.equal("released 4 GPU objects\n", result.stdout)
    assert.is_true(result.elapsed_ms < 5000, "ended " .. result.elapsed_ms .. " ms after SIGINT")
  end)

  it("stops a loop of graph replays promptly and releases its objects #gpu", function()
    local result = interrupt_benchmark("graph")
    assert.are.equal(1, result.code, result.stderr)
    assert.matches("^gpurun: [^\n]*interrupted!\nstack traceback:", result.stderr)
    assert.are.equal("released 6 GPU objects\n", result.stdout)
    assert.is_true(result.elapsed_ms < 5000, "ended " .. result.elapsed_ms .. " ms after SIGINT")
  end)
end)
