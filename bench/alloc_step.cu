/* alloc_step: bench/alloc_compare.lua's pipeline step as a plain CUDA C++
 * user would write it, the reference its "made and freed in the step" row
 * is set beside: what the driver's memory nodes cost per replay without
 * gpurun in the way. bench/alloc_compare.sh builds it with nvcc and runs it;
 * it prints one JSON object (us per step).
 *
 *   build/bench/alloc_step [--mib 1,4,16,256] [--iters 2000] [--reps 11]
 */
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <cuda_runtime.h>

#include "dag.cu"

#define BENCH_PROGRAM "alloc_step"
#include "cuda_check.h"

namespace {

struct Options {
    std::vector<long long> mib{1, 4, 16, 256};
    long long iters = 2000;
    int reps = 11;
};

[[noreturn]] void usage(const char *why)
{
    std::fprintf(stderr, "alloc_step: %s\nusage: alloc_step [--mib 1,4,16,256] [--iters N] [--reps N]\n",
                 why);
    std::exit(2);
}

long long positive(const char *text, long long max, const char *what)
{
    char *end = nullptr;
    long long value = std::strtoll(text, &end, 10);
    if (end == text || *end != '\0' || value < 1 || value > max) {
        std::fprintf(stderr, "alloc_step: %s expects an integer from 1 to %lld, got '%s'\n", what, max,
                     text);
        std::exit(2);
    }
    return value;
}

Options parse(int argc, char **argv)
{
    Options options;
    for (int i = 1; i < argc; i++) {
        const char *value = i + 1 < argc ? argv[i + 1] : nullptr;
        if (!value)
            usage("unknown option or missing value");
        if (std::strcmp(argv[i], "--mib") == 0) {
            options.mib.clear();
            std::string list = value;
            for (size_t start = 0; start <= list.size();) {
                size_t comma = list.find(',', start);
                if (comma == std::string::npos)
                    comma = list.size();
                options.mib.push_back(positive(list.substr(start, comma - start).c_str(), 4096, "--mib"));
                start = comma + 1;
            }
        } else if (std::strcmp(argv[i], "--iters") == 0) {
            options.iters = positive(value, 1000000, "--iters");
        } else if (std::strcmp(argv[i], "--reps") == 0) {
            options.reps = (int)positive(value, 1000, "--reps");
        } else {
            usage("unknown option or missing value");
        }
        i++;
    }
    return options;
}

double seconds()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Step {
    size_t elements;
    unsigned grid;
    float *a, *r;
};

// The step's four kernels, scale, shift, scale, combine (dag.cu, the one
// copy the Lua side compiles too), on float32 temporaries t1 and t2,
// captured into a graph one of two ways:
//   up front   the two temporaries made with cudaMalloc before the capture
//   in graph   cudaMallocAsync / cudaFreeAsync on the capturing stream,
//              which become 2 allocation and 2 free nodes (t2 made after t1
//              is freed, as the Lua step)
void capture_step(cudaStream_t stream, const Step &step, float *t1, float *t2, bool in_graph)
{
    size_t bytes = step.elements * sizeof(float);
    if (in_graph)
        CHECK(cudaMallocAsync((void **)&t1, bytes, stream));
    scale<<<step.grid, 256, 0, stream>>>(step.a, t1, 2.0f, step.elements);
    shift<<<step.grid, 256, 0, stream>>>(t1, step.r, 1.0f, step.elements);
    if (in_graph) {
        CHECK(cudaFreeAsync(t1, stream));
        CHECK(cudaMallocAsync((void **)&t2, bytes, stream));
    }
    scale<<<step.grid, 256, 0, stream>>>(step.r, t2, 0.5f, step.elements);
    combine<<<step.grid, 256, 0, stream>>>(t2, step.a, step.r, step.elements);
    if (in_graph)
        CHECK(cudaFreeAsync(t2, stream));
}

// The graph uploaded, launched 20 times, then timed: `iters` launches from
// one stream synchronisation to the next, once per rep (us per launch;
// bench/alloc_compare.lua prints the median over the --reps reps).
std::vector<double> time_graph(cudaStream_t stream, cudaGraphExec_t graph, long long iters, int reps)
{
    CHECK(cudaGraphUpload(graph, stream));
    for (int i = 0; i < 20; i++)
        CHECK(cudaGraphLaunch(graph, stream));
    CHECK(cudaStreamSynchronize(stream));
    std::vector<double> us;
    for (int rep = 0; rep < reps; rep++) {
        double start = seconds();
        for (long long i = 0; i < iters; i++)
            CHECK(cudaGraphLaunch(graph, stream));
        CHECK(cudaStreamSynchronize(stream));
        us.push_back((seconds() - start) * 1e6 / (double)iters);
    }
    return us;
}

void print_list(const std::vector<double> &values)
{
    for (size_t k = 0; k < values.size(); k++)
        std::printf("%s%.4f", k ? ", " : "", values[k]);
}

} // namespace

int main(int argc, char **argv)
{
    Options options = parse(argc, argv);
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaDeviceProp properties;
    CHECK(cudaGetDeviceProperties(&properties, 0));
    std::printf("{\"device\": \"%s\", \"reps\": %d, \"results\": [", properties.name, options.reps);
    for (size_t s = 0; s < options.mib.size(); s++) {
        long long mib = options.mib[s];
        Step step;
        step.elements = (size_t)mib * (1 << 20) / sizeof(float);
        step.grid = (unsigned)((step.elements + 255) / 256);
        float *t1, *t2;
        CHECK(cudaMalloc((void **)&step.a, step.elements * sizeof(float)));
        CHECK(cudaMalloc((void **)&step.r, step.elements * sizeof(float)));
        CHECK(cudaMalloc((void **)&t1, step.elements * sizeof(float)));
        CHECK(cudaMalloc((void **)&t2, step.elements * sizeof(float)));
        CHECK(cudaMemset(step.a, 0, step.elements * sizeof(float)));
        // --iters divided by the size in MiB over 4 for the larger sizes (at
        // least 20), as the Lua step's large size is.
        long long iters = mib > 4 ? std::max(20LL, options.iters * 4 / mib) : options.iters;
        std::printf("%s{\"mib\": %lld, \"iters\": %lld", s ? ", " : "", mib, iters);
        for (int in_graph = 0; in_graph < 2; in_graph++) {
            cudaGraph_t graph;
            cudaGraphExec_t exec;
            CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
            capture_step(stream, step, t1, t2, in_graph);
            CHECK(cudaStreamEndCapture(stream, &graph));
            CHECK(cudaGraphInstantiate(&exec, graph, 0));
            std::printf(", \"%s\": [", in_graph ? "in_graph_us" : "up_front_us");
            print_list(time_graph(stream, exec, iters, options.reps));
            std::printf("]");
            CHECK(cudaGraphExecDestroy(exec));
            CHECK(cudaGraphDestroy(graph));
        }
        std::printf("}");
        CHECK(cudaFree(step.a));
        CHECK(cudaFree(step.r));
        CHECK(cudaFree(t1));
        CHECK(cudaFree(t2));
    }
    std::printf("]}\n");
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
