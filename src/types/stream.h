/* gpurun.Stream: an ordered queue of GPU work on one device. */
#ifndef GPURUN_TYPES_STREAM_H
#define GPURUN_TYPES_STREAM_H

#include "runtime/runtime.h"

/* Creates a non-blocking stream on the current device with the given
 * priority (0: the default), pushes it. */
struct gpurun_stream *gpurun_push_new_stream(lua_State *L, int priority);

/* Pushes a Stream object of `context` and `device` whose handle its maker
 * creates and then opens it (header.closed = 0); its one user value keeps
 * what the stream needs alive (a green context's Context). */
struct gpurun_stream_object *gpurun_push_stream_object(lua_State *L, CUcontext context, int device);

/* Closes the Stream at index, whose context is about to be destroyed with
 * all its work done: its ordering event goes now, as nothing is left to
 * wait for. */
void gpurun_close_stream_of_ended_context(lua_State *L, int index);

/* What a type above keeps for a stream (a library's handle bound to it)
 * goes when the stream closes: each hook runs in Stream:close, before the
 * stream is destroyed. Set once per type, when it is opened. */
typedef void (*gpurun_stream_close_hook)(lua_State *L, struct gpurun_stream *stream);
void gpurun_add_stream_close_hook(gpurun_stream_close_hook hook);

void gpurun_open_stream(lua_State *L);

#endif
