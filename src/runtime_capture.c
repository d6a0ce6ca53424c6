/* The capture registry: every capture in progress, what each keeps alive,
 * frees deferred while one runs, and the rule that ends them all when an
 * error is raised (gpurun_capture_abort_all, which runtime_error.c calls
 * before raising anything).
 *
 * A capture keeps each gpurun object it used (buffers, kernels) in a table
 * and counts as its user, so that closing one explicitly is refused while a
 * graph may still touch it; the Graph completed from it takes its own copy
 * of the list. Nothing here raises: callers turn results into errors. */
#include "runtime.h"

static struct gpurun_capture *capturing;

static const char *const state_names[] = {"idle", "building", "built", "abandoned"};

const char *gpurun_capture_state_name(enum gpurun_capture_state state)
{
    return state_names[state];
}

void gpurun_capture_init(struct gpurun_capture *capture, struct gpurun_stream *stream)
{
    capture->stream = stream;
    capture->state = GPURUN_CAPTURE_IDLE;
    capture->graph = NULL;
    capture->owner = LUA_NOREF;
    capture->kept = LUA_NOREF;
    capture->next = NULL;
}

int gpurun_capture_in_progress(void)
{
    return capturing != NULL;
}

/* Only gpurun objects are ever kept: the header says where a use counts. */
static void adjust_users(lua_State *L, int index, int delta)
{
    struct gpurun_object *object = lua_touserdata(L, index);
    if (object == NULL)
        return;
    if (object->counts_for)
        object = object->counts_for;
    object->graph_users += delta;
}

static void drop_kept(lua_State *L, struct gpurun_capture *capture)
{
    if (capture->kept == LUA_NOREF)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->kept);
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1))
        adjust_users(L, -2, -1);
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, capture->kept);
    capture->kept = LUA_NOREF;
}

static void unlink_capture(lua_State *L, struct gpurun_capture *capture)
{
    for (struct gpurun_capture **link = &capturing; *link; link = &(*link)->next) {
        if (*link == capture) {
            *link = capture->next;
            break;
        }
    }
    capture->next = NULL;
    if (capture->stream->capture == capture)
        capture->stream->capture = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, capture->owner);
    capture->owner = LUA_NOREF;
}

static void destroy_graph(struct gpurun_capture *capture)
{
    if (capture->graph) {
        (void)CUDA_CALL(cuGraphDestroy, capture->graph);
        capture->graph = NULL;
    }
}

/* Ends the capture on the driver's side, discarding what it recorded. */
static void abandon(lua_State *L, struct gpurun_capture *capture)
{
    CUgraph partial = NULL;
    if (capture->stream->handle
        && CUDA_CALL(cuStreamEndCapture, capture->stream->handle, &partial) == CUDA_SUCCESS
        && partial)
        (void)CUDA_CALL(cuGraphDestroy, partial);
    unlink_capture(L, capture);
    drop_kept(L, capture);
    capture->state = GPURUN_CAPTURE_ABANDONED;
}

CUresult gpurun_capture_begin(lua_State *L, struct gpurun_capture *capture, int owner_index)
{
    owner_index = lua_absindex(L, owner_index);
    gpurun_capture_release(L, capture);
    lua_newtable(L);
    capture->kept = luaL_ref(L, LUA_REGISTRYINDEX);
    /* Thread-local mode: a call that is unsafe during capture (an allocation,
     * a synchronize) fails instead of silently breaking the graph. */
    CUresult result = CUDA_CALL(cuStreamBeginCapture, capture->stream->handle,
                                CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (result != CUDA_SUCCESS) {
        drop_kept(L, capture);
        return result;
    }
    capture->state = GPURUN_CAPTURE_BUILDING;
    capture->stream->capture = capture;
    lua_pushvalue(L, owner_index); /* a building owner is never collected */
    capture->owner = luaL_ref(L, LUA_REGISTRYINDEX);
    capture->next = capturing;
    capturing = capture;
    return CUDA_SUCCESS;
}

CUresult gpurun_capture_end(lua_State *L, struct gpurun_capture *capture)
{
    unlink_capture(L, capture);
    CUgraph graph = NULL;
    CUresult result = CUDA_CALL(cuStreamEndCapture, capture->stream->handle, &graph);
    if (result != CUDA_SUCCESS) {
        if (graph)
            (void)CUDA_CALL(cuGraphDestroy, graph);
        drop_kept(L, capture);
        capture->state = GPURUN_CAPTURE_ABANDONED;
    } else {
        capture->graph = graph;
        capture->state = GPURUN_CAPTURE_BUILT;
    }
    if (!capturing)
        gpurun_flush_frees();
    return result;
}

void gpurun_capture_abort_all(lua_State *L)
{
    if (!capturing)
        return;
    while (capturing)
        abandon(L, capturing);
    gpurun_flush_frees();
}

void gpurun_capture_keep(lua_State *L, struct gpurun_capture *capture, int index)
{
    index = lua_absindex(L, index);
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->kept);
    lua_pushvalue(L, index);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushvalue(L, index);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        adjust_users(L, index, +1);
    }
    lua_pop(L, 2);
}

