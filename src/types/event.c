/* gpurun.Event: events made by gpurun.Event{...} or by Stream:record(),
 * timing between two of them, waiting for one, and sharing one with
 * another process (Event{ ipc = true }, ipc_descriptor, Event.from_ipc). */
#include "types/event.h"

#include <string.h>

#include "base/ipc_descriptor.h"

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

static int event_ipc(lua_State *L)
{
    lua_pushboolean(L, (self(L)->flags & CU_EVENT_INTERPROCESS) != 0);
    return 1;
}

/* ipc_descriptor() -> a string naming the event to another process
 * (cuIpcGetEventHandle), which waits on it after Event.from_ipc. */
static int event_ipc_descriptor(lua_State *L)
{
    struct gpurun_event *event = check_event(L, 1);
    if (!(event->flags & CU_EVENT_INTERPROCESS))
        return gpurun_error(L, "Event:ipc_descriptor: the event was not made with "
                               "gpurun.Event{ ipc = true }");
    CUipcEventHandle handle;
    memset(&handle, 0, sizeof handle);
    CUcontext previous = gpurun_enter_context(event->context);
    CUresult result = CUDA_CALL(cuIpcGetEventHandle, &handle, event->handle);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "exporting an event to other processes");
    struct ipc_descriptor descriptor;
    memset(&descriptor, 0, sizeof descriptor);
    descriptor.kind = IPC_KIND_EVENT;
    descriptor.device = event->device;
    memcpy(descriptor.data, &handle, sizeof handle < IPC_DATA_BYTES ? sizeof handle
                                                                   : IPC_DATA_BYTES);
    unsigned char bytes[IPC_DESCRIPTOR_BYTES];
    ipc_descriptor_encode(&descriptor, bytes);
    lua_pushlstring(L, (const char *)bytes, sizeof bytes);
    return 1;
}

/* Event.from_ipc(descriptor) -> another process's event
 * (cuIpcOpenEventHandle), on the current device, which must be the
 * event's: streams wait on it, event:sync() and query() see it. */
static int module_event_from_ipc(lua_State *L)
{
    struct ipc_descriptor descriptor;
    gpurun_check_ipc_descriptor(L, 1, IPC_KIND_EVENT, &descriptor);
    CUcontext context = gpurun_require_context(L);
    if (descriptor.device != gpurun_runtime.current_device)
        return gpurun_arg_error(L, 1, "the event belongs to device %d, the current device is "
                                      "%d (make device %d current first)", descriptor.device,
                                gpurun_runtime.current_device, descriptor.device);
    struct gpurun_event *event = gpurun_new_object(L, sizeof *event, 0, &gpurun_event_tag);
    event->flags = CU_EVENT_INTERPROCESS | CU_EVENT_DISABLE_TIMING;
    event->context = context;
    event->device = descriptor.device;
    event->recorded = 1;
    CUipcEventHandle handle;
    memset(&handle, 0, sizeof handle);
    memcpy(&handle, descriptor.data, sizeof handle < IPC_DATA_BYTES ? sizeof handle
                                                                   : IPC_DATA_BYTES);
    if (CUDA_CALL(cuIpcOpenEventHandle, &event->handle, handle) != CUDA_SUCCESS) {
        event->handle = NULL;
        return gpurun_cuda_error(L, "opening another process's event");
    }
    event->header.closed = 0;
    return 1;
}

/* Event([{ timing = true, blocking = false, ipc = false }]): timing = false
 * makes an event that only orders work (cheaper to record and wait on),
 * blocking = true makes event:sync() yield the CPU instead of spinning,
 * ipc = true one that other processes can wait on (Event:ipc_descriptor),
 * which the driver allows only without timing. */
static int module_event(lua_State *L)
{
    static const char *const known[] = {"timing", "blocking", "ipc", NULL};
    gpurun_check_options(L, 1, known);
    unsigned int flags = CU_EVENT_DEFAULT;
    int ipc = gpurun_opt_boolean_field(L, 1, "ipc", 0);
    int timing = gpurun_opt_boolean_field(L, 1, "timing", !ipc);
    if (ipc && timing)
        return gpurun_arg_error(L, 1, "an event with ipc = true has no timing (the driver "
                                      "requires CU_EVENT_DISABLE_TIMING): leave timing out or "
                                      "pass timing = false");
    if (ipc)
        flags |= CU_EVENT_INTERPROCESS;
    if (!timing)
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
    {"ipc_descriptor", event_ipc_descriptor},
    {"close", event_close},
    {NULL, NULL}
};

static const luaL_Reg event_fields[] = {
    {"device", event_device},
    {"timing", event_timing},
    {"blocking", event_blocking},
    {"ipc", event_ipc},
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

static const luaL_Reg type_functions[] = {
    {"from_ipc", module_event_from_ipc},
    {NULL, NULL}
};

void gpurun_open_event(lua_State *L)
{
    gpurun_register_type(L, &event_type);
    gpurun_set_functions(L, module_functions);
    gpurun_set_type_functions(L, &gpurun_event_tag, type_functions);
}
