/* gpurun.Program: CUDA C++ source and its options, compiled by NVRTC. */
#ifndef GPURUN_TYPES_PROGRAM_H
#define GPURUN_TYPES_PROGRAM_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_program_tag;

void gpurun_open_program(lua_State *L);

#endif
