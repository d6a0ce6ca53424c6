/* gpurun.IPCAllocationHandle: a memory pool's shareable handle (a POSIX
 * file descriptor this process owns) with the pool's descriptor, as
 * cuda.core's IPCAllocationHandle: made by MemoryPool:get_allocation_handle,
 * received by gpurun.ipc.receive, imported by
 * MemoryPool.from_allocation_handle. Closing it closes the descriptor. */
#ifndef GPURUN_TYPES_ALLOCATION_HANDLE_H
#define GPURUN_TYPES_ALLOCATION_HANDLE_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_allocation_handle_tag;

/* User value 1: the pool's descriptor (a string), or nil. */
struct gpurun_allocation_handle {
    struct gpurun_object header;
    int fd;
};

/* Pushes an open handle owning fd (closed here if the push fails), with
 * the string at descriptor_index (0: none) as its descriptor. */
struct gpurun_allocation_handle *gpurun_push_allocation_handle(lua_State *L, int fd,
                                                               int descriptor_index);

/* The open IPCAllocationHandle at index, or an error. */
struct gpurun_allocation_handle *gpurun_check_allocation_handle(lua_State *L, int index);

void gpurun_open_allocation_handle(lua_State *L);

#endif
