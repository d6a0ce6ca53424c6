/* gpurun.Stream, and the module's current stream (gpurun.set_current_stream,
 * gpurun.current_stream): where buffer operations without a stream go. */
#include "types/stream.h"

#include "types/event.h"

struct gpurun_stream_object *gpurun_push_stream_object(lua_State *L, CUcontext context, int device)
{
    struct gpurun_stream_object *object =
        gpurun_new_object(L, sizeof *object, 1, &gpurun_stream_tag);
    object->stream.context = context;
    object->stream.device = device;
    return object;
}

struct gpurun_stream *gpurun_push_new_stream(lua_State *L, int priority)
{
    CUcontext context = gpurun_require_context(L);
    struct gpurun_stream_object *object =
        gpurun_push_stream_object(L, context, gpurun_runtime.current_device);
    CHECK_CUDA(L, "creating a stream", cuStreamCreateWithPriority, &object->stream.handle,
               CU_STREAM_NON_BLOCKING, priority);
    object->header.closed = 0;
    return &object->stream;
}

/* Whether the driver sees the stream being captured: by one of gpurun's
 * builders, or joined to a capture through an event. */
static int is_capturing(lua_State *L, struct gpurun_stream *stream)
{
    if (stream->capture)
        return 1;
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    CHECK_CUDA(L, "asking whether the stream is being captured", cuStreamIsCapturing,
               stream->handle, &status);
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

static int stream_sync(lua_State *L)
{
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    if (is_capturing(L, stream))
        return gpurun_refuse_captured(L, 0, "Stream:sync", "synchronize before begin_building "
                                                          "or after end_building");
    gpurun_wait_stream(L, stream, "synchronizing a stream");
    return 0;
}

/* query() -> true when all work on the stream has finished. */
static int stream_query(lua_State *L)
{
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    return gpurun_push_ready(L, CUDA_CALL(cuStreamQuery, stream->handle), "querying a stream");
}

/* record([event]) -> event. Reusing an event keeps timing loops free of
 * allocation. */
static int stream_record(lua_State *L)
{
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    struct gpurun_event *event;
    if (lua_isnoneornil(L, 2)) {
        /* In the device's primary context, also for a green context's
         * stream: the event outlives the stream, and may outlive its context. */
        event = gpurun_push_event_on(L, CU_EVENT_DEFAULT,
                                     gpurun_primary_context(L, stream->device), stream->device);
        stream = gpurun_check_stream(L, 1); /* the event's allocation ran finalizers */
    } else {
        event = gpurun_check_open(L, 2, &gpurun_event_tag);
        lua_settop(L, 2);
        if (event->device != stream->device)
            return gpurun_error(L, "Stream:record: the event belongs to device %d but the "
                                   "stream to device %d (an event is recorded on streams of "
                                   "its own device)", event->device, stream->device);
    }
    CUcontext previous = gpurun_enter_context(stream->context);
    CUresult result = CUDA_CALL(cuEventRecord, event->handle, stream->handle);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "recording an event");
    event->recorded = 1;
    event->capture = stream->capture ? stream->capture->root : NULL;
    return 1;
}

/* wait(event | stream) -> self: work queued on this stream from now on
 * starts after the event (or after what is queued on the other stream now).
 * Captures wait on their builders instead (GraphBuilder:wait), so that a
 * graph never holds work on a stream gpurun does not see as captured. */
static int stream_wait(lua_State *L)
{
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    if (stream->capture)
        return gpurun_refuse_captured(L, 0, "Stream:wait", "wait on the builder "
                                                          "(builder:wait(...)) instead");
    struct gpurun_event *event = gpurun_to_tagged(L, 2, &gpurun_event_tag);
    if (event) {
        event = gpurun_check_open(L, 2, &gpurun_event_tag);
        if (!event->recorded)
            return gpurun_arg_error(L, 2, "a recorded gpurun.Event expected: this one was never "
                                          "recorded");
        if (event->capture)
            return gpurun_arg_error(L, 2, "the event was recorded during a graph capture: wait "
                                          "for it on a GraphBuilder of that capture");
        CHECK_CUDA(L, "making a stream wait for an event", cuStreamWaitEvent, stream->handle,
                   event->handle, 0);
    } else if (gpurun_to_tagged(L, 2, &gpurun_stream_tag)) {
        struct gpurun_stream *other = gpurun_check_stream(L, 2);
        if (other->capture)
            return gpurun_refuse_captured(L, 2, NULL, "wait for it on a builder of that capture");
        if (other->device != stream->device)
            return gpurun_arg_error(L, 2, "a stream of device %d expected (this one's), got one "
                                          "of device %d", stream->device, other->device);
        if (gpurun_order_after(stream, other) != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "making a stream wait for another");
        /* Unbounded work there may now hold this stream up too. */
        stream->unbounded |= other->unbounded;
    } else {
        return gpurun_type_error(L, 2, "gpurun.Event or gpurun.Stream");
    }
    lua_settop(L, 1);
    return 1;
}

#define MAX_CLOSE_HOOKS 4
static gpurun_stream_close_hook close_hooks[MAX_CLOSE_HOOKS];

