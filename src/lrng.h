/* gpurun.default_rng and gpurun.Generator: seeded uniform numbers in
 * buffers and in Lua tables. */
#ifndef GPURUN_LRNG_H
#define GPURUN_LRNG_H

#include "runtime.h"

extern const struct gpurun_tag gpurun_generator_tag;

void gpurun_open_rng(lua_State *L);

#endif
