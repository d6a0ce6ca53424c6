/* gpurun.Device: one CUDA device and its primary context. */
#include "types/device.h"

#include "types/sm_resource.h"

#include <string.h>

#include "base/device_attributes.h"
#include "types/stream.h"

const struct gpurun_tag gpurun_device_tag = {"gpurun.Device"};

struct device {
    struct gpurun_object header;
    int ordinal;
    CUdevice handle;
    int cc_major, cc_minor;
    size_t total_memory;
    char name[256];
};

static struct device *check_device(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_device_tag);
}

int gpurun_check_device_ordinal(lua_State *L, int index)
{
    return check_device(L, index)->ordinal;
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
    lua_Integer ordinal = gpurun_opt_integer(L, 1, 0, NULL);
    gpurun_require_driver(L);
    int count = cuda_driver_device_count();
    if (ordinal < 0 || ordinal >= count)
        return gpurun_error(L, "CUDA device %I not found: %d device(s) visible",
                            (LUAI_UACINT)ordinal, count);

    luaL_getsubtable(L, LUA_REGISTRYINDEX, "gpurun.devices");
    if (lua_rawgeti(L, -1, ordinal) == LUA_TUSERDATA
        && !((struct device *)lua_touserdata(L, -1))->header.closed)
        return 1;
    lua_pop(L, 1);

    struct device *device = gpurun_new_object(L, sizeof *device, 0, &gpurun_device_tag);
    device->ordinal = (int)ordinal;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device->handle, (int)ordinal);
    CHECK_CUDA(L, "reading the device name", cuDeviceGetName, device->name,
               (int)sizeof device->name, device->handle);
    CHECK_CUDA(L, "reading the device memory size", cuDeviceTotalMem, &device->total_memory,
               device->handle);
    device->cc_major = device_attribute(L, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
    device->cc_minor = device_attribute(L, device, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
    device->header.closed = 0;
    lua_pushvalue(L, -1);
    lua_rawseti(L, -3, ordinal);
    return 1;
}

static int device_set_current(lua_State *L)
{
    struct device *device = check_device(L, 1);
    gpurun_make_current(L, device->ordinal);
    lua_settop(L, 1);
    return 1;
}

/* Methods that act on the device need it to be the current one: switching
 * silently would move every later allocation to another GPU. */
static struct device *check_current_device(lua_State *L, int index, const char *method)
{
    struct device *device = check_device(L, index);
    if (gpurun_runtime.current_device != device->ordinal) {
        if (gpurun_runtime.current_device < 0)
            gpurun_error(L, "Device:%s: device %d is not current; call :set_current() first",
                         method, device->ordinal);
        gpurun_error(L, "Device:%s: device %d is not current (device %d is); call "
                        ":set_current() first", method, device->ordinal,
                     gpurun_runtime.current_device);
    }
    return device;
}

/* can_access_peer(other) -> whether kernels on this device can read and
 * write other's memory directly (true for the device itself). */
static int device_can_access_peer(lua_State *L)
{
    struct device *device = check_device(L, 1);
    struct device *peer = check_device(L, 2);
    int can = 1;
    if (peer != device)
        CHECK_CUDA(L, "asking whether one device can access another's memory",
                   cuDeviceCanAccessPeer, &can, device->handle, peer->handle);
    lua_pushboolean(L, can);
    return 1;
}

/* enable_peer_access(other) -> self: kernels on this device may use
 * other's buffers from now on. Idempotent; a no-op for the device itself. */
static int device_enable_peer_access(lua_State *L)
{
    struct device *device = check_device(L, 1);
    struct device *peer = check_device(L, 2);
    lua_settop(L, 2);
    if (peer == device || gpurun_peer_enabled(device->ordinal, peer->ordinal)) {
        lua_settop(L, 1);
        return 1;
    }
    CUcontext context = gpurun_primary_context(L, device->ordinal);
    CUcontext peer_context = gpurun_primary_context(L, peer->ordinal);
    CUcontext previous = gpurun_enter_context(context);
    CUresult result = CUDA_CALL(cuCtxEnablePeerAccess, peer_context, 0);
    gpurun_leave_context(previous);
    if (result == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED)
        return gpurun_error(L, "Device:enable_peer_access: device %d cannot access device %d's "
                               "memory (no peer path between them; Buffer:copy_from still "
                               "copies, staged through the host)", device->ordinal,
                            peer->ordinal);
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
        return gpurun_cuda_error(L, "enabling access from device %d to device %d's memory",
                                 device->ordinal, peer->ordinal);
    gpurun_record_peer_access(device->ordinal, peer->ordinal);
    lua_settop(L, 1);
    return 1;
}

static int device_sync(lua_State *L)
{
    check_current_device(L, 1, "Device:sync");
    if (gpurun_wait_device(L, NULL, "Device:sync") != CUDA_SUCCESS)
        gpurun_cuda_error(L, "synchronizing the device");
    return 0;
}

/* The current context's stream priorities: least (the default, 0) and
 * greatest (the most urgent, a negative number on every GPU so far). */
static void priority_range(lua_State *L, int *least, int *greatest)
{
    CHECK_CUDA(L, "reading the stream priority range", cuCtxGetStreamPriorityRange, least,
               greatest);
}

/* create_stream([{ priority = p }]): p from the device's least priority
 * (0, the default) down to its greatest (-5 on an H200); lower runs first. */
static int device_create_stream(lua_State *L)
{
    static const char *const known[] = {"priority", NULL};
    check_current_device(L, 1, "Device:create_stream");
    gpurun_check_options(L, 2, known);
    lua_Integer priority = gpurun_opt_integer_field(L, 2, "priority", 0, "an integer");
    int least = 0, greatest = 0;
    priority_range(L, &least, &greatest);
    if (priority > least || priority < greatest)
        return gpurun_arg_error(L, 2, "priority %I out of range: this device's stream priorities "
                                      "run from %d (least, the default) to %d (greatest)",
                                (LUAI_UACINT)priority, least, greatest);
    gpurun_push_new_stream(L, (int)priority);
    return 1;
}

static const struct {
    const char *name;
    CUdevice_attribute attribute;
} attribute_names[] = {
#define ATTRIBUTE_NAME(name, constant) {#name, constant},
    GPURUN_DEVICE_ATTRIBUTES(ATTRIBUTE_NAME)
#undef ATTRIBUTE_NAME
};

/* The attribute named by the string at arg, or an argument error. */
static CUdevice_attribute check_attribute_name(lua_State *L, int arg)
{
    const char *name = lua_tostring(L, arg);
    for (size_t i = 0; i < sizeof attribute_names / sizeof attribute_names[0]; i++)
        if (strcmp(attribute_names[i].name, name) == 0)
            return attribute_names[i].attribute;
    return (CUdevice_attribute)gpurun_arg_error(L, arg, "unknown device attribute '%s' (the "
        "names are cuda.h's CU_DEVICE_ATTRIBUTE_* in lower case without the prefix, such as "
        "'max_shared_memory_per_block_optin')", name);
}

/* get_attribute(name or n) -> the value of CU_DEVICE_ATTRIBUTE_<NAME> (or
 * of the raw enum value n), for what the named fields do not cover. */
static int device_get_attribute(lua_State *L)
{
    struct device *device = check_device(L, 1);
    CUdevice_attribute attribute;
    if (lua_type(L, 2) == LUA_TSTRING) {
        attribute = check_attribute_name(L, 2);
    } else {
        if (lua_type(L, 2) != LUA_TNUMBER)
            gpurun_type_error(L, 2, "attribute name or number");
        lua_Integer value = gpurun_check_integer(L, 2, NULL);
        if (value <= 0 || value >= CU_DEVICE_ATTRIBUTE_MAX)
            gpurun_arg_error(L, 2, "CU_DEVICE_ATTRIBUTE_* value expected, got %I",
                             (LUAI_UACINT)value);
        attribute = (CUdevice_attribute)value;
    }
    lua_pushinteger(L, device_attribute(L, device, attribute));
    return 1;
}

static int device_close(lua_State *L)
{
    struct device *device = gpurun_check_tagged(L, 1, &gpurun_device_tag);
    /* The primary context stays retained until exit: streams and buffers
     * made on it may outlive this object. */
    device->header.closed = 1;
    return 0;
}

static int device_id(lua_State *L)
{
    lua_pushinteger(L, ((struct device *)lua_touserdata(L, 1))->ordinal);
    return 1;
}

static int device_name(lua_State *L)
{
    lua_pushstring(L, ((struct device *)lua_touserdata(L, 1))->name);
    return 1;
}

static int device_arch(lua_State *L)
{
    struct device *device = lua_touserdata(L, 1);
    lua_pushfstring(L, "%d%d", device->cc_major, device->cc_minor);
    return 1;
}

static int device_compute_capability(lua_State *L)
{
    struct device *device = lua_touserdata(L, 1);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, device->cc_major);
    lua_setfield(L, -2, "major");
    lua_pushinteger(L, device->cc_minor);
    lua_setfield(L, -2, "minor");
    return 1;
}

