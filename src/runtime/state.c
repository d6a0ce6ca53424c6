/* The runtime's state: contexts, the current device and stream, the
 * checks of what work goes on (a Stream, or a GraphBuilder capturing one;
 * their Lua types are in src/types/), and the waits for GPU work, which
 * run host callbacks as the driver reaches them: the driver's thread posts
 * a reached call to the queue at the end of this file, and the main thread
 * runs its Lua function while it waits (docs/api.md, "Host callbacks").
 * Each device's primary context is retained once per process and released
 * by the module's state object, whose __gc runs after every other gpurun
 * object's (it is created first). */
#include "runtime/runtime.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>

#define MAX_DEVICES GPURUN_MAX_DEVICES
/* The registry keeps the current stream's object, so the record in
 * gpurun_runtime can never outlive it. */
#define CURRENT_STREAM_KEY "gpurun.current_stream"
#define STATE_KEY "gpurun.runtime"

struct gpurun_runtime gpurun_runtime = {NULL, -1, NULL, 0};

static volatile sig_atomic_t interrupt_noted;

static CUcontext retained_contexts[MAX_DEVICES];
static CUdevice retained_devices[MAX_DEVICES];

const char *gpurun_no_context_reason(void)
{
    if (gpurun_runtime.current_context != NULL)
        return NULL;
    if (cuda_driver_load() != CUDA_SUCCESS)
        return cuda_driver_load_error();
    return "no current CUDA device: call gpurun.Device(id):set_current() first";
}

void gpurun_check_not_in_host_call(lua_State *L, const char *what)
{
    if (__builtin_expect(gpurun_in_host_call(), 0))
        gpurun_error(L, "a host callback must not call into the GPU (it runs while the script "
                        "waits for the GPU): %s refused", what);
}

CUcontext gpurun_require_context(lua_State *L)
{
    gpurun_check_not_in_host_call(L, "using the device");
    const char *reason = gpurun_no_context_reason();
    if (reason)
        gpurun_error(L, "%s", reason);
    return gpurun_runtime.current_context;
}

CUcontext gpurun_primary_context(lua_State *L, int ordinal)
{
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        gpurun_error(L, "device ordinal %d out of range", ordinal);
    if (retained_contexts[ordinal] == NULL) {
        CUdevice device;
        CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, ordinal);
        CUcontext context;
        CHECK_CUDA(L, "retaining the primary context", cuDevicePrimaryCtxRetain, &context, device);
        retained_contexts[ordinal] = context;
        retained_devices[ordinal] = device;
    }
    return retained_contexts[ordinal];
}

void gpurun_make_current(lua_State *L, int ordinal)
{
    CUcontext context = gpurun_primary_context(L, ordinal);
    CHECK_CUDA(L, "making the device's primary context current", cuCtxSetCurrent, context);
    if (gpurun_runtime.current_device != ordinal) {
        /* A stream belongs to its device. */
        gpurun_runtime.current_stream = NULL;
        lua_pushnil(L);
        lua_setfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
    }
    gpurun_runtime.current_context = context;
    gpurun_runtime.current_device = ordinal;
}

static unsigned long long peer_access[MAX_DEVICES];

int gpurun_peer_enabled(int from, int to)
{
    if (from == to)
        return 1;
    if (from < 0 || to < 0 || from >= MAX_DEVICES || to >= MAX_DEVICES)
        return 0;
    return (peer_access[from] >> to) & 1;
}

void gpurun_record_peer_access(int from, int to)
{
    if (from >= 0 && to >= 0 && from < MAX_DEVICES && to < MAX_DEVICES)
        peer_access[from] |= 1ULL << to;
}

const struct gpurun_tag gpurun_stream_tag = {"gpurun.Stream"};

static struct gpurun_stream_object *check_stream_object(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_stream_tag);
}

struct gpurun_stream *gpurun_check_stream(lua_State *L, int index)
{
    return &check_stream_object(L, index)->stream;
}

struct gpurun_stream *gpurun_operation_stream(lua_State *L, int index)
{
    if (index == 0 || lua_isnoneornil(L, index))
        return gpurun_runtime.current_stream;
    return gpurun_check_stream(L, index);
}

const struct gpurun_tag gpurun_builder_tag = {"gpurun.GraphBuilder"};

struct gpurun_graph_builder *gpurun_check_builder(lua_State *L, int index)
{
    struct gpurun_graph_builder *builder = gpurun_check_open(L, index, &gpurun_builder_tag);
    if (builder->capture.stream->handle == NULL)
        gpurun_closed_error(L, gpurun_stream_tag.type_name);
    return builder;
}

