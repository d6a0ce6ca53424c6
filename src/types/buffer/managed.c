/* Managed memory as a gpurun.Buffer, which kernels and the host both
 * reach: gpurun.managed(n [, dtype [, { attach = }]]) (cuMemAllocManaged),
 * and where its pages live, in cuda.core's names: Buffer:prefetch(location,
 * stream) and Buffer:advise(advice [, location]). Its host access is every
 * Buffer's (buffer.c), ordered by gpurun_order_host_access. */
#include "types/buffer/internal.h"

#include <string.h>

#include "types/device.h"
#include "types/graph_builder.h"

/* What a message shows of the value at index: a short string quoted. */
static const char *shown(lua_State *L, int index)
{
    size_t length = 0;
    if (lua_type(L, index) == LUA_TSTRING && lua_tolstring(L, index, &length) && length <= 40)
        return lua_pushfstring(L, "\"%s\"", lua_tostring(L, index));
    return gpurun_value_text(L, index);
}

static unsigned int check_attach(lua_State *L, int arg)
{
    static const char *const known[] = {"attach", NULL};
    unsigned int flags = CU_MEM_ATTACH_GLOBAL;
    if (!gpurun_check_options(L, arg, known))
        return flags;
    lua_pushliteral(L, "attach");
    int type = lua_rawget(L, arg);
    if (type != LUA_TNIL) {
        const char *name = type == LUA_TSTRING ? lua_tostring(L, -1) : "";
        if (strcmp(name, "host") == 0) {
            flags = CU_MEM_ATTACH_HOST;
        } else if (strcmp(name, "global") != 0) {
            const char *got = shown(L, -1);
            gpurun_arg_error(L, arg, "option 'attach' must be \"global\" or \"host\", got %s", got);
        }
    }
    lua_pop(L, 1);
    return flags;
}

static int device_attribute(lua_State *L, int ordinal, CUdevice_attribute attribute)
{
    CUdevice device;
    int value = 0;
    CHECK_CUDA(L, "reading a device attribute", cuDeviceGet, &device, ordinal);
    CHECK_CUDA(L, "reading a device attribute", cuDeviceGetAttribute, &value, attribute, device);
    return value;
}

/* managed(n [, dtype [, { attach = "global" | "host" }]]): contents
 * undefined, as for gpurun.empty. Asking for more than the device has free
 * is refused before the driver is asked: managed memory would otherwise
 * be oversubscribed and paged in and out behind the script's back. */
static int module_managed(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    unsigned int flags = check_attach(L, 3);
    gpurun_check_byte_size(L, count, dtype, 1);
    lua_settop(L, 0);
    CUcontext context = gpurun_require_context(L);
    if (gpurun_capture_in_progress())
        gpurun_error(L, "cannot allocate a managed gpurun.Buffer while a graph is being built "
                        "(allocate before begin_building); capture abandoned");
    int device = gpurun_runtime.current_device;
    if (!device_attribute(L, device, CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY))
        gpurun_error(L, "gpurun.managed: device %d cannot allocate managed memory on this system",
                     device);
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    size_t bytes = count * info->size;
    char size_text[32], free_text[32], total_text[32];
    gpurun_flush_frees();
    size_t free_bytes = 0, total_bytes = 0;
    CHECK_CUDA(L, "asking how much device memory is free", cuMemGetInfo, &free_bytes,
               &total_bytes);
    if (bytes > free_bytes)
        gpurun_error(L, "gpurun.managed: %s for %I %s elements is more than device %d has free "
                        "(%s free of %s)", gpurun_format_size(size_text, sizeof size_text, bytes),
                     (LUAI_UACINT)count, info->name, device,
                     gpurun_format_size(free_text, sizeof free_text, free_bytes),
                     gpurun_format_size(total_text, sizeof total_text, total_bytes));
    struct gpurun_buffer *buffer = gpurun_push_buffer_object(L, count, dtype, 0);
    buffer->context = context;
    buffer->device = device;
    if (CUDA_CALL(cuMemAllocManaged, &buffer->pointer, bytes, flags) != CUDA_SUCCESS) {
        buffer->pointer = 0;
        gpurun_transfer_error(L, "allocating %s of managed memory for %I %s elements",
                              gpurun_format_size(size_text, sizeof size_text, bytes),
                              (LUAI_UACINT)count, info->name);
    }
    buffer->managed = 1;
    buffer->header.closed = 0;
    return 1;
}

/* ---- where the pages live ---------------------------------------------- */