static int device_total_memory(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)((struct device *)lua_touserdata(L, 1))->total_memory);
    return 1;
}

#define ATTRIBUTE_FIELD(field, attribute)                                         \
    static int device_##field(lua_State *L)                                       \
    {                                                                             \
        lua_pushinteger(L, device_attribute(L, lua_touserdata(L, 1), attribute)); \
        return 1;                                                                 \
    }
ATTRIBUTE_FIELD(multiprocessor_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)
ATTRIBUTE_FIELD(max_threads_per_block, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)
ATTRIBUTE_FIELD(max_shared_memory_per_block, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)

/* { least = 0, greatest = -5 }: the priorities create_stream accepts. */
static int device_stream_priority_range(lua_State *L)
{
    check_current_device(L, 1, "Device.stream_priority_range");
    int least = 0, greatest = 0;
    priority_range(L, &least, &greatest);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, least);
    lua_setfield(L, -2, "least");
    lua_pushinteger(L, greatest);
    lua_setfield(L, -2, "greatest");
    return 1;
}

static int device_tostring(lua_State *L)
{
    struct device *device = gpurun_check_tagged(L, 1, &gpurun_device_tag);
    if (device->header.closed)
        lua_pushfstring(L, "gpurun.Device(%d, closed)", device->ordinal);
    else
        lua_pushfstring(L, "gpurun.Device(%d, %s)", device->ordinal, device->name);
    return 1;
}