struct gpurun_capture *gpurun_to_building(lua_State *L, int index)
{
    if (index == 0 || gpurun_to_tagged(L, index, &gpurun_builder_tag) == NULL)
        return NULL;
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, index);
    if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
        gpurun_error(L, "GraphBuilder is not building (it is %s): call begin_building() first",
                     gpurun_capture_state_name(builder->capture.state));
    return &builder->capture;
}

int gpurun_refuse_captured(lua_State *L, int arg, const char *operation, const char *instead)
{
    const char *why = lua_pushfstring(L, "%s%sthe stream is being captured by a GraphBuilder: %s; "
                                         "capture abandoned", operation ? operation : "",
                                      operation ? ": " : "", instead);
    if (arg > 0)
        return gpurun_arg_error(L, arg, "%s", why);
    return gpurun_error(L, "%s", why);
}

void gpurun_set_current_stream(lua_State *L, int index, struct gpurun_stream *stream)
{
    gpurun_runtime.current_stream = stream;
    if (stream)
        lua_pushvalue(L, index);
    else
        lua_pushnil(L);
    lua_setfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
}

void gpurun_push_current_stream(lua_State *L)
{
    lua_getfield(L, LUA_REGISTRYINDEX, CURRENT_STREAM_KEY);
}

void gpurun_note_interrupt(void)
{
    interrupt_noted = 1;
    /* Loops that check their flag end on the device at their next pass. */
    gpurun_cancel_all();
}

void gpurun_check_interrupt(lua_State *L, const char *what)
{
    if (!interrupt_noted)
        return;
    interrupt_noted = 0;
    gpurun_runtime.abandoned = 1;
    cuda_driver_skip_teardown();
    int callbacks = gpurun_host_calls_pending() > 0;
    gpurun_host_calls_shut_down();
    gpurun_error(L, "interrupted! (while %s: the GPU was still running %s; its memory is left "
                    "to the driver at exit)", what,
                 callbacks ? "work before host callbacks" : "a graph with a while loop");
}

int gpurun_service_host_calls(lua_State *L)
{
    int failed;
    int ran = gpurun_host_calls_run(L, &failed);
    /* What was freed while runs were pending can be freed now. */
    if (ran > 0 && gpurun_host_calls_pending() == 0)
        gpurun_flush_frees();
    if (failed) {
        const char *message = lua_tostring(L, -1);
        gpurun_error(L, "a host callback failed: %s%s", message ? message : "(an error that is "
                     "not a string)", failed > 1 ? lua_pushfstring(L, " (and %d more)", failed - 1)
                                                : "");
    }
    return ran;
}

void gpurun_settle_host_calls(lua_State *L, const char *what)
{
    if (gpurun_host_calls_pending() == 0)
        return;
    gpurun_check_not_in_host_call(L, what);
    while (gpurun_host_calls_pending() > 0) {
        if (gpurun_service_host_calls(L) == 0)
            gpurun_host_calls_await(200000);
        gpurun_check_interrupt(L, what);
    }
}

CUresult gpurun_wait_device(lua_State *L, CUcontext context, const char *what)
{
    gpurun_settle_host_calls(L, what);
    CUcontext previous = context ? gpurun_enter_context(context) : NULL;
    CUresult result = CUDA_CALL(cuCtxSynchronize);
    if (context)
        gpurun_leave_context(previous);
    return result;
}

/* After Ctrl-C set the loops' cancel flags: whether the work waited for
 * ends within a second (its loops checked their flags), so that the
 * interrupt leaves the device idle and nothing needs abandoning. Work
 * waiting for a host callback cannot end here. */
static int stopped_after_cancel(CUresult (*query)(void *), void *handle)
{
    if (gpurun_host_calls_pending() > 0)
        return 0;
    for (int i = 0; i < 10000; i++) {
        CUresult result = query(handle);
        if (result == CUDA_SUCCESS)
            return 1;
        if (result != CUDA_ERROR_NOT_READY)
            return 0;
        struct timespec pause = {0, 100000};
        nanosleep(&pause, NULL);
    }
    return 0;
}

/* Polls query(handle) until it is done, running host callbacks as the
 * driver reaches them and giving up at an interrupt. */
static void poll(lua_State *L, CUresult (*query)(void *), void *handle, const char *what)
{
    interrupt_noted = 0;
    long pause_ns = 1000;
    for (;;) {
        gpurun_service_host_calls(L);
        CUresult result = query(handle);
        if (result == CUDA_SUCCESS) {
            /* The callbacks posted just before the work ended. */
            gpurun_service_host_calls(L);
            return;
        }
        if (result != CUDA_ERROR_NOT_READY)
            gpurun_cuda_error(L, "%s", what);
        if (interrupt_noted && stopped_after_cancel(query, handle)) {
            interrupt_noted = 0;
            gpurun_error(L, "interrupted! (while %s: the GPU's loops were cancelled and its work "
                            "has ended)", what);
        }
        gpurun_check_interrupt(L, what);
        /* Up to 0.2 ms between polls: work that ends is seen soon, work
         * that does not costs no CPU; a callback reached wakes it at once. */
        if (gpurun_host_calls_pending() > 0) {
            if (gpurun_host_calls_await(pause_ns))
                pause_ns = 1000;
        } else {
            struct timespec pause = {0, pause_ns};
            nanosleep(&pause, NULL);
        }
        if (pause_ns < 200000)
            pause_ns *= 2;
    }
}

