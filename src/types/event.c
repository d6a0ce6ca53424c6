/* gpurun.Event: events made by gpurun.Event{...} or by Stream:record(),
 * timing between two of them, and waiting for one. */
#include "types/event.h"

const struct gpurun_tag gpurun_event_tag = {"gpurun.Event"};

static struct gpurun_event *check_event(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_event_tag);
}

struct gpurun_event *gpurun_push_event_on(lua_State *L, unsigned int flags, CUcontext context,
                                          int device)
{
    struct gpurun_event *event =
        gpurun_new_object(L, sizeof *event, 0, &gpurun_event_tag);
    event->flags = flags;
    event->context = context;
    event->device = device;
    CUcontext previous = gpurun_enter_context(context);
    CUresult result = CUDA_CALL(cuEventCreate, &event->handle, flags);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "creating an event");
    event->header.closed = 0;
    return event;
}

struct gpurun_event *gpurun_push_new_event(lua_State *L, unsigned int flags)
{
    CUcontext context = gpurun_require_context(L);
    return gpurun_push_event_on(L, flags, context, gpurun_runtime.current_device);
}

static int event_sync(lua_State *L)
{
    struct gpurun_event *event = check_event(L, 1);
    gpurun_wait_event(L, event->handle, "waiting for an event");
    return 0;
}

/* query() -> true when the work before the event has finished. */
static int event_query(lua_State *L)
{
    struct gpurun_event *event = check_event(L, 1);
    return gpurun_push_ready(L, CUDA_CALL(cuEventQuery, event->handle), "querying an event");
}

/* stop:elapsed_ms(start) -> milliseconds from start to stop, both recorded;
 * waits for stop. Also stop - start. */
static int event_elapsed_ms(lua_State *L)
{
    struct gpurun_event *stop = check_event(L, 1);
    struct gpurun_event *start = check_event(L, 2);
    if (!start->recorded || !stop->recorded)
        return gpurun_error(L, "Event:elapsed_ms: both events must have been recorded on a stream");
    if (start->device != stop->device)
        return gpurun_error(L, "Event:elapsed_ms: the events belong to different devices (%d "
                               "and %d); time events recorded on streams of one device",
                            start->device, stop->device);
    if ((start->flags | stop->flags) & CU_EVENT_DISABLE_TIMING)
        return gpurun_error(L, "Event:elapsed_ms: an event made with timing = false has no time "
                               "(make both with gpurun.Event{ timing = true })");
    gpurun_wait_event(L, stop->handle, "waiting for an event");
    float milliseconds = 0;
    CHECK_CUDA(L, "measuring the time between two events", cuEventElapsedTime, &milliseconds,
               start->handle, stop->handle);
    lua_pushnumber(L, milliseconds);
    return 1;
}

static int event_close(lua_State *L)
{
    struct gpurun_event *event = gpurun_check_tagged(L, 1, &gpurun_event_tag);
    if (event->header.closed)
        return 0;
    event->header.closed = 1;
    CUcontext previous = gpurun_enter_context(event->context);
    (void)CUDA_CALL(cuEventDestroy, event->handle);
    gpurun_leave_context(previous);
    event->handle = NULL;
    return 0;
}

static struct gpurun_event *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int event_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

static int event_timing(lua_State *L)
{
    lua_pushboolean(L, !(self(L)->flags & CU_EVENT_DISABLE_TIMING));
    return 1;
}

static int event_blocking(lua_State *L)
{
    lua_pushboolean(L, (self(L)->flags & CU_EVENT_BLOCKING_SYNC) != 0);
    return 1;
}

/* Event([{ timing = true, blocking = false }]): timing = false makes an
 * event that only orders work (cheaper to record and wait on), blocking =
 * true makes event:sync() yield the CPU instead of spinning. */
static int module_event(lua_State *L)
{
    static const char *const known[] = {"timing", "blocking", NULL};
    gpurun_check_options(L, 1, known);
    unsigned int flags = CU_EVENT_DEFAULT;
    if (!gpurun_opt_boolean_field(L, 1, "timing", 1))
        flags |= CU_EVENT_DISABLE_TIMING;
    if (gpurun_opt_boolean_field(L, 1, "blocking", 0))
        flags |= CU_EVENT_BLOCKING_SYNC;
    gpurun_push_new_event(L, flags);
    return 1;
}

static int event_tostring(lua_State *L)
{
    struct gpurun_event *event = gpurun_check_tagged(L, 1, &gpurun_event_tag);
    lua_pushstring(L, event->header.closed ? "gpurun.Event(closed)" : "gpurun.Event");
    return 1;
}

static const luaL_Reg event_methods[] = {
    {"sync", event_sync},
    {"query", event_query},
    {"elapsed_ms", event_elapsed_ms},
    {"close", event_close},
    {NULL, NULL}
};

static const luaL_Reg event_fields[] = {
    {"device", event_device},
    {"timing", event_timing},
    {"blocking", event_blocking},
    {NULL, NULL}
};

static const luaL_Reg event_metamethods[] = {
    {"__sub", event_elapsed_ms},
    {"__tostring", event_tostring},
    {"__close", event_close},
    {"__gc", event_close},
    {NULL, NULL}
};

static const struct gpurun_type event_type = {
    &gpurun_event_tag, event_methods, event_metamethods, event_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"Event", module_event},
    {NULL, NULL}
};

void gpurun_open_event(lua_State *L)
{
    gpurun_register_type(L, &event_type);
    gpurun_set_functions(L, module_functions);
}
