/* gpurun.Context: a green context (some of a device's multiprocessors),
 * made by Device:create_context, with streams of its own. */
#ifndef GPURUN_TYPES_CONTEXT_H
#define GPURUN_TYPES_CONTEXT_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_context_tag;

struct gpurun_stream;

/* Pushes a new stream in the context of the Stream at index (a green
 * context's, or the current device's primary one): where a capture's
 * forks and conditional bodies record, so that one graph's nodes share
 * one context. */
struct gpurun_stream *gpurun_push_stream_beside(lua_State *L, int stream_index);

void gpurun_open_context(lua_State *L);

#endif
