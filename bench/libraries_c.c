/* libraries_c: bench/libraries.lua's library calls from plain C, each
 * captured into a CUDA graph and launched: cublasGemmEx (float32
 * accumulation, workspace set, as gpurun sets them), cuFFT plans (work
 * area set, auto-allocation off) and cusparseSpMV; for
 * bench/libraries_compare.sh, one JSON object out under the Lua side's keys.
 *
 *   build/bench/libraries_c [--gemm 4096] [--small-gemm 64]
 *       [--fft-sizes 1048576,16777216] [--spmv-rows 4194304]
 *       [--cases gemm,small_gemm,fft,spmv] [--reps 15] [--seconds 0.1]
 */
#define _POSIX_C_SOURCE 200809L
#define BENCH_PROGRAM "libraries_c"
#include "bench_common.h"

#include <math.h>
#include <stdint.h>

#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <cufft.h>
#include <cusparse.h>

#define MAX_SIZES 16
#define WARMUP 5
#define MIN_ITERS 10
#define MAX_ITERS 5000
#define CUBLAS_WORKSPACE (32u << 20) /* gpurun's from Hopper on */

struct options {
    long long gemm, small_gemm, spmv_rows;
    long long fft_sizes[MAX_SIZES];
    int fft_count;
    int cases; /* a bit per case */
    int reps;
    double seconds;
};

enum { CASE_GEMM = 1, CASE_SMALL_GEMM = 2, CASE_FFT = 4, CASE_SPMV = 8 };

static void check_cuda(const char *call, cudaError_t result)
{
    if (result != cudaSuccess) {
        fprintf(stderr, "%s: %s: %s (%s)\n", BENCH_PROGRAM, call, cudaGetErrorName(result),
                cudaGetErrorString(result));
        exit(1);
    }
}

static void check_status(const char *call, int status)
{
    if (status != 0) {
        fprintf(stderr, "%s: %s: status %d\n", BENCH_PROGRAM, call, status);
        exit(1);
    }
}

#define CUDART(call) check_cuda(#call, (call))
#define LIBRARY(call) check_status(#call, (int)(call))

/* One case's figures, printed as the JSON members of its key. */
static int printed;

static void print_case(const char *key, const char *what, double us, double min_us, int iters,
                       int reps)
{
    printf("%s\"%s\":{\"what\":\"%s\",\"us_per_iter\":%.6g,\"min_us\":%.6g,\"iters\":%d,\"reps\":%d}",
           printed++ ? "," : "", key, what, us, min_us, iters, reps);
    fflush(stdout);
}

/* The median us per launch of `graph`, as gpurun.bench.measure times:
 * after WARMUP launches a probe of MIN_ITERS, then --reps repetitions of
 * as many as fill about --seconds (MIN_ITERS to MAX_ITERS), each from a
 * stream synchronisation to another. */
static void time_graph(const char *key, const char *what, cudaGraphExec_t exec, cudaStream_t stream,
                       const struct options *options)
{
    for (int i = 0; i < WARMUP; i++)
        CUDART(cudaGraphLaunch(exec, stream));
    CUDART(cudaStreamSynchronize(stream));
    double start = now_seconds();
    for (int i = 0; i < MIN_ITERS; i++)
        CUDART(cudaGraphLaunch(exec, stream));
    CUDART(cudaStreamSynchronize(stream));
    double per_iter = (now_seconds() - start) / MIN_ITERS;
    if (per_iter < 1e-7)
        per_iter = 1e-7;
    double want = ceil(options->seconds / per_iter);
    int iters = want < MIN_ITERS ? MIN_ITERS : want > MAX_ITERS ? MAX_ITERS : (int)want;
    double runs[MAX_REPS], fastest = INFINITY;
    for (int rep = 0; rep < options->reps; rep++) {
        CUDART(cudaStreamSynchronize(stream));
        start = now_seconds();
        for (int i = 0; i < iters; i++)
            CUDART(cudaGraphLaunch(exec, stream));
        CUDART(cudaStreamSynchronize(stream));
        runs[rep] = (now_seconds() - start) * 1e6 / iters;
        if (runs[rep] < fastest)
            fastest = runs[rep];
    }
    print_case(key, what, median(runs, (unsigned long)options->reps), fastest, iters, options->reps);
}

typedef void (*step_fn)(void *context, cudaStream_t stream);

/* step run once uncaptured (the library's one-time work), then captured
 * into a graph that is instantiated, uploaded and timed. */