void gpurun_capture_push_kept(lua_State *L, struct gpurun_capture *capture)
{
    lua_newtable(L);
    if (capture->kept == LUA_NOREF)
        return;
    int sequence = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->kept);
    lua_Integer count = 0;
    for (lua_pushnil(L); lua_next(L, -2);) {
        lua_pop(L, 1);
        adjust_users(L, -1, +1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, sequence, ++count);
    }
    lua_pop(L, 1);
}

void gpurun_capture_release(lua_State *L, struct gpurun_capture *capture)
{
    if (capture->state == GPURUN_CAPTURE_BUILDING)
        abandon(L, capture);
    destroy_graph(capture);
    drop_kept(L, capture);
    if (!capturing)
        gpurun_flush_frees();
}

void gpurun_release_users(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    lua_Integer count = (lua_Integer)lua_rawlen(L, index);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, index, i);
        adjust_users(L, -1, -1);
        lua_pop(L, 1);
    }
}

/* ---- deferred frees ------------------------------------------------------ */

/* cuMemFree is not allowed while a graph is being captured (it would break
 * the capture), so memory freed then waits; page-locked host memory too
 * (host != NULL, with the event of its last queued copy). A full list frees
 * at once rather than leak. */
#define MAX_PENDING_FREES 1024
static struct {
    CUdeviceptr pointer;
    CUcontext context;
    void *host;
    CUevent last_use;
} pending[MAX_PENDING_FREES];
static size_t pending_count;

/* Waits for the last copy queued on the host memory, then frees it. */
static CUresult free_host(void *pointer, CUevent last_use)
{
    /* As for device memory: the contexts' release at exit took it. */
    if (gpurun_runtime.current_context == NULL)
        return CUDA_SUCCESS;
    CUresult result = CUDA_SUCCESS;
    if (last_use) {
        result = CUDA_CALL(cuEventSynchronize, last_use);
        (void)CUDA_CALL(cuEventDestroy, last_use);
    }
    CUresult freed = CUDA_CALL(cuMemFreeHost, pointer);
    return result != CUDA_SUCCESS ? result : freed;
}

static CUresult free_in_context(CUdeviceptr pointer, CUcontext context)
{
    CUcontext current = gpurun_runtime.current_context;
    /* No current context means the runtime has been closed at exit, and
     * releasing the primary contexts freed everything in them. */
    if (current == NULL)
        return CUDA_SUCCESS;
    if (context == current)
        return CUDA_CALL(cuMemFree, pointer);
    CUresult result = CUDA_CALL(cuCtxSetCurrent, context);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuMemFree, pointer);
    CUresult restored = CUDA_CALL(cuCtxSetCurrent, current);
    return result != CUDA_SUCCESS ? result : restored;
}

void gpurun_flush_frees(void)
{
    while (pending_count > 0) {
        pending_count--;
        /* Nobody is left to tell about a failure here. */
        if (pending[pending_count].host)
            (void)free_host(pending[pending_count].host, pending[pending_count].last_use);
        else
            (void)free_in_context(pending[pending_count].pointer, pending[pending_count].context);
    }
}

CUresult gpurun_free_memory(CUdeviceptr pointer, CUcontext context)
{
    if (capturing && pending_count < MAX_PENDING_FREES) {
        pending[pending_count].pointer = pointer;
        pending[pending_count].context = context;
        pending[pending_count].host = NULL;
        pending[pending_count].last_use = NULL;
        pending_count++;
        return CUDA_SUCCESS;
    }
    if (!capturing)
        gpurun_flush_frees();
    return free_in_context(pointer, context);
}

CUresult gpurun_free_host_memory(void *pointer, CUevent last_use)
{
    if (capturing && pending_count < MAX_PENDING_FREES) {
        pending[pending_count].pointer = 0;
        pending[pending_count].context = NULL;
        pending[pending_count].host = pointer;
        pending[pending_count].last_use = last_use;
        pending_count++;
        return CUDA_SUCCESS;
    }
    if (!capturing)
        gpurun_flush_frees();
    return free_host(pointer, last_use);
}
