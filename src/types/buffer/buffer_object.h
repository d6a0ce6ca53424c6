/* What a gpurun.Buffer is: its header, its tag, and the checks every
 * operation on one starts with (types/buffer/buffer_object.c). The operations are
 * above: ordering and transfers, host copies, then the type itself. */
#ifndef GPURUN_TYPES_BUFFER_OBJECT_H
#define GPURUN_TYPES_BUFFER_OBJECT_H

#include "runtime/runtime.h"
#include "types/stream.h"

extern const struct gpurun_tag gpurun_buffer_tag;

struct gpurun_memory_pool;

/* Streams other than its own that a buffer of stream-ordered memory was
 * used on since it was made (kernels launched there, fills and copies
 * queued there, graphs replayed there): its free waits for their work.
 * One more and its free waits for the whole device instead. */
#define GPURUN_BUFFER_USES 4

/* The user values of a buffer of stream-ordered memory (a view has one:
 * its base): the MemoryPool, the Stream it is freed on (the GraphBuilder
 * it was made on, while its capture builds), the streams of used_on. */
#define GPURUN_BUFFER_POOL_VALUE 1
#define GPURUN_BUFFER_STREAM_VALUE 2
#define GPURUN_BUFFER_USES_VALUE 3
#define GPURUN_BUFFER_USER_VALUES (2 + GPURUN_BUFFER_USES)

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
    /* Stream-ordered memory: a pool's (cuMemAllocFromPoolAsync, freed with
     * cuMemFreeAsync on `stream` after the work of used_on), or a graph's
     * (an allocation node). cuMemAlloc's memory has none of it. */
    unsigned char ordered;
    /* Used on more streams than used_on holds. */
    unsigned char uses_lost;
    /* No memory behind it at the moment: made inside a capture, it has
     * none outside that capture until its graph is launched. */
    unsigned char unallocated;
    struct gpurun_memory_pool *pool;     /* where it came from (NULL: cuMemAlloc) */
    struct gpurun_stream *stream;        /* its own stream (NULL inside a capture) */
    struct gpurun_stream *used_on[GPURUN_BUFFER_USES];
    /* Made by an allocation node: the node's address and size (counted
     * against the pool's max_size), which stay the graph's after the
     * buffer is closed (types/graph.c). */
    CUdeviceptr graph_address;
    size_t graph_bytes;
};

/* An open Buffer at index, or an error (for a view whose base was closed,
 * one that says so). */
struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index);

/* An open Buffer on the current device (a copy or a fill on another
 * device's memory would need its context), or an error. */
struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index);

/* Raises unless the buffer has memory for work recorded by `capture` (NULL:
 * work that runs now, or on a plain stream): one made inside a capture has
 * memory only for that capture's builders until its graph is launched. */
void gpurun_check_buffer_memory(lua_State *L, const struct gpurun_buffer *buffer,
                                const struct gpurun_capture *capture);

/* The buffer whose memory it is: the base of a view, else itself. */
static inline struct gpurun_buffer *gpurun_buffer_owner(struct gpurun_buffer *buffer)
{
    return buffer->base ? buffer->base : buffer;
}

/* Records that the Buffer at index is used by work queued on the Stream at
 * stream_index (a new stream into used_on, held by a user value), so that
 * its free waits for that work. Allocates nothing. */
void gpurun_record_buffer_use(lua_State *L, struct gpurun_buffer *owner, int index,
                              int stream_index);

/* The same, for the launch path: a compare or two when nothing is new. */
static inline void gpurun_note_buffer_use(lua_State *L, struct gpurun_buffer *buffer, int index,
                                          const struct gpurun_stream *stream, int stream_index)
{
    struct gpurun_buffer *owner = gpurun_buffer_owner(buffer);
    if (!owner->ordered || owner->stream == stream)
        return;
    for (int i = 0; i < GPURUN_BUFFER_USES; i++)
        if (owner->used_on[i] == stream)
            return;
    gpurun_record_buffer_use(L, owner, index, stream_index);
}

/* For an operation on the buffer at index queued on the stream argument at
 * stream_index (0 or nil: the current stream; a GraphBuilder: none), which
 * returns before the work is done. */
void gpurun_note_buffer_use_on(lua_State *L, int index, int stream_index);

#endif