static void time_captured(const char *key, const char *what, step_fn step, void *context,
                          cudaStream_t stream, const struct options *options)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    step(context, stream);
    CUDART(cudaStreamSynchronize(stream));
    CUDART(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    step(context, stream);
    CUDART(cudaStreamEndCapture(stream, &graph));
    CUDART(cudaGraphInstantiate(&exec, graph, 0));
    CUDART(cudaGraphUpload(exec, stream));
    time_graph(key, what, exec, stream, options);
    CUDART(cudaGraphExecDestroy(exec));
    CUDART(cudaGraphDestroy(graph));
}

/* ---- GEMM ---------------------------------------------------------------------------- */

/* The inputs are uniform in [0, 1), multiples of 2^-digits with the
 * dtype's digits (24 for float32, 11 for float16, 8 for bfloat16): exact
 * in the dtype, and as many random bits as gpurun.device_rng's draws carry
 * (torch's and CuPy's, drawn in float32 and rounded, about as many). A
 * large product of 16-bit floats runs at the clock its power allows, and
 * the power depends on how many of the inputs' bits toggle, so every side
 * multiplies inputs of the same kind. */
static uint16_t half_bits(double value)
{
    if (value == 0)
        return 0;
    int exponent;
    double mantissa = frexp(value, &exponent); /* value = mantissa 2^exponent, mantissa in [0.5, 1) */
    return (uint16_t)(((exponent - 1 + 15) << 10) | (int)((mantissa * 2 - 1) * 1024));
}

static uint16_t bfloat16_bits(float value)
{
    uint32_t bits;
    memcpy(&bits, &value, sizeof bits);
    return (uint16_t)(bits >> 16);
}

static void *device_input(long long count, cudaDataType type, unsigned seed)
{
    size_t size = type == CUDA_R_32F ? 4 : 2;
    int digits = type == CUDA_R_32F ? 24 : type == CUDA_R_16F ? 11 : 8;
    unsigned char *host = malloc((size_t)count * size);
    if (host == NULL) {
        fprintf(stderr, "%s: out of host memory\n", BENCH_PROGRAM);
        exit(1);
    }
    for (long long i = 0; i < count; i++) {
        seed = seed * 1664525u + 1013904223u;
        float value = (float)(seed >> (32 - digits)) / (float)(1u << digits);
        if (type == CUDA_R_32F) {
            memcpy(host + 4 * i, &value, 4);
        } else {
            uint16_t bits = type == CUDA_R_16F ? half_bits(value) : bfloat16_bits(value);
            memcpy(host + 2 * i, &bits, 2);
        }
    }
    void *device;
    CUDART(cudaMalloc(&device, (size_t)count * size));
    CUDART(cudaMemcpy(device, host, (size_t)count * size, cudaMemcpyHostToDevice));
    free(host);
    return device;
}

struct gemm {
    cublasHandle_t handle;
    int n;
    cudaDataType type;
    void *a, *b, *c;
};

/* C = A B of row-major n x n matrices, in cuBLAS's column-major terms
 * C^T = B^T A^T: B first, as gpurun.matmul calls it. */
static void gemm_step(void *context, cudaStream_t stream)
{
    struct gemm *g = context;
    const float alpha = 1, beta = 0;
    LIBRARY(cublasSetStream(g->handle, stream));
    LIBRARY(cublasGemmEx(g->handle, CUBLAS_OP_N, CUBLAS_OP_N, g->n, g->n, g->n, &alpha, g->b, g->type,
                         g->n, g->a, g->type, g->n, &beta, g->c, g->type, g->n, CUBLAS_COMPUTE_32F,
                         CUBLAS_GEMM_DEFAULT));
}

static void gemm_case(cublasHandle_t handle, long long n, cudaDataType type, const char *dtype,
                      cudaStream_t stream, const struct options *options)
{
    size_t size = type == CUDA_R_32F ? 4 : 2;
    struct gemm g = { handle, (int)n, type, device_input(n * n, type, 1), device_input(n * n, type, 2),
                      NULL };
    CUDART(cudaMalloc(&g.c, (size_t)(n * n) * size));
    char key[64], what[64];
    snprintf(key, sizeof key, "gemm_%s_%lld", dtype, n);
    snprintf(what, sizeof what, "GEMM %s %lld^3", dtype, n);
    time_captured(key, what, gemm_step, &g, stream, options);
    CUDART(cudaFree(g.a));
    CUDART(cudaFree(g.b));
    CUDART(cudaFree(g.c));
}

