/* gpurun.launch, and the argument checks and packing that launch plans
 * (types/launch_plan.c) share with it. */
#ifndef GPURUN_TYPES_LAUNCH_H
#define GPURUN_TYPES_LAUNCH_H

#include "runtime/runtime.h"
#include "types/buffer/buffer.h"
#include "types/graph_builder.h"
#include "types/kernel.h"
#include "types/launch_config.h"

/* Raises unless the kernel can run on the launch target at index (already
 * checked by gpurun_launch_target; capture is what it set). */
void gpurun_check_launch_device(lua_State *L, const struct gpurun_kernel *kernel, int index,
                                const struct gpurun_capture *capture);

/* The LaunchConfig at index, or an error. */
struct gpurun_launch_config *gpurun_check_config(lua_State *L, int index);

/* Raises unless `given` arguments and the config suit the kernel. */
void gpurun_check_launch(lua_State *L, const struct gpurun_kernel *kernel,
                         const struct gpurun_launch_config *config, int given);

/* Writes the Lua value at index as parameter i of the kernel into slot;
 * returns the Buffer whose memory it passed (a TensorMap's: the owner of
 * the buffer it points at), or NULL for other values. `capture` is the
 * one the launch records into (NULL: none, or a plan being bound): a
 * Condition passes only into its own. */
struct gpurun_buffer *gpurun_pack_argument(lua_State *L, const struct gpurun_kernel *kernel,
                                           int i, int index, unsigned char *slot,
                                           const struct gpurun_capture *capture);

/* Launches with the config's attributes (through cuLaunchKernelEx when it
 * has any, after checking them against the kernel and device once), in the
 * kernel's context (made current around the call when another device is),
 * raising "<call>: ... while launching kernel 'name'" on failure. The packed
 * arguments are `params`. On a stream of another context of the kernel's
 * device (a green context's, stream_context), the context-independent
 * kernel is launched instead of `function`: the driver runs it in the
 * stream's context, on that context's multiprocessors. */
void gpurun_launch_kernel(lua_State *L, const struct gpurun_kernel *kernel, CUfunction function,
                          struct gpurun_launch_config *config, CUstream stream,
                          CUcontext stream_context, void **params);

void gpurun_open_launch(lua_State *L);

#endif
