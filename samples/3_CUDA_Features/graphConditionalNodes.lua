-- graphConditionalNodes.lua: a port of NVIDIA cuda-samples' C++ sample
-- Samples/3_CUDA_Features/graphConditionalNodes. Five small graphs whose
-- kernels decide on the GPU what runs next, through conditional nodes: an
-- if on whether a byte is odd, a do-while counting a byte down from 10, a
-- while with a kernel before and after it, an if/else, and a switch over
-- four bodies. Kernels print as the C++ sample's do; the port also counts,
-- in device memory, which body kernels ran and checks that against what
-- each launch's byte calls for (the C++ sample only prints).
--
--   gpurun samples/3_CUDA_Features/graphConditionalNodes.lua [--device ID]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")

-- ran[] slots: which body kernel ran how often during one launch.
local IF_TRUE, IF_FALSE, DO_WHILE_EMPTY, AFTER_WHILE, SWITCH = 1, 2, 3, 4, 5 -- SWITCH..SWITCH+3
local SLOTS = 8

local KERNELS = [[
#include <cuda_device_runtime_api.h>

extern "C" __global__ void ifGraphKernelA(const char *value, cudaGraphConditionalHandle handle)
{
  const unsigned int odd = *value & 1;
  cudaGraphSetConditional(handle, odd);
  printf("GPU: Handle set to %d\n", odd);
}

extern "C" __global__ void ifGraphKernelC(unsigned int *ran)
{
  ran[0]++;
  printf("GPU: Hello from the GPU! The condition was true.\n");
}

extern "C" __global__ void ifGraphKernelD(unsigned int *ran)
{
  ran[1]++;
  printf("GPU: Hello from the GPU! The condition was false.\n");
}

extern "C" __global__ void doWhileEmptyKernel(unsigned int *ran)
{
  ran[2]++;
  printf("GPU: doWhileEmptyKernel()\n");
}

extern "C" __global__ void doWhileLoopKernel(char *counter, cudaGraphConditionalHandle handle)
{
  if (--*counter == 0)
    cudaGraphSetConditional(handle, 0);
  printf("GPU: counter = %d\n", *counter);
}

extern "C" __global__ void capturedWhileKernel(char *counter, cudaGraphConditionalHandle handle)
{
  printf("GPU: counter = %d\n", *counter);
  if (*counter)
    --*counter;
  cudaGraphSetConditional(handle, *counter);
}

extern "C" __global__ void capturedWhileEmptyKernel(unsigned int *ran)
{
  ran[3]++;
  printf("GPU: capturedWhileEmptyKernel()\n");
}

extern "C" __global__ void switchGraphKernelA(const char *value, cudaGraphConditionalHandle handle)
{
  const unsigned int chosen = *value;
  cudaGraphSetConditional(handle, chosen);
  printf("GPU: Handle set to %d\n", chosen);
}

extern "C" __global__ void switchGraphBody(unsigned int *ran, int which)
{
  ran[4 + which]++;
  printf("GPU: Hello from switchGraphKernel%c(), running on the GPU!\n", 'C' + which);
}
]]

local cli = args.new("graphConditionalNodes.lua",
  "Conditional graph nodes: if, do-while, while, if/else and switch, decided by kernels.")
cli:integer_option("--device", "CUDA device id.", 0, 0)
local options = cli:parse(arg)

io.stdout:setvbuf("no") -- the kernels' printf lines come between the script's own
local device = require("gpurun.samples.cuda_device").open(cli, options.device)
local major, minor = gpurun.driver_version()
print(("Driver version is: %d.%d"):format(major, minor))
local function driver_at_least(want_major, want_minor)
  return major > want_major or (major == want_major and minor >= want_minor)
end
if not driver_at_least(12, 3) then
  print("Skipping execution as driver does not support Graph Conditional Nodes")
  os.exit(0, true)
