/* gpurun.Buffer: device memory holding elements of one dtype. */
#ifndef GPURUN_TYPES_BUFFER_H
#define GPURUN_TYPES_BUFFER_H

#include "runtime/runtime.h"
#include "types/buffer/buffer_object.h"

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
 * (completed), gets memory at each launch on the Stream at stream_index
 * (launched), or keeps the last launch's when the graph is closed, and is
 * closed if it never got any (closed). */
void gpurun_buffer_graph_completed(lua_State *L, int index);
void gpurun_buffer_graph_launched(lua_State *L, int index, int stream_index);
void gpurun_buffer_graph_closed(lua_State *L, int index);

void gpurun_open_buffer(lua_State *L);

#endif
