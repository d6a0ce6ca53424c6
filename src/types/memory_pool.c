/* gpurun.MemoryPool: a driver memory pool (cuda.core's DeviceMemoryResource
 * over one), and the device's graph memory (cuda.core's GraphMemoryResource).
 * Buffers come from a pool through gpurun.empty(n, dtype, { pool = }) and
 * the other constructors (types/buffer/memory.c), which count them here so
 * that closing a pool with buffers still open is refused.
 *
 * Every driver call on a pool runs in relaxed capture mode while a capture
 * is in progress (gpurun_relax_captures): the driver counts reading a pool's
 * attributes, making one and destroying one as unsafe during a capture from
 * this thread, and refusing them would invalidate that capture. */
#include "types/memory_pool.h"

#include <math.h>
#include <string.h>
#include <unistd.h>

#include "base/ipc_descriptor.h"
#include "types/device.h"

const struct gpurun_tag gpurun_memory_pool_tag = {"gpurun.MemoryPool"};

#define DEFAULT_POOLS_KEY "gpurun.memory_pools"

/* "Keep everything": a freed block stays in the pool for the next
 * allocation instead of going back to the OS at the next synchronize. */
#define KEEP_ALL ((cuuint64_t)UINT64_MAX)

struct gpurun_memory_pool *gpurun_check_memory_pool(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_memory_pool_tag);
}

CUresult gpurun_pool_attribute(const struct gpurun_memory_pool *pool, CUmemPool_attribute attribute,
                               cuuint64_t *value)
{
    *value = 0;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolGetAttribute, pool->handle, attribute, value);
    gpurun_restore_captures(relaxed);
    return result;
}

static CUresult set_attribute(CUmemoryPool handle, CUmemPool_attribute attribute, cuuint64_t value)
{
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolSetAttribute, handle, attribute, &value);
    gpurun_restore_captures(relaxed);
    return result;
}

const char *gpurun_push_pool_name(lua_State *L, const struct gpurun_memory_pool *pool)
{
    char size[32];
    if (!pool->owned)
        return lua_pushfstring(L, "gpurun.MemoryPool(device %d, default)", pool->device);
    if (pool->imported)
        return lua_pushfstring(L, "gpurun.MemoryPool(device %d, imported)", pool->device);
    if (pool->ipc && pool->max_size == 0)
        return lua_pushfstring(L, "gpurun.MemoryPool(device %d, ipc)", pool->device);
    if (pool->ipc)
        return lua_pushfstring(L, "gpurun.MemoryPool(device %d, ipc, max %s)", pool->device,
                               gpurun_format_size(size, sizeof size, pool->max_size));
    if (pool->max_size == 0)
        return lua_pushfstring(L, "gpurun.MemoryPool(device %d)", pool->device);
    return lua_pushfstring(L, "gpurun.MemoryPool(device %d, max %s)", pool->device,
                           gpurun_format_size(size, sizeof size, pool->max_size));
}

int gpurun_pool_out_of_memory(lua_State *L, const struct gpurun_memory_pool *pool, size_t bytes,
                              const char *what, int in_capture)
{
    char asked[32], left[32], used_text[32], graph_text[32], max_text[32];
    cuuint64_t used = 0, reserved = 0;
    (void)gpurun_pool_attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
    (void)gpurun_pool_attribute(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, &reserved);
    const char *name = gpurun_push_pool_name(L, pool);
    gpurun_format_size(asked, sizeof asked, bytes);
    const char *where = in_capture ? " in the graph being built" : "";
    if (pool->max_size > 0) {
        size_t taken = (size_t)used + pool->graph_bytes;
        gpurun_format_size(left, sizeof left, pool->max_size > taken ? pool->max_size - taken : 0);
        return gpurun_error(L, "%s: out of memory allocating %s %s%s: %s of its %s maximum "
                               "left (%s in use, %s by buffers made in graph captures)",
                            name, asked, what, where, left,
                            gpurun_format_size(max_text, sizeof max_text, pool->max_size),
                            gpurun_format_size(used_text, sizeof used_text, (size_t)used),
                            gpurun_format_size(graph_text, sizeof graph_text, pool->graph_bytes));
    }
    size_t free_bytes = 0, total = 0;
    CUcontext previous = gpurun_enter_context(pool->context);
    (void)CUDA_CALL(cuMemGetInfo, &free_bytes, &total);
    gpurun_leave_context(previous);
    return gpurun_error(L, "%s: out of memory allocating %s %s%s: %s of device memory left "
                           "(the pool holds %s, %s of it in use)",
                        name, asked, what, where,
                        gpurun_format_size(left, sizeof left, free_bytes),
                        gpurun_format_size(max_text, sizeof max_text, (size_t)reserved),
                        gpurun_format_size(used_text, sizeof used_text, (size_t)used));
}

