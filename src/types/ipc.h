/* The C side of gpurun.ipc (lua/gpurun/builtin/ipc.lua): one message of
 * bytes and pool handles over a Unix-domain socket (base/ipc_socket.c). */
#ifndef GPURUN_TYPES_IPC_H
#define GPURUN_TYPES_IPC_H

#include "runtime/runtime.h"

void gpurun_open_ipc(lua_State *L);

#endif
