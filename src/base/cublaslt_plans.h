/* cuBLASLt products with an epilogue, planned once per shape: a handle's
 * few most recent plans (the matmul descriptor, the three layouts, the
 * algorithm its heuristic chose for the workspace given), so that a call
 * of a shape seen before sets the bias pointer and runs, with no
 * allocation. Column-major, as cuBLASLt sees them; C and D are one
 * matrix. Knows nothing about Lua. */
#ifndef GPURUN_BASE_CUBLASLT_PLANS_H
#define GPURUN_BASE_CUBLASLT_PLANS_H

#include "base/cublas_loader.h"

#define CUBLAS_STATUS_NOT_SUPPORTED 15
/* cublasLtMatmulPreferenceAttributes_t, uint32_t each */
#define CUBLASLT_PREF_MIN_ALIGNMENT_A_BYTES 5

/* What a plan is kept by: compared whole, so made with every field set. */
struct cublaslt_shape {
    int transa, transb; /* 0 or 1 */
    int m, n, k, lda, ldb, ldc;
    int type;       /* the cudaDataType of A, B, C, D and the bias */
    int compute;    /* cublasComputeType_t */
    int scale_type; /* the cudaDataType of alpha and beta */
    int epilogue;   /* a CUBLASLT_EPILOGUE_* */
    /* The alignment in bytes (a power of two, 256 at most) of the
     * pointers the plan will be run with: what its algorithm may assume. */
    int align_a, align_b, align_c, align_bias;
};

/* The alignment of a pointer, as a shape keeps it. */
int cublaslt_alignment(const void *pointer);

struct cublaslt_plan {
    struct cublaslt_shape shape;
    cublaslt_matmul_desc desc;
    cublaslt_layout a, b, c;
    cublaslt_algo algo;
};

#define CUBLASLT_PLANS 8

/* A handle and its plans; all zero before the first use. */
struct cublaslt_plans {
    cublaslt_handle handle;
    struct cublaslt_plan plan[CUBLASLT_PLANS];
    int count, next;
};

/* The plan for shape, made on first use (the oldest goes when all are
 * taken); plans->handle must be made. NULL on failure, with the call and
 * its status (NOT_SUPPORTED from cublasLtMatmulAlgoGetHeuristic where
 * cuBLASLt has no algorithm for the shape, types and epilogue). */
const struct cublaslt_plan *cublaslt_plan_for(struct cublaslt_plans *plans,
                                              const struct cublaslt_shape *shape,
                                              size_t workspace_bytes, const char **call,
                                              cublas_status *status);

/* D = epilogue(alpha op(A) op(B) + beta C [+ bias]) on the stream, C and
 * D at c; bias NULL where the epilogue takes none. CUBLAS_SUCCESS, or the
 * status with the call that failed in *call. */
cublas_status cublaslt_plan_run(const struct cublaslt_plans *plans,
                                const struct cublaslt_plan *plan, const void *alpha,
                                const void *a, const void *b, const void *beta, void *c,
                                const void *bias, void *workspace, size_t workspace_bytes,
                                cublas_stream stream, const char **call);

/* Destroys the plans' descriptors (host memory, used by no queued work
 * once the call returned); the handle is the caller's to destroy. */
void cublaslt_plans_clear(struct cublaslt_plans *plans);

#endif