/* Raises unless the device allocates from pools. */
static CUdevice check_pools_supported(lua_State *L, int ordinal)
{
    CUdevice device;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, ordinal);
    int supported = 0;
    CHECK_CUDA(L, "asking whether the device has memory pools", cuDeviceGetAttribute, &supported,
               CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, device);
    if (!supported)
        gpurun_error(L, "gpurun.MemoryPool: device %d has no stream-ordered memory pools "
                        "(CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED is 0)", ordinal);
    return device;
}

struct gpurun_memory_pool *gpurun_push_default_pool(lua_State *L, int ordinal)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, DEFAULT_POOLS_KEY);
    if (lua_rawgeti(L, -1, ordinal) == LUA_TUSERDATA
        && !((struct gpurun_memory_pool *)lua_touserdata(L, -1))->header.closed) {
        lua_remove(L, -2);
        return lua_touserdata(L, -1);
    }
    lua_pop(L, 1);
    CUcontext context = gpurun_primary_context(L, ordinal);
    CUdevice device = check_pools_supported(L, ordinal);
    struct gpurun_memory_pool *pool =
        gpurun_new_object(L, sizeof *pool, 0, &gpurun_memory_pool_tag);
    pool->context = context;
    pool->device = ordinal;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuDeviceGetDefaultMemPool, &pool->handle, device);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "getting the device's default memory pool");
    /* As cuda.core's DeviceMemoryResource does: at the driver's threshold of
     * 0 the pool gives its free memory back to the OS at every synchronize
     * (and gpurun synchronizes at every host copy), so nearly every
     * allocation would map new memory. Keeping it makes the next allocation
     * of a size seen before a few microseconds; trim() gives it back. */
    cuuint64_t threshold = 0;
    if (gpurun_pool_attribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold) != CUDA_SUCCESS)
        gpurun_cuda_error(L, "reading the default memory pool's release threshold");
    if (threshold == 0
        && set_attribute(pool->handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, KEEP_ALL) != CUDA_SUCCESS)
        gpurun_cuda_error(L, "raising the default memory pool's release threshold");
    pool->header.closed = 0;
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, ordinal);
    lua_remove(L, -2);
    return pool;
}

/* The device of MemoryPool{ device = } at options index arg: a Device, an
 * ordinal, or (nil) the current device. */
static int option_device(lua_State *L, int arg)
{
    int type = LUA_TNIL;
    if (!lua_isnoneornil(L, arg)) {
        lua_pushliteral(L, "device");
        type = lua_rawget(L, arg);
        if (type == LUA_TNIL)
            lua_pop(L, 1);
    }
    int ordinal;
    if (type == LUA_TNIL) {
        gpurun_require_context(L);
        ordinal = gpurun_runtime.current_device;
    } else if (gpurun_to_tagged(L, -1, &gpurun_device_tag)) {
        ordinal = gpurun_check_device_ordinal(L, lua_gettop(L));
    } else {
        lua_Integer value = 0;
        if (!gpurun_exact_integer(L, -1, &value)) {
            const char *got = gpurun_value_text(L, -1);
            gpurun_arg_error(L, arg, "option 'device' must be a gpurun.Device or a device "
                                     "ordinal, got %s", got);
        }
        gpurun_require_driver(L);
        int count = cuda_driver_device_count();
        if (value < 0 || value >= count)
            gpurun_arg_error(L, arg, "option 'device': CUDA device %I not found: %d device(s) "
                                     "visible", (LUAI_UACINT)value, count);
        ordinal = (int)value;
    }
    if (type != LUA_TNIL)
        lua_pop(L, 1);
    return ordinal;
}

