/* gpurun.Stream and gpurun.Event: ordered GPU work and GPU-side time. */
#include "gpurun.h"

#include <string.h>

struct event {
    CUevent handle;
    int recorded;
    int closed;
};

static struct gpurun_stream *check_stream(lua_State *L, int index)
{
    struct gpurun_stream *stream = luaL_checkudata(L, index, GPURUN_STREAM);
    if (stream->closed)
        gpurun_closed_error(L, GPURUN_STREAM);
    return stream;
}

CUstream gpurun_check_stream_handle(lua_State *L, int index)
{
    return check_stream(L, index)->handle;
}

/* The registry keeps the current stream's object, so the handle in
 * gpurun_runtime can never outlive it. */
#define CURRENT_STREAM_KEY "gpurun.current_stream"

CUstream gpurun_operation_stream(lua_State *L, int index)
{
    if (lua_isnoneornil(L, index))
        return gpurun_runtime.current_stream;
    return check_stream(L, index)->handle;
}

int gpurun_push_new_stream(lua_State *L)
{
    gpurun_require_context(L);
    struct gpurun_stream *stream = lua_newuserdatauv(L, sizeof *stream, 0);
    memset(stream, 0, sizeof *stream);
    stream->tag = &gpurun_tag_stream;
    stream->device = gpurun_runtime.current_device;
    stream->closed = 1;
    luaL_setmetatable(L, GPURUN_STREAM);
    CHECK_CUDA(L, "creating a stream", cuStreamCreate, &stream->handle, CU_STREAM_NON_BLOCKING);
    stream->closed = 0;
    return 1;
}

static int stream_is_capturing(lua_State *L, struct gpurun_stream *stream)
{
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_CUDA(L, "asking whether the stream is being captured", cuStreamIsCapturing,
               stream->handle, &status);
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int stream_sync(lua_State *L)
{
    struct gpurun_stream *stream = check_stream(L, 1);
    if (stream_is_capturing(L, stream)) {
        gpurun_abort_captures(L);
        return luaL_error(L, "Stream:sync: the stream is being captured into a graph "
                             "(synchronizing is not allowed while building); capture abandoned");
    }
    CHECK_CUDA(L, "synchronizing a stream", cuStreamSynchronize, stream->handle);
    return 0;
}

/* query() -> true when all work on the stream has finished. */
static int stream_query(lua_State *L)
{
    struct gpurun_stream *stream = check_stream(L, 1);
    CUresult result = CUDA_CALL(cuStreamQuery, stream->handle);
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY)
        gpurun_cuda_error(L, "querying a stream");
    lua_pushboolean(L, result == CUDA_SUCCESS);
    return 1;
}

static struct event *check_event(lua_State *L, int index)
{
    struct event *event = luaL_checkudata(L, index, GPURUN_EVENT);
    if (event->closed)
        gpurun_closed_error(L, GPURUN_EVENT);
    return event;
}

static struct event *push_new_event(lua_State *L)
{
    gpurun_require_context(L);
    struct event *event = lua_newuserdatauv(L, sizeof *event, 0);
    event->handle = NULL;
    event->recorded = 0;
    event->closed = 1;
    luaL_setmetatable(L, GPURUN_EVENT);
    CHECK_CUDA(L, "creating an event", cuEventCreate, &event->handle, CU_EVENT_DEFAULT);
    event->closed = 0;
    return event;
}

/* record([event]) -> event. Reusing an event keeps timing loops free of
 * allocation. */
static int stream_record(lua_State *L)
{
    struct gpurun_stream *stream = check_stream(L, 1);
    struct event *event;
    if (lua_isnoneornil(L, 2)) {
        event = push_new_event(L);
    } else {
        event = check_event(L, 2);
        lua_settop(L, 2);
    }
    CHECK_CUDA(L, "recording an event", cuEventRecord, event->handle, stream->handle);
    event->recorded = 1;
    return 1;
}

static int stream_create_graph_builder(lua_State *L)
{
    check_stream(L, 1);
    return gpurun_push_graph_builder(L, 1);
}

static int stream_close(lua_State *L)
{
    struct gpurun_stream *stream = luaL_checkudata(L, 1, GPURUN_STREAM);
    if (stream->closed)
        return 0;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (CUDA_CALL(cuStreamIsCapturing, stream->handle, &status) == CUDA_SUCCESS
        && status != CU_STREAM_CAPTURE_STATUS_NONE)
        gpurun_abort_captures(L);
    if (gpurun_runtime.current_stream == stream->handle) {
        gpurun_runtime.current_stream = NULL;
        lua_pushnil(L);
        lua_setfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
    }
    stream->closed = 1;
    /* Work already queued finishes; the driver frees the stream after it. */
    (void)CUDA_CALL(cuStreamDestroy, stream->handle);
    stream->handle = NULL;
    return 0;
}

