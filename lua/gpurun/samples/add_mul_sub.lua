-- The kernels of the cuda.core sample "cudaGraphs" (NVIDIA cuda-samples,
-- python/2_CoreConcepts/cudaGraphs): r1 = a + b, r2 = r1 * c, r3 = r2 - a,
-- one grid-stride elementwise kernel each over float32 vectors of n
-- elements. scripts/cudagraphs.lua times them at one size,
-- scripts/sweep.lua over a range of sizes.
--
--   local KERNELS = require("gpurun.samples.add_mul_sub").SOURCE  -- CUDA C for gpurun.Program
--   local kernels <close> = require("gpurun.samples.add_mul_sub").compile(device)
--   gpurun.launch(stream, config, kernels.vec_add, a, b, r1, gpurun.u64(n))

local gpurun = require("gpurun")

local add_mul_sub = {
  -- the one copy: lua/gpurun/samples/kernels/cudagraphs.cu, which bench/cudagraphs_c embeds too
  SOURCE = require("gpurun.samples.kernels").source("cudagraphs"),
}

local NAMES = { "vec_add", "vec_mul", "vec_sub" }

local Kernels = {}
Kernels.__index = Kernels

-- The kernels and their code closed, kernels first.
function Kernels:close()
  for _, name in ipairs(NAMES) do
    self[name]:close()
  end
  self.code:close()
end
Kernels.__close = Kernels.close

-- compile(device) -> { vec_add, vec_mul, vec_sub } compiled for `device`
-- (through the kernel cache), to close (or use as a <close> variable).
function add_mul_sub.compile(device)
  local program <close> = gpurun.Program(add_mul_sub.SOURCE, "c++",
    gpurun.ProgramOptions{ std = "c++17", arch = "sm_" .. device.arch })
  local kernels = setmetatable({ code = program:compile("cubin") }, Kernels)
  for _, name in ipairs(NAMES) do
    kernels[name] = kernels.code:get_kernel(name)
  end
  return kernels
end

return add_mul_sub
