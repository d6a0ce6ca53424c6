/* gpurun.Program: CUDA C++ source and its options, compiled by NVRTC. */
#ifndef GPURUN_LPROGRAM_H
#define GPURUN_LPROGRAM_H

#include "runtime.h"

extern const struct gpurun_tag gpurun_program_tag;

void gpurun_open_program(lua_State *L);

#endif
