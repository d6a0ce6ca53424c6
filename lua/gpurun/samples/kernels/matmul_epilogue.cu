// samples/2_CoreConcepts/persistentProgramCache.lua's generated kernel, matrixMulSharedMem.lua's
// tiled one and bench/cubin_load.lua's: C = EPILOGUE(A @ B + bias) for row-major float
// matrices (A is M x K, B is K x N), one TILE_SIZE x TILE_SIZE block of
// threads per tile of C, staging tiles of A and B in shared memory. The
// code that compiles it defines TILE_SIZE and EPILOGUE(value) first.
extern "C" __global__ void matmul_epilogue(const float *__restrict__ A, const float *__restrict__ B,
                                           const float *__restrict__ bias, float *__restrict__ C,
                                           int M, int N, int K)
{
    __shared__ float a_tile[TILE_SIZE][TILE_SIZE];
    __shared__ float b_tile[TILE_SIZE][TILE_SIZE];
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int row = blockIdx.y * TILE_SIZE + ty;
    const int col = blockIdx.x * TILE_SIZE + tx;
    float sum = 0.0f;
    for (int base = 0; base < K; base += TILE_SIZE) {
        const int a_col = base + tx, b_row = base + ty;
        a_tile[ty][tx] = row < M && a_col < K ? A[(size_t)row * K + a_col] : 0.0f;
        b_tile[ty][tx] = b_row < K && col < N ? B[(size_t)b_row * N + col] : 0.0f;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < TILE_SIZE; ++j)
            sum += a_tile[ty][j] * b_tile[j][tx];
        __syncthreads();
    }
    if (row < M && col < N)
        C[(size_t)row * N + col] = EPILOGUE(sum + bias[col]);
}
