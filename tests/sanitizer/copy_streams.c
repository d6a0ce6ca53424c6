/* tests/sanitizer/copy_streams.c — scripts/dag.lua's two-stream round with
 * the driver calls gpurun makes for it and nothing else of gpurun (the same
 * loader and NVRTC call as while_graph.c, through driver_setup.c), for
 * compute-sanitizer's initcheck: if this program is reported as gpurun's
 * are, the tool is what loses the writes; if it is clean where gpurun is
 * not, gpurun is at fault. docs/reliability.md ("initcheck and a copy
 * beside a kernel") tells what it found. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "driver_setup.h"

/* lua/gpurun/samples/kernels/dag.cu's kernels. */
static const char KERNELS[] =
    "extern \"C\" __global__ void scale(const float *in, float *out, float alpha, size_t n)\n"
    "{ size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = alpha * in[i]; }\n"
    "extern \"C\" __global__ void shift(const float *in, float *out, float beta, size_t n)\n"
    "{ size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = in[i] + beta; }\n"
    "extern \"C\" __global__ void combine(const float *x, const float *y, float *out, size_t n)\n"
    "{ size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; if (i < n) out[i] = x[i] + y[i]; }\n";

static void check(CUresult result, const char *what)
{
    setup_check("copy_streams", result, what);
}

static void launch(CUfunction function, CUstream stream, CUdeviceptr in, CUdeviceptr out,
                   float factor, size_t n, const char *what)
{
    void *args[] = {&in, &out, &factor, &n};
    check(CUDA_CALL(cuLaunchKernel, function, (unsigned int)((n + 255) / 256), 1, 1, 256, 1, 1, 0,
                    stream, args, NULL), what);
}

/*   copy_streams [--rounds N] [--compile-only]
 *
 * Each round: b copied into b_copy and shifted into y on a side stream, a
 * scaled into x on the main stream, the main stream waiting for an event of
 * the side one, then combine r = x + y. Prints the four buffers' addresses,
 * then "copy_streams: N rounds, right" and exits 0; 1 on a CUDA or NVRTC
 * failure or a wrong result; 2 on a usage error. With --compile-only it
 * only compiles the kernels (no GPU needed). */
