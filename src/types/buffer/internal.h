/* What the files of types/buffer/ share and no other type sees: the
 * methods that buffer.c, elements.c and memory.c make and type.c
 * registers, and what the constructors fill a new buffer with. Others
 * include buffer.h. */
#ifndef GPURUN_TYPES_BUFFER_INTERNAL_H
#define GPURUN_TYPES_BUFFER_INTERNAL_H

#include "types/buffer/buffer.h"

/* ---- buffer.c ------------------------------------------------------------ */

/* Buffer:copy_from and copy_to. */
int gpurun_buffer_copy_from(lua_State *L);
int gpurun_buffer_copy_to(lua_State *L);

/* A range of a buffer, as a buffer of its own for the functions that copy
 * (a C value, never a Lua object). */
struct gpurun_buffer gpurun_buffer_part(const struct gpurun_buffer *buffer, size_t first,
                                        size_t count);

/* The sequence at table_index as count elements of dtype in new staging
 * memory (pushed), every element checked before any device work; arg names
 * the argument in errors. */
unsigned char *gpurun_stage_table(lua_State *L, int table_index, int arg, size_t count, int dtype);

/* A string of exactly the part's bytes into it. */
void gpurun_copy_from_string(lua_State *L, struct gpurun_buffer *part, int index, int stream_index,
                             const char *operation);

/* ---- elements.c ---------------------------------------------------------- */

/* Buffer:fill, to_table, to_bytes, get, set, and buf[i]. */
int gpurun_buffer_fill(lua_State *L);
int gpurun_buffer_to_table(lua_State *L);
int gpurun_buffer_to_bytes(lua_State *L);
int gpurun_buffer_get(lua_State *L);
int gpurun_buffer_set(lua_State *L);
int gpurun_buffer_element(lua_State *L);

/* Sets every element of `buffer` (the Buffer at buffer_index, or a part of
 * it) to the element at pattern, on the stream or builder at stream_index. */
void gpurun_fill_buffer(lua_State *L, struct gpurun_buffer *buffer, int buffer_index,
                        const unsigned char *pattern, int stream_index, const char *operation);

/* ---- memory.c ------------------------------------------------------------ */

/* Buffer:view. */
int gpurun_buffer_view(lua_State *L);

/* The one close of the Buffer at 1, behind :close([stream]) and __close
 * (explicit) and __gc; stream_index is close's stream argument (0: none). */
int gpurun_close_buffer(lua_State *L, int explicit, int stream_index);

/* A buffer made in a capture whose graph went without becoming a Graph:
 * its memory never comes to exist (runtime/capture.c calls it). */
void gpurun_drop_buffer(lua_State *L, int index);

/* Raises, naming the argument at count_arg, when count elements of dtype
 * overflow size_t in bytes. */
void gpurun_check_byte_size(lua_State *L, size_t count, int dtype, int count_arg);

/* Pushes a new Buffer object, closed and with no memory yet, for a
 * constructor to fill in and open. */
struct gpurun_buffer *gpurun_push_buffer_object(lua_State *L, size_t count, int dtype,
                                                int uservalues);

/* ---- managed.c ----------------------------------------------------------- */

/* gpurun.managed, Buffer:prefetch and Buffer:advise, registered. */
void gpurun_open_managed(lua_State *L);

/* ---- ipc.c --------------------------------------------------------------- */

/* Buffer:ipc_descriptor and gpurun.Buffer.from_ipc, registered. */
void gpurun_open_buffer_ipc(lua_State *L);

#endif
