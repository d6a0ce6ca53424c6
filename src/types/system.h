/* Module functions of no type: device_count, driver_version, driver_error,
 * nvrtc_version, mem_info, format_cuda_error, perf_counter, version. */
#ifndef GPURUN_TYPES_SYSTEM_H
#define GPURUN_TYPES_SYSTEM_H

#include "runtime/runtime.h"

void gpurun_open_system(lua_State *L);

#endif
