/* gpurun.Program: CUDA C++ source and its options, compiled by NVRTC. */
#ifndef GPURUN_TYPES_PROGRAM_H
#define GPURUN_TYPES_PROGRAM_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_program_tag;

/* Pushes the current device's arch ("90"), or nil with no current device:
 * the arch a compile or a link is for when its options name none. */
void gpurun_push_current_arch(lua_State *L);

/* Pushes the function `name` of the builtin table of the options type
 * `type_name` ("gpurun.ProgramOptions"), written in Lua. */
void gpurun_push_options_function(lua_State *L, const char *type_name, const char *name);

/* The option strings of the list at `list` (which keeps them anchored) as a
 * C array, itself left on the stack. */
const char **gpurun_option_strings(lua_State *L, int list, size_t *count);

void gpurun_open_program(lua_State *L);

#endif
