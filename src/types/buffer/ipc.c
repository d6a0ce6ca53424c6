/* A Buffer shared between processes: the exporter's buffer, from a pool
 * made with MemoryPool{ ipc = true }, gives a descriptor
 * (Buffer:ipc_descriptor: cuMemPoolExportPointer's data with the pool's
 * identity, the device and the elements), and another process that
 * imported the pool (MemoryPool.from_allocation_handle) maps the same
 * memory with gpurun.Buffer.from_ipc (cuMemPoolImportPointer). The importer
 * must close its buffer before the exporter frees the memory. */
#include "types/buffer/internal.h"

#include <string.h>

#include "base/ipc_descriptor.h"
#include "types/memory_pool.h"

/* ipc_descriptor() -> a string naming the buffer to another process. */
static int buffer_ipc_descriptor(lua_State *L)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, 1);
    if (buffer->base)
        return gpurun_error(L, "Buffer:ipc_descriptor: a view cannot be shared; share its base "
                               "buffer and take the view in the other process");
    struct gpurun_memory_pool *pool = buffer->pool;
    if (pool == NULL || !pool->ipc || pool->imported)
        return gpurun_error(L, "Buffer:ipc_descriptor: only a buffer allocated from a pool made "
                               "with gpurun.MemoryPool{ ipc = true } can be shared (this one %s)",
                            pool == NULL ? "is not from a pool"
                            : pool->imported ? "was imported from another process"
                                             : "is from a pool without ipc");
    if (buffer->unallocated)
        return gpurun_error(L, "Buffer:ipc_descriptor: the buffer was made in a graph capture "
                               "and has no memory outside its graph");
    struct ipc_descriptor descriptor;
    memset(&descriptor, 0, sizeof descriptor);
    descriptor.kind = IPC_KIND_BUFFER;
    descriptor.device = buffer->device;
    descriptor.dtype = (uint32_t)buffer->dtype;
    memcpy(descriptor.pool_id, pool->pool_id, IPC_POOL_ID_BYTES);
    descriptor.count = buffer->count;
    descriptor.bytes = buffer->count * buffer->element_size;
    CUmemPoolPtrExportData data;
    memset(&data, 0, sizeof data);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUcontext previous = gpurun_enter_context(buffer->context);
    CUresult result = CUDA_CALL(cuMemPoolExportPointer, &data, buffer->pointer);
    gpurun_leave_context(previous);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "exporting a buffer of a memory pool");
    memcpy(descriptor.data, &data, sizeof data < IPC_DATA_BYTES ? sizeof data : IPC_DATA_BYTES);
    unsigned char bytes[IPC_DESCRIPTOR_BYTES];
    ipc_descriptor_encode(&descriptor, bytes);
    lua_pushlstring(L, (const char *)bytes, sizeof bytes);
    return 1;
}

/* Buffer.from_ipc(descriptor, pool) -> the exporter's buffer, mapped from
 * the pool this process imported from the same exporter's pool. */
static int module_from_ipc(lua_State *L)
{
    struct ipc_descriptor descriptor;
    gpurun_check_ipc_descriptor(L, 1, IPC_KIND_BUFFER, &descriptor);
    if (!gpurun_to_tagged(L, 2, &gpurun_memory_pool_tag))
        return gpurun_type_error(L, 2, "gpurun.MemoryPool (imported with "
                                       "gpurun.MemoryPool.from_allocation_handle)");
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 2);
    lua_settop(L, 2);
    if (!pool->imported) {
        const char *name = gpurun_push_pool_name(L, pool);
        return gpurun_arg_error(L, 2, "%s is not an imported pool: import the exporter's pool "
                                      "with gpurun.MemoryPool.from_allocation_handle", name);
    }
    if (descriptor.device != pool->device)
        return gpurun_arg_error(L, 1, "the buffer lives on device %d, the pool on device %d",
                                descriptor.device, pool->device);
    if (memcmp(descriptor.pool_id, pool->pool_id, IPC_POOL_ID_BYTES) != 0)
        return gpurun_arg_error(L, 1, "the buffer comes from another pool than the one given "
                                      "(the pool identities differ)");
    if (descriptor.dtype >= GPURUN_DTYPE_COUNT || descriptor.count == 0
        || descriptor.count > SIZE_MAX / gpurun_dtypes[descriptor.dtype].size
        || descriptor.bytes != descriptor.count * gpurun_dtypes[descriptor.dtype].size)
        return gpurun_arg_error(L, 1, "bad IPC descriptor: %llu elements of dtype %lu do not "
                                      "make its %llu bytes",
                                (unsigned long long)descriptor.count,
                                (unsigned long)descriptor.dtype,
                                (unsigned long long)descriptor.bytes);
    if (gpurun_capture_in_progress())
        return gpurun_error(L, "gpurun.Buffer.from_ipc: cannot import a buffer while a graph is "
                               "being built (import it before begin_building); capture "
                               "abandoned");
    struct gpurun_buffer *buffer = gpurun_push_buffer_object(
        L, (size_t)descriptor.count, (int)descriptor.dtype, GPURUN_BUFFER_USER_VALUES);
    pool = gpurun_check_memory_pool(L, 2); /* the allocation may run finalizers */
    CUmemPoolPtrExportData data;
    memset(&data, 0, sizeof data);
    memcpy(&data, descriptor.data, sizeof data < IPC_DATA_BYTES ? sizeof data : IPC_DATA_BYTES);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUcontext previous = gpurun_enter_context(pool->context);
    CUresult result = CUDA_CALL(cuMemPoolImportPointer, &buffer->pointer, pool->handle, &data);
    gpurun_leave_context(previous);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS) {
        buffer->pointer = 0;
        return gpurun_cuda_error(L, "importing a buffer of %llu bytes from another process's "
                                    "memory pool", (unsigned long long)descriptor.bytes);
    }
    /* Freed after the device's work (it has no stream of its own), which
     * releases this process's mapping only. */
    buffer->context = pool->context;
    buffer->device = pool->device;
    buffer->ordered = 1;
    buffer->pool = pool;
    pool->live_buffers++;
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 3, GPURUN_BUFFER_POOL_VALUE);
    buffer->header.closed = 0;
    return 1;
}

static const luaL_Reg buffer_methods[] = {
    {"ipc_descriptor", buffer_ipc_descriptor},
    {NULL, NULL}
};

static const luaL_Reg type_functions[] = {
    {"from_ipc", module_from_ipc},
    {NULL, NULL}
};

void gpurun_open_buffer_ipc(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_buffer_tag, buffer_methods);
    gpurun_set_type_functions(L, &gpurun_buffer_tag, type_functions);
}
