/* What a gpurun.Buffer is: its header, its tag, and the checks every
 * operation on one starts with (types/buffer_object.c). The operations are
 * above: ordering and transfers, host copies, then the type itself. */
#ifndef GPURUN_TYPES_BUFFER_OBJECT_H
#define GPURUN_TYPES_BUFFER_OBJECT_H

#include "runtime/runtime.h"
#include "types/stream.h"

extern const struct gpurun_tag gpurun_buffer_tag;

struct gpurun_buffer {
    struct gpurun_object header; /* first: the launch path reads it through the tag */
    CUdeviceptr pointer;
    size_t count;                /* elements */
    size_t element_size;
    int dtype;                   /* enum gpurun_dtype */
    CUcontext context;           /* where the memory lives, and is freed */
    int device;
    /* A view's base (Buffer:view; user value 1 keeps it alive), whose
     * memory it shares, or NULL. A view counts its graph uses for its base,
     * is closed with it, and frees nothing itself. */
    struct gpurun_buffer *base;
};

/* An open Buffer at index, or an error (for a view whose base was closed,
 * one that says so). */
struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index);

/* An open Buffer on the current device (a copy or a fill on another
 * device's memory would need its context), or an error. */
struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index);

#endif
