/* The C side of gpurun.system: NVML's answers as Lua values. */
#ifndef GPURUN_TYPES_NVML_H
#define GPURUN_TYPES_NVML_H

#include "runtime/runtime.h"

/* Sets package.loaded["gpurun.nvml_core"]. */
void gpurun_open_nvml(lua_State *L);

#endif