int main(int argc, char **argv)
{
    long rounds = 1;
    int compile_only = 0;
    for (int i = 1; i < argc; i++) {
        char *end = NULL;
        if (strcmp(argv[i], "--rounds") == 0 && i + 1 < argc
            && (rounds = strtol(argv[i + 1], &end, 10), *end == '\0') && rounds >= 1
            && rounds <= 1000000)
            i++;
        else if (strcmp(argv[i], "--compile-only") == 0)
            compile_only = 1;
        else {
            fprintf(stderr, "usage: copy_streams [--rounds N (1 to 1000000)] [--compile-only]\n");
            return 2;
        }
    }
    struct nvrtc_output code;
    if (compile_only) {
        setup_compile("copy_streams", KERNELS, "dag.cu", "sm_90", NULL, &code);
        printf("copy_streams: compiled scale, shift and combine (%zu bytes of cubin)\n",
               code.code_size);
        nvrtc_output_free(&code);
        return 0;
    }
    CUdevice device;
    CUcontext context;
    char arch[16];
    setup_device("copy_streams", &device, &context, arch, sizeof arch);
    setup_compile("copy_streams", KERNELS, "dag.cu", arch, NULL, &code);

    CUlibrary library;
    const char *names[] = {"scale", "shift", "combine"};
    CUfunction functions[3];
    check(CUDA_CALL(cuLibraryLoadData, &library, code.code, NULL, NULL, 0, NULL, NULL, 0),
          "loading the cubin");
    for (int k = 0; k < 3; k++) {
        CUkernel kernel;
        check(CUDA_CALL(cuLibraryGetKernel, &kernel, library, names[k]), names[k]);
        check(CUDA_CALL(cuKernelGetFunction, &functions[k], kernel), names[k]);
    }

    CUstream main_stream, side_stream;
    CUevent side_done;
    check(CUDA_CALL(cuStreamCreateWithPriority, &main_stream, CU_STREAM_NON_BLOCKING, 0),
          "creating the main stream");
    check(CUDA_CALL(cuStreamCreateWithPriority, &side_stream, CU_STREAM_NON_BLOCKING, 0),
          "creating the side stream");
    check(CUDA_CALL(cuEventCreate, &side_done, CU_EVENT_DISABLE_TIMING), "creating the event");

    /* a = 1 and b = 2 as gpurun.full fills them; b_copy, x, y, r as
     * gpurun.empty leaves them. */
    size_t n = 4096, bytes = n * sizeof(float);
    CUdeviceptr a, b, b_copy, x, y, r;
    CUdeviceptr *all[] = {&a, &b, &b_copy, &x, &y, &r};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        check(CUDA_CALL(cuMemAlloc, all[k], bytes), "allocating a buffer");
    float one = 1.0f, two = 2.0f;
    unsigned int one_bits, two_bits;
    memcpy(&one_bits, &one, sizeof one_bits);
    memcpy(&two_bits, &two, sizeof two_bits);
    check(CUDA_CALL(cuMemsetD32Async, a, one_bits, n, main_stream), "filling a");
    check(CUDA_CALL(cuMemsetD32Async, b, two_bits, n, main_stream), "filling b");
    check(CUDA_CALL(cuStreamSynchronize, main_stream), "waiting for the fills");
    printf("b_copy 0x%llx, x 0x%llx, y 0x%llx, r 0x%llx\n", (unsigned long long)b_copy,
           (unsigned long long)x, (unsigned long long)y, (unsigned long long)r);

    /* dag.lua's two_streams(), round after round. */
    for (long round = 0; round < rounds; round++) {
        check(CUDA_CALL(cuMemcpyDtoDAsync, b_copy, b, bytes, side_stream), "copying b");
        launch(functions[1], side_stream, b_copy, y, 0.5f, n, "launching shift");
        launch(functions[0], main_stream, a, x, 2.0f, n, "launching scale");
        check(CUDA_CALL(cuEventRecord, side_done, side_stream), "recording the side's event");
        check(CUDA_CALL(cuStreamWaitEvent, main_stream, side_done, 0), "waiting for the side");
        void *args[] = {&x, &y, &r, &n};
        check(CUDA_CALL(cuLaunchKernel, functions[2], (unsigned int)((n + 255) / 256), 1, 1, 256,
                        1, 1, 0, main_stream, args, NULL), "launching combine");
    }
    check(CUDA_CALL(cuStreamSynchronize, main_stream), "waiting for the rounds");

    float *result = malloc(bytes);
    if (!result)
        return 1;
    check(CUDA_CALL(cuMemcpyDtoHAsync, result, r, bytes, main_stream), "reading r");
    check(CUDA_CALL(cuStreamSynchronize, main_stream), "waiting for r");
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++)
        wrong += result[i] != 2.0f * 1.0f + (2.0f + 0.5f);

    check(CUDA_CALL(cuEventDestroy, side_done), "destroying the event");
    check(CUDA_CALL(cuStreamDestroy, side_stream), "destroying the side stream");
    check(CUDA_CALL(cuStreamDestroy, main_stream), "destroying the main stream");
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        check(CUDA_CALL(cuMemFree, *all[k]), "freeing a buffer");
    check(CUDA_CALL(cuLibraryUnload, library), "unloading the cubin");
    check(CUDA_CALL(cuDevicePrimaryCtxRelease, device), "releasing the primary context");
    free(result);
    nvrtc_output_free(&code);
    if (wrong) {
        fprintf(stderr, "copy_streams: %zu of %zu results wrong\n", wrong, n);
        return 1;
    }
    printf("copy_streams: %ld rounds, right\n", rounds);
    return 0;
}
