/* The capture registry: every capture in progress (origins, forks and
 * bodies: runtime.h's gpurun_capture_role), what each keeps alive, and the
 * rule that ends them all when an error is raised
 * (gpurun_capture_abort_all, which runtime/error.c calls before raising
 * anything). Nothing here raises: callers turn results into errors. */
#include "runtime/runtime.h"

#include <string.h>

static struct gpurun_capture *capturing;

static const char *const state_names[] = {"idle", "building", "built", "abandoned", "joined"};

const char *gpurun_capture_state_name(enum gpurun_capture_state state)
{
    return state_names[state];
}

void gpurun_capture_init(struct gpurun_capture *capture, struct gpurun_stream *stream)
{
    capture->stream = stream;
    capture->state = GPURUN_CAPTURE_IDLE;
    capture->role = GPURUN_CAPTURE_ORIGIN;
    capture->root = capture;
    capture->graph = NULL;
    capture->owner = LUA_NOREF;
    capture->kept = LUA_NOREF;
    capture->open_forks = 0;
    capture->open_bodies = 0;
    capture->has_loop = 0;
    capture->has_conditional = 0;
    capture->has_memory_nodes = 0;
    capture->cancel_slot = 0;
    capture->allocations = LUA_NOREF;
    capture->mode = CU_STREAM_CAPTURE_MODE_THREAD_LOCAL;
    capture->next = NULL;
}

int gpurun_capture_in_progress(void)
{
    return capturing != NULL;
}

int gpurun_capture_allows_unsafe(void)
{
    for (const struct gpurun_capture *c = capturing; c; c = c->next) {
        /* A fork records into its origin's capture, begun in the origin's mode. */
        const struct gpurun_capture *begun = c->role == GPURUN_CAPTURE_FORK ? c->root : c;
        if (begun->mode != CU_STREAM_CAPTURE_MODE_RELAXED)
            return 0;
    }
    return 1;
}

/* Only gpurun objects are ever kept: the header says where a use counts. */
void gpurun_adjust_users(lua_State *L, int index, int delta)
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
        gpurun_adjust_users(L, -2, -1);
    lua_pop(L, 1);
    luaL_unref(L, LUA_REGISTRYINDEX, capture->kept);
    capture->kept = LUA_NOREF;
}

/* ---- memory allocated inside a capture ---- */

static void (*drop_allocation)(lua_State *L, int index);

void gpurun_capture_set_drop(void (*drop)(lua_State *L, int index))
{
    drop_allocation = drop;
}

static void list_memory_node(lua_State *L, struct gpurun_capture *capture, int index)
{
    if (capture->allocations == LUA_NOREF) {
        lua_newtable(L);
        capture->allocations = luaL_ref(L, LUA_REGISTRYINDEX);
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->allocations);
    lua_pushvalue(L, index);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_pop(L, 1);
    capture->has_memory_nodes = 1;
}

void gpurun_capture_add_allocation(lua_State *L, struct gpurun_capture *capture, int index)
{
    index = lua_absindex(L, index);
    capture = capture->root;
    list_memory_node(L, capture, index);
    ((struct gpurun_object *)lua_touserdata(L, index))->allocated_in = capture;
}

void gpurun_capture_add_free(lua_State *L, struct gpurun_capture *capture, int index)
{
    list_memory_node(L, capture->root, lua_absindex(L, index));
}

void gpurun_capture_remove_allocation(lua_State *L, struct gpurun_capture *capture, int index)
{
    index = lua_absindex(L, index);
    capture = capture->root;
    ((struct gpurun_object *)lua_touserdata(L, index))->allocated_in = NULL;
    if (capture->allocations == LUA_NOREF)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->allocations);
    lua_pushvalue(L, index);
    lua_pushnil(L);
    lua_rawset(L, -3);
    lua_pop(L, 1);
}

/* Pushes a sequence of the keys of the registry table `ref` (none for
 * LUA_NOREF). */