static void gemm_cases(cudaStream_t stream, const struct options *options)
{
    cublasHandle_t handle;
    void *workspace;
    LIBRARY(cublasCreate(&handle));
    CUDART(cudaMalloc(&workspace, CUBLAS_WORKSPACE));
    LIBRARY(cublasSetWorkspace(handle, workspace, CUBLAS_WORKSPACE));
    LIBRARY(cublasSetMathMode(handle, CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION));
    if (options->cases & CASE_GEMM) {
        gemm_case(handle, options->gemm, CUDA_R_32F, "float32", stream, options);
        gemm_case(handle, options->gemm, CUDA_R_16BF, "bfloat16", stream, options);
        gemm_case(handle, options->gemm, CUDA_R_16F, "float16", stream, options);
    }
    if (options->cases & CASE_SMALL_GEMM)
        gemm_case(handle, options->small_gemm, CUDA_R_32F, "float32", stream, options);
    LIBRARY(cublasDestroy(handle));
    CUDART(cudaFree(workspace));
}

/* ---- FFT ----------------------------------------------------------------------------- */

struct fft {
    cufftHandle plan;
    int real;
    void *x, *y;
};

static void fft_step(void *context, cudaStream_t stream)
{
    struct fft *f = context;
    LIBRARY(cufftSetStream(f->plan, stream));
    if (f->real)
        LIBRARY(cufftExecR2C(f->plan, f->x, f->y));
    else
        LIBRARY(cufftExecC2C(f->plan, f->x, f->y, CUFFT_FORWARD));
}

/* A transform's input, as every other side has it: n ones (real), or n
 * complex ones (1, 0). Its spectrum is n at frequency 0 and 0 elsewhere.
 * The data moves the clock a busy GPU holds, so every side transforms the
 * same numbers. */
static void *fft_input(long long n, int real)
{
    size_t floats = (size_t)n * (real ? 1 : 2);
    float *host = calloc(floats, sizeof *host);
    if (host == NULL) {
        fprintf(stderr, "%s: out of host memory\n", BENCH_PROGRAM);
        exit(1);
    }
    for (long long i = 0; i < n; i++)
        host[real ? i : 2 * i] = 1.0f;
    void *device;
    CUDART(cudaMalloc(&device, floats * sizeof *host));
    CUDART(cudaMemcpy(device, host, floats * sizeof *host, cudaMemcpyHostToDevice));
    free(host);
    return device;
}

static void fft_case(long long n, int real, cudaStream_t stream, const struct options *options)
{
    struct fft f = { 0, real, NULL, NULL };
    size_t work_bytes = 0;
    void *work = NULL;
    LIBRARY(cufftCreate(&f.plan));
    LIBRARY(cufftSetAutoAllocation(f.plan, 0));
    LIBRARY(cufftMakePlanMany64(f.plan, 1, &n, NULL, 1, 0, NULL, 1, 0, real ? CUFFT_R2C : CUFFT_C2C, 1,
                                &work_bytes));
    if (work_bytes > 0) {
        CUDART(cudaMalloc(&work, work_bytes));
        LIBRARY(cufftSetWorkArea(f.plan, work));
    }
    f.x = fft_input(n, real);
    CUDART(cudaMalloc(&f.y, (size_t)(real ? n / 2 + 1 : n) * 8));
    char key[64], what[64];
    snprintf(key, sizeof key, "fft_%s_%lld", real ? "r2c" : "c2c", n);
    snprintf(what, sizeof what, "FFT %s %lld", real ? "r2c" : "c2c", n);
    time_captured(key, what, fft_step, &f, stream, options);
    float first[2];
    CUDART(cudaMemcpy(first, f.y, sizeof first, cudaMemcpyDeviceToHost));
    if (fabs(first[0] - (double)n) > 1e-5 * (double)n || fabs(first[1]) > 1e-5 * (double)n) {
        fprintf(stderr, "%s: %s: frequency 0 is (%g, %g), want (%lld, 0)\n", BENCH_PROGRAM, what, first[0],
                first[1], n);
        exit(1);
    }
    LIBRARY(cufftDestroy(f.plan));
    CUDART(cudaFree(work));
    CUDART(cudaFree(f.x));
    CUDART(cudaFree(f.y));
}

/* ---- SpMV ---------------------------------------------------------------------------- */

