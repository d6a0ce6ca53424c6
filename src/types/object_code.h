/* gpurun.ObjectCode: the PTX or CUBIN a Program compiled, and the kernels
 * in it. */
#ifndef GPURUN_TYPES_OBJECT_CODE_H
#define GPURUN_TYPES_OBJECT_CODE_H

#include "runtime/runtime.h"
#include "base/nvrtc_compile.h"

extern const struct gpurun_tag gpurun_object_code_tag;

/* Pushes an ObjectCode holding the output of compiling the program `name`
 * to `target`; expressions[i] is the name expression whose lowered name is
 * output->lowered_names[i]. The program's source, the string at
 * source_index, goes with its kernels (Kernel.source). */
void gpurun_push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
                             int from_cache, int source_index);

void gpurun_open_object_code(lua_State *L);

#endif
