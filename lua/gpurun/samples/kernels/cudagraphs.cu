// The cuda.core sample's pipeline, r1 = a + b, r2 = r1 * c, r3 = r2 - a:
// scripts/cudagraphs.lua, bench/compare.lua and bench/cudagraphs_c.c (which
// embeds this file when it is built) all run these same kernels.
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
