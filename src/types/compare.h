/* gpurun.compare and gpurun.allclose: numpy's isclose over buffers. */
#ifndef GPURUN_TYPES_COMPARE_H
#define GPURUN_TYPES_COMPARE_H

#include "runtime/runtime.h"

void gpurun_open_compare(lua_State *L);

#endif
