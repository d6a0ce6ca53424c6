/* The CUDA driver, opened on first use.
 *
 * gpurun never links libcuda: the library is dlopen()ed the first time a
 * caller needs it and every entry point is fetched through cuGetProcAddress
 * into one table. A machine without a driver (or without a GPU) still runs
 * plain Lua; only calls that need the driver fail, with one message that says
 * why the driver could not be loaded.
 *
 * This layer knows nothing about Lua. */
#ifndef GPURUN_BASE_CUDA_DRIVER_H
#define GPURUN_BASE_CUDA_DRIVER_H

#include <stddef.h>
#include <cuda.h>
#include <cudaTypedefs.h>

/* Every entry point gpurun uses, each pinned to the ABI version whose
 * signature gpurun calls (the PFN_<name>_v<version> types of cudaTypedefs.h).
 * Asking cuGetProcAddress for "the newest" instead can hand back a function
 * with another signature: CUDA 13's cuCtxSynchronize takes a context, and
 * "cuGraphInstantiate" resolves to the CUDA 11 five-argument form. */
#define CUDA_DRIVER_ENTRY_POINTS(X) \
    X(cuInit, 2000) X(cuDriverGetVersion, 2020) X(cuGetErrorName, 6000) \
    X(cuGetErrorString, 6000) X(cuDeviceGetCount, 2000) X(cuDeviceGet, 2000) \
    X(cuDeviceGetName, 2000) X(cuDeviceGetAttribute, 2000) \
    X(cuDeviceTotalMem, 3020) X(cuDevicePrimaryCtxRetain, 7000) \
    X(cuDevicePrimaryCtxRelease, 11000) X(cuCtxSetCurrent, 4000) \
    X(cuCtxGetCurrent, 4000) X(cuCtxSynchronize, 2000) \
    X(cuStreamCreate, 2000) X(cuStreamCreateWithPriority, 5050) X(cuStreamDestroy, 4000) \
    X(cuStreamSynchronize, 2000) X(cuStreamQuery, 2000) \
    X(cuStreamBeginCapture, 10010) X(cuStreamEndCapture, 10000) \
    X(cuStreamIsCapturing, 10000) X(cuEventCreate, 2000) \
    X(cuEventDestroy, 4000) X(cuEventRecord, 2000) \
    X(cuEventSynchronize, 2000) X(cuEventElapsedTime, 12080) \
    X(cuEventQuery, 2000) X(cuLibraryLoadData, 12000) \
    X(cuLibraryUnload, 12000) X(cuLibraryGetKernel, 12000) \
    X(cuLibraryGetKernelCount, 12040) X(cuLibraryEnumerateKernels, 12040) \
    X(cuKernelGetName, 12030) X(cuKernelGetParamInfo, 12040) \
    X(cuKernelGetAttribute, 12000) X(cuKernelGetFunction, 12000) X(cuLaunchKernel, 4000) \
    X(cuMemAlloc, 3020) X(cuMemFree, 3020) X(cuMemGetInfo, 3020) \
    X(cuMemcpyHtoDAsync, 3020) X(cuMemcpyDtoHAsync, 3020) \
    X(cuMemcpyDtoDAsync, 3020) X(cuMemsetD8Async, 3020) \
    X(cuMemsetD16Async, 3020) X(cuMemsetD32Async, 3020) \
    X(cuGraphInstantiateWithFlags, 11040) X(cuGraphUpload, 11010) \
    X(cuGraphInstantiateWithParams, 12000) \
    X(cuGraphLaunch, 10000) X(cuGraphExecDestroy, 10000) \
    X(cuGraphDestroy, 10000) X(cuGraphGetNodes, 10000) \
    X(cuStreamWaitEvent, 3020) X(cuStreamBeginCaptureToGraph, 12030) \
    X(cuStreamGetCaptureInfo, 12030) X(cuStreamUpdateCaptureDependencies, 12030) \
    X(cuGraphConditionalHandleCreate, 12030) X(cuGraphAddNode, 12030) \
    X(cuGraphClone, 10000) X(cuGraphExecUpdate, 12000) X(cuGraphNodeGetType, 10000) \
    X(cuGraphNodeGetDependencies, 12030) X(cuGraphKernelNodeGetParams, 12000) \
    X(cuGraphExecKernelNodeSetParams, 12000) X(cuGraphNodeSetEnabled, 11060) \
    X(cuGraphNodeGetEnabled, 11060) X(cuGraphDebugDotPrint, 11030) X(cuFuncGetName, 12030) \
    X(cuLaunchKernelEx, 11060) X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050) \
    X(cuOccupancyMaxActiveClusters, 11070) X(cuFuncGetAttribute, 2020) \
    X(cuGraphMemcpyNodeGetParams, 10000) X(cuGraphMemsetNodeGetParams, 10000) \
    X(cuDeviceCanAccessPeer, 4000) X(cuCtxEnablePeerAccess, 4000) X(cuMemcpyPeerAsync, 4000) \
    X(cuFuncSetAttribute, 9000) X(cuOccupancyMaxPotentialBlockSize, 6050) \
    X(cuMemHostAlloc, 2020) X(cuMemFreeHost, 2000) X(cuCtxGetStreamPriorityRange, 5050) \
    X(cuStreamGetPriority, 5050) X(cuLaunchHostFunc, 10000) \
    X(cuThreadExchangeStreamCaptureMode, 10010) \
    X(cuDeviceGetDefaultMemPool, 11020) X(cuMemPoolCreate, 11020) X(cuMemPoolDestroy, 11020) \
    X(cuMemPoolGetAttribute, 11020) X(cuMemPoolSetAttribute, 11020) X(cuMemPoolTrimTo, 11020) \
    X(cuMemAllocFromPoolAsync, 11020) X(cuMemFreeAsync, 11020) \
    X(cuDeviceGetGraphMemAttribute, 11040) X(cuDeviceSetGraphMemAttribute, 11040) \
    X(cuDeviceGraphMemTrim, 11040) X(cuGraphMemAllocNodeGetParams, 11040) \
    X(cuGraphMemFreeNodeGetParams, 11040) \
    X(cuGraphAddEventRecordNode, 11010) X(cuGraphAddDependencies, 12030) \
    X(cuGraphNodeFindInClone, 10000) \
    X(cuGraphKernelNodeGetAttribute, 11000) X(cuGraphChildGraphNodeGetGraph, 10000) \
    X(cuTensorMapEncodeTiled, 12000) X(cuTensorMapReplaceAddress, 12000) \
    X(cuLinkCreate, 6050) X(cuLinkAddData, 6050) X(cuLinkComplete, 5050) X(cuLinkDestroy, 5050) \
    X(cuMemAllocManaged, 6000) X(cuMemPrefetchAsync, 12020) X(cuMemAdvise, 12020) \
    X(cuMemHostGetDevicePointer, 3020) \
    X(cuMemPoolExportToShareableHandle, 11020) X(cuMemPoolImportFromShareableHandle, 11020) \
    X(cuMemPoolExportPointer, 11020) X(cuMemPoolImportPointer, 11020) \
    X(cuMemPoolSetAccess, 11020) X(cuMemPoolGetAccess, 11020) \
    X(cuIpcGetEventHandle, 4010) X(cuIpcOpenEventHandle, 4010)

