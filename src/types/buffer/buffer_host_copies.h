/* Buffer copies to and from host memory other than Lua tables: strings,
 * PinnedBuffers and files (types/buffer/buffer_host_copies.c). */
#ifndef GPURUN_TYPES_BUFFER_HOST_COPIES_H
#define GPURUN_TYPES_BUFFER_HOST_COPIES_H

#include "types/buffer/buffer_object.h"

/* Each copies between `part` (a Buffer, or a range of one as part_of makes
 * it) and the value at `index`; stream_index is the stream argument. */

/* A range of a buffer, as a buffer of its own for the functions here (a C
 * value, never a Lua object). */
struct gpurun_buffer gpurun_buffer_part(const struct gpurun_buffer *buffer, size_t first,
                                        size_t count);

/* A string of exactly the part's bytes into it. */
void gpurun_copy_from_string(lua_State *L, struct gpurun_buffer *part, int index, int stream_index,
                             const char *operation);

/* Pushes the bytes of count elements from first (0-based) of the Buffer at
 * self_index as a string. */
void gpurun_push_bytes(lua_State *L, int self_index, size_t first, size_t count, int stream_index,
                       const char *operation);

/* Between the part and the PinnedBuffer at index (as many elements, the same
 * dtype), queued: on a stream it returns at once (the PinnedBuffer waits for
 * the copy before the host touches it); on a GraphBuilder that is building
 * it becomes a node of the graph, which keeps both alive; with no stream
 * at all it waits for the device before and after. self_index is the
 * Buffer's argument (the capture keeps it). */
void gpurun_copy_pinned(lua_State *L, struct gpurun_buffer *part, int self_index, int index,
                        int to_device, int stream_index, const char *operation);

/* Between the part of the Buffer at self_index and the Lua file at index,
 * from or at its position, through page-locked staging in chunks; returns
 * when done. */
void gpurun_copy_file(lua_State *L, int self_index, const struct gpurun_buffer *part, int index,
                      int to_device, int stream_index, const char *operation);

/* Whether the value at index is a Lua file handle (open or closed). */
int gpurun_is_file(lua_State *L, int index);


#endif
