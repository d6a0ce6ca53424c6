/* gpurun.Context: a green context (some of a device's multiprocessors),
 * made by Device:create_context, with streams of its own. */
#ifndef GPURUN_TYPES_CONTEXT_H
#define GPURUN_TYPES_CONTEXT_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_context_tag;

void gpurun_open_context(lua_State *L);

#endif
