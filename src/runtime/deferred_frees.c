/* Frees deferred while a capture is in progress: device and page-locked
 * memory, graphs kernels launch and libraries' handles, each freed once no
 * capture runs (runtime/capture.c says when one does: gpurun_frees_wait). */
#include "runtime/runtime.h"

static int captures_running;

void gpurun_frees_wait(int wait)
{
    captures_running = wait;
}

/* cuMemFree is not allowed while a graph is being captured (it would break
 * the capture), so memory freed then waits; page-locked host memory too
 * (host != NULL, with the event of its last queued copy), and graphs that
 * kernels launch, whose destruction waits for the context (exec != NULL).
 * A full list frees at once rather than leak. */
#define MAX_PENDING_FREES 1024
struct pending_free {
    CUdeviceptr pointer;
    CUcontext context;
    int after_device; /* stream-ordered memory: wait for the context's work first */
    void *host;
    CUevent last_use;
    CUgraphExec exec; /* a graph kernels may launch: destroyed after the context's work */
    void (*release)(void *object); /* a library's handle: released after the context's work */
    void *object;
};
static struct pending_free pending[MAX_PENDING_FREES];
static size_t pending_count;

/* Waits for the last copy queued on the host memory and for the work of
 * the context of kernels that reach it (NULL: none), then frees it. */
static CUresult free_host(void *pointer, CUevent last_use, CUcontext kernel_context)
{
    /* As for device memory: the contexts' release at exit took it. */
    if (gpurun_runtime.current_context == NULL)
        return CUDA_SUCCESS;
    CUresult result = CUDA_SUCCESS;
    if (last_use) {
        result = CUDA_CALL(cuEventSynchronize, last_use);
        (void)CUDA_CALL(cuEventDestroy, last_use);
    }
    if (kernel_context) {
        CUcontext previous = gpurun_enter_context(kernel_context);
        CUresult waited = CUDA_CALL(cuCtxSynchronize);
        gpurun_leave_context(previous);
        if (result == CUDA_SUCCESS)
            result = waited;
    }
    CUresult freed = CUDA_CALL(cuMemFreeHost, pointer);
    return result != CUDA_SUCCESS ? result : freed;
}

/* cuMemFree of memory from cuMemAlloc waits for the device itself; of a
 * pool's (after_device), it does not, so the context is waited for first. */
static CUresult free_now(CUdeviceptr pointer, int after_device)
{
    CUresult result = after_device ? CUDA_CALL(cuCtxSynchronize) : CUDA_SUCCESS;
    CUresult freed = CUDA_CALL(cuMemFree, pointer);
    return result != CUDA_SUCCESS ? result : freed;
}

/* A graph that kernels launch from the device is destroyed once no work
 * queued before can launch it any more. */
static CUresult destroy_exec_now(CUgraphExec exec)
{
    CUresult result = CUDA_CALL(cuCtxSynchronize);
    CUresult destroyed = CUDA_CALL(cuGraphExecDestroy, exec);
    return result != CUDA_SUCCESS ? result : destroyed;
}

/* A library's handle whose release waits for the device (cublasDestroy
 * does), released once the work queued before cannot use it any more. */
static CUresult release_now(void (*release)(void *object), void *object)
{
    CUresult result = CUDA_CALL(cuCtxSynchronize);
    release(object);
    return result;
}

static CUresult in_context(const struct pending_free *entry)
{
    if (entry->release)
        return release_now(entry->release, entry->object);
    if (entry->exec)
        return destroy_exec_now(entry->exec);
    return free_now(entry->pointer, entry->after_device);
}

static CUresult free_in_context(const struct pending_free *entry)
{
    CUcontext context = entry->context;
    CUcontext current = gpurun_runtime.current_context;
    /* No current context means the runtime has been closed at exit, and
     * releasing the primary contexts freed everything in them; abandoned
     * work (a replay interrupted by Ctrl-C) may still use the memory. */
    if (current == NULL || gpurun_runtime.abandoned)
        return CUDA_SUCCESS;
    if (context == current)
        return in_context(entry);
    CUresult result = CUDA_CALL(cuCtxSetCurrent, context);
    if (result == CUDA_SUCCESS)
        result = in_context(entry);
    CUresult restored = CUDA_CALL(cuCtxSetCurrent, current);
    return result != CUDA_SUCCESS ? result : restored;
}

/* cuMemFree and cuMemFreeHost may wait for the device, which a capture in
 * progress does not allow: free once it has ended. */
static int must_defer(void)
{
    return captures_running;
}

/* Keeps `entry` for gpurun_flush_frees while frees must wait and the list
 * has room: 1 when kept. */
static int defer_free(struct pending_free entry)
{
    if (!must_defer() || pending_count >= MAX_PENDING_FREES)
        return 0;
    pending[pending_count++] = entry;
    return 1;
}

void gpurun_flush_frees(void)
{
    if (must_defer())
        return;
    while (pending_count > 0) {
        pending_count--;
        /* Nobody is left to tell about a failure here. */
        if (pending[pending_count].host)
            (void)free_host(pending[pending_count].host, pending[pending_count].last_use,
                            pending[pending_count].context);
        else
            (void)free_in_context(&pending[pending_count]);
    }
}

static CUresult free_device_memory(CUdeviceptr pointer, CUcontext context, int after_device)
{
    struct pending_free entry = { .pointer = pointer, .context = context,
                                  .after_device = after_device };
    if (defer_free(entry))
        return CUDA_SUCCESS;
    gpurun_flush_frees(); /* nothing while frees must wait */
    /* A full list while frees must wait: a pool's memory leaks rather than be
     * freed under work that may still use it (the wait would break the
     * capture);
     * cuMemFree of cuMemAlloc's memory fails the capture, as before. */
    if (must_defer() && after_device)
        return CUDA_SUCCESS;
    return free_in_context(&entry);
}

CUresult gpurun_free_memory(CUdeviceptr pointer, CUcontext context)
{
    return free_device_memory(pointer, context, 0);
}

CUresult gpurun_free_memory_after_device(CUdeviceptr pointer, CUcontext context)
{
    return free_device_memory(pointer, context, 1);
}

/* What waits for the context's work (a graph kernels launch, a library's
 * handle): now, or once no capture is in progress. A full list while a
 * capture runs keeps it rather than destroy it under work that may still
 * use it. */
static CUresult after_device(struct pending_free entry)
{
    if (defer_free(entry))
        return CUDA_SUCCESS;
    gpurun_flush_frees();
    if (must_defer())
        return CUDA_SUCCESS;
    return free_in_context(&entry);
}

CUresult gpurun_destroy_exec_after_device(CUgraphExec exec, CUcontext context)
{
    return after_device((struct pending_free){ .context = context, .exec = exec });
}

CUresult gpurun_release_after_device(void (*release)(void *object), void *object,
                                     CUcontext context)
{
    return after_device((struct pending_free){ .context = context, .release = release,
                                                .object = object });
}

CUresult gpurun_free_host_memory(void *pointer, CUevent last_use, CUcontext kernel_context)
{
    if (defer_free((struct pending_free){ .host = pointer, .last_use = last_use,
                                          .context = kernel_context }))
        return CUDA_SUCCESS;
    gpurun_flush_frees();
    return free_host(pointer, last_use, kernel_context);
}