end

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local program <close> = gpurun.Program(KERNELS, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local kernel = setmetatable({}, { __index = function(t, name)
  t[name] = code:get_kernel(name)
  return t[name]
end })
local one = gpurun.LaunchConfig{ grid = 1, block = 1 }
local byte <close> = gpurun.zeros(1, "int8")
local ran <close> = gpurun.zeros(SLOTS, "uint32")
local checks = check.new(cli.name)

-- A graph of what capture(builder) captures.
local function build(capture)
  local builder <close> = stream:create_graph_builder()
  builder:begin_building()
  capture(builder)
  builder:end_building()
  return builder:complete()
end

-- Captures body's work into a conditional node's body builder.
local function fill_body(body, work)
  body:begin_building()
  work(body)
  body:end_building()
end

-- Launches the graph with the byte set to `value` and checks how often each
-- body kernel ran: `counts` maps ran[] slots to counts (others must be 0).
local function launch_with(graph, value, what, label, counts)
  byte:fill(value)
  ran:fill(0)
  stream:sync()
  print(("Host: Launching graph with %s set to %d"):format(what, value))
  graph:launch(stream)
  stream:sync()
  local expected = {}
  for slot = 1, SLOTS do expected[slot] = counts[slot] or 0 end
  checks:tables(("%s, %s %d: body kernels run"):format(label, what, value), ran:to_table(), expected, 0, 0)
end

-- A -> if [ C ]
local function simple_if_graph()
  print("simpleIfGraph: Building graph...")
  local graph <close> = build(function(builder)
    local condition = builder:create_condition()
    gpurun.launch(builder, one, kernel.ifGraphKernelA, byte, condition)
    fill_body(builder:if_then(condition), function(body)
      gpurun.launch(body, one, kernel.ifGraphKernelC, ran)
    end)
  end)
  launch_with(graph, 0, "device memory", "if", {})
  launch_with(graph, 1, "device memory", "if", { [IF_TRUE] = 1 })
  print("simpleIfGraph: Complete\n")
end

-- while (condition, 1 at each launch) [ B -> C -> D ]: a do-while.
local function simple_do_while_graph()
  print("simpleDoWhileGraph: Building graph...")
  local graph <close> = build(function(builder)
    local condition = builder:create_condition(1)
    fill_body(builder:while_loop(condition), function(body)
      gpurun.launch(body, one, kernel.doWhileEmptyKernel, ran)
      gpurun.launch(body, one, kernel.doWhileEmptyKernel, ran)
      gpurun.launch(body, one, kernel.doWhileLoopKernel, byte, condition)
    end)
  end)
  launch_with(graph, 10, "loop counter", "do-while", { [DO_WHILE_EMPTY] = 20 })
  checks:number("do-while: the counter at the end", byte:get(1), 0, 0, 0)
  print("simpleDoWhileGraph: Complete\n")
end

-- A -> while [ C ] -> D, A and C the same kernel: a while, tested first.
local function captured_while_graph()
  print("capturedWhileGraph: Building graph...")
  local graph <close> = build(function(builder)
    local condition = builder:create_condition()
    gpurun.launch(builder, one, kernel.capturedWhileKernel, byte, condition)
    fill_body(builder:while_loop(condition), function(body)
      gpurun.launch(body, one, kernel.capturedWhileKernel, byte, condition)
    end)
    gpurun.launch(builder, one, kernel.capturedWhileEmptyKernel, ran)
  end)
  launch_with(graph, 0, "loop counter", "while", { [AFTER_WHILE] = 1 })
  launch_with(graph, 10, "loop counter", "while", { [AFTER_WHILE] = 1 })
  checks:number("while: the counter at the end", byte:get(1), 0, 0, 0)
  print("capturedWhileGraph: Complete\n")
end

-- A -> if [ C | D ]
local function simple_if_else_graph()
  print("simpleIfElseGraph: Building graph...")
  local graph <close> = build(function(builder)
    local condition = builder:create_condition()
    gpurun.launch(builder, one, kernel.ifGraphKernelA, byte, condition)
    local then_body, else_body = builder:if_else(condition)
    fill_body(then_body, function(body) gpurun.launch(body, one, kernel.ifGraphKernelC, ran) end)
    fill_body(else_body, function(body) gpurun.launch(body, one, kernel.ifGraphKernelD, ran) end)
  end)
  launch_with(graph, 0, "device memory", "if/else", { [IF_FALSE] = 1 })
  launch_with(graph, 1, "device memory", "if/else", { [IF_TRUE] = 1 })
  print("simpleIfElseGraph: Complete\n")
end

-- A -> switch [ C | D | E | F ]
local function simple_switch_graph()
  print("simpleSwitchGraph: Building graph...")
  local graph <close> = build(function(builder)
    local condition = builder:create_condition()
    gpurun.launch(builder, one, kernel.switchGraphKernelA, byte, condition)
    for which, body in ipairs{ builder:switch(condition, 4) } do
      fill_body(body, function(b) gpurun.launch(b, one, kernel.switchGraphBody, ran, which - 1) end)
    end
  end)
  for value = 0, 4 do
    launch_with(graph, value, "device memory", "switch", value < 4 and { [SWITCH + value] = 1 } or {})
  end
  print("simpleSwitchGraph: Complete\n")
end

simple_if_graph()
simple_do_while_graph()
captured_while_graph()
if not driver_at_least(12, 8) then
  print("Skipping execution as driver does not support if/else and switch type Graph Conditional Nodes")
else
  simple_if_else_graph()
  simple_switch_graph()
end
if not checks:passed() then
  os.exit(1, true)
end
print("Test PASSED: every launch ran the bodies its condition called for")
