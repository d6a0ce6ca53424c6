/* gpurun.Context: a green context, some of a device's multiprocessors
 * (groups of an SMResource split) with streams of its own. Kernels and
 * graphs launched on those streams run on its multiprocessors only;
 * gpurun's current device keeps its primary context, so buffers, events
 * and kernels are made as before and used from the green streams. */
#include "types/context.h"

#include <string.h>

#include "types/device.h"
#include "types/sm_resource.h"
#include "types/stream.h"

const struct gpurun_tag gpurun_context_tag = {"gpurun.Context"};

#define MAX_RESOURCES 64

struct context {
    struct gpurun_object header;
    CUgreenCtx green;
    CUcontext context; /* the green context as a CUcontext (cuCtxFromGreenCtx) */
    int device;
};

static struct context *check_context(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_context_tag);
}

/* The SMResources of the list at index (options.resources, argument 2),
 * checked, into resources[]; their count. One whole resource, or results
 * of one split, all of `device`. */
static unsigned int check_resources(lua_State *L, int index, int device, CUdevResource *resources)
{
    if (lua_type(L, index) != LUA_TTABLE || lua_rawlen(L, index) == 0)
        gpurun_arg_error(L, 2, "option 'resources' must be a non-empty list of gpurun.SMResource "
                               "(groups of SMResource:split), got %s", gpurun_type_name(L, index));
    lua_Unsigned count = lua_rawlen(L, index);
    if (count > MAX_RESOURCES)
        gpurun_arg_error(L, 2, "option 'resources' lists %I SMResources; at most %d",
                         (LUAI_UACINT)count, MAX_RESOURCES);
    unsigned int split = 0;
    for (lua_Unsigned i = 1; i <= count; i++) {
        lua_rawgeti(L, index, (lua_Integer)i);
        struct gpurun_sm_resource *sm = gpurun_to_tagged(L, -1, &gpurun_sm_resource_tag);
        if (sm == NULL)
            gpurun_arg_error(L, 2, "resources[%d]: gpurun.SMResource expected, got %s", (int)i,
                             gpurun_type_name(L, -1));
        if (sm->header.closed)
            gpurun_closed_error(L, gpurun_sm_resource_tag.type_name);
        if (sm->device != device)
            gpurun_arg_error(L, 2, "resources[%d] is of device %d, not of device %d", (int)i,
                             sm->device, device);
        if (sm->origin == GPURUN_SM_CONTEXT)
            gpurun_arg_error(L, 2, "resources[%d] is a green context's; make contexts of the "
                                   "groups of Device.resources.sm:split{}", (int)i);
        if (sm->origin == GPURUN_SM_DEVICE && count > 1)
            gpurun_arg_error(L, 2, "resources[%d] is the whole device's: it goes alone", (int)i);
        if (i > 1 && sm->split != split)
            gpurun_arg_error(L, 2, "resources[%d] comes from another split than resources[1]: one "
                                   "context combines groups of one split only", (int)i);
        split = sm->split;
        resources[i - 1] = sm->resource;
        lua_pop(L, 1);
    }
    return (unsigned int)count;
}

static const char *const context_options[] = {"resources", NULL};

/* Device:create_context{ resources = { group, ... } } -> Context */
static int device_create_context(lua_State *L)
{
    int device = gpurun_check_device_ordinal(L, 1);
    if (!gpurun_check_options(L, 2, context_options))
        return gpurun_arg_error(L, 2, "options expected: { resources = { SMResource, ... } }");
    lua_settop(L, 2);
    CUdevResource *resources = gpurun_push_staging(L, MAX_RESOURCES * sizeof *resources);
    lua_pushliteral(L, "resources");
    lua_rawget(L, 2);
    unsigned int count = check_resources(L, 4, device, resources);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuDevResourceGenerateDesc, 12040);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuGreenCtxCreate, 12040);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuCtxFromGreenCtx, 12040);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuGreenCtxStreamCreate, 12050);
    /* The green context retains the primary one: retained already, making
     * one costs no primary context start-up. */
    gpurun_primary_context(L, device);
    CUdevice handle;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &handle, device);
    struct context *context = gpurun_new_object(L, sizeof *context, 1, &gpurun_context_tag);
    context->device = device;
    /* The streams made of it, weakly: closing it closes them first. */
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_setiuservalue(L, -2, 1);
    CUdevResourceDesc description;
    CHECK_CUDA(L, "describing the green context's SMs", cuDevResourceGenerateDesc, &description,
               resources, count);
    CHECK_CUDA(L, "creating a green context", cuGreenCtxCreate, &context->green, description,
               handle, CU_GREEN_CTX_DEFAULT_STREAM);
    if (CUDA_CALL(cuCtxFromGreenCtx, &context->context, context->green) != CUDA_SUCCESS) {
        (void)CUDA_CALL(cuGreenCtxDestroy, context->green);
        context->green = NULL;
        gpurun_cuda_error(L, "converting a green context");
    }
    context->header.closed = 0;
    return 1;
}

/* Pushes a new stream of the open Context at index, which it keeps (and
 * which closes it first when closed). */
static struct gpurun_stream *push_green_stream(lua_State *L, int context_index, int priority)
{
    struct context *context = lua_touserdata(L, context_index);
    struct gpurun_stream_object *stream =
        gpurun_push_stream_object(L, context->context, context->device);
    lua_pushvalue(L, context_index);
    lua_setiuservalue(L, -2, 1);
    CHECK_CUDA(L, "creating a stream of a green context", cuGreenCtxStreamCreate,
               &stream->stream.handle, context->green, CU_STREAM_NON_BLOCKING, priority);
    stream->header.closed = 0;
    lua_getiuservalue(L, context_index, 1);
    lua_pushvalue(L, -2);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    return &stream->stream;
}