/* The 5-point Laplacian of a side x side grid in CSR, each row's columns
 * in order (up, left, self, right, down), as bench/libraries.lua writes it. */
static void laplacian(long long side, int *offsets, int *columns, float *values)
{
    long long at = 0, rows = side * side;
    for (long long r = 0; r < rows; r++) {
        long long i = r / side, j = r % side;
        offsets[r] = (int)at;
        long long neighbours[5] = { i > 0 ? r - side : -1, j > 0 ? r - 1 : -1, r,
                                    j < side - 1 ? r + 1 : -1, i < side - 1 ? r + side : -1 };
        for (int k = 0; k < 5; k++) {
            if (neighbours[k] >= 0) {
                columns[at] = (int)neighbours[k];
                values[at++] = k == 2 ? 4.0f : -1.0f;
            }
        }
    }
    offsets[rows] = (int)at;
}

struct spmv {
    cusparseHandle_t handle;
    cusparseSpMatDescr_t a;
    cusparseDnVecDescr_t x, y;
    void *buffer;
};

static void spmv_step(void *context, cudaStream_t stream)
{
    struct spmv *s = context;
    const float alpha = 1, beta = 0;
    LIBRARY(cusparseSetStream(s->handle, stream));
    LIBRARY(cusparseSpMV(s->handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, s->a, s->x, &beta, s->y,
                         CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, s->buffer));
}

static void *copied(const void *host, size_t bytes)
{
    void *device;
    CUDART(cudaMalloc(&device, bytes));
    CUDART(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice));
    return device;
}

static void spmv_case(long long rows, cudaStream_t stream, const struct options *options)
{
    long long side = llround(sqrt((double)rows)), nnz = 5 * rows - 4 * side;
    int *offsets = malloc((size_t)(rows + 1) * sizeof *offsets);
    int *columns = malloc((size_t)nnz * sizeof *columns);
    float *values = malloc((size_t)nnz * sizeof *values), *ones = malloc((size_t)rows * sizeof *ones);
    if (!offsets || !columns || !values || !ones) {
        fprintf(stderr, "%s: out of host memory\n", BENCH_PROGRAM);
        exit(1);
    }
    laplacian(side, offsets, columns, values);
    for (long long i = 0; i < rows; i++)
        ones[i] = 1.0f;
    void *d_offsets = copied(offsets, (size_t)(rows + 1) * 4), *d_columns = copied(columns, (size_t)nnz * 4);
    void *d_values = copied(values, (size_t)nnz * 4), *d_x = copied(ones, (size_t)rows * 4), *d_y;
    CUDART(cudaMalloc(&d_y, (size_t)rows * 4));
    struct spmv s;
    const float alpha = 1, beta = 0;
    size_t bytes = 0;
    LIBRARY(cusparseCreate(&s.handle));
    LIBRARY(cusparseCreateCsr(&s.a, rows, rows, nnz, d_offsets, d_columns, d_values, CUSPARSE_INDEX_32I,
                              CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, CUDA_R_32F));
    LIBRARY(cusparseCreateDnVec(&s.x, rows, d_x, CUDA_R_32F));
    LIBRARY(cusparseCreateDnVec(&s.y, rows, d_y, CUDA_R_32F));
    LIBRARY(cusparseSpMV_bufferSize(s.handle, CUSPARSE_OPERATION_NON_TRANSPOSE, &alpha, s.a, s.x, &beta,
                                    s.y, CUDA_R_32F, CUSPARSE_SPMV_ALG_DEFAULT, &bytes));
    CUDART(cudaMalloc(&s.buffer, bytes > 0 ? bytes : 1));
    char key[64], what[64];
    snprintf(key, sizeof key, "spmv_%lld", rows);
    snprintf(what, sizeof what, "SpMV Laplacian %lld rows", rows);
    time_captured(key, what, spmv_step, &s, stream, options);
    LIBRARY(cusparseDestroySpMat(s.a));
    LIBRARY(cusparseDestroyDnVec(s.x));
    LIBRARY(cusparseDestroyDnVec(s.y));
    LIBRARY(cusparseDestroy(s.handle));
    void *frees[] = { d_offsets, d_columns, d_values, d_x, d_y, s.buffer };
    for (int i = 0; i < 6; i++)
        CUDART(cudaFree(frees[i]));
    free(offsets);
    free(columns);
    free(values);
    free(ones);
}

/* ---- options ------------------------------------------------------------------------- */