int gpurun_check_device_argument(lua_State *L, int arg)
{
    if (gpurun_to_tagged(L, arg, &gpurun_device_tag))
        return gpurun_check_device_ordinal(L, arg);
    lua_Integer value = 0;
    if (!gpurun_exact_integer(L, arg, &value)) {
        const char *got = gpurun_value_text(L, arg);
        return gpurun_arg_error(L, arg, "a gpurun.Device or a device ordinal expected, got %s",
                                got);
    }
    gpurun_require_driver(L);
    int count = cuda_driver_device_count();
    if (value < 0 || value >= count)
        return gpurun_arg_error(L, arg, "CUDA device %I not found: %d device(s) visible",
                                (LUAI_UACINT)value, count);
    return (int)value;
}

CUresult gpurun_export_pool(CUmemoryPool handle, int *fd)
{
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolExportToShareableHandle, fd, handle,
                                CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    gpurun_restore_captures(relaxed);
    return result;
}

CUresult gpurun_create_pool(CUmemoryPool *handle, int ordinal, size_t max_size, int ipc)
{
    CUmemPoolProps props;
    memset(&props, 0, sizeof props);
    props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
    props.handleTypes = ipc ? CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR : CU_MEM_HANDLE_TYPE_NONE;
    props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    props.location.id = ordinal;
    props.maxSize = max_size;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolCreate, handle, &props);
    gpurun_restore_captures(relaxed);
    return result;
}

/* A new pool's release threshold set and, for ipc, the pool exported
 * once: the driver exports a pool's allocations (cuMemPoolExportPointer)
 * only once the pool itself has been shared. Returns the step that failed,
 * or NULL. */
static const char *set_up_pool(const struct gpurun_memory_pool *pool, cuuint64_t threshold)
{
    if (set_attribute(pool->handle, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, threshold) != CUDA_SUCCESS)
        return "setting a new memory pool's release threshold";
    if (!pool->ipc)
        return NULL;
    int fd = -1;
    if (gpurun_export_pool(pool->handle, &fd) != CUDA_SUCCESS)
        return "sharing a new memory pool as a file descriptor";
    close(fd);
    return NULL;
}

/* release_threshold: bytes, or math.huge (the default) to keep all. */
static cuuint64_t option_threshold(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg))
        return KEEP_ALL;
    lua_pushliteral(L, "release_threshold");
    if (lua_rawget(L, arg) == LUA_TNIL) {
        lua_pop(L, 1);
        return KEEP_ALL;
    }
    lua_Integer value = 0;
    cuuint64_t threshold = KEEP_ALL;
    if (lua_type(L, -1) == LUA_TNUMBER && lua_tonumber(L, -1) == HUGE_VAL)
        threshold = KEEP_ALL;
    else if (gpurun_exact_integer(L, -1, &value) && value >= 0)
        threshold = (cuuint64_t)value;
    else {
        const char *got = gpurun_value_text(L, -1);
        gpurun_arg_error(L, arg, "option 'release_threshold' must be a non-negative integer "
                                 "number of bytes or math.huge, got %s", got);
    }
    lua_pop(L, 1);
    return threshold;
}

/* MemoryPool([{ device = current, release_threshold = math.huge, max_size = 0,
 * ipc = false }]) -> a new pool of device memory (cuMemPoolCreate),
 * destroyed by close(); with ipc, one whose handle exports as a POSIX file
 * descriptor, so that other processes can import it and its buffers. */
