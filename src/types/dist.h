/* The C side of require("gpurun.dist"): MPI ranks and NCCL collectives. */
#ifndef GPURUN_TYPES_DIST_H
#define GPURUN_TYPES_DIST_H

#include "runtime/runtime.h"

/* Registers the communicator type and sets package.loaded["gpurun.dist_core"]. */
void gpurun_open_dist(lua_State *L);

#endif
