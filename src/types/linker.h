/* gpurun.Linker: ObjectCodes linked by nvJitLink into one ObjectCode. */
#ifndef GPURUN_TYPES_LINKER_H
#define GPURUN_TYPES_LINKER_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_linker_tag;

void gpurun_open_linker(lua_State *L);

#endif
