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
};

/* An open PinnedBuffer at index, or an error. */
struct gpurun_pinned *gpurun_check_pinned(lua_State *L, int index);

/* Allocates count elements of dtype and pushes the PinnedBuffer; count_arg
 * names the argument when the byte size overflows. Needs a current device. */
struct gpurun_pinned *gpurun_push_new_pinned(lua_State *L, size_t count, int dtype, int count_arg);

/* Waits for the copies queued on streams that use the memory. */
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