static int module_memory_pool(lua_State *L)
{
    static const char *const known[] = {"device", "release_threshold", "max_size", "ipc", NULL};
    gpurun_check_options(L, 1, known);
    lua_settop(L, 1);
    int ipc = gpurun_opt_boolean_field(L, 1, "ipc", 0);
    lua_Integer max_size = gpurun_opt_integer_field(L, 1, "max_size", 0,
                                                    "a non-negative integer number of bytes");
    if (max_size < 0)
        gpurun_arg_error(L, 1, "option 'max_size' must be a non-negative integer number of bytes "
                               "(0: the driver's limit), got %I", (LUAI_UACINT)max_size);
    cuuint64_t threshold = option_threshold(L, 1);
    int ordinal = option_device(L, 1);
    CUcontext context = gpurun_primary_context(L, ordinal);
    CUdevice device = check_pools_supported(L, ordinal);
    if (ipc) {
        int handle_types = 0;
        CHECK_CUDA(L, "asking whether the device shares pools as file descriptors",
                   cuDeviceGetAttribute, &handle_types,
                   CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES, device);
        if (!(handle_types & CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR))
            gpurun_error(L, "gpurun.MemoryPool: device %d cannot share a pool as a POSIX file "
                            "descriptor (CU_DEVICE_ATTRIBUTE_MEMPOOL_SUPPORTED_HANDLE_TYPES is "
                            "%d), so ipc = true is refused", ordinal, handle_types);
    }
    struct gpurun_memory_pool *pool =
        gpurun_new_object(L, sizeof *pool, 0, &gpurun_memory_pool_tag);
    pool->context = context;
    pool->device = ordinal;
    pool->owned = 1;
    pool->ipc = ipc;
    pool->max_size = (size_t)max_size;
    if (ipc && ipc_new_pool_id(pool->pool_id) != 0)
        return gpurun_error(L, "gpurun.MemoryPool: the system gave no random bytes for the "
                               "pool's identity");
    CUresult result = gpurun_create_pool(&pool->handle, ordinal, (size_t)max_size, ipc);
    if (result != CUDA_SUCCESS) {
        char size[32];
        pool->handle = NULL;
        return gpurun_cuda_error(L, "making a memory pool on device %d%s%s", ordinal,
                                 max_size ? " of at most " : "",
                                 max_size ? gpurun_format_size(size, sizeof size, (size_t)max_size)
                                          : "");
    }
    const char *failed = set_up_pool(pool, threshold);
    if (failed) {
        CUresult result_kept = cuda_last_failed_result;
        const char *call = cuda_last_failed_call;
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        (void)CUDA_CALL(cuMemPoolDestroy, pool->handle);
        gpurun_restore_captures(relaxed);
        pool->handle = NULL;
        cuda_last_failed_result = result_kept;
        cuda_last_failed_call = call;
        return gpurun_cuda_error(L, "%s", failed);
    }
    pool->header.closed = 0;
    return 1;
}

/* The one close: refused while buffers from the pool are open (they would
 * outlive their memory); a default pool stays the driver's. */
static int close_pool(lua_State *L, int explicit)
{
    struct gpurun_memory_pool *pool = gpurun_check_tagged(L, 1, &gpurun_memory_pool_tag);
    if (pool->header.closed)
        return 0;
    if (explicit && pool->live_buffers > 0) {
        const char *name = gpurun_push_pool_name(L, pool);
        return gpurun_error(L, "MemoryPool:close: %s has %d buffer(s) from it still open; close "
                               "them first (the pool stays open)", name, pool->live_buffers);
    }
    pool->header.closed = 1;
    if (pool->owned && pool->handle && gpurun_runtime.current_context) {
        /* Blocks still being freed on streams go back when their frees run. */
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        (void)CUDA_CALL(cuMemPoolDestroy, pool->handle);
        gpurun_restore_captures(relaxed);
    }
    pool->handle = NULL;
    return 0;
}

static int pool_close(lua_State *L)
{
    return close_pool(L, 1);
}

static int pool_gc(lua_State *L)
{
    return close_pool(L, 0);
}

/* trim([keep_bytes = 0]) -> self: gives the pool's unused memory back to the
 * OS, keeping at least keep_bytes reserved (cuMemPoolTrimTo). */
