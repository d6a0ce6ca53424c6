/* The CUDA driver, opened on first use.
 *
 * gpurun never links libcuda: the library is dlopen()ed the first time a
 * caller needs it and every entry point is fetched through cuGetProcAddress
 * into one table. A machine without a driver (or without a GPU) still runs
 * plain Lua; only calls that need the driver fail, with one message that says
 * why the driver could not be loaded.
 *
 * This layer knows nothing about Lua. */
#ifndef GPURUN_CUDA_DRIVER_H
#define GPURUN_CUDA_DRIVER_H

#include <stddef.h>
#include <cuda.h>

/* Every entry point gpurun uses. The member names are the header's own
 * (cuMemAlloc expands to cuMemAlloc_v2 in both the table and the caller), and
 * the string handed to cuGetProcAddress is the unexpanded base name. Where
 * the header maps a name to a different function rather than a newer
 * version of it (cuGraphInstantiate -> cuGraphInstantiateWithFlags), the
 * list names that function: the driver would return the old signature. */
#define CUDA_DRIVER_ENTRY_POINTS(X) \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) \
    X(cuDeviceGetCount) X(cuDeviceGet) X(cuDeviceGetName) \
    X(cuDeviceGetAttribute) X(cuDeviceTotalMem) \
    X(cuDevicePrimaryCtxRetain) X(cuDevicePrimaryCtxRelease) \
    X(cuCtxSetCurrent) X(cuCtxGetCurrent) X(cuCtxSynchronize) \
    X(cuStreamCreate) X(cuStreamDestroy) X(cuStreamSynchronize) \
    X(cuStreamQuery) X(cuStreamBeginCapture) X(cuStreamEndCapture) \
    X(cuStreamIsCapturing) \
    X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord) \
    X(cuEventSynchronize) X(cuEventElapsedTime) X(cuEventQuery) \
    X(cuLibraryLoadData) X(cuLibraryUnload) X(cuLibraryGetKernel) \
    X(cuLibraryGetKernelCount) X(cuLibraryEnumerateKernels) \
    X(cuKernelGetName) X(cuKernelGetParamInfo) X(cuKernelGetAttribute) \
    X(cuLaunchKernel) \
    X(cuMemAlloc) X(cuMemFree) X(cuMemGetInfo) \
    X(cuMemcpyHtoDAsync) X(cuMemcpyDtoHAsync) X(cuMemcpyDtoDAsync) \
    X(cuMemsetD8Async) X(cuMemsetD16Async) X(cuMemsetD32Async) \
    X(cuGraphInstantiateWithFlags) X(cuGraphUpload) X(cuGraphLaunch) \
    X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuGraphGetNodes)

struct cuda_driver {
#define CUDA_DRIVER_MEMBER(name) __typeof__(name) *name;
    CUDA_DRIVER_ENTRY_POINTS(CUDA_DRIVER_MEMBER)
#undef CUDA_DRIVER_MEMBER
};

/* The table, valid once cuda_driver_load() has returned CUDA_SUCCESS. */
extern struct cuda_driver cuda;

/* Opens libcuda.so.1, fills the table and calls cuInit(0), once per process.
 * Later calls return the first call's result. On failure, the reason is in
 * cuda_driver_load_error(). */
CUresult cuda_driver_load(void);
const char *cuda_driver_load_error(void);

/* Device count that never fails: 0 without a driver or without a GPU. */
int cuda_driver_device_count(void);

/* The one place a CUresult becomes text:
 *   "cuCallName: CUDA_ERROR_NAME (description)"
 * Writes at most size bytes (NUL included) into buffer and returns buffer. */
char *cuda_format_error(char *buffer, size_t size, const char *call, CUresult result);

/* True for the errors after which the context can no longer be used
 * (an illegal address or a trap inside a kernel, say). */
int cuda_error_is_sticky(CUresult result);

/* Every driver call goes through CUDA_CALL(cuName, args...): it calls the
 * table's entry point and, on failure only, records which call failed and how,
 * so that the caller can format the one message shape later. Free on success:
 * no formatting, no allocation, just a compare. */
extern const char *cuda_last_failed_call;
extern CUresult cuda_last_failed_result;

static inline CUresult cuda_checked(CUresult result, const char *call)
{
    if (__builtin_expect(result != CUDA_SUCCESS, 0)) {
        cuda_last_failed_call = call;
        cuda_last_failed_result = result;
    }
    return result;
}

#define CUDA_CALL(name, ...) cuda_checked(cuda.name(__VA_ARGS__), #name)

/* Unloads the library; the table is empty afterwards. */
void cuda_driver_unload(void);

#endif