static CUresult query_stream(void *handle)
{
    return CUDA_CALL(cuStreamQuery, (CUstream)handle);
}

static CUresult query_event(void *handle)
{
    return CUDA_CALL(cuEventQuery, (CUevent)handle);
}

/* Inside a host callback only work that is done already may be waited
 * for: a callback's function makes no GPU calls, as the driver's host
 * functions may not (the queue below). */
static void check_done_in_host_call(lua_State *L, CUresult (*query)(void *), void *handle,
                                    const char *what)
{
    if (gpurun_in_host_call() && query(handle) != CUDA_SUCCESS)
        gpurun_check_not_in_host_call(L, what);
}

void gpurun_wait_stream(lua_State *L, struct gpurun_stream *stream, const char *what)
{
    check_done_in_host_call(L, query_stream, stream->handle, what);
    if (gpurun_in_host_call())
        return;
    if (!stream->unbounded && gpurun_host_calls_pending() == 0) {
        CHECK_CUDA(L, what, cuStreamSynchronize, stream->handle);
        return;
    }
    poll(L, query_stream, stream->handle, what);
    stream->unbounded = 0;
}

void gpurun_wait_event(lua_State *L, CUevent event, const char *what)
{
    check_done_in_host_call(L, query_event, event, what);
    if (gpurun_in_host_call())
        return;
    if (gpurun_host_calls_pending() == 0) {
        CHECK_CUDA(L, what, cuEventSynchronize, event);
        return;
    }
    poll(L, query_event, event, what);
}

static int runtime_close(lua_State *L)
{
    (void)L;
    /* Nothing runs Lua from here on: queued callbacks are let go. */
    gpurun_host_calls_shut_down();
    gpurun_flush_frees();
    if (cuda.cuDevicePrimaryCtxRelease != NULL) {
        for (int i = 0; i < MAX_DEVICES; i++) {
            if (retained_contexts[i] != NULL) {
                /* At exit a failed release (say after a sticky error) changes
                 * nothing the user can act on. */
                (void)CUDA_CALL(cuDevicePrimaryCtxRelease, retained_devices[i]);
                retained_contexts[i] = NULL;
            }
        }
    }
    gpurun_runtime.current_context = NULL;
    gpurun_runtime.current_device = -1;
    gpurun_runtime.current_stream = NULL;
    return 0;
}

void gpurun_open_runtime(lua_State *L)
{
    /* Only once per state: the module can be opened again (busted's
     * insulation drops package.loaded between files), and a second state
     * object would let the collector release contexts live objects use. */
    if (lua_getfield(L, LUA_REGISTRYINDEX, STATE_KEY) == LUA_TNIL) {
        lua_newuserdatauv(L, 1, 0);
        lua_newtable(L);
        lua_pushcfunction(L, runtime_close);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, STATE_KEY);
    }
    lua_pop(L, 1);
}

double gpurun_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

/* ---- the host-call queue: the driver's threads post, the main thread runs */

/* A reached call, queued by the driver's thread for the main thread: on the
 * heap, or, if malloc fails there, on the driver thread's stack, which then
 * waits until the main thread has run it (the one case that still waits). */
