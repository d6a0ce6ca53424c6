/* NCCL, opened on first use.
 *
 * gpurun never links NCCL: the first collective dlopen()s libnccl.so.2 (the
 * CUDA toolkit's, NVIDIA's libnccl2 package, or $GPURUN_NCCL_LIBRARY) and
 * takes its entry points by name into one table. The declarations below are
 * NCCL 2's ABI as nccl.h documents it (stable across NCCL 2.x), so gpurun
 * builds without NCCL's headers. Knows nothing about Lua. */
#ifndef GPURUN_BASE_NCCL_LOADER_H
#define GPURUN_BASE_NCCL_LOADER_H

#include <stddef.h>
#include <cuda.h>

typedef struct nccl_comm *nccl_comm_t;          /* ncclComm_t */
typedef struct { char internal[128]; } nccl_unique_id; /* ncclUniqueId, NCCL_UNIQUE_ID_BYTES */

/* ncclResult_t */
typedef enum {
    NCCL_SUCCESS = 0, NCCL_UNHANDLED_CUDA_ERROR = 1, NCCL_SYSTEM_ERROR = 2,
    NCCL_INTERNAL_ERROR = 3, NCCL_INVALID_ARGUMENT = 4, NCCL_INVALID_USAGE = 5,
    NCCL_REMOTE_ERROR = 6, NCCL_IN_PROGRESS = 7
} nccl_result;

/* ncclDataType_t */
typedef enum {
    NCCL_INT8 = 0, NCCL_UINT8 = 1, NCCL_INT32 = 2, NCCL_UINT32 = 3, NCCL_INT64 = 4,
    NCCL_UINT64 = 5, NCCL_FLOAT16 = 6, NCCL_FLOAT32 = 7, NCCL_FLOAT64 = 8,
    NCCL_BFLOAT16 = 9 /* ncclBfloat16 */
} nccl_data_type;

/* ncclRedOp_t: avg since NCCL 2.10. */
typedef enum { NCCL_SUM = 0, NCCL_PROD = 1, NCCL_MAX = 2, NCCL_MIN = 3, NCCL_AVG = 4 } nccl_red_op;

/* Every entry point gpurun uses, with its signature (NCCL's streams are
 * cudaStream_t, the same handle as the driver's CUstream). */
#define NCCL_ENTRY_POINTS(X)                                                                 \
    X(ncclGetVersion, nccl_result, (int *version))                                          \
    X(ncclGetErrorString, const char *, (nccl_result result))                               \
    X(ncclGetUniqueId, nccl_result, (nccl_unique_id *id))                                   \
    X(ncclCommInitRank, nccl_result, (nccl_comm_t *comm, int size, nccl_unique_id id,       \
                                      int rank))                                            \
    X(ncclCommDestroy, nccl_result, (nccl_comm_t comm))                                     \
    X(ncclCommAbort, nccl_result, (nccl_comm_t comm))                                       \
    X(ncclAllReduce, nccl_result, (const void *send, void *receive, size_t count,           \
                                   nccl_data_type type, nccl_red_op op, nccl_comm_t comm,   \
                                   CUstream stream))                                        \
    X(ncclBroadcast, nccl_result, (const void *send, void *receive, size_t count,           \
                                   nccl_data_type type, int root, nccl_comm_t comm,         \
                                   CUstream stream))                                        \
    X(ncclAllGather, nccl_result, (const void *send, void *receive, size_t send_count,      \
                                   nccl_data_type type, nccl_comm_t comm, CUstream stream)) \
    X(ncclReduceScatter, nccl_result, (const void *send, void *receive,                     \
                                       size_t receive_count, nccl_data_type type,           \
                                       nccl_red_op op, nccl_comm_t comm, CUstream stream))

struct nccl_library {
#define NCCL_MEMBER(name, result, params) result (*name) params;
    NCCL_ENTRY_POINTS(NCCL_MEMBER)
#undef NCCL_MEMBER
};

/* The table, valid once nccl_loader_load() has returned 0. */
extern struct nccl_library nccl;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in nccl_loader_error(). */
int nccl_loader_load(void);
const char *nccl_loader_error(void);

/* NCCL's version as major * 10000 + minor * 100 + patch (2.28.9: 22809). */
int nccl_loader_version(void);

/* Calls go through NCCL_CALL(ncclName, args...), which records a failure
 * for nccl_format_error, as CUDA_CALL does for the driver. */
extern const char *nccl_last_failed_call;
extern nccl_result nccl_last_failed_result;

static inline nccl_result nccl_checked(nccl_result result, const char *call)
{
    if (__builtin_expect(result != NCCL_SUCCESS, 0)) {
        nccl_last_failed_call = call;
        nccl_last_failed_result = result;
    }
    return result;
}

#define NCCL_CALL(name, ...) nccl_checked(nccl.name(__VA_ARGS__), #name)

/* The one place an ncclResult_t becomes text, for the call that last failed:
 *   "ncclAllReduce: ncclInvalidArgument (invalid argument)" */
char *nccl_format_error(char *buffer, size_t size);

#endif