static void usage_error(const char *what, const char *text)
{
    fprintf(stderr, "%s: error: %s: bad value '%s'\n", BENCH_PROGRAM, what, text ? text : "");
    exit(2);
}

static long long positive(const char *what, const char *text)
{
    char *end;
    long long value = text ? strtoll(text, &end, 10) : 0;
    if (text == NULL || *text == '\0' || *end != '\0' || value < 1)
        usage_error(what, text);
    return value;
}

static int parse_cases(const char *text)
{
    static const char *names[] = { "gemm", "small_gemm", "fft", "spmv" };
    int cases = 0;
    char copy[256];
    if (text == NULL || strlen(text) >= sizeof copy)
        usage_error("--cases", text);
    strcpy(copy, text);
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
        int found = 0;
        for (int i = 0; i < 4; i++) {
            if (strcmp(item, names[i]) == 0)
                found = 1 << i;
        }
        if (!found)
            usage_error("--cases", item);
        cases |= found;
    }
    return cases;
}

static void parse_sizes(struct options *options, const char *text)
{
    char copy[512];
    if (text == NULL || strlen(text) >= sizeof copy)
        usage_error("--fft-sizes", text);
    strcpy(copy, text);
    options->fft_count = 0;
    for (char *item = strtok(copy, ","); item; item = strtok(NULL, ",")) {
        if (options->fft_count == MAX_SIZES)
            usage_error("--fft-sizes", text);
        options->fft_sizes[options->fft_count++] = positive("--fft-sizes", item);
    }
}

static struct options parse(int argc, char **argv)
{
    struct options o = { 4096, 64, 1LL << 22, { 1LL << 20, 1LL << 24 }, 2, 15, 15, 0.1 };
    for (int i = 1; i < argc; i++) {
        const char *flag = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(flag, "--help") == 0 || strcmp(flag, "-h") == 0) {
            printf("Usage: libraries_c [--gemm N] [--small-gemm N] [--fft-sizes N,...] "
                   "[--spmv-rows N] [--cases gemm,small_gemm,fft,spmv] [--reps N] [--seconds S]\n");
            exit(0);
        }
        i++;
        if (strcmp(flag, "--gemm") == 0)
            o.gemm = positive(flag, value);
        else if (strcmp(flag, "--small-gemm") == 0)
            o.small_gemm = positive(flag, value);
        else if (strcmp(flag, "--fft-sizes") == 0)
            parse_sizes(&o, value);
        else if (strcmp(flag, "--spmv-rows") == 0)
            o.spmv_rows = positive(flag, value);
        else if (strcmp(flag, "--cases") == 0)
            o.cases = parse_cases(value);
        else if (strcmp(flag, "--reps") == 0)
            o.reps = (int)positive(flag, value);
        else if (strcmp(flag, "--seconds") == 0)
            o.seconds = value ? atof(value) : 0;
        else
            usage_error("unknown option", flag);
    }
    long long side = llround(sqrt((double)o.spmv_rows));
    char shown[32];
    snprintf(shown, sizeof shown, "%lld", o.spmv_rows);
    if (side < 3 || side * side != o.spmv_rows)
        usage_error("--spmv-rows (a square of 9 or more: side x side grid)", shown);
    snprintf(shown, sizeof shown, "%d", o.reps);
    if (o.reps > MAX_REPS)
        usage_error("--reps (at most 1000)", shown);
    snprintf(shown, sizeof shown, "%g", o.seconds);
    if (!(o.seconds > 0))
        usage_error("--seconds", shown);
    return o;
}

int main(int argc, char **argv)
{
    struct options options = parse(argc, argv);
    struct cudaDeviceProp properties;
    cudaStream_t stream;
    CUDART(cudaSetDevice(0));
    CUDART(cudaGetDeviceProperties(&properties, 0));
    CUDART(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    printf("{\"device\":\"%s\",\"reps\":%d,\"cases\":{", properties.name, options.reps);
    if (options.cases & (CASE_GEMM | CASE_SMALL_GEMM))
        gemm_cases(stream, &options);
    for (int i = 0; (options.cases & CASE_FFT) && i < options.fft_count; i++) {
        fft_case(options.fft_sizes[i], 0, stream, &options);
        fft_case(options.fft_sizes[i], 1, stream, &options);
    }
    if (options.cases & CASE_SPMV)
        spmv_case(options.spmv_rows, stream, &options);
    printf("}}\n");
    CUDART(cudaStreamDestroy(stream));
    return 0;
}
