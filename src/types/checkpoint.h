/* gpurun.checkpoint: lock, checkpoint, restore and unlock this process's
 * GPU state through the driver. */
#ifndef GPURUN_TYPES_CHECKPOINT_H
#define GPURUN_TYPES_CHECKPOINT_H

#include "runtime/runtime.h"

void gpurun_open_checkpoint(lua_State *L);

#endif
