/* gpurun.HostCallback(fn): fn() runs at a point of a stream's order,
 * queued with callback:launch(stream) (cuLaunchHostFunc) or captured as a
 * graph's host node with callback:launch(builder), run at each replay.
 * It runs on the main thread, while the script waits for the GPU (a sync,
 * a buffer read, a pipeline's wait), and the stream's later work does not
 * wait for it (runtime/state.c says why). fn must not call into the
 * GPU: gpurun refuses launches, allocations and waits inside it. An error
 * it raises is raised by the wait that ran it. A callback with runs queued
 * is kept alive until they are done, and refuses to close. */
#include "types/host_callback.h"

#include "types/graph_builder.h"
#include "types/stream.h"

const struct gpurun_tag gpurun_host_callback_tag = {"gpurun.HostCallback"};

static struct gpurun_host_callback *check_callback(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_host_callback_tag);
}

/* HostCallback(fn) -> HostCallback; needs no GPU until it is launched. */
static int module_host_callback(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TFUNCTION)
        return gpurun_type_error(L, 1, "function");
    struct gpurun_host_callback *callback =
        gpurun_new_object(L, sizeof *callback, 0, &gpurun_host_callback_tag);
    gpurun_host_call_init(&callback->call);
    lua_pushvalue(L, 1);
    callback->call.function_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    callback->header.closed = 0;
    return 1;
}

/* launch(stream | builder) -> self. On a stream, one run queued; on a
 * builder that is building, a host node (conditional bodies refuse: their
 * runs are not known ahead). */
static int host_callback_launch(lua_State *L)
{
    struct gpurun_host_callback *callback = check_callback(L, 1);
    gpurun_check_not_in_host_call(L, "HostCallback:launch");
    struct gpurun_capture *capture;
    CUstream stream = gpurun_launch_target(L, 2, &capture);
    CUcontext context;
    if (capture) {
        if (capture->role == GPURUN_CAPTURE_BODY)
            return gpurun_error(L, "HostCallback:launch: a conditional body may run any number "
                                   "of times; launch host callbacks outside conditional nodes");
        gpurun_capture_keep(L, capture, 1);
        /* Keeping allocates, which can run a finalizer that closes the
         * builder or the callback: both checked again. */
        callback = check_callback(L, 1);
        stream = gpurun_launch_target(L, 2, &capture);
        context = capture->stream->context;
    } else {
        gpurun_host_call_expect(L, &callback->call, 1, 1);
        /* So does expecting; a callback with a run expected refuses to close. */
        const struct gpurun_stream_object *object = lua_touserdata(L, 2);
        if (object->header.closed) {
            gpurun_host_call_cancel(L, &callback->call, 1);
            return gpurun_closed_error(L, gpurun_stream_tag.type_name);
        }
        context = object->stream.context;
    }
    CUcontext previous = gpurun_enter_context(context);
    CUresult result = CUDA_CALL(cuLaunchHostFunc, stream, gpurun_host_call_trampoline,
                                &callback->call);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS) {
        if (!capture)
            gpurun_host_call_cancel(L, &callback->call, 1);
        return gpurun_cuda_error(L, "queueing a host callback");
    }
    lua_settop(L, 1);
    return 1;
}

static int host_callback_close(lua_State *L)
{
    struct gpurun_host_callback *callback = gpurun_check_tagged(L, 1, &gpurun_host_callback_tag);
    if (callback->header.closed)
        return 0;
    if (callback->call.pending > 0)
        return gpurun_error(L, "gpurun.HostCallback has %d run(s) queued on the GPU: wait for "
                               "them (Stream:sync) before closing it", (int)callback->call.pending);
    if (callback->header.graph_users > 0)
        return gpurun_error(L, "gpurun.HostCallback is used by %d graph(s) or graph builder(s); "
                               "close them first", callback->header.graph_users);
    callback->header.closed = 1;
    luaL_unref(L, LUA_REGISTRYINDEX, callback->call.function_ref);
    callback->call.function_ref = LUA_NOREF;
    return 0;
}

/* The collector runs this only when nothing queued can reach the callback
 * (pending runs anchor it), so it never refuses. */
static int host_callback_gc(lua_State *L)
{
    struct gpurun_host_callback *callback = lua_touserdata(L, 1);
    if (!callback->header.closed) {
        callback->header.closed = 1;
        luaL_unref(L, LUA_REGISTRYINDEX, callback->call.function_ref);
        callback->call.function_ref = LUA_NOREF;
    }
    return 0;
}

static int host_callback_pending(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_host_callback *)lua_touserdata(L, 1))->call.pending);
    return 1;
}

static int host_callback_calls(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_host_callback *)lua_touserdata(L, 1))->call.calls);
    return 1;
}

static int host_callback_tostring(lua_State *L)
{
    struct gpurun_host_callback *callback = gpurun_check_tagged(L, 1, &gpurun_host_callback_tag);
    if (callback->header.closed)
        lua_pushliteral(L, "gpurun.HostCallback(closed)");
    else
        lua_pushfstring(L, "gpurun.HostCallback(%d run, %d queued)", (int)callback->call.calls,
                        (int)callback->call.pending);
    return 1;
}

static const luaL_Reg host_callback_methods[] = {
    {"launch", host_callback_launch},
    {"close", host_callback_close},
    {NULL, NULL}
};

static const luaL_Reg host_callback_fields[] = {
    {"pending", host_callback_pending},
    {"calls", host_callback_calls},
    {NULL, NULL}
};

static const luaL_Reg host_callback_metamethods[] = {
    {"__tostring", host_callback_tostring},
    {"__close", host_callback_close},
    {"__gc", host_callback_gc},
    {NULL, NULL}
};

static const struct gpurun_type host_callback_type = {
    &gpurun_host_callback_tag, host_callback_methods, host_callback_metamethods,
    host_callback_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"HostCallback", module_host_callback},
    {NULL, NULL}
};

void gpurun_open_host_callback(lua_State *L)
{
    gpurun_register_type(L, &host_callback_type);
    gpurun_set_functions(L, module_functions);
}
