/* gpurun.dtypes: base/dtype.c's table of element types, as Lua reads it. */
#ifndef GPURUN_TYPES_DTYPES_H
#define GPURUN_TYPES_DTYPES_H

#include "runtime/runtime.h"

void gpurun_open_dtypes(lua_State *L);

#endif
