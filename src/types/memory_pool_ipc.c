/* A MemoryPool across processes and devices: its handle exported as a
 * POSIX file descriptor (get_allocation_handle) and imported by another
 * process (MemoryPool.from_allocation_handle), as cuda.core's
 * DeviceMemoryResource does; and which other devices reach its memory
 * (set_access, get_access: cuMemPoolSetAccess). Buffers of such a pool go
 * between processes through types/buffer/ipc.c. */
#include "types/memory_pool.h"

#include <string.h>
#include <unistd.h>

#include "base/ipc_descriptor.h"
#include "types/allocation_handle.h"

/* get_allocation_handle() -> a gpurun.IPCAllocationHandle: a new file
 * descriptor of the pool (cuMemPoolExportToShareableHandle) and the pool's
 * descriptor, for another process to import. */
static int pool_get_allocation_handle(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 1);
    if (!pool->ipc || pool->imported) {
        const char *name = gpurun_push_pool_name(L, pool);
        return gpurun_error(L, "MemoryPool:get_allocation_handle: %s is not shareable (%s)", name,
                            pool->imported ? "it is imported: share the exporter's pool"
                                           : "make it with gpurun.MemoryPool{ ipc = true }");
    }
    struct ipc_descriptor descriptor;
    memset(&descriptor, 0, sizeof descriptor);
    descriptor.kind = IPC_KIND_POOL;
    descriptor.device = pool->device;
    descriptor.count = pool->max_size;
    memcpy(descriptor.pool_id, pool->pool_id, IPC_POOL_ID_BYTES);
    unsigned char bytes[IPC_DESCRIPTOR_BYTES];
    ipc_descriptor_encode(&descriptor, bytes);
    lua_pushlstring(L, (const char *)bytes, sizeof bytes);
    int fd = -1;
    if (gpurun_export_pool(pool->handle, &fd) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "exporting a memory pool as a file descriptor");
    gpurun_push_allocation_handle(L, fd, -1);
    return 1;
}

/* MemoryPool.from_allocation_handle(handle [, descriptor]) -> the pool of
 * another process (cuMemPoolImportFromShareableHandle), from which buffers
 * of that process are imported with gpurun.Buffer.from_ipc; it allocates
 * nothing. The descriptor is the handle's own where not given. The handle
 * stays open: close it once imported. */
static int module_from_allocation_handle(lua_State *L)
{
    struct gpurun_allocation_handle *handle = gpurun_check_allocation_handle(L, 1);
    lua_settop(L, 2);
    if (lua_isnil(L, 2)) {
        lua_getiuservalue(L, 1, 1);
        lua_replace(L, 2);
        if (lua_isnil(L, 2))
            return gpurun_arg_error(L, 2, "the handle carries no descriptor: pass the pool's "
                                          "descriptor (from the exporter's handle.descriptor)");
    }
    struct ipc_descriptor descriptor;
    gpurun_check_ipc_descriptor(L, 2, IPC_KIND_POOL, &descriptor);
    int ordinal = descriptor.device;
    CUcontext context = gpurun_primary_context(L, ordinal);
    struct gpurun_memory_pool *pool =
        gpurun_new_object(L, sizeof *pool, 0, &gpurun_memory_pool_tag);
    handle = gpurun_check_allocation_handle(L, 1); /* the allocation may run finalizers */
    pool->context = context;
    pool->device = ordinal;
    pool->owned = 1;
    pool->ipc = 1;
    pool->imported = 1;
    pool->max_size = (size_t)descriptor.count;
    memcpy(pool->pool_id, descriptor.pool_id, IPC_POOL_ID_BYTES);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUcontext previous = gpurun_enter_context(context);
    CUresult result = CUDA_CALL(cuMemPoolImportFromShareableHandle, &pool->handle,
                                (void *)(uintptr_t)handle->fd,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    gpurun_leave_context(previous);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS) {
        pool->handle = NULL;
        return gpurun_cuda_error(L, "importing a memory pool from file descriptor %d on "
                                    "device %d", handle->fd, ordinal);
    }
    pool->header.closed = 0;
    return 1;
}

