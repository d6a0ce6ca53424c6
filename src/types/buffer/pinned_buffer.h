/* gpurun.PinnedBuffer: page-locked host memory holding elements of one
 * dtype, which the GPU copies to and from at full speed and asynchronously
 * (cuda.core allocates the same memory through its pinned memory
 * resources). */
#ifndef GPURUN_TYPES_PINNED_BUFFER_H
#define GPURUN_TYPES_PINNED_BUFFER_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_pinned_tag;

struct gpurun_pinned {
    struct gpurun_object header;
    unsigned char *host;      /* cuMemHostAlloc'ed, portable to every context */
    size_t count;             /* elements */
    size_t element_size;
    int dtype;
    /* Recorded after the last copy queued on a stream that reads or writes
     * this memory (NULL before the first): host access and freeing wait for
     * it while copy_pending is set. */
    CUevent last_copy;
    CUcontext event_context;
    CUstream last_stream;     /* where last_copy was recorded */
    int copy_pending;
    /* Mapped ({ mapped = true }): the address kernels reach it at, else 0. */
    CUdeviceptr device_pointer;
    /* The context of the last kernel given it (a launch, or a capture that
     * a graph replays), or NULL: host access waits for that device. */
    CUcontext kernel_context;
};

/* An open PinnedBuffer at index, or an error. */
struct gpurun_pinned *gpurun_check_pinned(lua_State *L, int index);

/* Allocates count elements of dtype and pushes the PinnedBuffer; count_arg
 * names the argument when the byte size overflows; `mapped`: kernels reach
 * it too, at device_pointer. Needs a current device. */
struct gpurun_pinned *gpurun_push_new_pinned(lua_State *L, size_t count, int dtype, int count_arg,
                                             int mapped);

/* The one rule for memory that kernels reach directly while the host may
 * touch it too (a managed Buffer, a mapped PinnedBuffer given to a
 * kernel): stream order does not cover a kernel or graph queued on another
 * stream, and graph replays record no streams, so the host reaches such
 * memory only after all the work queued on its device (`context`) is done.
 * `what` names the access in errors. */
void gpurun_wait_direct_access(lua_State *L, CUcontext context, const char *what);

/* Waits for the copies queued on streams that use the memory, and for the
 * device of the kernels given it (gpurun_wait_direct_access). */
void gpurun_pinned_wait(lua_State *L, struct gpurun_pinned *pinned);

/* Before queuing a copy that uses the memory on a stream of the current
 * context: makes the event gpurun_pinned_queued records (so that recording
 * cannot fail for want of one once the copy is queued). */
void gpurun_pinned_prepare(lua_State *L, struct gpurun_pinned *pinned);

/* Says that a copy using the memory was just queued on `stream` (of the
 * current context): what waits for the memory then waits for that copy,
 * and for those queued before it on other streams. */
void gpurun_pinned_queued(lua_State *L, struct gpurun_pinned *pinned, CUstream stream);

void gpurun_open_pinned(lua_State *L);

#endif
