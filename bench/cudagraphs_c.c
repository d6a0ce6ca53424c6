/* cudagraphs_c: the pure-C reference that bench/compare.lua holds gpurun to:
 * the pipeline of scripts/cudagraphs.lua, r1 = a + b, r2 = r1 * c,
 * r3 = r2 - a (float32), straight on the CUDA Driver API and NVRTC, timed as
 * three cuLaunchKernel calls per iteration and as one cuGraphLaunch of a
 * graph captured from them; docs/benchmark.md says how.
 *
 *   cudagraphs_c [--elements N] [--iters N] [--reps R] [--json] [--library]
 *                [--cpu-launch N] [--per-graph K,...]
 *
 * Exit codes: 0 success, 1 a CUDA/NVRTC failure or a wrong result, 2 usage. */
#define _POSIX_C_SOURCE 200809L  /* clock_gettime under a strict -std=c11 too */

#define BENCH_PROGRAM "cudagraphs_c"

#include <errno.h>
#include <inttypes.h>
#include <math.h>

#include <nvrtc.h>

#include "bench_common.h"

#define WARMUP_ITERATIONS 5
#define BLOCK_SIZE 256

/* lua/gpurun/samples/kernels/cudagraphs.cu and busy.cu, embedded by CMake: the
 * same text bench/compare.lua and scripts/cudagraphs.lua compile. */
#include "bench_kernels.h"

/* ---- error checks --------------------------------------------------------- */

static void die_nvrtc(const char *call, nvrtcResult result)
{
    fprintf(stderr, "cudagraphs_c: %s: %s\n", call, nvrtcGetErrorString(result));
    exit(1);
}

#define NVRTC(name, ...)                                                     \
    do {                                                                     \
        nvrtcResult nvrtc_result_ = name(__VA_ARGS__);                       \
        if (nvrtc_result_ != NVRTC_SUCCESS)                                  \
            die_nvrtc(#name, nvrtc_result_);                                 \
    } while (0)

/* ---- options -------------------------------------------------------------- */

struct options {
    size_t elements;
    unsigned long iters;
    unsigned long reps;
    int json;
    int library;
    unsigned long cpu_launches; /* --cpu-launch N: time N launches' CPU cost instead */
    const char *per_graph;      /* --per-graph 1,10,100: graphs of K passes, plain and PDL */
};

#define USAGE_LINE "usage: cudagraphs_c [--elements N] [--iters N] [--reps R] [--json] [--library] [--cpu-launch N] [--per-graph K,...]\n"

static void usage_error(void)
{
    fputs(USAGE_LINE, stderr);
    exit(2);
}

static void usage(void)
{
    printf(USAGE_LINE
           "  --elements N  float32 elements per buffer (default 4096)\n"
           "  --iters N     timed iterations per path and rep (default 1000)\n"
           "  --reps R      times each path is re-timed (default 7, at most %d)\n"
           "  --json        one JSON object: elements, iters, reps, device, launch_api,\n"
           "                individual_us[] and graph_us[] (one figure per rep)\n"
           "  --library     load with cuLibraryLoadData and launch CUkernel handles, as gpurun does\n"
           "  --cpu-launch N  instead, per rep: hold the GPU busy with one long kernel, then time\n"
           "                N launches of vec_add (and N graph launches) on the CPU alone;\n"
           "                --json gives launch_ns[] and graph_ns[] (ns per launch, one per rep)\n"
           "  --per-graph K,...  also time graphs of K passes of the pipeline, with plain\n"
           "                launches and with programmatic dependent launch (cudagraphs_pdl.cu);\n"
           "                --json adds per_graph: [{k, pdl, us[]}] (us per pipeline iteration)\n",
           MAX_REPS);
}

static unsigned long long parse_count(const char *option, const char *text, unsigned long long max)
{
    char *end = NULL;
    errno = 0;
    unsigned long long value = text[0] == '-' ? 0 : strtoull(text, &end, 10);
    if (text[0] == '-' || errno != 0 || end == text || *end != '\0' || value == 0 || value > max) {
        fprintf(stderr, "cudagraphs_c: %s expects an integer from 1 to %llu, got '%s'\n",
                option, max, text);
        usage_error();
    }
    return value;
}

static struct options parse_options(int argc, char **argv)
{
    struct options options = {4096, 1000, 7, 0, 0, 0, NULL};
    for (int i = 1; i < argc; i++) {
        const char *option = argv[i];
        if (strcmp(option, "--json") == 0) {
            options.json = 1;
        } else if (strcmp(option, "--library") == 0) {
            options.library = 1;
        } else if (strcmp(option, "--per-graph") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cudagraphs_c: --per-graph needs a value\n");
                usage_error();
            }
            options.per_graph = argv[++i];
        } else if (strcmp(option, "--help") == 0 || strcmp(option, "-h") == 0) {
            usage();
            exit(0);
        } else if (strcmp(option, "--elements") == 0 || strcmp(option, "--iters") == 0 ||
                   strcmp(option, "--reps") == 0 || strcmp(option, "--cpu-launch") == 0) {
            if (i + 1 >= argc) {
                fprintf(stderr, "cudagraphs_c: %s needs a value\n", option);
                usage_error();
            }
            const char *value = argv[++i];
            if (option[2] == 'e')  /* grid = elements / 256 must fit an unsigned int */
                options.elements = parse_count(option, value, (unsigned long long)UINT32_MAX * BLOCK_SIZE);
            else if (option[2] == 'i')
                options.iters = parse_count(option, value, 1000000000ULL);
            else if (option[2] == 'c')  /* more would fill the launch queue and block */
                options.cpu_launches = parse_count(option, value, 1000ULL);
            else
                options.reps = parse_count(option, value, MAX_REPS);
        } else {
            fprintf(stderr, "cudagraphs_c: unknown option '%s'\n", option);
            usage_error();
        }
    }
    return options;
}

