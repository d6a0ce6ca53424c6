/* gpurun.HostCallback: a Lua function run at a point of a stream's order
 * (runtime/state.c says how, and on which thread). */
#ifndef GPURUN_TYPES_HOST_CALLBACK_H
#define GPURUN_TYPES_HOST_CALLBACK_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_host_callback_tag;

struct gpurun_host_callback {
    struct gpurun_object header;
    struct gpurun_host_call call;
};

void gpurun_open_host_callback(lua_State *L);

#endif