static const char *const stream_options[] = {"priority", NULL};

/* create_stream([{ priority = p }]) -> Stream of this context */
static int context_create_stream(lua_State *L)
{
    struct context *context = check_context(L, 1);
    gpurun_check_options(L, 2, stream_options);
    lua_Integer priority = gpurun_opt_integer_field(L, 2, "priority", 0, "an integer");
    int least = 0, greatest = 0;
    CUcontext previous = gpurun_enter_context(context->context);
    CUresult result = CUDA_CALL(cuCtxGetStreamPriorityRange, &least, &greatest);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading the stream priority range");
    if (priority > least || priority < greatest)
        return gpurun_arg_error(L, 2, "priority %I out of range: this device's stream priorities "
                                      "run from %d (least, the default) to %d (greatest)",
                                (LUAI_UACINT)priority, least, greatest);
    push_green_stream(L, 1, (int)priority);
    return 1;
}

struct gpurun_stream *gpurun_push_stream_beside(lua_State *L, int stream_index)
{
    stream_index = lua_absindex(L, stream_index);
    lua_getiuservalue(L, stream_index, 1);
    if (gpurun_to_tagged(L, -1, &gpurun_context_tag) == NULL) {
        lua_pop(L, 1);
        return gpurun_push_new_stream(L, 0);
    }
    check_context(L, -1);
    struct gpurun_stream *stream = push_green_stream(L, lua_gettop(L), 0);
    lua_remove(L, -2);
    return stream;
}

/* sync(): waits for the work of every stream of the context. */
static int context_sync(lua_State *L)
{
    struct context *context = check_context(L, 1);
    if (gpurun_wait_device(L, context->context, "synchronizing a green context") != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "synchronizing a green context");
    return 0;
}

/* Waits for its work and closes its streams (the driver does not destroy
 * a green context's streams with it). The green context itself goes when
 * the object is collected: its streams and the graphs captured on them
 * keep the object, so nothing of the context outlives it. */
static int context_close(lua_State *L)
{
    struct context *context = gpurun_check_tagged(L, 1, &gpurun_context_tag);
    if (context->header.closed)
        return 0;
    context->header.closed = 1;
    if (context->green == NULL)
        return 0;
    if (!gpurun_runtime.abandoned && !gpurun_in_host_call()) {
        CUcontext previous = gpurun_enter_context(context->context);
        /* A failed wait (a sticky error) leaves nothing to wait for. */
        (void)CUDA_CALL(cuCtxSynchronize);
        gpurun_leave_context(previous);
    }
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_pushnil(L);
    while (lua_next(L, 2) != 0) {
        lua_pop(L, 1);
        struct gpurun_stream_object *stream = gpurun_to_tagged(L, -1, &gpurun_stream_tag);
        if (stream && !stream->header.closed)
            gpurun_close_stream_of_ended_context(L, -1);
    }
    return 0;
}

static int context_gc(lua_State *L)
{
    context_close(L);
    struct context *context = lua_touserdata(L, 1);
    if (context->green)
        (void)CUDA_CALL(cuGreenCtxDestroy, context->green);
    context->green = NULL;
    context->context = NULL;
    return 0;
}

static int context_device(lua_State *L)
{
    lua_pushinteger(L, ((struct context *)lua_touserdata(L, 1))->device);
    return 1;
}

static int context_handle(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(uintptr_t)((struct context *)lua_touserdata(L, 1))->green);
    return 1;
}

/* resources -> { sm = SMResource }: the multiprocessors it was given. */
static int context_resources(lua_State *L)
{
    struct context *context = lua_touserdata(L, 1);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuGreenCtxGetDevResource, 12040);
    CUdevResource resource;
    memset(&resource, 0, sizeof resource);
    CHECK_CUDA(L, "reading a green context's SMs", cuGreenCtxGetDevResource, context->green,
               &resource, CU_DEV_RESOURCE_TYPE_SM);
    gpurun_push_sm_resources(L, &resource, context->device, GPURUN_SM_CONTEXT);
    return 1;
}

static int context_tostring(lua_State *L)
{
    struct context *context = gpurun_check_tagged(L, 1, &gpurun_context_tag);
    if (context->header.closed)
        lua_pushliteral(L, "gpurun.Context(closed)");
    else
        lua_pushfstring(L, "gpurun.Context(%p, device %d)", (void *)context->green,
                        context->device);
    return 1;
}

static const luaL_Reg context_methods[] = {
    {"create_stream", context_create_stream},
    {"sync", context_sync},
    {"close", context_close},
    {NULL, NULL}
};

static const luaL_Reg context_fields[] = {
    {"device", context_device},
    {"handle", context_handle},
    {"resources", context_resources},
    {NULL, NULL}
};

static const luaL_Reg context_metamethods[] = {
    {"__tostring", context_tostring},
    {"__close", context_close},
    {"__gc", context_gc},
    {NULL, NULL}
};

static const struct gpurun_type context_type = {
    &gpurun_context_tag, context_methods, context_metamethods, context_fields, NULL,
};

static const luaL_Reg device_methods[] = {
    {"create_context", device_create_context},
    {NULL, NULL}
};

void gpurun_open_context(lua_State *L)
{
    gpurun_register_type(L, &context_type);
    gpurun_add_methods(L, &gpurun_device_tag, device_methods);
}
