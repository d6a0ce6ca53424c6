/* gpurun.nvtx: NVTX ranges and marks for Nsight Systems and Nsight Compute. */
#ifndef GPURUN_TYPES_NVTX_H
#define GPURUN_TYPES_NVTX_H

#include <lua.h>

/* Opens the module table: range_push, range_pop, mark, with_range. */
int luaopen_gpurun_nvtx(lua_State *L);

#endif
