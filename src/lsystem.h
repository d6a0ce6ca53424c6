/* Module functions of no type: device_count, driver_version, driver_error,
 * nvrtc_version, mem_info, format_cuda_error, perf_counter, version. */
#ifndef GPURUN_LSYSTEM_H
#define GPURUN_LSYSTEM_H

#include "runtime.h"

void gpurun_open_system(lua_State *L);

#endif
