/* gpurun.compare and gpurun.allclose: numpy's isclose over buffers. */
#ifndef GPURUN_LCOMPARE_H
#define GPURUN_LCOMPARE_H

#include "runtime.h"

void gpurun_open_compare(lua_State *L);

#endif
