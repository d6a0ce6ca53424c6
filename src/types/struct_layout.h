/* gpurun.struct(fields [, options]) -> gpurun.StructLayout: the layout C
 * gives a field list, which makes the gpurun.Struct values (types/struct.h)
 * a kernel takes by value. */
#ifndef GPURUN_TYPES_STRUCT_LAYOUT_H
#define GPURUN_TYPES_STRUCT_LAYOUT_H

#include "runtime/runtime.h"

void gpurun_open_struct_layout(lua_State *L);

#endif