static int stream_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_STREAM))
        return 1;
    struct gpurun_stream *stream = check_stream(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "handle") == 0)
        lua_pushinteger(L, (lua_Integer)(uintptr_t)stream->handle);
    else if (strcmp(key, "device") == 0)
        lua_pushinteger(L, stream->device);
    else
        lua_pushnil(L);
    return 1;
}

static int stream_tostring(lua_State *L)
{
    struct gpurun_stream *stream = luaL_checkudata(L, 1, GPURUN_STREAM);
    if (stream->closed)
        lua_pushliteral(L, "gpurun.Stream(closed)");
    else
        lua_pushfstring(L, "gpurun.Stream(%p)", (void *)stream->handle);
    return 1;
}

/* ---- Event -------------------------------------------------------------- */

static int event_sync(lua_State *L)
{
    struct event *event = check_event(L, 1);
    CHECK_CUDA(L, "waiting for an event", cuEventSynchronize, event->handle);
    return 0;
}

static int event_query(lua_State *L)
{
    struct event *event = check_event(L, 1);
    CUresult result = CUDA_CALL(cuEventQuery, event->handle);
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY)
        gpurun_cuda_error(L, "querying an event");
    lua_pushboolean(L, result == CUDA_SUCCESS);
    return 1;
}

/* stop:elapsed_ms(start) -> milliseconds from start to stop, both recorded;
 * waits for stop. Also stop - start. */
static int event_elapsed_ms(lua_State *L)
{
    struct event *stop = check_event(L, 1);
    struct event *start = check_event(L, 2);
    if (!start->recorded || !stop->recorded)
        return luaL_error(L, "Event:elapsed_ms: both events must have been recorded on a stream");
    CHECK_CUDA(L, "waiting for an event", cuEventSynchronize, stop->handle);
    float milliseconds = 0;
    CHECK_CUDA(L, "measuring the time between two events", cuEventElapsedTime, &milliseconds,
               start->handle, stop->handle);
    lua_pushnumber(L, milliseconds);
    return 1;
}

static int event_close(lua_State *L)
{
    struct event *event = luaL_checkudata(L, 1, GPURUN_EVENT);
    if (event->closed)
        return 0;
    event->closed = 1;
    (void)CUDA_CALL(cuEventDestroy, event->handle);
    event->handle = NULL;
    return 0;
}

static int event_tostring(lua_State *L)
{
    struct event *event = luaL_checkudata(L, 1, GPURUN_EVENT);
    lua_pushstring(L, event->closed ? "gpurun.Event(closed)" : "gpurun.Event");
    return 1;
}

/* ---- module functions --------------------------------------------------- */

/* set_current_stream(stream | nil): buffer operations without an explicit
 * stream go on this one, ordered with the kernels launched on it. */
static int module_set_current_stream(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        gpurun_runtime.current_stream = NULL;
        lua_pushnil(L);
    } else {
        struct gpurun_stream *stream = check_stream(L, 1);
        if (stream->device != gpurun_runtime.current_device)
            return luaL_error(L, "set_current_stream: the stream belongs to device %d but "
                                 "device %d is current", stream->device,
                              gpurun_runtime.current_device);
        gpurun_runtime.current_stream = stream->handle;
        lua_settop(L, 1);
    }
    lua_setfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
    return 0;
}

static int module_current_stream(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
    return 1;
}

static const luaL_Reg stream_meth[] = {
    {"sync", stream_sync},
    {"query", stream_query},
    {"record", stream_record},
    {"create_graph_builder", stream_create_graph_builder},
    {"close", stream_close},
    {NULL, NULL}
};

static const luaL_Reg stream_metameth[] = {
    {"__index", stream_index},
    {"__tostring", stream_tostring},
    {"__close", stream_close},
    {"__gc", stream_close},
    {NULL, NULL}
};

static const luaL_Reg event_meth[] = {
    {"sync", event_sync},
    {"query", event_query},
    {"elapsed_ms", event_elapsed_ms},
    {"close", event_close},
    {NULL, NULL}
};

static const luaL_Reg event_metameth[] = {
    {"__sub", event_elapsed_ms},
    {"__tostring", event_tostring},
    {"__close", event_close},
    {"__gc", event_close},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"set_current_stream", module_set_current_stream},
    {"current_stream", module_current_stream},
    {NULL, NULL}
};

void gpurun_open_stream(lua_State *L)
{
    gpurun_new_type(L, GPURUN_STREAM, stream_meth, stream_metameth);
    lua_pop(L, 1);
    gpurun_new_type(L, GPURUN_EVENT, event_meth, event_metameth);
    lua_pop(L, 1);
    luaL_setfuncs(L, module_functions, 0);
}
