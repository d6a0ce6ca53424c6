/* gpurun.ObjectCode: device code (compiled, linked or brought from
 * elsewhere) and the kernels in it. */
#ifndef GPURUN_TYPES_OBJECT_CODE_H
#define GPURUN_TYPES_OBJECT_CODE_H

#include "runtime/runtime.h"
#include "base/device_code.h"
#include "base/nvrtc_compile.h"

extern const struct gpurun_tag gpurun_object_code_tag;

/* Pushes an ObjectCode holding the output of compiling the program `name`
 * to `type`; expressions[i] is the name expression whose lowered name is
 * output->lowered_names[i]. The program's source, the string at
 * source_index, goes with its kernels (Kernel.source). */
void gpurun_push_object_code(lua_State *L, enum device_code_type type, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
                             int from_cache, int source_index);

/* Pushes an ObjectCode of `type` holding the string at code_index, the
 * output of a link named `name` with its log (from the kernel cache when
 * from_cache); the kernels' signatures are read from ptx (ptx_size bytes;
 * NULL when the code carries none). */
void gpurun_push_linked_code(lua_State *L, enum device_code_type type, const char *name,
                             const char *log, int code_index, const char *ptx, size_t ptx_size,
                             int from_cache);

/* Pushes the code (a string) and the name of the ObjectCode at index,
 * which must be open, and returns its type: what a link takes of it. */
enum device_code_type gpurun_push_code_of(lua_State *L, int index);

/* Pushes the signatures of the kernels of the ObjectCode at index, which
 * must be open, as ptx_signatures_format's text ("" when its code carries
 * none): what a cubin linked from it types its kernels by. */
void gpurun_push_signatures_of(lua_State *L, int index);

void gpurun_open_object_code(lua_State *L);

#endif