/* Entry points of features a driver may lack (green contexts, process
 * checkpoints): left NULL where the driver has none, so that gpurun still
 * loads and only the feature's own calls refuse, naming what is missing. */
#define CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(X) \
    X(cuDeviceGetDevResource, 12040) X(cuDevSmResourceSplitByCount, 12040) \
    X(cuDevResourceGenerateDesc, 12040) X(cuGreenCtxCreate, 12040) \
    X(cuGreenCtxDestroy, 12040) X(cuCtxFromGreenCtx, 12040) \
    X(cuGreenCtxGetDevResource, 12040) X(cuGreenCtxStreamCreate, 12050) \
    X(cuCheckpointProcessLock, 12080) X(cuCheckpointProcessCheckpoint, 12080) \
    X(cuCheckpointProcessRestore, 12080) X(cuCheckpointProcessUnlock, 12080) \
    X(cuCheckpointProcessGetState, 12080) X(cuCheckpointProcessGetRestoreThreadId, 12080)

struct cuda_driver {
#define CUDA_DRIVER_MEMBER(name, version) PFN_##name##_v##version name;
    CUDA_DRIVER_ENTRY_POINTS(CUDA_DRIVER_MEMBER)
    CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(CUDA_DRIVER_MEMBER)
#undef CUDA_DRIVER_MEMBER
};

/* The table, valid once cuda_driver_load() has returned CUDA_SUCCESS. */
extern struct cuda_driver cuda;

/* Opens libcuda.so.1, fills the table and calls cuInit(0), once per process.
 * Later calls return the first call's result. On failure, the reason is in
 * cuda_driver_load_error(). */
CUresult cuda_driver_load(void);
const char *cuda_driver_load_error(void);

/* The driver's version (cuDriverGetVersion, e.g. 13000) without cuInit:
 * only the library is opened, so `gpurun -v` costs no driver start-up. On
 * failure, the reason is in cuda_driver_load_error(). */
CUresult cuda_driver_version(int *version);

/* The folder of the libcuda gpurun opened (without cuInit), "" where none
 * opens: where the libraries that come with the driver (NVML) are. */
const char *cuda_driver_folder(void);

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

/* After work that may never end was abandoned (Ctrl-C while a graph with a
 * while loop replays), releasing what that work may use could wait for it
 * forever: from then on the calls that free or destroy (memory, modules,
 * graphs, streams, events, contexts) do nothing, and the driver frees it all
 * when the process exits. */
void cuda_driver_skip_teardown(void);

#endif
