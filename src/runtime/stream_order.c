/* One stream waiting for the work queued on another, through the ordering
 * event each stream keeps. Nothing here raises, so that the capture
 * registry, which every error ends, forks and joins its streams through it
 * too. */
#include "runtime/runtime.h"

CUresult gpurun_mark_stream(struct gpurun_stream *stream)
{
    CUcontext previous = gpurun_enter_context(stream->context);
    CUresult result = CUDA_SUCCESS;
    if (stream->order_event == NULL) {
        result = CUDA_CALL(cuEventCreate, &stream->order_event, CU_EVENT_DISABLE_TIMING);
        if (result != CUDA_SUCCESS)
            stream->order_event = NULL;
    }
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuEventRecord, stream->order_event, stream->handle);
    gpurun_leave_context(previous);
    return result;
}

CUresult gpurun_order_after(struct gpurun_stream *into, struct gpurun_stream *from)
{
    if (from->handle == NULL)
        return from->order_event ? CUDA_CALL(cuStreamWaitEvent, into->handle, from->order_event, 0)
                                 : CUDA_ERROR_INVALID_HANDLE;
    CUresult result = gpurun_mark_stream(from);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuStreamWaitEvent, into->handle, from->order_event, 0);
    return result;
}
