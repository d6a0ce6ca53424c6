-- simplePrint.lua: a port of NVIDIA cuda-samples' python/1_GettingStarted/
-- simplePrint (cuda.core). printf from a kernel: a 2 x 2 grid of 2 x 2 x 2
-- blocks, each thread printing its linear block and thread index and a
-- value passed at launch; the lines appear when the stream is synchronized.
-- The original's second half runs the same kernel written with Numba,
-- which has no gpurun counterpart: the port says so, as the original does
-- without Numba installed.
--
--   gpurun samples/1_GettingStarted/simplePrint.lua

local gpurun = require("gpurun")
local args = require("gpurun.args")

local VALUE = 10
local GRID = { 2, 2 }
local BLOCK = { 2, 2, 2 }
local RULE = string.rep("=", 70)

local KERNEL = [[
extern "C" __global__ void printKernel(int value)
{
  const int block = blockIdx.y * gridDim.x + blockIdx.x;
  const int thread = (threadIdx.z * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x;
  printf("[%d, %d]:\t\tValue is: %d\n", block, thread, value);
}
]]

local cli = args.new("simplePrint.lua", "Prints from a kernel with printf, on a 2D grid of 3D blocks.")
cli:parse(arg)

local device = cli:open_device(0)
print("Simple Print - Printing from CUDA Kernels")
print("Demonstrating the CUDA C++ approach")
print()
print("Device: " .. device.name)
print("Compute Capability: sm_" .. device.arch)
print()

print(RULE)
print("METHOD 1: CUDA C++ Kernel (via gpurun.Program)")
print(RULE)
print("Advantage: Full C++ features, better for complex kernels")
print()
print("Compiling CUDA C++ kernel...")
local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local print_kernel = code:get_kernel("printKernel")
print("Kernel compiled successfully.\n")

local stream <close> = device:create_stream()
print("Kernel configuration:")
print(("  Grid:  (%d, %d)"):format(GRID[1], GRID[2]))
print(("  Block: (%d, %d, %d)"):format(BLOCK[1], BLOCK[2], BLOCK[3]))
print(("  Total threads: %d"):format(GRID[1] * GRID[2] * BLOCK[1] * BLOCK[2] * BLOCK[3]))
print()
print(("Launching kernel with value=%d. Output:\n"):format(VALUE))
io.stdout:flush() -- the kernel's lines go to the same stdout, after these
gpurun.launch(stream, gpurun.LaunchConfig{ grid = GRID, block = BLOCK }, print_kernel, VALUE)
stream:sync()
print("\nCUDA C++ kernel execution complete.")

print("\n" .. RULE)
print("Numba CUDA example skipped (gpurun compiles CUDA C++, not Python)")
print(RULE)
print("\n" .. RULE)
print("Done! The kernel approach demonstrated successfully.")
print(RULE)
