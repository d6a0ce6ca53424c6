/* gpurun.Buffer: device memory holding elements of one dtype, in
 * types/buffer/. What the types above it use: what a Buffer is, its checks
 * and the streams it was used on, the stream its work goes on with the
 * element copies (buffer.c); fills (elements.c); where a new one's memory
 * comes from, and what a Graph tells the buffers its allocation nodes made
 * (memory.c). */
#ifndef GPURUN_TYPES_BUFFER_BUFFER_H
#define GPURUN_TYPES_BUFFER_BUFFER_H

#include "runtime/runtime.h"
#include "types/stream.h"

/* ---- what a Buffer is (buffer.c) ---------------------------------------- */

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
    /* Managed memory (cuMemAllocManaged, types/buffer/managed.c), which the
     * host reaches too: host access waits as gpurun_order_host_access says. */
    unsigned char managed;
    /* A graph's allocation that a free node of another graph frees
     * (Buffer:close(builder)): the two graphs' launches must alternate, and
     * `unallocated` says whose turn it is. */
    unsigned char freed_in_graph;
    /* Its graph frees it at each launch (auto_free_on_launch). */
    unsigned char graph_auto_free;
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

/* Whether kernels on another device may use the buffer's memory: a peer
 * enabled with Device:enable_peer_access, or a device its pool gave access
 * to (MemoryPool:set_access). */
int gpurun_buffer_reached_from(const struct gpurun_buffer *buffer, int device);

/* Whether kernels on `device` may use the buffer's memory, inline for the
 * launch path: its own device needs no call. */
static inline int gpurun_buffer_reachable(struct gpurun_buffer *buffer, int device)
{
    return buffer->device == device || gpurun_buffer_reached_from(gpurun_buffer_owner(buffer), device);
}

/* Records that the Buffer at index (whose memory is owner's) is used by
 * work queued on the Stream at stream_index, so that its free waits for
 * that work: a new stream goes into used_on, held by a user value; memory
 * that is not stream-ordered, its own stream and a stream recorded already
 * need nothing. Allocates nothing. */
void gpurun_record_buffer_use(lua_State *L, struct gpurun_buffer *owner, int index,
                              int stream_index);

/* The same for the launch path, inline: a compare or two when nothing is
 * new, and the call only when something may be. */
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

/* ---- the stream its work goes on, element copies (buffer.c) ------------ */

/* Every buffer operation goes on gpurun_operation_stream(): queued there
 * and waited for only when host memory is involved; with no stream, the
 * whole device is waited for before (a kernel may still use the buffer) and
 * after (so that what follows sees the result). A stream being captured is
 * refused: the capture would keep neither host memory nor the buffer. */
CUstream gpurun_begin_transfer(lua_State *L, int stream_index, const char *operation);
void gpurun_end_transfer(lua_State *L, CUstream stream, const char *operation);

/* For operations a graph can hold (fills, copies between buffers): the
 * Stream or, while it builds, the GraphBuilder at stream_index (then
 * *capture is set, and the operation becomes a memset or memcpy node). */
CUstream gpurun_begin_device_transfer(lua_State *L, int stream_index, const char *operation,
                                      struct gpurun_capture **capture);

/* The same with the current stream, for functions that take none. */
CUstream gpurun_begin_host_transfer(lua_State *L, const char *operation);

/* With no stream, a copy that involves another device's buffer waits for
 * that device too, before and after. */
void gpurun_sync_other_device(lua_State *L, const struct gpurun_buffer *buffer,
                              const char *operation);

/* Copies count elements from first on, to or from host memory; each returns
 * once its copy is done, so that the host memory can be reused. */
void gpurun_write_elements(lua_State *L, struct gpurun_buffer *buffer, size_t first,
                           size_t count, const void *host, CUstream stream);
void gpurun_read_elements(lua_State *L, const struct gpurun_buffer *buffer, size_t first,
                          size_t count, void *host, CUstream stream);

/* Before a copy between a buffer and the host queued on `stream`: the copy
 * is in that stream's order only, so a managed buffer waits for the rest
 * of its device too, as gpurun_wait_direct_access (pinned_buffer.h) says
 * (with no stream, begin_transfer waited for the device already). */
void gpurun_order_host_access(lua_State *L, const struct gpurun_buffer *buffer, CUstream stream,
                              const char *what);

/* gpurun_cuda_error, saying what to do instead when the call failed because
 * a graph is being captured. */
int gpurun_transfer_error(lua_State *L, const char *what_fmt, ...);

/* ---- its elements (elements.c) ------------------------------------------ */

/* Sets every element to the element at pattern; `capturing`: into a graph
 * (memset nodes only). */
void gpurun_fill_elements(lua_State *L, struct gpurun_buffer *buffer,
                          const unsigned char *pattern, CUstream stream, int capturing);

/* ---- its memory (memory.c) ----------------------------------------------- */

/* Where a new buffer's memory comes from, as the constructors' options say
 * ({ pool =, stream = }): with `ordered` 0, cuMemAlloc; else the MemoryPool
 * at pool_index (0: the device's default pool), allocated in the order of
 * the Stream or GraphBuilder at stream_index (0: the current stream); on a
 * building GraphBuilder, an allocation node of its graph. */
struct gpurun_placement {
    int ordered;
    int pool_index;
    int stream_index;
};

/* Reads the options table at arg (none or nil: cuMemAlloc) into *where,
 * pushing the pool and the stream it names so that their indices stay
 * valid. `host_data`: the constructor copies host data in (array, random),
 * which no graph can replay, so a GraphBuilder is refused here. */
void gpurun_check_placement(lua_State *L, int arg, struct gpurun_placement *where, int host_data);

/* Allocates count elements (on the current device, or as `where` says:
 * NULL is cuMemAlloc) and pushes the Buffer; count_arg names the argument
 * when the byte size overflows. */
struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype, int count_arg,
                                             const struct gpurun_placement *where);

/* For types/graph.c, the Graph completed from the capture that allocated
 * the Buffer at index (and did not free it): the buffer is now the graph's
 * (completed, with its auto_free_on_launch), gets memory at each launch on
 * the Stream at stream_index (launched), or keeps the last launch's when
 * the graph is closed, and is closed if it never got any (closed). */
void gpurun_buffer_graph_completed(lua_State *L, int index, int auto_free);
void gpurun_buffer_graph_launched(lua_State *L, int index, int stream_index);
void gpurun_buffer_graph_closed(lua_State *L, int index);

/* The Graph whose free node frees the Buffer at index, another graph's
 * allocation (Buffer:close(builder)), is gone, or its capture was dropped:
 * memory the allocating graph made and nobody will free now is freed after
 * the device's work, and that graph frees what it makes after each launch
 * itself from then on. */
void gpurun_buffer_free_graph_closed(lua_State *L, int index);

void gpurun_open_buffer(lua_State *L);

#endif
