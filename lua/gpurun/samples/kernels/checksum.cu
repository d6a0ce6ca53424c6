// The sum of a float32 vector in float64, in two deterministic steps (no
// atomics: the same input always gives the same bits): partial_sums leaves
// one sum per block, sum_partials adds those in one block. Both run with
// 256 threads per block. scripts/distributed.lua uses them for the checksum
// it all-reduces across ranks.
#define CHECKSUM_BLOCK 256

__device__ double block_sum(double value)
{
    __shared__ double scratch[CHECKSUM_BLOCK];
    scratch[threadIdx.x] = value;
    __syncthreads();
    for (unsigned int half = CHECKSUM_BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half)
            scratch[threadIdx.x] += scratch[threadIdx.x + half];
        __syncthreads();
    }
    return scratch[0];
}

extern "C" __global__ void partial_sums(const float *x, double *partials, size_t n)
{
    double sum = 0.0;
    size_t stride = (size_t)gridDim.x * CHECKSUM_BLOCK;
    for (size_t i = (size_t)blockIdx.x * CHECKSUM_BLOCK + threadIdx.x; i < n; i += stride)
        sum += x[i];
    double total = block_sum(sum);
    if (threadIdx.x == 0)
        partials[blockIdx.x] = total;
}

extern "C" __global__ void sum_partials(const double *partials, double *out, unsigned int count)
{
    double sum = 0.0;
    for (unsigned int i = threadIdx.x; i < count; i += CHECKSUM_BLOCK)
        sum += partials[i];
    double total = block_sum(sum);
    if (threadIdx.x == 0)
        out[0] = total;
}