static void push_keys(lua_State *L, int ref)
{
    lua_newtable(L);
    if (ref == LUA_NOREF)
        return;
    int sequence = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, ref);
    lua_Integer count = 0;
    for (lua_pushnil(L); lua_next(L, -2);) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, sequence, ++count);
    }
    lua_pop(L, 1);
}

void gpurun_capture_push_allocations(lua_State *L, struct gpurun_capture *capture)
{
    push_keys(L, capture->allocations);
    luaL_unref(L, LUA_REGISTRYINDEX, capture->allocations);
    capture->allocations = LUA_NOREF;
}

/* The graph that would have made their memory is gone. */
static void drop_allocations(lua_State *L, struct gpurun_capture *capture)
{
    if (capture->allocations == LUA_NOREF)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->allocations);
    luaL_unref(L, LUA_REGISTRYINDEX, capture->allocations);
    capture->allocations = LUA_NOREF;
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        ((struct gpurun_object *)lua_touserdata(L, -2))->allocated_in = NULL;
        if (drop_allocation) {
            lua_pushvalue(L, -2);
            drop_allocation(L, lua_gettop(L));
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

struct gpurun_relaxed gpurun_relax_captures(void)
{
    struct gpurun_relaxed relaxed = {0, CU_STREAM_CAPTURE_MODE_RELAXED};
    if (capturing && CUDA_CALL(cuThreadExchangeStreamCaptureMode, &relaxed.saved) == CUDA_SUCCESS)
        relaxed.active = 1;
    return relaxed;
}

void gpurun_restore_captures(struct gpurun_relaxed relaxed)
{
    if (relaxed.active)
        (void)CUDA_CALL(cuThreadExchangeStreamCaptureMode, &relaxed.saved);
}

/* The owner's reference, taken before cuStreamBeginCapture so that nothing
 * from Lua runs between the driver's capture beginning and its listing
 * (luaL_ref itself does not step the collector: lua_rawseti never does). */
static void keep_owner(lua_State *L, struct gpurun_capture *capture, int owner_index)
{
    lua_pushvalue(L, owner_index); /* a building owner is never collected */
    capture->owner = luaL_ref(L, LUA_REGISTRYINDEX);
}

/* Lists a capture whose owner is kept; allocates nothing. */
static void list_capture(struct gpurun_capture *capture)
{
    capture->stream->capture = capture;
    capture->next = capturing;
    capturing = capture;
    gpurun_frees_wait(1);
}

static void link_capture(lua_State *L, struct gpurun_capture *capture, int owner_index)
{
    keep_owner(L, capture, owner_index);
    list_capture(capture);
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
    gpurun_frees_wait(capturing != NULL);
    if (capture->stream->capture == capture)
        capture->stream->capture = NULL;
    luaL_unref(L, LUA_REGISTRYINDEX, capture->owner);
    capture->owner = LUA_NOREF;
}

/* The forks of an origin stay listed (and their streams refuse plain work)
 * until the origin's capture ends, since the driver keeps them in it until
 * then; this lets them all go, as `state`, those still open included. */
static void unlink_forks(lua_State *L, struct gpurun_capture *origin, enum gpurun_capture_state open)
{
    for (struct gpurun_capture *c = capturing, *next; c; c = next) {
        next = c->next;
        if (c->role == GPURUN_CAPTURE_FORK && c->root == origin) {
            if (c->state == GPURUN_CAPTURE_BUILDING)
                c->state = open;
            unlink_capture(L, c);
        }
    }
    origin->open_forks = 0;
}

static void destroy_graph(struct gpurun_capture *capture)
{
    if (capture->role == GPURUN_CAPTURE_ORIGIN && capture->graph) {
        /* A builder collected while another captures: as for a Graph. */
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        (void)CUDA_CALL(cuGraphDestroy, capture->graph);
        gpurun_restore_captures(relaxed);
    }
    if (capture->role == GPURUN_CAPTURE_ORIGIN)
        capture->graph = NULL;
}

/* Ends the capture on the driver's side, discarding what it recorded. A
 * body's graph belongs to its conditional node and goes with the origin's. */
static void abandon(lua_State *L, struct gpurun_capture *capture)
{
    CUgraph partial = NULL;
    if (capture->role == GPURUN_CAPTURE_ORIGIN) {
        /* Every fork joined first: ending a capture with unjoined streams
         * fails and can leave them in it. */
        for (struct gpurun_capture *c = capturing; c; c = c->next)
            if (c->role == GPURUN_CAPTURE_FORK && c->root == capture
                && c->state == GPURUN_CAPTURE_BUILDING && c->stream->handle)
                (void)gpurun_order_after(capture->stream, c->stream);
        unlink_forks(L, capture, GPURUN_CAPTURE_ABANDONED);
    }
    if (capture->role != GPURUN_CAPTURE_FORK && capture->stream->handle
        && CUDA_CALL(cuStreamEndCapture, capture->stream->handle, &partial) == CUDA_SUCCESS
        && partial && capture->role == GPURUN_CAPTURE_ORIGIN)
        (void)CUDA_CALL(cuGraphDestroy, partial);
    if (capture->role == GPURUN_CAPTURE_BODY && capture->root->open_bodies > 0)
        capture->root->open_bodies--;
    unlink_capture(L, capture);
    if (capture->role == GPURUN_CAPTURE_ORIGIN) {
        drop_kept(L, capture);
        drop_allocations(L, capture);
        gpurun_cancel_release(capture->cancel_slot);
        capture->cancel_slot = 0;
    }
    capture->state = GPURUN_CAPTURE_ABANDONED;
}

CUresult gpurun_capture_begin(lua_State *L, struct gpurun_capture *capture, int owner_index,
                              CUstreamCaptureMode mode)
{
    owner_index = lua_absindex(L, owner_index);
    /* The mode only says which calls the driver refuses while the capture
     * builds (thread-local by default: an allocation or a synchronize fails
     * instead of silently breaking the graph; relaxed: this thread may make
     * them). In every mode an error ends the capture (gpurun_capture_abort_all),
     * and frees wait for its end. */
    CUresult result;
    if (capture->role == GPURUN_CAPTURE_BODY) {
        keep_owner(L, capture, owner_index);
        result = CUDA_CALL(cuStreamBeginCaptureToGraph, capture->stream->handle, capture->graph,
                           NULL, NULL, 0, mode);
        if (result != CUDA_SUCCESS) {
            luaL_unref(L, LUA_REGISTRYINDEX, capture->owner);
            capture->owner = LUA_NOREF;
            return result;
        }
        capture->root->open_bodies++;
    } else {
        gpurun_capture_release(L, capture);
        lua_newtable(L);
        capture->kept = luaL_ref(L, LUA_REGISTRYINDEX);
        keep_owner(L, capture, owner_index);
        /* Nothing from here to list_capture may allocate from Lua. */
        result = CUDA_CALL(cuStreamBeginCapture, capture->stream->handle, mode);
        if (result != CUDA_SUCCESS) {
            luaL_unref(L, LUA_REGISTRYINDEX, capture->owner);
            capture->owner = LUA_NOREF;
            drop_kept(L, capture);
            return result;
        }
        capture->has_loop = 0;
        capture->has_conditional = 0;
        capture->has_memory_nodes = 0;
    }
    capture->mode = mode;
    capture->state = GPURUN_CAPTURE_BUILDING;
    list_capture(capture);
    return CUDA_SUCCESS;
}

CUresult gpurun_capture_fork(lua_State *L, struct gpurun_capture *fork,
                             struct gpurun_capture *parent, int owner_index)
{
    CUresult result = gpurun_order_after(fork->stream, parent->stream);
    if (result != CUDA_SUCCESS)
        return result;
    fork->role = GPURUN_CAPTURE_FORK;
    fork->root = parent->root;
    fork->state = GPURUN_CAPTURE_BUILDING;
    fork->root->open_forks++;
    link_capture(L, fork, lua_absindex(L, owner_index));
    return CUDA_SUCCESS;
}

CUresult gpurun_capture_join(struct gpurun_capture *into, struct gpurun_capture *from)
{
    CUresult result = gpurun_order_after(into->stream, from->stream);
    if (result == CUDA_SUCCESS && from->role == GPURUN_CAPTURE_FORK) {
        from->state = GPURUN_CAPTURE_JOINED;
        from->root->open_forks--;
    }
    return result;
}

CUresult gpurun_capture_end(lua_State *L, struct gpurun_capture *capture)
{
    if (capture->role == GPURUN_CAPTURE_ORIGIN
        && (capture->open_forks > 0 || capture->open_bodies > 0))
        return CUDA_ERROR_STREAM_CAPTURE_UNJOINED;
    CUgraph graph = NULL;
    CUresult result = CUDA_CALL(cuStreamEndCapture, capture->stream->handle, &graph);
    if (capture->role == GPURUN_CAPTURE_ORIGIN)
        unlink_forks(L, capture, GPURUN_CAPTURE_JOINED);
    unlink_capture(L, capture);
    if (capture->role == GPURUN_CAPTURE_BODY) {
        capture->root->open_bodies--;
        capture->state = result == CUDA_SUCCESS ? GPURUN_CAPTURE_BUILT : GPURUN_CAPTURE_ABANDONED;
    } else if (result != CUDA_SUCCESS) {
        if (graph)
            (void)CUDA_CALL(cuGraphDestroy, graph);
        drop_kept(L, capture);
        drop_allocations(L, capture);
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
    /* Bodies first, newest (innermost) first: their graphs go with the
     * origin's, which must not be ended under them. */
    for (struct gpurun_capture *c = capturing, *next; c; c = next) {
        next = c->next;
        if (c->role == GPURUN_CAPTURE_BODY) {
            abandon(L, c);
            next = capturing;
        }
    }
    while (capturing) {
        struct gpurun_capture *c = capturing;
        while (c && c->role != GPURUN_CAPTURE_ORIGIN)
            c = c->next;
        abandon(L, c ? c : capturing);
    }
    gpurun_flush_frees();
}

/* The origin keeps each gpurun object it or its forks and bodies used
 * (buffers, kernels) in a table and counts as its user, so closing one
 * explicitly is refused while a graph may still touch it; the Graph
 * completed from it takes its own copy of the list. */
void gpurun_capture_keep(lua_State *L, struct gpurun_capture *capture, int index)
{
    index = lua_absindex(L, index);
    capture = capture->root;
    /* A capture that ended (a finalizer closed its builder) keeps nothing:
     * its caller's checks of the target raise. */
    if (capture->kept == LUA_NOREF)
        return;
    /* Memory the graph allocates itself needs no keeping: its nodes make it. */
    const struct gpurun_object *object = lua_touserdata(L, index);
    if (object && (object->counts_for ? object->counts_for : object)->allocated_in == capture)
        return;
    lua_rawgeti(L, LUA_REGISTRYINDEX, capture->kept);
    lua_pushvalue(L, index);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushvalue(L, index);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        gpurun_adjust_users(L, index, +1);
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
        gpurun_adjust_users(L, -1, +1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, sequence, ++count);
    }
    lua_pop(L, 1);
}

void gpurun_capture_push_objects(lua_State *L, const struct gpurun_capture *capture)
{
    push_keys(L, capture->kept);
}

void gpurun_capture_release(lua_State *L, struct gpurun_capture *capture)
{
    if (capture->state == GPURUN_CAPTURE_BUILDING) {
        if (capture->role == GPURUN_CAPTURE_FORK)
            gpurun_capture_abort_all(L); /* a fork cannot end alone */
        else
            abandon(L, capture);
    }
    destroy_graph(capture);
    if (capture->role == GPURUN_CAPTURE_ORIGIN) {
        drop_kept(L, capture);
        drop_allocations(L, capture);
    }
    if (!capturing)
        gpurun_flush_frees();
}

void gpurun_release_users(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    lua_Integer count = (lua_Integer)lua_rawlen(L, index);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, index, i);
        gpurun_adjust_users(L, -1, -1);
        lua_pop(L, 1);
    }
}