/* A location at arg: "host", a gpurun.Device or a device ordinal. */
static CUmemLocation check_location(lua_State *L, int arg)
{
    CUmemLocation location = {CU_MEM_LOCATION_TYPE_DEVICE, 0};
    if (lua_type(L, arg) == LUA_TSTRING && strcmp(lua_tostring(L, arg), "host") == 0) {
        location.type = CU_MEM_LOCATION_TYPE_HOST;
        return location;
    }
    lua_Integer ordinal = 0;
    if (gpurun_to_tagged(L, arg, &gpurun_device_tag)) {
        location.id = gpurun_check_device_ordinal(L, arg);
        return location;
    }
    if (lua_type(L, arg) != LUA_TNUMBER || !gpurun_exact_integer(L, arg, &ordinal)) {
        const char *got = shown(L, arg);
        gpurun_arg_error(L, arg, "\"host\", a gpurun.Device or a device ordinal expected, got %s",
                         got);
    }
    int devices = cuda_driver_device_count();
    if (ordinal < 0 || ordinal >= devices)
        gpurun_arg_error(L, arg, "device %I not found: %d device(s) visible (the host is "
                                 "\"host\")", (LUAI_UACINT)ordinal, devices);
    location.id = (int)ordinal;
    return location;
}

/* The open managed Buffer at 1 on the current device (a view: its range). */
static struct gpurun_buffer *check_managed(lua_State *L, const char *operation)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, 1);
    if (!gpurun_buffer_owner(buffer)->managed)
        gpurun_error(L, "%s: the gpurun.Buffer is not managed memory (make it with "
                        "gpurun.managed(n, dtype))", operation);
    return gpurun_check_live_buffer(L, 1);
}

/* prefetch(location, stream) -> self: migrates the pages to the location,
 * in the stream's order (cuMemPrefetchAsync). */
static int buffer_prefetch(lua_State *L)
{
    struct gpurun_buffer *buffer = check_managed(L, "Buffer:prefetch");
    CUmemLocation location = check_location(L, 2);
    if (gpurun_to_tagged(L, 3, &gpurun_builder_tag))
        return gpurun_arg_error(L, 3, "a prefetch goes on a gpurun.Stream, not in a graph: "
                                      "prefetch before begin_building or after end_building");
    if (!gpurun_to_tagged(L, 3, &gpurun_stream_tag))
        return gpurun_type_error(L, 3, "gpurun.Stream");
    struct gpurun_stream *stream = gpurun_check_stream(L, 3);
    if (stream->device != buffer->device)
        return gpurun_arg_error(L, 3, "the stream belongs to device %d, the buffer to device %d",
                                stream->device, buffer->device);
    if (stream->capture)
        return gpurun_refuse_captured(L, 3, NULL,
                                      "prefetch before begin_building or after end_building");
    if (CUDA_CALL(cuMemPrefetchAsync, buffer->pointer, buffer->count * buffer->element_size,
                  location, 0, stream->handle) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "prefetching a managed gpurun.Buffer to %s",
                              location.type == CU_MEM_LOCATION_TYPE_HOST ? "the host" : "a device");
    lua_settop(L, 1);
    return 1;
}

/* cuMemAdvise's advice, in the order of CUmem_advise (1 on), as cuda.core
 * spells them; `located`: the advice is about a location, which must be
 * given. */
static const struct {
    const char *name;
    int located;
} advice_kinds[] = {
    {"set_read_mostly", 0},   {"unset_read_mostly", 0}, {"set_preferred_location", 1},
    {"unset_preferred_location", 0}, {"set_accessed_by", 1},   {"unset_accessed_by", 1},
};

#define ADVICE_COUNT ((int)(sizeof advice_kinds / sizeof advice_kinds[0]))

static int check_advice(lua_State *L, int arg)
{
    const char *name = lua_type(L, arg) == LUA_TSTRING ? lua_tostring(L, arg) : NULL;
    for (int i = 0; name && i < ADVICE_COUNT; i++)
        if (strcmp(name, advice_kinds[i].name) == 0)
            return i;
    const char *got = shown(L, arg);
    return gpurun_arg_error(L, arg, "advice expected (set_read_mostly, unset_read_mostly, "
                                    "set_preferred_location, unset_preferred_location, "
                                    "set_accessed_by, unset_accessed_by), got %s", got);
}

/* advise(advice [, location]) -> self (cuMemAdvise). */
static int buffer_advise(lua_State *L)
{
    struct gpurun_buffer *buffer = check_managed(L, "Buffer:advise");
    int kind = check_advice(L, 2);
    CUmemLocation location = {CU_MEM_LOCATION_TYPE_DEVICE, buffer->device};
    if (!lua_isnoneornil(L, 3))
        location = check_location(L, 3);
    else if (advice_kinds[kind].located)
        return gpurun_arg_error(L, 3, "advice '%s' is about a location: pass \"host\", a "
                                      "gpurun.Device or a device ordinal",
                                advice_kinds[kind].name);
    if (CUDA_CALL(cuMemAdvise, buffer->pointer, buffer->count * buffer->element_size,
                  (CUmem_advise)(kind + 1), location) != CUDA_SUCCESS)
        gpurun_cuda_error(L, "advising '%s' for a managed gpurun.Buffer", advice_kinds[kind].name);
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg buffer_methods[] = {
    {"prefetch", buffer_prefetch},
    {"advise", buffer_advise},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"managed", module_managed},
    {NULL, NULL}
};

void gpurun_open_managed(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_buffer_tag, buffer_methods);
    gpurun_set_functions(L, module_functions);
}
