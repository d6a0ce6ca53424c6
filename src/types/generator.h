/* gpurun.default_rng and gpurun.Generator: seeded uniform numbers in
 * buffers and in Lua tables. */
#ifndef GPURUN_TYPES_GENERATOR_H
#define GPURUN_TYPES_GENERATOR_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_generator_tag;

void gpurun_open_rng(lua_State *L);

#endif
