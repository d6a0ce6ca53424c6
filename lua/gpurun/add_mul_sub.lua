-- The kernels of the cuda.core sample "cudaGraphs" (NVIDIA cuda-samples,
-- python/2_CoreConcepts/cudaGraphs): r1 = a + b, r2 = r1 * c, r3 = r2 - a,
-- one grid-stride elementwise kernel each over float32 vectors of n
-- elements. scripts/cudagraphs.lua times them at one size,
-- scripts/sweep.lua over a range of sizes.
--
--   local KERNELS = require("gpurun.add_mul_sub").SOURCE  -- CUDA C for gpurun.Program

return {
  SOURCE = [[
extern "C" __global__ void vec_add(const float *a, const float *b, float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] + b[i];
}

extern "C" __global__ void vec_mul(const float *a, const float *b, float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] * b[i];
}

extern "C" __global__ void vec_sub(const float *a, const float *b, float *out, size_t n)
{
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] - b[i];
}
]],
}
