/* tests/sanitizer/while_graph.c — scripts/converge.lua's graph, built with the
 * driver calls gpurun makes for it and nothing else of gpurun: no Lua, the
 * same loader (base/cuda_driver.c: dlopen, cuGetProcAddress at gpurun's
 * pinned ABI versions) and the same NVRTC call (base/nvrtc_compile.c),
 * through driver_setup.c. If it fails under compute-sanitizer as gpurun
 * does, the sanitizer is what cannot follow the conditional node; if it
 * passes, the fault is gpurun's. docs/reliability.md ("converge.lua under
 * memcheck") tells what it found. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "driver_setup.h"

/* scripts/converge.lua's kernels, as it compiles them. */
static const char KERNELS[] =
    "#include <cuda_device_runtime_api.h>\n"
    "\n"
    "extern \"C\" __global__ void relax(const float *u, float *v, float *residual, unsigned int n)\n"
    "{\n"
    "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i >= n)\n"
    "        return;\n"
    "    float value = i == 0 || i == n - 1 ? u[i] : 0.5f * (u[i - 1] + u[i + 1]);\n"
    "    v[i] = value;\n"
    "    atomicMax((int *)residual, __float_as_int(fabsf(value - u[i])));\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void decide(cudaGraphConditionalHandle condition, const float *residual,\n"
    "                                  float tol, unsigned int *steps, unsigned int max_steps)\n"
    "{\n"
    "    unsigned int done = ++*steps;\n"
    "    cudaGraphSetConditional(condition, *residual > tol && done < max_steps ? 1u : 0u);\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void relax_only(const float *u, float *v, unsigned int n)\n"
    "{\n"
    "    unsigned int i = blockIdx.x * blockDim.x + threadIdx.x;\n"
    "    if (i < n)\n"
    "        v[i] = i == 0 || i == n - 1 ? u[i] : 0.5f * (u[i - 1] + u[i + 1]);\n"
    "}\n"
    "\n"
    /* gpurun.max_abs_diff's shape (lua/gpurun/compute/reduction_source.lua):
     * 16-byte loads in a grid-stride loop, the tail one by one, warp
     * shuffles, the warps' values through shared memory between two
     * __syncthreads, and the block that takes the last ticket combining
     * the blocks' values the same way. */
    "__device__ float block_max(float a, float *scratch)\n"
    "{\n"
    "    for (unsigned int delta = 16; delta > 0; delta >>= 1)\n"
    "        a = fmaxf(a, __shfl_down_sync(0xffffffffu, a, delta));\n"
    "    if ((threadIdx.x & 31u) == 0)\n"
    "        scratch[threadIdx.x >> 5] = a;\n"
    "    __syncthreads();\n"
    "    if (threadIdx.x < 32) {\n"
    "        a = threadIdx.x < 8 ? scratch[threadIdx.x] : 0.0f;\n"
    "        for (unsigned int delta = 16; delta > 0; delta >>= 1)\n"
    "            a = fmaxf(a, __shfl_down_sync(0xffffffffu, a, delta));\n"
    "    }\n"
    "    __syncthreads();\n"
    "    return a;\n"
    "}\n"
    "\n"
    "extern \"C\" __global__ void __launch_bounds__(256) residual_max(const float *u, const float *v,\n"
    "    float *residual, unsigned int *ticket, float *partials, unsigned int n)\n"
    "{\n"
    "    const unsigned int stride = gridDim.x * 256, first = blockIdx.x * 256 + threadIdx.x;\n"
    "    const unsigned int vectors = n / 4;\n"
    "    __shared__ float scratch[8];\n"
    "    __shared__ bool last;\n"
    "    float a = 0.0f;\n"
    "    for (unsigned int k = first; k < vectors; k += stride) {\n"
    "        const float4 x = reinterpret_cast<const float4 *>(u)[k];\n"
    "        const float4 y = reinterpret_cast<const float4 *>(v)[k];\n"
    "        a = fmaxf(a, fmaxf(fmaxf(fabsf(y.x - x.x), fabsf(y.y - x.y)),\n"
    "                           fmaxf(fabsf(y.z - x.z), fabsf(y.w - x.w))));\n"
    "    }\n"
    "    for (unsigned int i = vectors * 4 + first; i < n; i += stride)\n"
    "        a = fmaxf(a, fabsf(v[i] - u[i]));\n"
    "    a = block_max(a, scratch);\n"
    "    if (gridDim.x > 1) {\n"
    "        if (threadIdx.x == 0) {\n"
    "            partials[blockIdx.x] = a;\n"
    "            __threadfence();\n"
    "            last = atomicAdd(ticket, 1u) == gridDim.x - 1;\n"
    "        }\n"
    "        __syncthreads();\n"
    "        if (!last)\n"
    "            return;\n"
    "        __threadfence();\n"
    "        a = 0.0f;\n"
    "        for (unsigned int b = threadIdx.x; b < gridDim.x; b += 256)\n"
    "            a = fmaxf(a, __ldcg(partials + b));\n"
    "        a = block_max(a, scratch);\n"
    "        if (threadIdx.x == 0)\n"
    "            *ticket = 0u;\n"
    "    }\n"
    "    if (threadIdx.x == 0)\n"
    "        *residual = a;\n"
    "}\n";

