/* reduce_cub: CUB's device-wide algorithms on the operations of
 * bench/reduce.lua, as a plain CUDA C++ user would call them, each
 * captured into a CUDA graph and the graph launched, for
 * bench/reduce_compare.sh (which builds it with nvcc); one JSON object out.
 *
 *   build/bench/reduce_cub [--sizes 4096,65536,...] [--reps 15] [--seconds 0.1]
 */
#include <cub/device/device_reduce.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda/std/functional>
#include <thrust/iterator/counting_iterator.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#define BENCH_PROGRAM "reduce_cub"
#include "cuda_check.h"

namespace {

const int WARMUP = 5, MIN_ITERS = 10, MAX_ITERS = 5000;

struct Options {
    std::vector<long long> sizes{4096, 65536, 1 << 20, 1 << 24, 1 << 26};
    int reps = 15;
    double seconds = 0.1;
};

double now()
{
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// One element of the fused map: ((a + b) * c - a)^2, read once each.
struct Squared {
    const float *a, *b, *c;
    __device__ float operator()(long long i) const
    {
        float r = (a[i] + b[i]) * c[i] - a[i];
        return r * r;
    }
};

__global__ void fill(float *x, long long n, float value, float step)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        x[i] = value + step * (float)(i % 1024);
}

// The median us per launch of `graph`, as bench/reduce.lua times gpurun's:
// from a stream synchronisation to another after warm-up, the median over
// --reps repetitions of enough iterations for about --seconds (10 to 5000).
double time_graph(cudaGraphExec_t graph, cudaStream_t stream, const Options &options)
{
    for (int i = 0; i < WARMUP; i++)
        CHECK(cudaGraphLaunch(graph, stream));
    CHECK(cudaStreamSynchronize(stream));
    double start = now();
    for (int i = 0; i < MIN_ITERS; i++)
        CHECK(cudaGraphLaunch(graph, stream));
    CHECK(cudaStreamSynchronize(stream));
    double per_iter = std::max((now() - start) / MIN_ITERS, 1e-7);
    int iters = (int)std::min<double>(MAX_ITERS, std::max<double>(MIN_ITERS, std::ceil(options.seconds / per_iter)));
    std::vector<double> runs;
    for (int rep = 0; rep < options.reps; rep++) {
        CHECK(cudaStreamSynchronize(stream));
        start = now();
        for (int i = 0; i < iters; i++)
            CHECK(cudaGraphLaunch(graph, stream));
        CHECK(cudaStreamSynchronize(stream));
        runs.push_back((now() - start) * 1e6 / iters);
    }
    std::sort(runs.begin(), runs.end());
    size_t m = runs.size() / 2;
    return runs.size() % 2 ? runs[m] : (runs[m - 1] + runs[m]) / 2;
}

// Captures step(stream) into a graph, instantiates it and times it.
template <typename Step>
double time_captured(cudaStream_t stream, const Options &options, Step step)
{
    cudaGraph_t graph;
    cudaGraphExec_t exec;
    step(stream); // warm: CUB's first call may do one-time work
    CHECK(cudaStreamSynchronize(stream));
    CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    step(stream);
    CHECK(cudaStreamEndCapture(stream, &graph));
    CHECK(cudaGraphInstantiate(&exec, graph, 0));
    double us = time_graph(exec, stream, options);
    CHECK(cudaGraphExecDestroy(exec));
    CHECK(cudaGraphDestroy(graph));
    return us;
}

// Temporary storage that CUB asks for, made before the capture.
void *temporaries(size_t bytes)
{
    void *p = nullptr;
    CHECK(cudaMalloc(&p, std::max<size_t>(bytes, 1)));
    return p;
}

Options parse(int argc, char **argv)
{
    Options options;
    for (int i = 1; i < argc; i++) {
        if (std::strcmp(argv[i], "--sizes") == 0 && i + 1 < argc) {
            options.sizes.clear();
            std::string list = argv[++i];
            size_t at = 0;
            while (at <= list.size()) {
                size_t comma = list.find(',', at);
                if (comma == std::string::npos)
                    comma = list.size();
                long long n = std::atoll(list.substr(at, comma - at).c_str());
                if (n <= 0) {
                    std::fprintf(stderr, "reduce_cub: --sizes: positive integers expected\n");
                    std::exit(2);
                }
                options.sizes.push_back(n);
                at = comma + 1;
            }
        } else if (std::strcmp(argv[i], "--reps") == 0 && i + 1 < argc) {
            options.reps = std::max(1, std::atoi(argv[++i]));
        } else if (std::strcmp(argv[i], "--seconds") == 0 && i + 1 < argc) {
            options.seconds = std::atof(argv[++i]);
        } else {
            std::fprintf(stderr, "usage: reduce_cub [--sizes N,N,...] [--reps N] [--seconds S]\n");
            std::exit(2);
        }
    }
    return options;
}

} // namespace