struct waiter {
    struct gpurun_host_call *call;
    int on_stack;
    int done;
    struct waiter *next;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t posted = PTHREAD_COND_INITIALIZER;
static pthread_cond_t finished = PTHREAD_COND_INITIALIZER;
static struct waiter *head;
static struct waiter **tail = &head;
static int shut_down;

/* Main thread only. */
static long pending_runs;
static int running_depth;

static void append(struct waiter *waiter)
{
    *tail = waiter;
    tail = &waiter->next;
    pthread_cond_broadcast(&posted);
}

/* The driver runs host functions on a thread of its own, and a lua_State
 * must never be entered from two threads. So the function the driver calls
 * runs no Lua: it posts "this call is reached" to a queue and returns at
 * once. The main thread runs what is posted whenever gpurun waits for the
 * GPU (gpurun_wait_stream polls while any call is pending, Event:sync, a
 * device-wide wait, the buffer operations that wait), and a call may run
 * only then.
 *
 * The driver's thread does not wait for the main thread: a host function
 * that blocks holds the driver's own locks, and the next driver call of the
 * main thread (a stream made, code loaded, memory freed) would wait for it
 * while it waits for the main thread. So the stream's later work does not
 * wait for the Lua function; the function runs after the work before it.
 * Inside the function, gpurun refuses to launch, allocate or wait. */
void CUDA_CB gpurun_host_call_trampoline(void *data)
{
    struct waiter *waiter = malloc(sizeof *waiter);
    pthread_mutex_lock(&lock);
    if (!shut_down && waiter != NULL) {
        *waiter = (struct waiter){data, 0, 0, NULL};
        append(waiter);
        waiter = NULL;
    } else if (!shut_down) {
        struct waiter self = {data, 1, 0, NULL};
        append(&self);
        while (!self.done && !shut_down)
            pthread_cond_wait(&finished, &lock);
    }
    pthread_mutex_unlock(&lock);
    free(waiter); /* only when shut down */
}

/* The main thread is done with a waiter taken off the queue. */
static void release(struct waiter *waiter)
{
    if (!waiter->on_stack) {
        free(waiter);
        return;
    }
    pthread_mutex_lock(&lock);
    waiter->done = 1;
    pthread_cond_broadcast(&finished);
    pthread_mutex_unlock(&lock);
}

void gpurun_host_call_init(struct gpurun_host_call *call)
{
    call->function_ref = LUA_NOREF;
    call->anchor_ref = LUA_NOREF;
    call->pending = 0;
    call->calls = 0;
}

void gpurun_host_call_expect(lua_State *L, struct gpurun_host_call *call, int object_index,
                             long runs)
{
    if (runs <= 0)
        return;
    if (call->pending == 0) {
        lua_pushvalue(L, object_index);
        call->anchor_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    call->pending += runs;
    pending_runs += runs;
}

static void finish_runs(lua_State *L, struct gpurun_host_call *call, long runs)
{
    call->pending -= runs;
    pending_runs -= runs;
    if (call->pending <= 0) {
        call->pending = 0;
        luaL_unref(L, LUA_REGISTRYINDEX, call->anchor_ref);
        call->anchor_ref = LUA_NOREF;
    }
    if (pending_runs <= 0)
        pending_runs = 0;
}

void gpurun_host_call_cancel(lua_State *L, struct gpurun_host_call *call, long runs)
{
    finish_runs(L, call, runs);
}

long gpurun_host_calls_pending(void)
{
    return pending_runs;
}

int gpurun_in_host_call(void)
{
    return running_depth > 0;
}

int gpurun_host_calls_run(lua_State *L, int *failed)
{
    *failed = 0;
    if (running_depth > 0 || pending_runs == 0)
        return 0;
    pthread_mutex_lock(&lock);
    struct waiter *list = head;
    head = NULL;
    tail = &head;
    pthread_mutex_unlock(&lock);
    int ran = 0;
    lua_checkstack(L, 3);
    while (list) {
        struct waiter *waiter = list;
        struct gpurun_host_call *call = waiter->call;
        list = waiter->next; /* the waiter is gone once released */
        lua_rawgeti(L, LUA_REGISTRYINDEX, call->function_ref);
        running_depth++;
        int status = lua_pcall(L, 0, 0, 0);
        running_depth--;
        if (status != LUA_OK) {
            if ((*failed)++ == 0)
                lua_setfield(L, LUA_REGISTRYINDEX, "gpurun.host_call_error");
            else
                lua_pop(L, 1);
        }
        release(waiter);
        call->calls++;
        finish_runs(L, call, 1);
        ran++;
    }
    if (*failed) {
        lua_getfield(L, LUA_REGISTRYINDEX, "gpurun.host_call_error");
        lua_pushnil(L);
        lua_setfield(L, LUA_REGISTRYINDEX, "gpurun.host_call_error");
    }
    return ran;
}

int gpurun_host_calls_await(long nanoseconds)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += nanoseconds;
    while (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&lock);
    int result = 0;
    while (head == NULL && result != ETIMEDOUT)
        result = pthread_cond_timedwait(&posted, &lock, &until);
    int ready = head != NULL;
    pthread_mutex_unlock(&lock);
    return ready;
}

void gpurun_host_calls_shut_down(void)
{
    pthread_mutex_lock(&lock);
    shut_down = 1;
    /* Under the lock: a waiter on a stack is there until its thread sees
     * shut_down, which needs the lock. */
    for (struct waiter *waiter = head, *next; waiter; waiter = next) {
        next = waiter->next;
        if (!waiter->on_stack)
            free(waiter);
    }
    head = NULL;
    tail = &head;
    pthread_cond_broadcast(&finished);
    pthread_mutex_unlock(&lock);
    pending_runs = 0;
}
