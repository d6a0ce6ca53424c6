/* What the CUDA C++ benchmarks (reduce_cub.cu, alloc_step.cu) share: one
 * way to end on a failed runtime call. Each program defines BENCH_PROGRAM
 * (its name, for messages) before including this. */
#ifndef CUDA_CHECK_H
#define CUDA_CHECK_H

#include <cstdio>
#include <cstdlib>

#include <cuda_runtime.h>

#define CHECK(call)                                                                      \
    do {                                                                                 \
        cudaError_t check_result_ = (call);                                              \
        if (check_result_ != cudaSuccess) {                                              \
            std::fprintf(stderr, "%s: %s: %s (%s)\n", BENCH_PROGRAM, #call,              \
                         cudaGetErrorName(check_result_), cudaGetErrorString(check_result_)); \
            std::exit(1);                                                                \
        }                                                                                \
    } while (0)

#endif