// The paths at each size:
//   sum      cub::DeviceReduce::Sum of float32 into one float32
//   argmax   cub::DeviceReduce::ArgMax of float32 (the value and its index)
//   fused    cub::DeviceReduce::TransformReduce of ((a + b) * c - a)^2 over
//            a counting iterator (a, b and c read once), into one float32
//   scan     cub::DeviceScan::InclusiveSum of float32
int main(int argc, char **argv)
{
    Options options = parse(argc, argv);
    cudaDeviceProp properties;
    CHECK(cudaGetDeviceProperties(&properties, 0));
    cudaStream_t stream;
    CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    std::printf("{\"device\": \"%s\", \"cub_version\": %d, \"reps\": %d, \"sizes\": [", properties.name,
                CUB_VERSION, options.reps);
    for (size_t s = 0; s < options.sizes.size(); s++) {
        long long n = options.sizes[s];
        float *a, *b, *c, *y, *sum, *best;
        long long *best_at;
        CHECK(cudaMalloc(&a, n * sizeof(float)));
        CHECK(cudaMalloc(&b, n * sizeof(float)));
        CHECK(cudaMalloc(&c, n * sizeof(float)));
        CHECK(cudaMalloc(&y, n * sizeof(float)));
        CHECK(cudaMalloc(&sum, sizeof(float)));
        CHECK(cudaMalloc(&best, sizeof *best));
        CHECK(cudaMalloc(&best_at, sizeof *best_at));
        fill<<<1024, 256, 0, stream>>>(a, n, 1.5f, 0.0f);
        fill<<<1024, 256, 0, stream>>>(b, n, 2.25f, 0.0f);
        fill<<<1024, 256, 0, stream>>>(c, n, 0.5f, 1e-6f);
        CHECK(cudaGetLastError());

        size_t bytes = 0;
        CHECK(cub::DeviceReduce::Sum(nullptr, bytes, a, sum, n, stream));
        void *sum_temp = temporaries(bytes);
        size_t sum_bytes = bytes;
        double sum_us = time_captured(stream, options, [&](cudaStream_t st) {
            CHECK(cub::DeviceReduce::Sum(sum_temp, sum_bytes, a, sum, n, st));
        });

        bytes = 0;
        CHECK(cub::DeviceReduce::ArgMax(nullptr, bytes, c, best, best_at, n, stream));
        void *arg_temp = temporaries(bytes);
        size_t arg_bytes = bytes;
        double argmax_us = time_captured(stream, options, [&](cudaStream_t st) {
            CHECK(cub::DeviceReduce::ArgMax(arg_temp, arg_bytes, c, best, best_at, n, st));
        });

        thrust::counting_iterator<long long> index(0);
        Squared squared{a, b, c};
        bytes = 0;
        CHECK(cub::DeviceReduce::TransformReduce(nullptr, bytes, index, sum, n, cuda::std::plus<float>(),
                                                 squared, 0.0f, stream));
        void *fused_temp = temporaries(bytes);
        size_t fused_bytes = bytes;
        double fused_us = time_captured(stream, options, [&](cudaStream_t st) {
            CHECK(cub::DeviceReduce::TransformReduce(fused_temp, fused_bytes, index, sum, n,
                                                     cuda::std::plus<float>(), squared, 0.0f, st));
        });

        bytes = 0;
        CHECK(cub::DeviceScan::InclusiveSum(nullptr, bytes, a, y, n, stream));
        void *scan_temp = temporaries(bytes);
        size_t scan_bytes = bytes;
        double scan_us = time_captured(stream, options, [&](cudaStream_t st) {
            CHECK(cub::DeviceScan::InclusiveSum(scan_temp, scan_bytes, a, y, n, st));
        });

        float got = 0;
        CHECK(cudaMemcpy(&got, sum, sizeof got, cudaMemcpyDeviceToHost));
        std::printf("%s{\"elements\": %lld, \"sum\": {\"us_per_iter\": %.3f}, \"argmax\": {\"us_per_iter\": %.3f}, "
                    "\"fused\": {\"us_per_iter\": %.3f}, \"scan\": {\"us_per_iter\": %.3f}, \"fused_value\": %.9g}",
                    s ? ", " : "", n, sum_us, argmax_us, fused_us, scan_us, got);
        for (void *p : {(void *)a, (void *)b, (void *)c, (void *)y, (void *)sum, (void *)best, (void *)best_at, sum_temp,
                        arg_temp, fused_temp, scan_temp})
            CHECK(cudaFree(p));
    }
    std::printf("]}\n");
    CHECK(cudaStreamDestroy(stream));
    return 0;
}