/* ---- conditional nodes ---------------------------------------------------- */

CUresult gpurun_capture_current_graph(const struct gpurun_capture *capture, CUgraph *graph)
{
    CUstreamCaptureStatus status;
    *graph = NULL;
    return CUDA_CALL(cuStreamGetCaptureInfo, capture->stream->handle, &status, NULL, graph, NULL,
                     NULL, NULL);
}

CUresult gpurun_capture_create_condition(struct gpurun_capture *capture, unsigned int default_value,
                                         CUgraphConditionalHandle *handle, CUgraph *graph)
{
    CUresult result = gpurun_capture_current_graph(capture, graph);
    if (result != CUDA_SUCCESS)
        return result;
    return CUDA_CALL(cuGraphConditionalHandleCreate, handle, *graph, capture->stream->context,
                     default_value, CU_GRAPH_COND_ASSIGN_DEFAULT);
}

/* Adds the node `params` describes after the work captured so far on the
 * capture's stream (the dependencies the stream would give its next node,
 * their edge data with them), and makes it what is captured next depends
 * on: the one way gpurun adds a node to a graph being captured. */
static CUresult add_captured_node(struct gpurun_capture *capture, CUgraphNodeParams *params,
                                  CUgraphNode *node)
{
    CUstreamCaptureStatus status;
    CUgraph graph = NULL;
    const CUgraphNode *dependencies = NULL;
    const CUgraphEdgeData *edges = NULL;
    size_t dependency_count = 0;
    CUresult result = CUDA_CALL(cuStreamGetCaptureInfo, capture->stream->handle, &status, NULL,
                                &graph, &dependencies, &edges, &dependency_count);
    if (result != CUDA_SUCCESS)
        return result;
    result = CUDA_CALL(cuGraphAddNode, node, graph, dependencies, edges, dependency_count, params);
    if (result != CUDA_SUCCESS)
        return result;
    return CUDA_CALL(cuStreamUpdateCaptureDependencies, capture->stream->handle, node, NULL, 1,
                     CU_STREAM_SET_CAPTURE_DEPENDENCIES);
}

