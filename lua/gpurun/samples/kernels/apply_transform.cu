// The "library" half of samples/2_CoreConcepts/jitLtoLinking.lua and
// bench/object_code.lua: a grid-stride kernel that maps every element
// through user_transform, which another translation unit defines; a
// linker (nvJitLink, or nvcc -dlink) resolves it.
extern "C" __device__ float user_transform(float x);

extern "C" __global__ void apply_transform(const float *__restrict__ in, float *__restrict__ out, size_t n)
{
    const size_t stride = (size_t)gridDim.x * blockDim.x;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride)
        out[i] = user_transform(in[i]);
}
