// scripts/pipeline.lua's reduction where gpurun has no gpurun.reduction: each
// block sums its grid-stride share of x in shared memory and adds it to
// *total (which the pipeline fills with 0 first). 256 threads per block.
extern "C" __global__ void __launch_bounds__(256) sum_into(const float *x, float *total, size_t n)
{
    __shared__ float part[256];
    float s = 0.0f;
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        s += x[i];
    part[threadIdx.x] = s;
    __syncthreads();
    for (unsigned int k = blockDim.x / 2; k > 0; k >>= 1) {
        if (threadIdx.x < k)
            part[threadIdx.x] += part[threadIdx.x + k];
        __syncthreads();
    }
    if (threadIdx.x == 0)
        atomicAdd(total, part[0]);
}
