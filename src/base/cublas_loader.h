/* cuBLAS, opened on first use.
 *
 * gpurun never links cuBLAS: the first call that needs it dlopen()s it
 * ($GPURUN_CUBLAS_LIBRARY, else libcublas.so.<NVRTC's major> from libnvrtc's
 * own folder, else by that name on the loader's path, as nvJitLink is
 * found) and takes its entry points by name into one table. The types
 * below are the few of cublas_api.h and library_types.h gpurun passes,
 * declared here by their documented values, so that gpurun builds without
 * cuBLAS's headers. Knows nothing about Lua. */
#ifndef GPURUN_BASE_CUBLAS_LOADER_H
#define GPURUN_BASE_CUBLAS_LOADER_H

#include <stddef.h>

typedef struct cublas_context *cublas_handle; /* cublasHandle_t */
typedef int cublas_status;                    /* cublasStatus_t */
typedef struct cublas_stream_st *cublas_stream; /* cudaStream_t, a CUstream */

#define CUBLAS_SUCCESS 0

/* cublasOperation_t */
#define CUBLAS_OPERATION_N 0
#define CUBLAS_OPERATION_T 1
/* cublasPointerMode_t */
#define CUBLAS_POINTERS_HOST 0
#define CUBLAS_POINTERS_DEVICE 1
/* cublasMath_t: reductions inside a GEMM keep the compute type, never the
 * (narrower) output type. */
#define CUBLAS_MATH_KEEP_COMPUTE_TYPE 16
/* cublasGemmAlgo_t */
#define CUBLAS_ALGORITHM_DEFAULT (-1)
/* cublasComputeType_t */
#define CUBLAS_COMPUTE_FLOAT32 68
#define CUBLAS_COMPUTE_FLOAT64 70

/* Every entry point gpurun uses, with its signature (all in cuBLAS 12.0
 * and later). */
#define CUBLAS_ENTRY_POINTS(X)                                                                \
    X(cublasCreate_v2, (cublas_handle * handle))                                             \
    X(cublasDestroy_v2, (cublas_handle handle))                                              \
    X(cublasGetVersion_v2, (cublas_handle handle, int *version))                             \
    X(cublasSetStream_v2, (cublas_handle handle, cublas_stream stream))                      \
    X(cublasSetWorkspace_v2, (cublas_handle handle, void *workspace, size_t bytes))          \
    X(cublasSetMathMode, (cublas_handle handle, int mode))                                   \
    X(cublasSetPointerMode_v2, (cublas_handle handle, int mode))                             \
    X(cublasGemmEx, (cublas_handle handle, int transa, int transb, int m, int n, int k,      \
                     const void *alpha, const void *a, int a_type, int lda, const void *b,   \
                     int b_type, int ldb, const void *beta, void *c, int c_type, int ldc,    \
                     int compute_type, int algorithm))                                       \
    X(cublasGemmStridedBatchedEx,                                                            \
      (cublas_handle handle, int transa, int transb, int m, int n, int k, const void *alpha, \
       const void *a, int a_type, int lda, long long stride_a, const void *b, int b_type,    \
       int ldb, long long stride_b, const void *beta, void *c, int c_type, int ldc,          \
       long long stride_c, int batch, int compute_type, int algorithm))                      \
    X(cublasAxpyEx, (cublas_handle handle, int n, const void *alpha, int alpha_type,        \
                     const void *x, int x_type, int incx, void *y, int y_type, int incy,     \
                     int execution_type))                                                    \
    X(cublasDotEx, (cublas_handle handle, int n, const void *x, int x_type, int incx,       \
                    const void *y, int y_type, int incy, void *result, int result_type,      \
                    int execution_type))                                                     \
    X(cublasNrm2Ex, (cublas_handle handle, int n, const void *x, int x_type, int incx,      \
                     void *result, int result_type, int execution_type))                     \
    X(cublasScalEx, (cublas_handle handle, int n, const void *alpha, int alpha_type, void *x, \
                     int x_type, int incx, int execution_type))

struct cublas_library {
#define CUBLAS_MEMBER(name, params) cublas_status (*name) params;
    CUBLAS_ENTRY_POINTS(CUBLAS_MEMBER)
#undef CUBLAS_MEMBER
    const char *(*cublasGetStatusName)(cublas_status status);
    const char *(*cublasGetStatusString)(cublas_status status);
};

/* The table, valid once cublas_loader_load() has returned 0. */
extern struct cublas_library cublas;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in cublas_loader_error(). */
int cublas_loader_load(void);
const char *cublas_loader_error(void);

/* "cublasGemmEx: CUBLAS_STATUS_INVALID_VALUE (an invalid numeric value was
 * used as an argument)" */
char *cublas_format_error(char *buffer, size_t size, const char *call, cublas_status status);

#endif