static int pool_trim(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 1);
    lua_Integer keep = gpurun_opt_integer(L, 2, 0, "integer number of bytes");
    if (keep < 0)
        return gpurun_arg_error(L, 2, "a non-negative number of bytes to keep expected, got %I",
                                (LUAI_UACINT)keep);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemPoolTrimTo, pool->handle, (size_t)keep);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "trimming a memory pool");
    lua_settop(L, 1);
    return 1;
}

/* reset_peaks() -> self: used_high and reserved_high start again from now. */
static int pool_reset_peaks(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, 1);
    if (set_attribute(pool->handle, CU_MEMPOOL_ATTR_USED_MEM_HIGH, 0) != CUDA_SUCCESS
        || set_attribute(pool->handle, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, 0) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "resetting a memory pool's high-water marks");
    lua_settop(L, 1);
    return 1;
}

/* ---- fields --------------------------------------------------------------- */

static int push_attribute(lua_State *L, CUmemPool_attribute attribute, const char *what)
{
    cuuint64_t value = 0;
    if (gpurun_pool_attribute(lua_touserdata(L, 1), attribute, &value) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading a memory pool's %s", what);
    if (value > (cuuint64_t)LUA_MAXINTEGER)
        lua_pushnumber(L, HUGE_VAL);
    else
        lua_pushinteger(L, (lua_Integer)value);
    return 1;
}

static int pool_used(lua_State *L)
{
    return push_attribute(L, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, "memory in use");
}

static int pool_used_high(lua_State *L)
{
    return push_attribute(L, CU_MEMPOOL_ATTR_USED_MEM_HIGH, "high-water mark of memory in use");
}

static int pool_reserved(lua_State *L)
{
    return push_attribute(L, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT, "reserved memory");
}

static int pool_reserved_high(lua_State *L)
{
    return push_attribute(L, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, "high-water mark of reserved memory");
}

static int pool_release_threshold(lua_State *L)
{
    return push_attribute(L, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, "release threshold");
}

static struct gpurun_memory_pool *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int pool_max_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->max_size);
    return 1;
}

static int pool_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

static int pool_buffers(lua_State *L)
{
    lua_pushinteger(L, self(L)->live_buffers);
    return 1;
}

static int pool_ipc(lua_State *L)
{
    lua_pushboolean(L, self(L)->ipc);
    return 1;
}

static int pool_is_imported(lua_State *L)
{
    lua_pushboolean(L, self(L)->imported);
    return 1;
}

static int pool_is_default(lua_State *L)
{
    lua_pushboolean(L, !self(L)->owned);
    return 1;
}

static int pool_handle(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(uintptr_t)self(L)->handle);
    return 1;
}

static int pool_tostring(lua_State *L)
{
    struct gpurun_memory_pool *pool = gpurun_check_tagged(L, 1, &gpurun_memory_pool_tag);
    if (pool->header.closed)
        lua_pushliteral(L, "gpurun.MemoryPool(closed)");
    else
        gpurun_push_pool_name(L, pool);
    return 1;
}

/* ---- the device's pools and graph memory -------------------------------- */

/* dev:memory_pool() -> the device's default pool (the same object each time
 * until it is closed). */
static int device_memory_pool(lua_State *L)
{
    gpurun_push_default_pool(L, gpurun_check_device_ordinal(L, 1));
    return 1;
}

static CUdevice graph_memory_device(lua_State *L)
{
    int ordinal = gpurun_check_device_ordinal(L, 1);
    gpurun_primary_context(L, ordinal);
    CUdevice device;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, ordinal);
    return device;
}

/* graph_memory() -> { used, used_high, reserved, reserved_high }: bytes of
 * the memory graphs' allocation nodes hold on the device
 * (cuDeviceGetGraphMemAttribute). */