CUresult gpurun_capture_add_conditional(struct gpurun_capture *capture,
                                        CUgraphConditionalHandle handle,
                                        CUgraphConditionalNodeType type, unsigned int count,
                                        CUgraphNode *node_out, CUgraph *bodies)
{
    CUgraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_CONDITIONAL;
    params.conditional.handle = handle;
    params.conditional.type = type;
    params.conditional.size = count;
    params.conditional.ctx = capture->stream->context;
    CUgraphNode node = NULL;
    CUresult result = add_captured_node(capture, &params, &node);
    if (result != CUDA_SUCCESS)
        return result;
    for (unsigned int i = 0; i < count; i++)
        bodies[i] = params.conditional.phGraph_out[i];
    *node_out = node;
    capture->root->has_conditional = 1;
    if (type == CU_GRAPH_COND_TYPE_WHILE)
        capture->root->has_loop = 1;
    return CUDA_SUCCESS;
}

CUresult gpurun_capture_add_child_graph(struct gpurun_capture *capture, CUgraph child)
{
    CUgraphNodeParams params;
    memset(&params, 0, sizeof params);
    params.type = CU_GRAPH_NODE_TYPE_GRAPH;
    params.graph.graph = child; /* cloned into the node: the ownership left at clone */
    CUgraphNode node = NULL;
    return add_captured_node(capture, &params, &node);
}