static void check(CUresult result, const char *what)
{
    setup_check("while_graph", result, what);
}

/* gpurun's wait on a stream whose work may never end (runtime/state.c). */
static void wait_polling(CUstream stream)
{
    long pause_ns = 1000;
    for (;;) {
        CUresult result = CUDA_CALL(cuStreamQuery, stream);
        if (result == CUDA_SUCCESS)
            return;
        if (result != CUDA_ERROR_NOT_READY)
            check(result, "waiting for the graph (cuStreamQuery)");
        struct timespec pause = {0, pause_ns};
        nanosleep(&pause, NULL);
        if (pause_ns < 200000)
            pause_ns *= 2;
    }
}

static void compile(const char *arch, struct nvrtc_output *output)
{
    setup_compile("while_graph", KERNELS, "relax.cu", arch, CUDA_INCLUDE_DIR, output);
}

static long option_value(int argc, char **argv, int *i)
{
    char *end = NULL;
    long value = *i + 1 < argc ? strtol(argv[*i + 1], &end, 10) : 0;
    if (!end || *end || value < 1 || value > 1000000) {
        fprintf(stderr, "while_graph: %s needs a count from 1 to 1000000\n", argv[*i]);
        exit(2);
    }
    (*i)++;
    return value;
}

/*   while_graph [--launches N] [--points N] [--reduction | --plain] [--compile-only]
 *
 * The graph: a copy and a memset, then a while node whose body is a memset
 * (the residual), the relaxation kernel, a copy back and a one-thread kernel
 * that sets the condition with cudaGraphSetConditional. It is instantiated,
 * uploaded and launched several times on one stream, each launch waited for
 * by polling cuStreamQuery as gpurun's waits on a graph with a loop do.
 *
 * With --reduction the body finds the residual as scripts/converge.lua
 * does, with a block reduction of gpurun.max_abs_diff's shape after the
 * relaxation; --plain records that step as a graph without the while node,
 * launched once per step from the host, to tell what the tools report of
 * the kernels from what they report of the conditional node.
 *
 * Prints "while_graph: N launches, S steps each" and exits 0; 1 on a CUDA or
 * NVRTC failure or launches that disagree; 2 on a usage error. With
 * --compile-only it only compiles the kernels (no GPU needed). */
