/* What the C benchmarks share: one way to end on a failed CUDA call, the
 * monotonic clock, and the median of the reps. Each program defines
 * BENCH_PROGRAM (its name, for messages) and _POSIX_C_SOURCE before
 * including this. */
#ifndef BENCH_COMMON_H
#define BENCH_COMMON_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cuda.h>

#define MAX_REPS 1000

static inline void die_cuda(const char *call, CUresult result)
{
    const char *name = NULL, *description = NULL;
    /* Without a usable driver these fail as well; then the number is all
     * there is to print. */
    if (cuGetErrorName(result, &name) != CUDA_SUCCESS || name == NULL)
        name = "unnamed CUresult";
    if (cuGetErrorString(result, &description) != CUDA_SUCCESS || description == NULL)
        description = "no description";
    fprintf(stderr, "%s: %s: %s (%s), code %d\n", BENCH_PROGRAM, call, name, description,
            (int)result);
    exit(1);
}

/* CU(cuMemAlloc, &p, bytes): the name is stringified before it expands to
 * cuMemAlloc_v2, so messages carry the documented name. */
#define CU(name, ...)                                                        \
    do {                                                                     \
        CUresult cu_result_ = name(__VA_ARGS__);                             \
        if (cu_result_ != CUDA_SUCCESS)                                      \
            die_cuda(#name, cu_result_);                                     \
    } while (0)

/* Device 0's primary context, made current; its name into name. */
static inline CUdevice open_device(char *name, int name_size)
{
    CUdevice device;
    CUcontext context;
    CU(cuInit, 0);
    CU(cuDeviceGet, &device, 0);
    CU(cuDeviceGetName, name, name_size, device);
    CU(cuDevicePrimaryCtxRetain, &context, device);
    CU(cuCtxSetCurrent, context);
    return device;
}

static inline double now_seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static inline int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of count (at most MAX_REPS) values, left as they were. */
static inline double median(const double *values, unsigned long count)
{
    double sorted[MAX_REPS];
    memcpy(sorted, values, count * sizeof *values);
    qsort(sorted, count, sizeof *sorted, compare_doubles);
    return count % 2 ? sorted[count / 2] : (sorted[count / 2 - 1] + sorted[count / 2]) / 2;
}

#endif
