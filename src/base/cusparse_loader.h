/* cuSPARSE, opened on first use, as cuBLAS is (base/cublas_loader.h):
 * $GPURUN_CUSPARSE_LIBRARY, else libcusparse.so.<its major> from libnvrtc's
 * folder, else by that name on the loader's path. cuSPARSE numbers its
 * sonames apart from the toolkit (12 in CUDA 12 and 13). The types below
 * are the few of cusparse.h gpurun passes, declared by their documented
 * values, so that gpurun builds without cuSPARSE's headers. No Lua. */
#ifndef GPURUN_BASE_CUSPARSE_LOADER_H
#define GPURUN_BASE_CUSPARSE_LOADER_H

#include <stddef.h>
#include <stdint.h>

typedef struct cusparse_context *cusparse_handle;  /* cusparseHandle_t */
typedef struct cusparse_sp_mat *cusparse_sp_mat;   /* cusparseSpMatDescr_t */
typedef struct cusparse_dn_vec *cusparse_dn_vec;   /* cusparseDnVecDescr_t */
typedef struct cusparse_dn_mat *cusparse_dn_mat;   /* cusparseDnMatDescr_t */
typedef struct cusparse_stream_st *cusparse_stream; /* cudaStream_t, a CUstream */
typedef int cusparse_status;                       /* cusparseStatus_t */

#define CUSPARSE_SUCCESS 0
/* cusparseOperation_t */
#define CUSPARSE_OP_NON_TRANSPOSE 0
#define CUSPARSE_OP_TRANSPOSE 1
/* cusparseIndexType_t, cusparseIndexBase_t, cusparseOrder_t */
#define CUSPARSE_INDEX_32I 2
#define CUSPARSE_INDEX_BASE_ZERO 0
#define CUSPARSE_ORDER_ROW 2
/* cusparseSpMVAlg_t, cusparseSpMMAlg_t */
#define CUSPARSE_SPMV_DEFAULT 0
#define CUSPARSE_SPMM_DEFAULT 0

/* Every entry point gpurun uses, with its signature (the generic API of
 * cuSPARSE 12). */
#define CUSPARSE_ENTRY_POINTS(X)                                                              \
    X(cusparseCreate, (cusparse_handle * handle))                                            \
    X(cusparseDestroy, (cusparse_handle handle))                                             \
    X(cusparseSetStream, (cusparse_handle handle, cusparse_stream stream))                   \
    X(cusparseCreateCsr, (cusparse_sp_mat * matrix, int64_t rows, int64_t cols, int64_t nnz, \
                          void *row_offsets, void *col_indices, void *values,                \
                          int offsets_type, int indices_type, int base, int value_type))     \
    X(cusparseDestroySpMat, (cusparse_sp_mat matrix))                                        \
    X(cusparseCreateDnVec, (cusparse_dn_vec * vector, int64_t size, void *values,            \
                            int value_type))                                                 \
    X(cusparseDestroyDnVec, (cusparse_dn_vec vector))                                        \
    X(cusparseDnVecSetValues, (cusparse_dn_vec vector, void *values))                        \
    X(cusparseCreateDnMat, (cusparse_dn_mat * matrix, int64_t rows, int64_t cols, int64_t ld, \
                            void *values, int value_type, int order))                        \
    X(cusparseDestroyDnMat, (cusparse_dn_mat matrix))                                        \
    X(cusparseDnMatSetValues, (cusparse_dn_mat matrix, void *values))                        \
    X(cusparseSpMV_bufferSize, (cusparse_handle handle, int op, const void *alpha,           \
                                cusparse_sp_mat a, cusparse_dn_vec x, const void *beta,      \
                                cusparse_dn_vec y, int compute_type, int algorithm,          \
                                size_t *bytes))                                              \
    X(cusparseSpMV, (cusparse_handle handle, int op, const void *alpha, cusparse_sp_mat a,   \
                     cusparse_dn_vec x, const void *beta, cusparse_dn_vec y,                 \
                     int compute_type, int algorithm, void *buffer))                         \
    X(cusparseSpMM_bufferSize, (cusparse_handle handle, int op_a, int op_b,                  \
                                const void *alpha, cusparse_sp_mat a, cusparse_dn_mat b,     \
                                const void *beta, cusparse_dn_mat c, int compute_type,       \
                                int algorithm, size_t *bytes))                               \
    X(cusparseSpMM, (cusparse_handle handle, int op_a, int op_b, const void *alpha,          \
                     cusparse_sp_mat a, cusparse_dn_mat b, const void *beta,                 \
                     cusparse_dn_mat c, int compute_type, int algorithm, void *buffer))

struct cusparse_library {
#define CUSPARSE_MEMBER(name, params) cusparse_status (*name) params;
    CUSPARSE_ENTRY_POINTS(CUSPARSE_MEMBER)
#undef CUSPARSE_MEMBER
    const char *(*cusparseGetErrorName)(cusparse_status status);
    const char *(*cusparseGetErrorString)(cusparse_status status);
};

/* The table, valid once cusparse_loader_load() has returned 0. */
extern struct cusparse_library cusparse;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in cusparse_loader_error(). */
int cusparse_loader_load(void);
const char *cusparse_loader_error(void);

/* "cusparseSpMV: CUSPARSE_STATUS_INVALID_VALUE (invalid value)" */
char *cusparse_format_error(char *buffer, size_t size, const char *call, cusparse_status status);

#endif