int main(int argc, char **argv)
{
    long launches = 3, points = 32;
    int compile_only = 0, reduction = 0, plain = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--launches") == 0)
            launches = option_value(argc, argv, &i);
        else if (strcmp(argv[i], "--points") == 0)
            points = option_value(argc, argv, &i);
        else if (strcmp(argv[i], "--compile-only") == 0)
            compile_only = 1;
        else if (strcmp(argv[i], "--reduction") == 0)
            reduction = 1;
        else if (strcmp(argv[i], "--plain") == 0)
            plain = reduction = 1;
        else {
            fprintf(stderr, "usage: while_graph [--launches N] [--points N] [--reduction | --plain]"
                            " [--compile-only]\n");
            return 2;
        }
    }
    if (points < 3)
        points = 3;
    struct nvrtc_output code;
    if (compile_only) {
        compile("sm_90", &code);
        printf("while_graph: compiled its kernels (%zu bytes of cubin)\n", code.code_size);
        nvrtc_output_free(&code);
        return 0;
    }
    /* Device 0's primary context, as Device(0):set_current() makes it. */
    CUdevice device;
    CUcontext context;
    char arch[16];
    setup_device("while_graph", &device, &context, arch, sizeof arch);
    compile(arch, &code);

    CUlibrary library;
    CUkernel relax_kernel, decide_kernel, relax_only_kernel, residual_kernel;
    CUfunction relax, decide, relax_only, residual_max;
    check(CUDA_CALL(cuLibraryLoadData, &library, code.code, NULL, NULL, 0, NULL, NULL, 0),
          "loading the cubin");
    check(CUDA_CALL(cuLibraryGetKernel, &relax_kernel, library, "relax"), "getting relax");
    check(CUDA_CALL(cuLibraryGetKernel, &decide_kernel, library, "decide"), "getting decide");
    check(CUDA_CALL(cuKernelGetFunction, &relax, relax_kernel), "getting relax's function");
    check(CUDA_CALL(cuKernelGetFunction, &decide, decide_kernel), "getting decide's function");
    check(CUDA_CALL(cuLibraryGetKernel, &relax_only_kernel, library, "relax_only"),
          "getting relax_only");
    check(CUDA_CALL(cuLibraryGetKernel, &residual_kernel, library, "residual_max"),
          "getting residual_max");
    check(CUDA_CALL(cuKernelGetFunction, &relax_only, relax_only_kernel),
          "getting relax_only's function");
    check(CUDA_CALL(cuKernelGetFunction, &residual_max, residual_kernel),
          "getting residual_max's function");

    CUstream stream, body_stream;
    check(CUDA_CALL(cuStreamCreateWithPriority, &stream, CU_STREAM_NON_BLOCKING, 0),
          "creating the stream");

    /* The buffers, filled on the stream as gpurun.array and zeros do. */
    unsigned int n = (unsigned int)points;
    size_t bytes = (size_t)n * sizeof(float);
    CUdeviceptr u0, u, v, residual, steps, ticket, partials;
    unsigned int reduce_blocks = (n + 1023) / 1024 < 64 ? (n + 1023) / 1024 : 64;
    check(CUDA_CALL(cuMemAlloc, &u0, bytes), "allocating u0");
    check(CUDA_CALL(cuMemAlloc, &u, bytes), "allocating u");
    check(CUDA_CALL(cuMemAlloc, &v, bytes), "allocating v");
    check(CUDA_CALL(cuMemAlloc, &residual, sizeof(float)), "allocating the residual");
    check(CUDA_CALL(cuMemAlloc, &steps, sizeof(unsigned int)), "allocating the step count");
    check(CUDA_CALL(cuMemAlloc, &ticket, sizeof(unsigned int)), "allocating the ticket");
    check(CUDA_CALL(cuMemAlloc, &partials, reduce_blocks * sizeof(float)), "allocating partials");
    float *initial = calloc(n, sizeof *initial);
    if (!initial)
        return 1;
    initial[n - 1] = 1.0f;
    check(CUDA_CALL(cuMemcpyHtoDAsync, u0, initial, bytes, stream), "copying u0");
    check(CUDA_CALL(cuMemsetD32Async, residual, 0, 1, stream), "zeroing the residual");
    check(CUDA_CALL(cuMemsetD32Async, steps, 0, 1, stream), "zeroing the step count");
    check(CUDA_CALL(cuMemsetD32Async, ticket, 0, 1, stream), "zeroing the ticket");
    check(CUDA_CALL(cuStreamSynchronize, stream), "waiting for the copies");

    /* The capture: runtime/capture.c's calls, in bench.capture's order. */
    CUstreamCaptureMode mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    CUstreamCaptureStatus status;
    CUgraph graph = NULL, body = NULL, captured_body = NULL;
    CUstream step_stream = stream;
    body_stream = NULL;
    CUgraphConditionalHandle condition = 0;
    if (plain)
        check(CUDA_CALL(cuMemcpyDtoDAsync, u, u0, bytes, stream), "copying u <- u0");
    check(CUDA_CALL(cuStreamBeginCapture, stream, mode), "beginning the capture");
    if (!plain) {
        check(CUDA_CALL(cuMemcpyDtoDAsync, u, u0, bytes, stream), "capturing u <- u0");
        check(CUDA_CALL(cuMemsetD32Async, steps, 0, 1, stream), "capturing steps = 0");
        check(CUDA_CALL(cuStreamGetCaptureInfo, stream, &status, NULL, &graph, NULL, NULL, NULL),
              "reading the capture's graph");
        check(CUDA_CALL(cuGraphConditionalHandleCreate, &condition, graph, context, 1,
                        CU_GRAPH_COND_ASSIGN_DEFAULT), "creating the condition (default 1)");
        const CUgraphNode *dependencies = NULL;
        size_t dependency_count = 0;
        check(CUDA_CALL(cuStreamGetCaptureInfo, stream, &status, NULL, &graph, &dependencies, NULL,
                        &dependency_count), "reading the capture's dependencies");
        CUgraphNodeParams params;
        memset(&params, 0, sizeof params);
        params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
        params.conditional.handle = condition;
        params.conditional.type = CU_GRAPH_COND_TYPE_WHILE;
        params.conditional.size = 1;
        params.conditional.ctx = context;
        CUgraphNode node;
        check(CUDA_CALL(cuGraphAddNode, &node, graph, dependencies, NULL, dependency_count,
                        &params), "adding the while node");
        check(CUDA_CALL(cuStreamUpdateCaptureDependencies, stream, &node, NULL, 1,
                        CU_STREAM_SET_CAPTURE_DEPENDENCIES), "ordering after the while node");
        body = params.conditional.phGraph_out[0];

        check(CUDA_CALL(cuStreamCreateWithPriority, &body_stream, CU_STREAM_NON_BLOCKING, 0),
              "creating the body's stream");
        check(CUDA_CALL(cuStreamBeginCaptureToGraph, body_stream, body, NULL, NULL, 0, mode),
              "beginning the body's capture");
        step_stream = body_stream;
    }
    /* One step: the residual, the relaxation, u <- v (and the decision). */
    check(CUDA_CALL(cuMemsetD32Async, residual, 0, 1, step_stream), "capturing residual = 0");
    unsigned int blocks = (n + 127) / 128;
    if (reduction) {
        void *relax_args[] = {&u, &v, &n};
        check(CUDA_CALL(cuLaunchKernel, relax_only, blocks, 1, 1, 128, 1, 1, 0, step_stream,
                        relax_args, NULL), "capturing relax_only");
        void *residual_args[] = {&u, &v, &residual, &ticket, &partials, &n};
        check(CUDA_CALL(cuLaunchKernel, residual_max, reduce_blocks, 1, 1, 256, 1, 1, 0,
                        step_stream, residual_args, NULL), "capturing residual_max");
    } else {
        void *relax_args[] = {&u, &v, &residual, &n};
        check(CUDA_CALL(cuLaunchKernel, relax, blocks, 1, 1, 128, 1, 1, 0, step_stream,
                        relax_args, NULL), "capturing relax");
    }
    check(CUDA_CALL(cuMemcpyDtoDAsync, u, v, bytes, step_stream), "capturing u <- v");
    if (!plain) {
        float tol = 1e-4f;
        unsigned int max_steps = 200000;
        void *decide_args[] = {&condition, &residual, &tol, &steps, &max_steps};
        check(CUDA_CALL(cuLaunchKernel, decide, 1, 1, 1, 1, 1, 1, 0, body_stream, decide_args,
                        NULL), "capturing decide");
        check(CUDA_CALL(cuStreamEndCapture, body_stream, &captured_body),
              "ending the body's capture");
    }
    check(CUDA_CALL(cuStreamEndCapture, stream, &graph), "ending the capture");

    /* complete() and bench.capture's upload. */
    size_t node_count = 0;
    check(CUDA_CALL(cuGraphGetNodes, graph, NULL, &node_count), "counting the graph's nodes");
    CUgraphNode *nodes = calloc(node_count + 1, sizeof *nodes);
    if (!nodes)
        return 1;
    check(CUDA_CALL(cuGraphGetNodes, graph, nodes, &node_count), "listing the graph's nodes");
    for (size_t i = 0; i < node_count; i++) {
        CUgraphNodeType type;
        check(CUDA_CALL(cuGraphNodeGetType, nodes[i], &type), "reading a node's kind");
    }
    CUgraphExec exec;
    check(CUDA_CALL(cuGraphInstantiateWithFlags, &exec, graph, 0), "instantiating the graph");
    check(CUDA_CALL(cuGraphUpload, exec, stream), "uploading the graph");

    unsigned int first_steps = 0;
    for (long launch = 1; launch <= launches; launch++) {
        wait_polling(stream);
        check(CUDA_CALL(cuGraphLaunch, exec, stream), "launching the graph");
        wait_polling(stream);
        unsigned int count = 0;
        check(CUDA_CALL(cuMemcpyDtoHAsync, &count, steps, sizeof count, stream),
              "reading the step count");
        check(CUDA_CALL(cuStreamSynchronize, stream), "waiting for the step count");
        if (plain) {
            float value = 0.0f;
            check(CUDA_CALL(cuMemcpyDtoHAsync, &value, residual, sizeof value, stream),
                  "reading the residual");
            check(CUDA_CALL(cuStreamSynchronize, stream), "waiting for the residual");
            printf("launch %ld: residual %g\n", launch, value);
            continue;
        }
        printf("launch %ld: %u steps\n", launch, count);
        if (launch == 1)
            first_steps = count;
        else if (count != first_steps) {
            fprintf(stderr, "while_graph: launch %ld took %u steps, the first %u\n", launch, count,
                    first_steps);
            return 1;
        }
    }

    /* Released in gpurun's order: graph, streams, memory, library, context. */
    check(CUDA_CALL(cuGraphExecDestroy, exec), "destroying the executable graph");
    check(CUDA_CALL(cuGraphDestroy, graph), "destroying the graph");
    if (body_stream)
        check(CUDA_CALL(cuStreamDestroy, body_stream), "destroying the body's stream");
    check(CUDA_CALL(cuStreamDestroy, stream), "destroying the stream");
    CUdeviceptr pointers[] = {u0, u, v, residual, steps, ticket, partials};
    for (size_t i = 0; i < sizeof pointers / sizeof pointers[0]; i++)
        check(CUDA_CALL(cuMemFree, pointers[i]), "freeing a buffer");
    check(CUDA_CALL(cuLibraryUnload, library), "unloading the cubin");
    check(CUDA_CALL(cuDevicePrimaryCtxRelease, device), "releasing the primary context");
    free(nodes);
    free(initial);
    nvrtc_output_free(&code);
    if (plain)
        printf("while_graph: %ld launches of one step each\n", launches);
    else
        printf("while_graph: %ld launches, %u steps each\n", launches, first_steps);
    return 0;
}