/* ---- setup ---------------------------------------------------------------- */

static char *compile_cubin(CUdevice device, const char *source, const char *name)
{
    int major = 0, minor = 0;
    CU(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    CU(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    char arch_option[64];
    snprintf(arch_option, sizeof arch_option, "--gpu-architecture=sm_%d%d", major, minor);
    const char *compile_options[] = {"--std=c++17", arch_option,
                                     "--include-path=" CUDA_INCLUDE_DIR};

    nvrtcProgram program;
    NVRTC(nvrtcCreateProgram, &program, source, name, 0, NULL, NULL);
    nvrtcResult compiled = nvrtcCompileProgram(program, 3, compile_options);
    if (compiled != NVRTC_SUCCESS) {
        size_t log_size = 0;
        NVRTC(nvrtcGetProgramLogSize, program, &log_size);
        char *log = malloc(log_size + 1);
        if (log != NULL) {
            NVRTC(nvrtcGetProgramLog, program, log);
            log[log_size] = '\0';
            fprintf(stderr, "%s\n", log);
        }
        die_nvrtc("nvrtcCompileProgram", compiled);
    }
    size_t cubin_size = 0;
    NVRTC(nvrtcGetCUBINSize, program, &cubin_size);
    char *cubin = malloc(cubin_size);
    if (cubin == NULL) {
        fprintf(stderr, "cudagraphs_c: out of host memory for a %zu-byte cubin\n", cubin_size);
        exit(1);
    }
    NVRTC(nvrtcGetCUBIN, program, cubin);
    NVRTC(nvrtcDestroyProgram, &program);
    return cubin;
}

struct kernels {
    CUfunction add, mul, sub, busy;
    CUfunction pdl_add, pdl_mul, pdl_sub; /* cudagraphs_pdl.cu's */
};

static CUfunction load_busy(CUdevice device)
{
    char *cubin = compile_cubin(device, BUSY_SOURCE, "busy.cu");
    CUmodule module;
    CUfunction busy;
    CU(cuModuleLoadData, &module, cubin);
    CU(cuModuleGetFunction, &busy, module, "busy");
    free(cubin);
    return busy;
}

static void load_pdl(CUdevice device, struct kernels *kernels)
{
    char *cubin = compile_cubin(device, CUDAGRAPHS_PDL_SOURCE, "cudagraphs_pdl.cu");
    CUmodule module;
    CU(cuModuleLoadData, &module, cubin);
    CU(cuModuleGetFunction, &kernels->pdl_add, module, "pdl_vec_add");
    CU(cuModuleGetFunction, &kernels->pdl_mul, module, "pdl_vec_mul");
    CU(cuModuleGetFunction, &kernels->pdl_sub, module, "pdl_vec_sub");
    free(cubin);
}

/* With --library, the cubin loaded with cuLibraryLoadData and the CUkernel
 * handles launched, the way gpurun does, instead of cuModuleLoadData and
 * CUfunction: it tells a cost of that launch path apart from a cost of the
 * Lua layer. */
static struct kernels load_kernels(const char *cubin, int library)
{
    struct kernels kernels = {0};
    if (library) {
        CUlibrary loaded;
        CUkernel add, mul, sub;
        CU(cuLibraryLoadData, &loaded, cubin, NULL, NULL, 0, NULL, NULL, 0);
        CU(cuLibraryGetKernel, &add, loaded, "vec_add");
        CU(cuLibraryGetKernel, &mul, loaded, "vec_mul");
        CU(cuLibraryGetKernel, &sub, loaded, "vec_sub");
        /* cuLaunchKernel takes a CUkernel cast to CUfunction, as gpurun passes it. */
        kernels.add = (CUfunction)add;
        kernels.mul = (CUfunction)mul;
        kernels.sub = (CUfunction)sub;
    } else {
        CUmodule module;
        CU(cuModuleLoadData, &module, cubin);
        CU(cuModuleGetFunction, &kernels.add, module, "vec_add");
        CU(cuModuleGetFunction, &kernels.mul, module, "vec_mul");
        CU(cuModuleGetFunction, &kernels.sub, module, "vec_sub");
    }
    return kernels;
}

/* ---- the pipeline --------------------------------------------------------- */

struct pipeline {
    struct kernels kernels;
    CUstream stream;
    unsigned int grid;
    size_t elements;
    CUdeviceptr a, b, c, r1, r2, r3;
    /* Kernel parameter arrays, built once: they point at the fields above,
     * whose values cuLaunchKernel copies at each call. */
    void *add_args[4], *mul_args[4], *sub_args[4];
};

static void set_launch_arguments(struct pipeline *p)
{
    void *add_args[] = {&p->a, &p->b, &p->r1, &p->elements};
    void *mul_args[] = {&p->r1, &p->c, &p->r2, &p->elements};
    void *sub_args[] = {&p->r2, &p->a, &p->r3, &p->elements};
    memcpy(p->add_args, add_args, sizeof add_args);
    memcpy(p->mul_args, mul_args, sizeof mul_args);
    memcpy(p->sub_args, sub_args, sizeof sub_args);
}

static void launch_three(struct pipeline *p)
{
    CU(cuLaunchKernel, p->kernels.add, p->grid, 1, 1, BLOCK_SIZE, 1, 1, 0, p->stream, p->add_args, NULL);
    CU(cuLaunchKernel, p->kernels.mul, p->grid, 1, 1, BLOCK_SIZE, 1, 1, 0, p->stream, p->mul_args, NULL);
    CU(cuLaunchKernel, p->kernels.sub, p->grid, 1, 1, BLOCK_SIZE, 1, 1, 0, p->stream, p->sub_args, NULL);
}

/* One pass with programmatic dependent launch: each kernel may start while
 * the one before it runs, and waits for it on the device. */
static void launch_three_pdl(struct pipeline *p)
{
    CUlaunchAttribute attribute;
    memset(&attribute, 0, sizeof attribute);
    attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
    attribute.value.programmaticStreamSerializationAllowed = 1;
    CUlaunchConfig config;
    memset(&config, 0, sizeof config);
    config.gridDimX = p->grid;
    config.gridDimY = config.gridDimZ = 1;
    config.blockDimX = BLOCK_SIZE;
    config.blockDimY = config.blockDimZ = 1;
    config.hStream = p->stream;
    config.attrs = &attribute;
    config.numAttrs = 1;
    CU(cuLaunchKernelEx, &config, p->kernels.pdl_add, p->add_args, NULL);
    CU(cuLaunchKernelEx, &config, p->kernels.pdl_mul, p->mul_args, NULL);
    CU(cuLaunchKernelEx, &config, p->kernels.pdl_sub, p->sub_args, NULL);
}

/* Each path is timed with CLOCK_MONOTONIC from a cuStreamSynchronize to a
 * cuStreamSynchronize after WARMUP_ITERATIONS, so the figure is host-side
 * launch cost plus GPU time, as gpurun's Lua loops see it: us per iteration. */
static double time_individual(struct pipeline *p, unsigned long iters)
{
    for (int i = 0; i < WARMUP_ITERATIONS; i++)
        launch_three(p);
    CU(cuStreamSynchronize, p->stream);
    double start = now_seconds();
    for (unsigned long i = 0; i < iters; i++)
        launch_three(p);
    CU(cuStreamSynchronize, p->stream);
    return (now_seconds() - start) * 1e6 / (double)iters;
}

static double time_graph(const struct pipeline *p, CUgraphExec graph, unsigned long iters)
{
    for (int i = 0; i < WARMUP_ITERATIONS; i++)
        CU(cuGraphLaunch, graph, p->stream);
    CU(cuStreamSynchronize, p->stream);
    double start = now_seconds();
    for (unsigned long i = 0; i < iters; i++)
        CU(cuGraphLaunch, graph, p->stream);
    CU(cuStreamSynchronize, p->stream);
    return (now_seconds() - start) * 1e6 / (double)iters;
}

static CUgraphExec capture_graph(struct pipeline *p)
{
    CUgraph graph;
    CUgraphExec executable;
    CU(cuStreamBeginCapture, p->stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    launch_three(p);
    CU(cuStreamEndCapture, p->stream, &graph);
    CU(cuGraphInstantiate, &executable, graph, 0);
    CU(cuGraphDestroy, graph);
    CU(cuGraphUpload, executable, p->stream);
    return executable;
}

/* ---- CPU cost per launch -------------------------------------------------- */

/* Launches the busy kernel for about 20 ms of GPU time: everything launched
 * behind it queues, so timing those launches times the CPU alone. */
static void hold_gpu(const struct pipeline *p, long long cycles)
{
    void *args[] = {&cycles};
    CU(cuLaunchKernel, p->kernels.busy, 1, 1, 1, 1, 1, 1, 0, p->stream, args, NULL);
}

/* Nanoseconds per launch of `count` launches queued behind the busy kernel;
 * *overlapped is cleared when the busy kernel had finished before the last
 * launch, which would make the figure include waiting. */
static double time_cpu_launches(struct pipeline *p, CUgraphExec graph, unsigned long count,
                                long long cycles, int *overlapped)
{
    CU(cuStreamSynchronize, p->stream);
    hold_gpu(p, cycles);
    double start = now_seconds();
    for (unsigned long i = 0; i < count; i++) {
        if (graph)
            CU(cuGraphLaunch, graph, p->stream);
        else
            CU(cuLaunchKernel, p->kernels.add, p->grid, 1, 1, BLOCK_SIZE, 1, 1, 0, p->stream,
               p->add_args, NULL);
    }
    double seconds = now_seconds() - start;
    if (cuStreamQuery(p->stream) != CUDA_ERROR_NOT_READY)
        *overlapped = 0;
    CU(cuStreamSynchronize, p->stream);
    return seconds * 1e9 / (double)count;
}

/* A graph of `passes` passes of the pipeline, plain or with PDL. */
static CUgraphExec capture_passes(struct pipeline *p, unsigned long passes, int pdl)
{
    CUgraph graph;
    CUgraphExec executable;
    CU(cuStreamBeginCapture, p->stream, CU_STREAM_CAPTURE_MODE_GLOBAL);
    for (unsigned long i = 0; i < passes; i++) {
        if (pdl)
            launch_three_pdl(p);
        else
            launch_three(p);
    }
    CU(cuStreamEndCapture, p->stream, &graph);
    CU(cuGraphInstantiate, &executable, graph, 0);
    CU(cuGraphDestroy, graph);
    CU(cuGraphUpload, executable, p->stream);
    return executable;
}

/* Inputs vary per element so that a kernel reading the wrong index fails the
 * check; the values are exact in float32 and so is every intermediate. */
static float input_a(size_t i) { return (float)(i % 1024) * 0.25f; }
static float input_b(size_t i) { return (float)(i % 7) + 0.5f; }
static float input_c(size_t i) { return (float)(i % 5) - 2.0f; }

static void upload(CUdeviceptr target, float (*value)(size_t), float *host, size_t elements)
{
    for (size_t i = 0; i < elements; i++)
        host[i] = value(i);
    CU(cuMemcpyHtoD, target, host, elements * sizeof(float));
}

static void verify(const struct pipeline *p, float *host, const char *path)
{
    CU(cuStreamSynchronize, p->stream);
    CU(cuMemcpyDtoH, host, p->r3, p->elements * sizeof(float));
    for (size_t i = 0; i < p->elements; i++) {
        float expected = (input_a(i) + input_b(i)) * input_c(i) - input_a(i);
        if (!(fabsf(host[i] - expected) <= 1e-5f + 1e-5f * fabsf(expected))) {
            fprintf(stderr, "cudagraphs_c: wrong result after %s: r3[%zu] = %.9g, expected %.9g\n",
                    path, i, (double)host[i], (double)expected);
            exit(1);
        }
    }
}

/* Sets r1, r2, r3 to NaN, so a check after one run only passes if that run
 * wrote every element. */
static void poison_results(const struct pipeline *p)
{
    const unsigned int quiet_nan = 0x7fc00000u;
    CU(cuMemsetD32Async, p->r1, quiet_nan, p->elements, p->stream);
    CU(cuMemsetD32Async, p->r2, quiet_nan, p->elements, p->stream);
    CU(cuMemsetD32Async, p->r3, quiet_nan, p->elements, p->stream);
}

/* ---- report --------------------------------------------------------------- */

static void print_json_array(const char *key, const double *values, unsigned long count)
{
    printf("\"%s\":[", key);
    for (unsigned long i = 0; i < count; i++)
        printf("%s%.4f", i ? "," : "", values[i]);
    printf("]");
}

static void print_json_string(const char *key, const char *value)
{
    printf("\"%s\":\"", key);
    for (const char *c = value; *c; c++) {
        if (*c == '"' || *c == '\\')
            putchar('\\');
        if ((unsigned char)*c >= 0x20)
            putchar(*c);
    }
    printf("\"");
}

int main(int argc, char **argv)
{
    struct options options = parse_options(argc, argv);

    char device_name[256];
    CUdevice device = open_device(device_name, sizeof device_name);

    char *cubin = compile_cubin(device, CUDAGRAPHS_SOURCE, "cudagraphs.cu");
    struct pipeline p = {0};
    p.kernels = load_kernels(cubin, options.library);
    free(cubin);
    p.kernels.busy = load_busy(device);
    p.elements = options.elements;
    p.grid = (unsigned int)((options.elements + BLOCK_SIZE - 1) / BLOCK_SIZE);
    CU(cuStreamCreate, &p.stream, CU_STREAM_NON_BLOCKING);
    set_launch_arguments(&p);

    size_t bytes = options.elements * sizeof(float);
    CUdeviceptr *buffers[] = {&p.a, &p.b, &p.c, &p.r1, &p.r2, &p.r3};
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
        CU(cuMemAlloc, buffers[i], bytes);
    float *host = malloc(bytes);
    if (host == NULL) {
        fprintf(stderr, "cudagraphs_c: out of host memory for %zu bytes\n", bytes);
        return 1;
    }
    upload(p.a, input_a, host, p.elements);
    upload(p.b, input_b, host, p.elements);
    upload(p.c, input_c, host, p.elements);

    poison_results(&p);
    launch_three(&p);
    verify(&p, host, "individual launches");
    CUgraphExec graph = capture_graph(&p);
    poison_results(&p);
    CU(cuGraphLaunch, graph, p.stream);
    verify(&p, host, "a graph launch");

    if (options.cpu_launches) {
        int clock_khz = 0, overlapped = 1;
        CU(cuDeviceGetAttribute, &clock_khz, CU_DEVICE_ATTRIBUTE_CLOCK_RATE, device);
        long long cycles = (long long)clock_khz * 20; /* 20 ms */
        double launch_ns[MAX_REPS], graph_ns[MAX_REPS];
        for (unsigned long rep = 0; rep < options.reps; rep++) {
            launch_ns[rep] = time_cpu_launches(&p, NULL, options.cpu_launches, cycles, &overlapped);
            graph_ns[rep] = time_cpu_launches(&p, graph, options.cpu_launches, cycles, &overlapped);
        }
        if (options.json) {
            printf("{\"launches\":%lu,\"reps\":%lu,\"gpu_stayed_busy\":%s,", options.cpu_launches,
                   options.reps, overlapped ? "true" : "false");
            print_json_array("launch_ns", launch_ns, options.reps);
            printf(",");
            print_json_array("graph_ns", graph_ns, options.reps);
            printf("}\n");
        } else {
            printf("%s: CPU time per launch with the GPU busy, median of %lu reps of %lu: "
                   "cuLaunchKernel %.1f ns, cuGraphLaunch %.1f ns%s\n", device_name, options.reps,
                   options.cpu_launches, median(launch_ns, options.reps),
                   median(graph_ns, options.reps),
                   overlapped ? "" : " (the GPU went idle during a rep: figures include waiting)");
        }
        options.reps = 0;
    }

    if (options.per_graph) {
        load_pdl(device, &p.kernels);
        if (options.json)
            printf("{\"elements\":%zu,\"iters\":%lu,\"reps\":%lu,\"per_graph\":[", options.elements,
                   options.iters, options.reps);
        int first = 1;
        for (const char *item = options.per_graph; *item;) {
            char *end = NULL;
            unsigned long passes = strtoul(item, &end, 10);
            if (end == item || passes == 0 || passes > 10000) {
                fprintf(stderr, "cudagraphs_c: --per-graph expects counts from 1 to 10000, got '%s'\n",
                        options.per_graph);
                exit(2);
            }
            item = *end == ',' ? end + 1 : end;
            for (int pdl = 0; pdl <= 1; pdl++) {
                CUgraphExec batch = capture_passes(&p, passes, pdl);
                poison_results(&p);
                CU(cuGraphLaunch, batch, p.stream);
                verify(&p, host, pdl ? "a graph of PDL passes" : "a graph of passes");
                unsigned long launches = (options.iters + passes - 1) / passes;
                double us[MAX_REPS];
                for (unsigned long rep = 0; rep < options.reps; rep++)
                    us[rep] = time_graph(&p, batch, launches) / (double)passes;
                CU(cuGraphExecDestroy, batch);
                if (options.json) {
                    printf("%s{\"k\":%lu,\"pdl\":%s,", first ? "" : ",", passes, pdl ? "true" : "false");
                    print_json_array("us", us, options.reps);
                    printf("}");
                } else {
                    printf("%lu per graph%s: %.3f us/iter (median of %lu reps)\n", passes,
                           pdl ? " with PDL" : "", median(us, options.reps), options.reps);
                }
                first = 0;
            }
        }
        if (options.json)
            printf("]}\n");
        options.reps = 0;
        options.cpu_launches = 1; /* nothing else is reported */
    }

    double individual_us[MAX_REPS], graph_us[MAX_REPS];
    for (unsigned long rep = 0; rep < options.reps; rep++) {
        individual_us[rep] = time_individual(&p, options.iters);
        graph_us[rep] = time_graph(&p, graph, options.iters);
        if (!options.json)
            printf("rep %lu: individual %.3f us/iter, graph %.3f us/iter\n",
                   rep + 1, individual_us[rep], graph_us[rep]);
    }

    if (options.cpu_launches) {
        /* reported above */
    } else if (options.json) {
        printf("{\"elements\":%zu,\"iters\":%lu,\"reps\":%lu,", options.elements, options.iters,
               options.reps);
        print_json_string("device", device_name);
        printf(",\"launch_api\":\"%s\",", options.library ? "cuLibrary" : "cuModule");
        print_json_array("individual_us", individual_us, options.reps);
        printf(",");
        print_json_array("graph_us", graph_us, options.reps);
        printf("}\n");
    } else {
        printf("%s, %zu elements, %lu iterations x %lu reps, median: "
               "individual %.3f us/iter, graph %.3f us/iter\n",
               device_name, options.elements, options.iters, options.reps,
               median(individual_us, options.reps), median(graph_us, options.reps));
    }

    free(host);
    CU(cuGraphExecDestroy, graph);
    for (size_t i = 0; i < sizeof buffers / sizeof *buffers; i++)
        CU(cuMemFree, *buffers[i]);
    CU(cuStreamDestroy, p.stream);
    CU(cuDevicePrimaryCtxRelease, device);
    return 0;
}
