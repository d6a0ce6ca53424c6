// The samples' block reduction (samples/2_CoreConcepts/parallelReduction.lua
// and launchConfigTuning.lua): each block adds its grid-stride share of `in`
// in dynamic shared memory (blockDim.x floats, blockDim.x a power of 2),
// halving the active threads each step, and writes one partial sum per block.
extern "C" __global__ void reduce_sum(const float *__restrict__ in, float *__restrict__ out, int n)
{
    extern __shared__ float partial[];
    const unsigned int t = threadIdx.x;
    const unsigned int step = gridDim.x * blockDim.x;
    float sum = 0.0f;
    for (unsigned int i = blockIdx.x * blockDim.x + t; i < (unsigned int)n; i += step)
        sum += in[i];
    partial[t] = sum;
    __syncthreads();
    for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
        if (t < half)
            partial[t] += partial[t + half];
        __syncthreads();
    }
    if (t == 0)
        out[blockIdx.x] = partial[0];
}
