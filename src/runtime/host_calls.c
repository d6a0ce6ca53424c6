/* Host callbacks (gpurun.HostCallback): a Lua function run at a point of a
 * stream's order, through cuLaunchHostFunc or a graph's host node; the
 * rule and why it is so are in docs/api.md ("Host callbacks").
 *
 * This file is the mechanism alone (the queue, the counts, the threads) and
 * calls no other part of the runtime: runtime/state.c runs the calls and
 * raises their errors (gpurun_service_host_calls); runtime/error.c refuses
 * GPU calls inside one. */
#include "runtime/runtime.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <time.h>

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