void gpurun_add_stream_close_hook(gpurun_stream_close_hook hook)
{
    for (int i = 0; i < MAX_CLOSE_HOOKS; i++) {
        if (close_hooks[i] == hook)
            return;
        if (close_hooks[i] == NULL) {
            close_hooks[i] = hook;
            return;
        }
    }
}

static int stream_close(lua_State *L)
{
    struct gpurun_stream_object *object = gpurun_check_tagged(L, 1, &gpurun_stream_tag);
    struct gpurun_stream *stream = &object->stream;
    if (object->header.closed)
        return 0;
    if (stream->capture)
        gpurun_capture_abort_all(L);
    if (gpurun_runtime.current_stream == stream)
        gpurun_set_current_stream(L, 0, NULL);
    object->header.closed = 1;
    for (int i = 0; i < MAX_CLOSE_HOOKS && close_hooks[i]; i++)
        close_hooks[i](L, stream);
    /* Work already queued finishes; the driver frees the stream after it.
     * Its ordering event marks the end of that work, for memory a pool
     * frees later on another stream (types/buffer/memory.c). */
    CUcontext previous = gpurun_enter_context(stream->context);
    if (gpurun_mark_stream(stream) != CUDA_SUCCESS && stream->order_event) {
        (void)CUDA_CALL(cuEventDestroy, stream->order_event);
        stream->order_event = NULL;
    }
    /* As for unloading code (types/object_code.c): a stream collected
     * while another is being captured must not end that capture. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    (void)CUDA_CALL(cuStreamDestroy, stream->handle);
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    stream->handle = NULL;
    return 0;
}

static void destroy_order_event(struct gpurun_stream_object *object)
{
    if (object->stream.order_event) {
        CUcontext previous = gpurun_enter_context(object->stream.context);
        (void)CUDA_CALL(cuEventDestroy, object->stream.order_event);
        gpurun_leave_context(previous);
    }
    object->stream.order_event = NULL;
}

/* Nothing can wait for a collected stream any more: a buffer that did
 * keeps the Stream object alive. */
static int stream_gc(lua_State *L)
{
    stream_close(L);
    destroy_order_event(lua_touserdata(L, 1));
    return 0;
}

void gpurun_close_stream_of_ended_context(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    lua_pushcfunction(L, stream_close);
    lua_pushvalue(L, index);
    lua_call(L, 1, 0);
    destroy_order_event(lua_touserdata(L, index));
}

static int stream_handle(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(uintptr_t)gpurun_check_stream(L, 1)->handle);
    return 1;
}

static int stream_device(lua_State *L)
{
    lua_pushinteger(L, gpurun_check_stream(L, 1)->device);
    return 1;
}

/* The priority it was created with: lower numbers run first (see
 * Device:create_stream). */
static int stream_priority(lua_State *L)
{
    int priority = 0;
    CHECK_CUDA(L, "reading a stream's priority", cuStreamGetPriority,
               gpurun_check_stream(L, 1)->handle, &priority);
    lua_pushinteger(L, priority);
    return 1;
}

static int stream_tostring(lua_State *L)
{
    struct gpurun_stream_object *object = gpurun_check_tagged(L, 1, &gpurun_stream_tag);
    if (object->header.closed)
        lua_pushliteral(L, "gpurun.Stream(closed)");
    else
        lua_pushfstring(L, "gpurun.Stream(%p)", (void *)object->stream.handle);
    return 1;
}

/* set_current_stream(stream | nil): buffer operations without an explicit
 * stream go on this one, ordered with the kernels launched on it. */
static int module_set_current_stream(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        gpurun_set_current_stream(L, 0, NULL);
        return 0;
    }
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    if (stream->device != gpurun_runtime.current_device)
        return gpurun_error(L, "set_current_stream: the stream belongs to device %d but "
                               "device %d is current", stream->device,
                            gpurun_runtime.current_device);
    gpurun_set_current_stream(L, 1, stream);
    return 0;
}

static int module_current_stream(lua_State *L)
{
    gpurun_push_current_stream(L);
    return 1;
}

static const luaL_Reg stream_methods[] = {
    {"sync", stream_sync},
    {"query", stream_query},
    {"record", stream_record},
    {"wait", stream_wait},
    {"close", stream_close},
    {NULL, NULL}
};

static const luaL_Reg stream_fields[] = {
    {"handle", stream_handle},
    {"device", stream_device},
    {"priority", stream_priority},
    {NULL, NULL}
};

static const luaL_Reg stream_metamethods[] = {
    {"__tostring", stream_tostring},
    {"__close", stream_close},
    {"__gc", stream_gc},
    {NULL, NULL}
};

static const struct gpurun_type stream_type = {
    &gpurun_stream_tag, stream_methods, stream_metamethods, stream_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"set_current_stream", module_set_current_stream},
    {"current_stream", module_current_stream},
    {NULL, NULL}
};

void gpurun_open_stream(lua_State *L)
{
    gpurun_register_type(L, &stream_type);
    gpurun_set_functions(L, module_functions);
}