static const luaL_Reg device_methods[] = {
    {"set_current", device_set_current},
    {"sync", device_sync},
    {"create_stream", device_create_stream},
    {"get_attribute", device_get_attribute},
    {"can_access_peer", device_can_access_peer},
    {"enable_peer_access", device_enable_peer_access},
    {"close", device_close},
    {NULL, NULL}
};

/* resources -> { sm = SMResource }: the device's multiprocessors, which
 * SMResource:split divides among green contexts. */
static int device_resources(lua_State *L)
{
    struct device *device = lua_touserdata(L, 1);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuDeviceGetDevResource, 12040);
    CUdevResource resource;
    memset(&resource, 0, sizeof resource);
    CHECK_CUDA(L, "reading the device's SMs", cuDeviceGetDevResource, device->handle, &resource,
               CU_DEV_RESOURCE_TYPE_SM);
    gpurun_push_sm_resources(L, &resource, device->ordinal, GPURUN_SM_DEVICE);
    return 1;
}

static const luaL_Reg device_fields[] = {
    {"resources", device_resources},
    {"id", device_id},
    {"device_id", device_id},
    {"name", device_name},
    {"arch", device_arch},
    {"compute_capability", device_compute_capability},
    {"total_memory", device_total_memory},
    {"multiprocessor_count", device_multiprocessor_count},
    {"max_threads_per_block", device_max_threads_per_block},
    {"max_shared_memory_per_block", device_max_shared_memory_per_block},
    {"stream_priority_range", device_stream_priority_range},
    {NULL, NULL}
};

static const luaL_Reg device_metamethods[] = {
    {"__tostring", device_tostring},
    {"__close", device_close},
    {"__gc", device_close},
    {NULL, NULL}
};

static const struct gpurun_type device_type = {
    &gpurun_device_tag, device_methods, device_metamethods, device_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"Device", device_new},
    {NULL, NULL}
};

void gpurun_open_device(lua_State *L)
{
    gpurun_register_type(L, &device_type);
    gpurun_set_functions(L, module_functions);
}
