/* gpurun.Device: one CUDA device and its primary context. */
#ifndef GPURUN_TYPES_DEVICE_H
#define GPURUN_TYPES_DEVICE_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_device_tag;

/* The ordinal of the open Device at index, or an error. */
int gpurun_check_device_ordinal(lua_State *L, int index);

void gpurun_open_device(lua_State *L);

#endif