/* ---- access from other devices -------------------------------------------- */

static const char *const ACCESS_NAMES[] = {"none", "r", "rw", NULL};
static const CUmemAccess_flags ACCESS_FLAGS[] = {CU_MEM_ACCESS_FLAGS_PROT_NONE,
                                                 CU_MEM_ACCESS_FLAGS_PROT_READ,
                                                 CU_MEM_ACCESS_FLAGS_PROT_READWRITE};

/* set_access(device, "rw" | "r" | "none") -> self: what kernels on another
 * device may do with the pool's memory (cuMemPoolSetAccess). The pool's own
 * device always has "rw": asking it again does nothing, less is refused. */
static int pool_set_access(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 1);
    int ordinal = gpurun_check_device_argument(L, 2);
    if (lua_type(L, 3) != LUA_TSTRING)
        return gpurun_type_error(L, 3, "\"rw\", \"r\" or \"none\"");
    const char *mode = lua_tostring(L, 3);
    int which = -1;
    for (int i = 0; ACCESS_NAMES[i]; i++)
        if (strcmp(mode, ACCESS_NAMES[i]) == 0)
            which = i;
    if (which < 0)
        return gpurun_arg_error(L, 3, "\"rw\", \"r\" or \"none\" expected, got '%s'", mode);
    lua_settop(L, 1);
    if (ordinal == pool->device) {
        if (ACCESS_FLAGS[which] == CU_MEM_ACCESS_FLAGS_PROT_READWRITE)
            return 1;
        const char *name = gpurun_push_pool_name(L, pool);
        return gpurun_error(L, "MemoryPool:set_access: %s lives on device %d, which always has "
                               "\"rw\" access to it (set access for other devices)", name,
                            ordinal);
    }
    CUmemAccessDesc access;
    memset(&access, 0, sizeof access);
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = ordinal;
    access.flags = ACCESS_FLAGS[which];
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolSetAccess, pool->handle, &access, 1);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "giving device %d \"%s\" access to a memory pool of device %d",
                                 ordinal, mode, pool->device);
    if (ordinal < GPURUN_MAX_DEVICES) {
        if (ACCESS_FLAGS[which] == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            pool->reached_by &= ~(1ULL << ordinal);
        else
            pool->reached_by |= 1ULL << ordinal;
    }
    return 1;
}

/* get_access(device) -> "rw", "r" or "none" (cuMemPoolGetAccess). */
static int pool_get_access(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 1);
    int ordinal = gpurun_check_device_argument(L, 2);
    CUmemLocation location;
    memset(&location, 0, sizeof location);
    location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    location.id = ordinal;
    CUmemAccess_flags flags = CU_MEM_ACCESS_FLAGS_PROT_NONE;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolGetAccess, &flags, pool->handle, &location);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading device %d's access to a memory pool", ordinal);
    for (int i = 0; ACCESS_NAMES[i]; i++)
        if (ACCESS_FLAGS[i] == flags) {
            lua_pushstring(L, ACCESS_NAMES[i]);
            return 1;
        }
    return gpurun_error(L, "MemoryPool:get_access: the driver answered access flags %d",
                        (int)flags);
}

static const luaL_Reg pool_methods[] = {
    {"get_allocation_handle", pool_get_allocation_handle},
    {"set_access", pool_set_access},
    {"get_access", pool_get_access},
    {NULL, NULL}
};

static const luaL_Reg type_functions[] = {
    {"from_allocation_handle", module_from_allocation_handle},
    {NULL, NULL}
};

void gpurun_open_memory_pool_ipc(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_memory_pool_tag, pool_methods);
    gpurun_set_type_functions(L, &gpurun_memory_pool_tag, type_functions);
}
