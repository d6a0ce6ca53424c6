-- multiGPUGradientAverage.lua: a port of NVIDIA cuda-samples'
-- python/4_DistributedComputing/multiGPUGradientAverage (cuda.core and
-- mpi4py). Data-parallel training's gradient step: each MPI rank, on a GPU
-- of its own, fills a gradient vector with rank + 0.001 i, and the ranks
-- average them. The original all-reduces host copies through MPI; gpurun
-- all-reduces the device buffers with NCCL (gpurun.dist, op "avg"), as
-- production frameworks do. Every rank checks the average against
-- (size - 1) / 2 + 0.001 i and the ranks agree on the verdict.
--
--   mpirun -np 2 gpurun samples/4_DistributedComputing/multiGPUGradientAverage.lua [--size N]

local gpurun = require("gpurun")
local args = require("gpurun.args")
local check = require("gpurun.check")
local dist = require("gpurun.dist")

local BLOCK = 256
local RULE = string.rep("=", 70)

local KERNEL = [[
extern "C" __global__ void init_grad_kernel(float *grad, int n, int rank)
{
  for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < (size_t)n;
       i += (size_t)gridDim.x * blockDim.x)
    grad[i] = rank + 0.001f * i;
}
]]

local cli = args.new("multiGPUGradientAverage.lua",
  "Averages each rank's gradient vector across GPUs with an NCCL all-reduce.")
cli:integer_option("--size", "Number of gradient elements per GPU.", 1024, 1)
local options = cli:parse(arg)
if options.size > 2147483647 then
  cli:usage_error(("--size must fit the kernel's int, got %d"):format(options.size))
end

cli:open_device(0) -- one line and exit 1 without a GPU, before MPI starts
dist.init()
local rank, size, n = dist.rank(), dist.size(), options.size
local device = dist.device()
if rank == 0 then print(("[Rank 0] World size = %d"):format(size)) end
dist.barrier()
if size < 2 then
  if rank == 0 then
    print(RULE)
    print("ERROR: This sample requires at least 2 MPI processes!")
    print(RULE)
    print("\nPlease run with mpirun:")
    print("  mpirun -np 2 gpurun samples/4_DistributedComputing/multiGPUGradientAverage.lua")
    print("  mpirun -np 4 gpurun samples/4_DistributedComputing/multiGPUGradientAverage.lua --size 10000")
    print("\nFor multi-GPU systems:")
    print("  mpirun -np N gpurun samples/4_DistributedComputing/multiGPUGradientAverage.lua")
    print("  (where N = number of GPUs)")
    print(RULE)
  end
  os.exit(1, true)
end
if rank == 0 then
  print("\n" .. RULE)
  print("Multi-GPU Gradient Average Demo")
  print(RULE)
  print(("Number of MPI ranks (GPUs): %d"):format(size))
  print(("Gradient vector length per GPU: %d"):format(n))
  print("Device: " .. device.name)
  print("Computation: gradients computed on GPU via gpurun.")
  print("Communication: gradients averaged by an NCCL all-reduce of the device buffers (gpurun.dist).")
  print(RULE)
end

local stream <close> = device:create_stream()
gpurun.set_current_stream(stream)
local program <close> = gpurun.Program(KERNEL, "c++",
  gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
local code <close> = program:compile("cubin")
local init_grad = code:get_kernel("init_grad_kernel")

-- This rank's gradients, timed with events.
local grad <close> = gpurun.empty(n, "float32")
local start = stream:record()
gpurun.launch(stream, gpurun.LaunchConfig{ grid = (n + BLOCK - 1) // BLOCK, block = BLOCK }, init_grad,
              grad, n, rank)
local stop = stream:record()
stop:sync()
local kernel_ms = stop:elapsed_ms(start)

-- The average over the ranks, in place, timed on the host end to end.
local comm_start = gpurun.perf_counter()
dist.all_reduce(grad, "avg", stream)
stream:sync()
local comm_ms = (gpurun.perf_counter() - comm_start) * 1000

local base = (size - 1) / 2
local samples = { 0, n // 2, n - 1 }
if rank == 0 then
  print("\nSample averaged gradient values (rank 0):")
  for _, i in ipairs(samples) do print(("  avg_grad[%d] = %.6f"):format(i, grad:get(i + 1))) end
  print("\nExpected values:")
  for _, i in ipairs(samples) do print(("  expected[%d] = %.6f"):format(i, base + 0.001 * i)) end
  print("\nVerifying gradient averaging correctness...")
end

-- Every rank checks its whole vector against base + 0.001 i as float32 computes it.
local expected = {}
local step = string.unpack("f", string.pack("f", 0.001))
for i = 1, n do
  expected[i] = string.unpack("f", string.pack("f", base + string.unpack("f", string.pack("f", step * (i - 1)))))
end
local checks = check.new(cli.name)
local ok = checks:tables(("rank %d's averaged gradients"):format(rank), grad:to_table(), expected, 1e-5, 1e-8)
if rank == 0 then print(ok and "Test PASSED" or "Test FAILED") end
local verdict <close> = gpurun.array({ ok and 1 or 0 }, "int32")
dist.all_reduce(verdict, "min", stream)
local ok_all = verdict:get(1) == 1

if rank == 0 then
  print(ok_all and "[PASS] Gradient averaging is correct on all ranks."
        or "[FAIL] Gradient averaging mismatch detected on one or more ranks.")
  print("\nPerformance:")
  print(("  Kernel time (GPU only): %.3f ms"):format(kernel_ms))
  print(("  NCCL all-reduce time (end-to-end): %.3f ms"):format(comm_ms))
  print(("  Total time: %.3f ms"):format(kernel_ms + comm_ms))
  print("\n" .. RULE)
  print("Demo complete.")
  print(RULE)
end
os.exit(ok_all and 0 or 1, true)
