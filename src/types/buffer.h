/* gpurun.Buffer: device memory holding elements of one dtype. */
#ifndef GPURUN_TYPES_BUFFER_H
#define GPURUN_TYPES_BUFFER_H

#include "runtime/runtime.h"
#include "types/buffer_object.h"

/* Allocates count elements on the current device and pushes the Buffer;
 * count_arg names the argument when the byte size overflows. */
struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype, int count_arg);

void gpurun_open_buffer(lua_State *L);

#endif
