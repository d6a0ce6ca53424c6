/* gpurun.MemoryPool: a driver memory pool that buffers are allocated from in
 * stream order (cuMemAllocFromPoolAsync / cuMemFreeAsync): a device's
 * default pool (Device:memory_pool()) or one of gpurun's own
 * (gpurun.MemoryPool{ ... }). The buffers themselves are types/buffer/'s. */
#ifndef GPURUN_TYPES_MEMORY_POOL_H
#define GPURUN_TYPES_MEMORY_POOL_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_memory_pool_tag;

struct gpurun_memory_pool {
    struct gpurun_object header;
    CUmemoryPool handle;
    CUcontext context;        /* the primary context of its device */
    int device;
    int owned;                /* made by gpurun.MemoryPool (destroyed at close), not a default */
    size_t max_size;          /* bytes; 0: the driver's own limit */
    int live_buffers;         /* buffers from it not freed yet: close is refused meanwhile */
    size_t graph_bytes;       /* bytes of open buffers made from it inside graph captures */
    /* Shared between processes (MemoryPool{ ipc = true }, types/memory_pool_ipc.c):
     * its handle exports as a POSIX file descriptor; `imported`: this
     * process's view of another's pool, which allocates nothing; pool_id:
     * the exporting pool's identity, which its descriptors carry. */
    int ipc;
    int imported;
    unsigned char pool_id[16];
    /* Devices set_access gave "r" or "rw" (bit per ordinal): their kernels
     * may take its buffers. */
    unsigned long long reached_by;
};

/* The open MemoryPool at index, or an error. */
struct gpurun_memory_pool *gpurun_check_memory_pool(lua_State *L, int index);

/* Pushes the default pool of device `ordinal` (one object per device, made
 * on first use, which raises the pool's release threshold). */
struct gpurun_memory_pool *gpurun_push_default_pool(lua_State *L, int ordinal);

/* Reads one of the pool's attributes (the cuuint64_t ones), in relaxed
 * capture mode while a capture is in progress. Returns the driver's result. */
CUresult gpurun_pool_attribute(const struct gpurun_memory_pool *pool, CUmemPool_attribute attribute,
                               cuuint64_t *value);

/* Pushes what messages call the pool: "gpurun.MemoryPool(device 0, default)",
 * "gpurun.MemoryPool(device 0, max 64.00 MiB)". */
const char *gpurun_push_pool_name(lua_State *L, const struct gpurun_memory_pool *pool);

/* Raises the error of an allocation of `bytes` (what: "for 1024 float32
 * elements") the pool could not make, naming the pool, the size and what
 * is left of it; `in_capture`: the allocation was to be a graph's node. */
int gpurun_pool_out_of_memory(lua_State *L, const struct gpurun_memory_pool *pool, size_t bytes,
                              const char *what, int in_capture);

/* Sets *handle to a new pool on device ordinal (0: cuMemPoolCreate's
 * properties below, with handleTypes for an IPC pool), in relaxed capture
 * mode. Returns the driver's result. */
CUresult gpurun_create_pool(CUmemoryPool *handle, int ordinal, size_t max_size, int ipc);
/* A new file descriptor of an ipc pool (cuMemPoolExportToShareableHandle),
 * relaxed around any capture in progress. */
CUresult gpurun_export_pool(CUmemoryPool handle, int *fd);

/* An ordinal argument or Device at arg that names a visible device, or an
 * error "CUDA device 3 not found: 1 device(s) visible". */
int gpurun_check_device_argument(lua_State *L, int arg);

void gpurun_open_memory_pool(lua_State *L);

/* MemoryPool:get_allocation_handle, set_access, get_access and
 * MemoryPool.from_allocation_handle (types/memory_pool_ipc.c). */
void gpurun_open_memory_pool_ipc(lua_State *L);

#endif
