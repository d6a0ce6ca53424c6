/* What the compile pipeline's three types share: lprogram_options.c
 * (gpurun.ProgramOptions), lprogram.c (gpurun.Program, which compiles) and
 * lobject_code.c (gpurun.ObjectCode, what a compile makes). */
#ifndef GPURUN_LPROGRAM_H
#define GPURUN_LPROGRAM_H

#include <string.h>

#include "gpurun.h"
#include "nvrtc_compile.h"

/* Scratch memory that Lua collects, so that an error never leaks it. */
static inline void *gpurun_scratch(lua_State *L, size_t size)
{
    return lua_newuserdatauv(L, size ? size : 1, 0);
}

static inline int gpurun_has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* qsort comparison of C strings, so that lists never depend on the order
 * of a table's traversal or of the driver's enumeration. */
int gpurun_compare_strings(const void *a, const void *b);

/* Replaces the table on top of the stack by a shallow copy: fields handed
 * out are read-only, changing the copy changes nothing. */
void gpurun_replace_with_copy(lua_State *L);

/* lprogram_options.c: replaces the value at index (a slot of the stack),
 * nil, a table of options or a ProgramOptions, by a ProgramOptions that is
 * not closed, or raises. */
void gpurun_to_program_options(lua_State *L, int index);

/* lprogram_options.c: pushes the NVRTC option strings of the ProgramOptions
 * at index, in order: its own table, which the caller must not change. */
void gpurun_push_option_list(lua_State *L, int index);

/* lobject_code.c: pushes an ObjectCode holding the output of compiling the
 * program `name` to `target`; expressions[i] is the name expression whose
 * lowered name is output->lowered_names[i]. */
void gpurun_push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
                             int from_cache);

/* Registration: metatables, and the constructors in the module table at
 * the top of the stack. gpurun_open_program (lprogram.c) calls the others. */
void gpurun_open_program_options(lua_State *L);
void gpurun_open_object_code(lua_State *L);

#endif
