/* gpurun.Device: one CUDA device and its primary context. */
#include "gpurun.h"

#include <string.h>

struct device {
    int ordinal;
    CUdevice handle;
    int cc_major, cc_minor;
    size_t total_memory;
    char name[256];
    int closed;
};

static struct device *check_device(lua_State *L, int index)
{
    struct device *device = luaL_checkudata(L, index, GPURUN_DEVICE);
    if (device->closed)
        gpurun_closed_error(L, GPURUN_DEVICE);
    return device;
}

static int device_attribute(lua_State *L, struct device *device, CUdevice_attribute attribute)
{
    int value = 0;
    CHECK_CUDA(L, "reading a device attribute", cuDeviceGetAttribute, &value, attribute,
               device->handle);
    return value;
}

/* Device(id) returns one object per ordinal, as cuda.core does, so that
 * comparing devices is comparing objects. */
static int device_new(lua_State *L)
{
    lua_Integer ordinal = luaL_optinteger(L, 1, 0);
    gpurun_require_driver(L);
    int count = cuda_driver_device_count();
    if (ordinal < 0 || ordinal >= count)
        return luaL_error(L, "CUDA device %I not found: %d device(s) visible", ordinal, count);

    luaL_getsubtable(L, LUA_REGISTRYINDEX, "gpurun.devices");
    if (lua_rawgeti(L, -1, ordinal) == LUA_TUSERDATA
        && !((struct device *)lua_touserdata(L, -1))->closed)
        return 1;
    lua_pop(L, 1);

    struct device *device = lua_newuserdatauv(L, sizeof *device, 0);
    memset(device, 0, sizeof *device);
    device->ordinal = (int)ordinal;
    device->closed = 1; /* until fully read, so a failed read leaves no half object */
    luaL_setmetatable(L, GPURUN_DEVICE);
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device->handle, (int)ordinal);
    CHECK_CUDA(L, "reading the device name", cuDeviceGetName, device->name,
               (int)sizeof device->name, device->handle);
    CHECK_CUDA(L, "reading the device memory size", cuDeviceTotalMem, &device->total_memory,
               device->handle);
    device->cc_major = device_attribute(L, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    device->cc_minor = device_attribute(L, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    device->closed = 0;
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, ordinal);
    return 1;
}

static int device_set_current(lua_State *L)
{
    struct device *device = check_device(L, 1);
    CUcontext context = gpurun_primary_context(L, device->ordinal);
    CHECK_CUDA(L, "making the device's primary context current", cuCtxSetCurrent, context);
    if (gpurun_runtime.current_device != device->ordinal)
        gpurun_runtime.current_stream = NULL; /* a stream belongs to its device */
    gpurun_runtime.current_context = context;
    gpurun_runtime.current_device = device->ordinal;
    lua_settop(L, 1);
    return 1;
}

/* Methods that act on the device need it to be the current one: switching
 * silently would move every later allocation to another GPU. */
static struct device *check_current_device(lua_State *L, int index, const char *method)
{
    struct device *device = check_device(L, index);
    if (gpurun_runtime.current_device != device->ordinal)
        luaL_error(L, "Device:%s: device %d is not current; call :set_current() first",
                   method, device->ordinal);
    return device;
}

static int device_sync(lua_State *L)
{
    check_current_device(L, 1, "sync");
    CHECK_CUDA(L, "synchronizing the device", cuCtxSynchronize);
    return 0;
}

static int device_create_stream(lua_State *L)
{
    check_current_device(L, 1, "create_stream");
    return gpurun_push_new_stream(L);
}

/* attribute(n) -> the raw CU_DEVICE_ATTRIBUTE_* value n, for what the named
 * fields do not cover. */
static int device_get_attribute(lua_State *L)
{
    struct device *device = check_device(L, 1);
    lua_Integer attribute = luaL_checkinteger(L, 2);
    luaL_argcheck(L, attribute > 0 && attribute < CU_DEVICE_ATTRIBUTE_MAX, 2,
                  "CU_DEVICE_ATTRIBUTE_* value expected");
    lua_pushinteger(L, device_attribute(L, device, (CUdevice_attribute)attribute));
    return 1;
}

static int device_close(lua_State *L)
{
    struct device *device = luaL_checkudata(L, 1, GPURUN_DEVICE);
    /* The primary context stays retained until exit: streams and buffers
     * made on it may outlive this object. */
    device->closed = 1;
    return 0;
}

static int device_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_DEVICE))
        return 1;
    struct device *device = check_device(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "id") == 0)
        lua_pushinteger(L, device->ordinal);
    else if (strcmp(key, "name") == 0)
        lua_pushstring(L, device->name);
    else if (strcmp(key, "arch") == 0)
        lua_pushfstring(L, "%d%d", device->cc_major, device->cc_minor);
    else if (strcmp(key, "compute_capability") == 0) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, device->cc_major);
        lua_setfield(L, -2, "major");
        lua_pushinteger(L, device->cc_minor);
        lua_setfield(L, -2, "minor");
    } else if (strcmp(key, "total_memory") == 0)
        lua_pushinteger(L, (lua_Integer)device->total_memory);
    else if (strcmp(key, "multiprocessor_count") == 0)
        lua_pushinteger(L, device_attribute(L, device, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT));
    else if (strcmp(key, "max_threads_per_block") == 0)
        lua_pushinteger(L, device_attribute(L, device, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK));
    else if (strcmp(key, "max_shared_memory_per_block") == 0)
        lua_pushinteger(L, device_attribute(L, device,
                                            CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN));
    else
        lua_pushnil(L);
    return 1;
}

static int device_tostring(lua_State *L)
{
    struct device *device = luaL_checkudata(L, 1, GPURUN_DEVICE);
    if (device->closed)
        lua_pushfstring(L, "gpurun.Device(%d, closed)", device->ordinal);
    else
        lua_pushfstring(L, "gpurun.Device(%d, %s)", device->ordinal, device->name);
    return 1;
}

static const luaL_Reg meth[] = {
    {"set_current", device_set_current},
    {"sync", device_sync},
    {"create_stream", device_create_stream},
    {"get_attribute", device_get_attribute},
    {"close", device_close},
    {NULL, NULL}
};

static const luaL_Reg metameth[] = {
    {"__index", device_index},
    {"__tostring", device_tostring},
    {"__close", device_close},
    {"__gc", device_close},
    {NULL, NULL}
};

void gpurun_open_device(lua_State *L)
{
    gpurun_new_type(L, GPURUN_DEVICE, meth, metameth);
    lua_pop(L, 1);
    lua_pushcfunction(L, device_new);
    lua_setfield(L, -2, "Device");
}
