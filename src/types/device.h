/* gpurun.Device: one CUDA device and its primary context. */
#ifndef GPURUN_TYPES_DEVICE_H
#define GPURUN_TYPES_DEVICE_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_device_tag;

void gpurun_open_device(lua_State *L);

#endif
