/* gpurun.LaunchPlan: a kernel's launch with its arguments checked and
 * packed once (kernel:bind), launched as often as wanted. */
#ifndef GPURUN_TYPES_LAUNCH_PLAN_H
#define GPURUN_TYPES_LAUNCH_PLAN_H

#include "runtime/runtime.h"

void gpurun_open_launch_plan(lua_State *L);

#endif
