// The sample's kernels for programmatic dependent launch (PDL): launched
// with LaunchConfig{ programmatic_stream_serialization = true }, each may
// start while the kernel before it on the stream is still running, and
// waits for it (cudaGridDependencySynchronize) before touching memory, so
// only the launch latency overlaps. bench/compare.lua and
// bench/cudagraphs_c.c time them against cudagraphs.cu's.
#include <cuda_device_runtime_api.h>

extern "C" __global__ void pdl_vec_add(const float *a, const float *b, float *out, size_t n)
{
    cudaGridDependencySynchronize();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] + b[i];
}

extern "C" __global__ void pdl_vec_mul(const float *a, const float *b, float *out, size_t n)
{
    cudaGridDependencySynchronize();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] * b[i];
}

extern "C" __global__ void pdl_vec_sub(const float *a, const float *b, float *out, size_t n)
{
    cudaGridDependencySynchronize();
    size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = a[i] - b[i];
}