static int device_graph_memory(lua_State *L)
{
    static const struct {
        const char *name;
        CUgraphMem_attribute attribute;
    } attributes[] = {
        {"used", CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT},
        {"used_high", CU_GRAPH_MEM_ATTR_USED_MEM_HIGH},
        {"reserved", CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT},
        {"reserved_high", CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH},
    };
    CUdevice device = graph_memory_device(L);
    lua_createtable(L, 0, 4);
    for (size_t i = 0; i < sizeof attributes / sizeof attributes[0]; i++) {
        cuuint64_t value = 0;
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        CUresult result = CUDA_CALL(cuDeviceGetGraphMemAttribute, device, attributes[i].attribute,
                                    &value);
        gpurun_restore_captures(relaxed);
        if (result != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "reading the device's graph memory");
        lua_pushinteger(L, (lua_Integer)value);
        lua_setfield(L, -2, attributes[i].name);
    }
    return 1;
}

/* trim_graph_memory() -> self: gives the memory graphs hold but do not use
 * back to the OS (cuDeviceGraphMemTrim). */
static int device_trim_graph_memory(lua_State *L)
{
    CUdevice device = graph_memory_device(L);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuDeviceGraphMemTrim, device);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "trimming the device's graph memory");
    lua_settop(L, 1);
    return 1;
}

/* reset_graph_memory_peaks() -> self: graph_memory()'s used_high and
 * reserved_high start again from now. */
static int device_reset_graph_memory_peaks(lua_State *L)
{
    CUdevice device = graph_memory_device(L);
    CUgraphMem_attribute peaks[] = {CU_GRAPH_MEM_ATTR_USED_MEM_HIGH,
                                    CU_GRAPH_MEM_ATTR_RESERVED_MEM_HIGH};
    for (int i = 0; i < 2; i++) {
        cuuint64_t zero = 0;
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        CUresult result = CUDA_CALL(cuDeviceSetGraphMemAttribute, device, peaks[i], &zero);
        gpurun_restore_captures(relaxed);
        if (result != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "resetting the device's graph memory high-water marks");
    }
    lua_settop(L, 1);
    return 1;
}

/* ---- registration ------------------------------------------------------- */

/*   gpurun.MemoryPool{ device =, release_threshold =, max_size =, ipc = }   a new pool
 *   dev:memory_pool()                      the device's default pool
 *   pool.used, .reserved, .used_high, .reserved_high, .release_threshold,
 *   .max_size, .device, .buffers, .is_default, .handle, .ipc, .is_imported
 *   pool:trim([keep_bytes]), pool:reset_peaks(), pool:close()
 *   dev:graph_memory(), dev:trim_graph_memory(), dev:reset_graph_memory_peaks() */

static const luaL_Reg pool_methods[] = {
    {"trim", pool_trim},
    {"reset_peaks", pool_reset_peaks},
    {"close", pool_close},
    {NULL, NULL}
};

static const luaL_Reg pool_fields[] = {
    {"used", pool_used},
    {"used_high", pool_used_high},
    {"reserved", pool_reserved},
    {"reserved_high", pool_reserved_high},
    {"release_threshold", pool_release_threshold},
    {"max_size", pool_max_size},
    {"device", pool_device},
    {"buffers", pool_buffers},
    {"is_default", pool_is_default},
    {"handle", pool_handle},
    {"ipc", pool_ipc},
    {"is_imported", pool_is_imported},
    {NULL, NULL}
};

static const luaL_Reg pool_metamethods[] = {
    {"__tostring", pool_tostring},
    {"__close", pool_close},
    {"__gc", pool_gc},
    {NULL, NULL}
};

static const struct gpurun_type pool_type = {
    &gpurun_memory_pool_tag, pool_methods, pool_metamethods, pool_fields, NULL,
};

static const luaL_Reg device_methods[] = {
    {"memory_pool", device_memory_pool},
    {"graph_memory", device_graph_memory},
    {"trim_graph_memory", device_trim_graph_memory},
    {"reset_graph_memory_peaks", device_reset_graph_memory_peaks},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"MemoryPool", module_memory_pool},
    {NULL, NULL}
};

void gpurun_open_memory_pool(lua_State *L)
{
    gpurun_register_type(L, &pool_type);
    gpurun_add_methods(L, &gpurun_device_tag, device_methods);
    gpurun_set_functions(L, module_functions);
}
