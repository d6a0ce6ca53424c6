/* cuFFT, opened on first use.
 *
 * gpurun never links cuFFT: the first call that needs it dlopen()s it
 * ($GPURUN_CUFFT_LIBRARY, else libcufft.so.<major> from libnvrtc's own
 * folder, else by that name on the loader's path, as cuBLAS is found) and
 * takes its entry points by name into one table. The types below are the
 * few of cufft.h gpurun passes, declared by their documented values, so
 * that gpurun builds without cuFFT's headers. Knows nothing about Lua. */
#ifndef GPURUN_BASE_CUFFT_LOADER_H
#define GPURUN_BASE_CUFFT_LOADER_H

#include <stddef.h>

typedef int cufft_handle;                      /* cufftHandle */
typedef int cufft_result;                      /* cufftResult */
typedef struct cufft_stream_st *cufft_stream;  /* cudaStream_t, a CUstream */

#define CUFFT_SUCCESS 0

/* cufftType */
#define CUFFT_TYPE_R2C 0x2a
#define CUFFT_TYPE_C2R 0x2c
#define CUFFT_TYPE_C2C 0x29
#define CUFFT_TYPE_D2Z 0x6a
#define CUFFT_TYPE_Z2D 0x6c
#define CUFFT_TYPE_Z2Z 0x69
/* The direction of a C2C or Z2Z transform. */
#define CUFFT_DIRECTION_FORWARD (-1)
#define CUFFT_DIRECTION_INVERSE 1

/* Every entry point gpurun uses, with its signature (all in cuFFT 11 and
 * later). The data pointers are void * here: cufftComplex is float2. */
#define CUFFT_ENTRY_POINTS(X)                                                                 \
    X(cufftCreate, (cufft_handle * plan))                                                    \
    X(cufftDestroy, (cufft_handle plan))                                                     \
    X(cufftGetVersion, (int *version))                                                       \
    X(cufftSetAutoAllocation, (cufft_handle plan, int auto_allocate))                        \
    X(cufftMakePlanMany64, (cufft_handle plan, int rank, long long *n, long long *inembed,   \
                            long long istride, long long idist, long long *onembed,          \
                            long long ostride, long long odist, int type, long long batch,   \
                            size_t *work_size))                                              \
    X(cufftSetWorkArea, (cufft_handle plan, void *work_area))                                \
    X(cufftSetStream, (cufft_handle plan, cufft_stream stream))                              \
    X(cufftExecC2C, (cufft_handle plan, void *in, void *out, int direction))                 \
    X(cufftExecZ2Z, (cufft_handle plan, void *in, void *out, int direction))                 \
    X(cufftExecR2C, (cufft_handle plan, void *in, void *out))                                \
    X(cufftExecD2Z, (cufft_handle plan, void *in, void *out))                                \
    X(cufftExecC2R, (cufft_handle plan, void *in, void *out))                                \
    X(cufftExecZ2D, (cufft_handle plan, void *in, void *out))

struct cufft_library {
#define CUFFT_MEMBER(name, params) cufft_result (*name) params;
    CUFFT_ENTRY_POINTS(CUFFT_MEMBER)
#undef CUFFT_MEMBER
};

/* The table, valid once cufft_loader_load() has returned 0. */
extern struct cufft_library cufft;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in cufft_loader_error(). */
int cufft_loader_load(void);
const char *cufft_loader_error(void);

/* "cufftExecC2C: CUFFT_INVALID_VALUE (...)": cuFFT has no call that names
 * its results, so the names of cufft.h are written here. */
char *cufft_format_error(char *buffer, size_t size, const char *call, cufft_result result);

#endif
