/* cuBLAS and cuBLASLt, each opened on first use, never linked: dlopen()
 * ($GPURUN_CUBLAS_LIBRARY / $GPURUN_CUBLASLT_LIBRARY, else libcublas.so.N
 * / libcublasLt.so.N, N NVRTC's major, from libnvrtc's folder, else by
 * that name on the loader's path, as nvJitLink is found), entry points
 * by name into one table each. The types below are the few of
 * cublas_api.h, cublasLt.h and library_types.h gpurun passes, declared by
 * their documented values, so that gpurun builds without cuBLAS's
 * headers. Knows nothing about Lua. */
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

/* cuBLASLt (cublasLt.h): a handle, and the descriptors of one product. */
typedef struct cublaslt_context *cublaslt_handle;          /* cublasLtHandle_t */
typedef struct cublaslt_matmul_desc *cublaslt_matmul_desc; /* cublasLtMatmulDesc_t */
typedef struct cublaslt_layout *cublaslt_layout;           /* cublasLtMatrixLayout_t */
typedef struct cublaslt_preference *cublaslt_preference;   /* cublasLtMatmulPreference_t */

typedef struct {
    unsigned long long data[8];
} cublaslt_algo; /* cublasLtMatmulAlgo_t */

typedef struct {
    cublaslt_algo algo;
    size_t workspace_size;
    cublas_status state;
    float waves_count;
    int reserved[4];
} cublaslt_heuristic; /* cublasLtMatmulHeuristicResult_t */

/* cublasLtMatmulDescAttributes_t (TRANSA/B int32_t, EPILOGUE uint32_t,
 * BIAS_POINTER a pointer) and cublasLtMatmulPreferenceAttributes_t
 * (MAX_WORKSPACE_BYTES uint64_t). */
#define CUBLASLT_DESC_TRANSA 3
#define CUBLASLT_DESC_TRANSB 4
#define CUBLASLT_DESC_EPILOGUE 7
#define CUBLASLT_DESC_BIAS_POINTER 8
#define CUBLASLT_PREF_MAX_WORKSPACE_BYTES 1
/* cublasLtEpilogue_t */
#define CUBLASLT_EPILOGUE_RELU 2
#define CUBLASLT_EPILOGUE_BIAS 4
#define CUBLASLT_EPILOGUE_RELU_BIAS 6
#define CUBLASLT_EPILOGUE_GELU 32
#define CUBLASLT_EPILOGUE_GELU_BIAS 36

#define CUBLASLT_ENTRY_POINTS(X)                                                             \
    X(cublasLtCreate, (cublaslt_handle * handle))                                            \
    X(cublasLtDestroy, (cublaslt_handle handle))                                             \
    X(cublasLtMatmulDescCreate, (cublaslt_matmul_desc * desc, int compute_type, int scale_type)) \
    X(cublasLtMatmulDescDestroy, (cublaslt_matmul_desc desc))                                \
    X(cublasLtMatmulDescSetAttribute,                                                        \
      (cublaslt_matmul_desc desc, int attribute, const void *value, size_t bytes))           \
    X(cublasLtMatrixLayoutCreate, (cublaslt_layout * layout, int type, unsigned long long rows, \
                                   unsigned long long cols, long long ld))                   \
    X(cublasLtMatrixLayoutDestroy, (cublaslt_layout layout))                                 \
    X(cublasLtMatmulPreferenceCreate, (cublaslt_preference * preference))                    \
    X(cublasLtMatmulPreferenceDestroy, (cublaslt_preference preference))                     \
    X(cublasLtMatmulPreferenceSetAttribute,                                                  \
      (cublaslt_preference preference, int attribute, const void *value, size_t bytes))      \
    X(cublasLtMatmulAlgoGetHeuristic,                                                        \
      (cublaslt_handle handle, cublaslt_matmul_desc desc, cublaslt_layout a, cublaslt_layout b, \
       cublaslt_layout c, cublaslt_layout d, cublaslt_preference preference, int requested,  \
       cublaslt_heuristic *results, int *returned))                                          \
    X(cublasLtMatmul,                                                                        \
      (cublaslt_handle handle, cublaslt_matmul_desc desc, const void *alpha, const void *a,  \
       cublaslt_layout a_layout, const void *b, cublaslt_layout b_layout, const void *beta,  \
       const void *c, cublaslt_layout c_layout, void *d, cublaslt_layout d_layout,           \
       const cublaslt_algo *algo, void *workspace, size_t workspace_bytes,                   \
       cublas_stream stream))

struct cublaslt_library {
#define CUBLASLT_MEMBER(name, params) cublas_status (*name) params;
    CUBLASLT_ENTRY_POINTS(CUBLASLT_MEMBER)
#undef CUBLASLT_MEMBER
    const char *(*cublasLtGetStatusName)(cublas_status status);
    const char *(*cublasLtGetStatusString)(cublas_status status);
};

/* As cublas and its load, for cuBLASLt. */
extern struct cublaslt_library cublaslt;
int cublaslt_loader_load(void);
const char *cublaslt_loader_error(void);
char *cublaslt_format_error(char *buffer, size_t size, const char *call, cublas_status status);

#endif
