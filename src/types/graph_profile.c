/* Graph:profile's mechanism: an instrumented twin of a Graph, an event
 * record node before and after each of its top-level nodes on top of the
 * original edges, and after them all a chain of empty brackets (event
 * record nodes only, what a bracket costs with nothing in it),
 * instantiated and replayed, its event times read back.
 * The policy (options, medians, shares, the critical path) is Lua's
 * (lua/gpurun/builtin/graph_profile.lua over lua/gpurun/graph/profile.lua);
 * this is package.loaded["gpurun.graph_profile_core"].record. */
#include "types/graph_profile.h"

#include <string.h>

#include "types/graph.h"
#include "types/stream.h"

/* Far more than a profile needs; keeps the staging of times bounded. */
#define MAX_REPLAYS 100000
/* Empty brackets timed at the end of each replay, back to back. */
#define EMPTY_BRACKETS 8

static const struct gpurun_tag twin_tag = {"gpurun.GraphProfileTwin"};

/* What the twin holds in the driver, released by one close (on the way out
 * of record(), or by the error that ends it: the object is to-be-closed). */
struct twin {
    struct gpurun_object header;
    CUcontext context;
    CUgraph clone;      /* the copy instrumented, until instantiated */
    CUgraphExec exec;
    size_t event_count; /* made so far */
    CUevent *events;    /* [0] before each replay; [1 + 2i], [2 + 2i]: node i's; then the
                         * EMPTY_BRACKETS + 1 of the chain */
};

static int twin_close(lua_State *L)
{
    struct twin *twin = lua_touserdata(L, 1);
    if (twin == NULL || twin->header.closed)
        return 0;
    twin->header.closed = 1;
    if (twin->context == NULL) /* nothing made yet */
        return 0;
    CUcontext previous = gpurun_enter_context(twin->context);
    if (twin->exec)
        (void)CUDA_CALL(cuGraphExecDestroy, twin->exec);
    if (twin->clone)
        (void)CUDA_CALL(cuGraphDestroy, twin->clone);
    for (size_t i = 0; i < twin->event_count; i++)
        (void)CUDA_CALL(cuEventDestroy, twin->events[i]);
    gpurun_leave_context(previous);
    twin->exec = NULL;
    twin->clone = NULL;
    twin->event_count = 0;
    return 0;
}

static int has_conditional(const struct gpurun_graph *graph)
{
    for (size_t i = 0; i < graph->node_count; i++) {
        CUgraphNodeType type;
        if (CUDA_CALL(cuGraphNodeGetType, graph->nodes[i], &type) == CUDA_SUCCESS
            && type == CU_GRAPH_NODE_TYPE_CONDITIONAL)
            return 1;
    }
    return 0;
}

/* Why the graph cannot have a twin, or NULL. */
static const char *refusal(const struct gpurun_graph *graph)
{
    if (graph->has_memory_nodes)
        return "a graph with memory allocation or free nodes cannot be profiled (the driver "
               "lets such a graph have one executable at a time)";
    if (graph->host_callbacks)
        return "a graph with host nodes cannot be profiled (its twin would run the Lua "
               "functions again outside the graph's own replays)";
    /* The driver clones no such graph, and refuses a second executable of
     * its source (CUDA_ERROR_NOT_SUPPORTED) while the Graph has one. */
    if (has_conditional(graph))
        return "a graph with conditional nodes cannot be profiled (the driver copies none, and "
               "lets such a graph have one executable at a time)";
    return NULL;
}

/* The scratch record() needs, one block: the twin's nodes, a node's
 * dependencies with their edge data, and the times. */
struct scratch {
    CUgraphNode *nodes;
    CUgraphNode *dependencies;
    CUgraphNode *ends; /* node i's end event record node */
    CUgraphEdgeData *edges;
    float *times;   /* replay r, node i: [2 (r n + i)] start, [2 (r n + i) + 1] end, in ms */
    float *empties; /* replay r: [r] the chain of empty brackets, in ms */
};

static void push_scratch(lua_State *L, struct scratch *s, size_t n, size_t replays)
{
    size_t room = n + 1;
    unsigned char *block = gpurun_push_staging(
        L, room * (3 * sizeof(CUgraphNode) + sizeof(CUgraphEdgeData))
               + (2 * n + 1) * replays * sizeof(float) + 16);
    s->edges = (CUgraphEdgeData *)block;
    s->nodes = (CUgraphNode *)(s->edges + room);
    s->dependencies = s->nodes + room;
    s->ends = s->dependencies + room;
    s->times = (float *)(s->ends + room);
    s->empties = s->times + 2 * n * replays;
}

/* Adds node i's two event record nodes to `g`: the first after the node's
 * own dependencies and before the node, the second after it. The original
 * edges stay, so the twin runs in the order the graph does. */
static CUresult instrument(CUgraph g, struct scratch *s, size_t n, size_t i,
                           const CUevent *events)
{
    size_t count = n + 1;
    CUresult result = CUDA_CALL(cuGraphNodeGetDependencies, s->nodes[i], s->dependencies,
                                s->edges, &count);
    if (result != CUDA_SUCCESS)
        return result;
    CUgraphNode start, end;
    result = CUDA_CALL(cuGraphAddEventRecordNode, &start, g, s->dependencies, count, events[0]);
    if (result != CUDA_SUCCESS)
        return result;
    result = CUDA_CALL(cuGraphAddDependencies, g, &start, &s->nodes[i], NULL, 1);
    if (result != CUDA_SUCCESS)
        return result;
    result = CUDA_CALL(cuGraphAddEventRecordNode, &end, g, &s->nodes[i], 1, events[1]);
    s->ends[i] = end;
    return result;
}

/* The chain of empty brackets, after every node's end event: each event
 * record node follows the one before, with nothing between. */
static CUresult add_empty_brackets(CUgraph g, const struct scratch *s, size_t n,
                                   const CUevent *events)
{
    CUgraphNode previous;
    CUresult result = CUDA_CALL(cuGraphAddEventRecordNode, &previous, g, s->ends, n, events[0]);
    for (int k = 1; k <= EMPTY_BRACKETS && result == CUDA_SUCCESS; k++) {
        CUgraphNode next;
        result = CUDA_CALL(cuGraphAddEventRecordNode, &next, g, &previous, 1, events[k]);
        previous = next;
    }
    return result;
}

/* The twin, a copy of the graph's source instrumented, instantiated into
 * twin->exec (in the graph's context, current); the copy is destroyed
 * again. Returns the step that failed, or NULL. */
static const char *make_twin(struct twin *twin, const struct gpurun_graph *graph,
                             struct scratch *s)
{
    size_t n = graph->node_count;
    if (CUDA_CALL(cuGraphClone, &twin->clone, graph->source) != CUDA_SUCCESS)
        return "copying the graph for its profile";
    CUgraph g = twin->clone;
    for (size_t i = 0; i < n; i++)
        if (CUDA_CALL(cuGraphNodeFindInClone, &s->nodes[i], graph->nodes[i], g) != CUDA_SUCCESS)
            return "finding a node in the profile's copy of the graph";
    const char *failed = NULL;
    for (size_t i = 0; i < n && !failed; i++)
        if (instrument(g, s, n, i, twin->events + 1 + 2 * i) != CUDA_SUCCESS)
            failed = "adding the profile's event record nodes";
    if (!failed && add_empty_brackets(g, s, n, twin->events + 1 + 2 * n) != CUDA_SUCCESS)
        failed = "adding the profile's empty brackets";
    if (!failed) {
        CUDA_GRAPH_INSTANTIATE_PARAMS params;
        memset(&params, 0, sizeof params);
        if (CUDA_CALL(cuGraphInstantiateWithParams, &twin->exec, g, &params) != CUDA_SUCCESS) {
            twin->exec = NULL;
            failed = "instantiating the profile's twin of the graph";
        }
    }
    /* The copy goes (its driver error, if any, kept for the message). */
    CUresult kept = cuda_last_failed_result;
    const char *kept_call = cuda_last_failed_call;
    if (twin->clone) {
        (void)CUDA_CALL(cuGraphDestroy, twin->clone);
        twin->clone = NULL;
    }
    cuda_last_failed_result = kept;
    cuda_last_failed_call = kept_call;
    return failed;
}

/* One replay of the twin on the stream, waited for, its times read into
 * times (2 per node: start and end, ms after the event before it) and
 * *empty (the chain of empty brackets, ms from first to last). */
static void replay_twin(lua_State *L, struct twin *twin, struct gpurun_stream *stream, size_t n,
                        float *times, float *empty)
{
    CUcontext previous = gpurun_enter_context(twin->context);
    CUresult result = CUDA_CALL(cuEventRecord, twin->events[0], stream->handle);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuGraphLaunch, twin->exec, stream->handle);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "replaying the profile's twin of the graph");
    gpurun_wait_stream(L, stream, "waiting for a profile replay");
    previous = gpurun_enter_context(twin->context);
    for (size_t k = 0; k < 2 * n && result == CUDA_SUCCESS; k++)
        result = CUDA_CALL(cuEventElapsedTime, &times[k], twin->events[0], twin->events[1 + k]);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuEventElapsedTime, empty, twin->events[1 + 2 * n],
                           twin->events[1 + 2 * n + EMPTY_BRACKETS]);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "reading the profile's event times");
}

/* Pushes a sequence of `count` numbers, every other one of times from
 * `first`, in microseconds. */
static void push_times(lua_State *L, const float *times, size_t count, size_t first)
{
    lua_createtable(L, (int)count, 0);
    for (size_t k = 0; k < count; k++) {
        lua_pushnumber(L, (lua_Number)times[2 * k + first] * 1000.0);
        lua_rawseti(L, -2, (lua_Integer)k + 1);
    }
}

/* record(graph, stream, replays) -> { starts = {...}, ends = {...},
 * empty = {...} }: the twin replayed once unrecorded, then `replays` times;
 * replay r's node i at [(r - 1) * node_count + i], microseconds after the
 * replay was queued; empty[r], one empty bracket's microseconds (the
 * chain's mean) in replay r. */
static int profile_record(lua_State *L)
{
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    gpurun_graph_replay_stream(L, graph, 2);
    lua_Integer replays = gpurun_check_integer(L, 3, "integer count of replays");
    if (replays < 1 || replays > MAX_REPLAYS)
        return gpurun_arg_error(L, 3, "replays must be from 1 to %d, got %I", MAX_REPLAYS,
                                (LUAI_UACINT)replays);
    const char *why = refusal(graph);
    if (why)
        return gpurun_error(L, "Graph:profile: %s", why);
    lua_settop(L, 3);
    size_t n = graph->node_count;
    size_t event_total = 2 * n + 1 + EMPTY_BRACKETS + 1;
    struct twin *twin = gpurun_new_object(L, sizeof *twin + event_total * sizeof(CUevent), 0,
                                          &twin_tag);
    twin->events = (CUevent *)(twin + 1);
    twin->header.closed = 0;
    lua_toclose(L, 4);
    struct scratch s;
    push_scratch(L, &s, n, (size_t)replays);
    /* Both allocations can run a finalizer that closes the graph or the stream. */
    graph = gpurun_check_graph(L, 1);
    struct gpurun_stream *stream = gpurun_graph_replay_stream(L, graph, 2);
    twin->context = graph->context;
    CUcontext previous = gpurun_enter_context(twin->context);
    CUresult result = CUDA_SUCCESS;
    for (size_t k = 0; k < event_total && result == CUDA_SUCCESS; k++) {
        result = CUDA_CALL(cuEventCreate, &twin->events[k], CU_EVENT_DEFAULT);
        if (result == CUDA_SUCCESS)
            twin->event_count++;
    }
    const char *failed = result == CUDA_SUCCESS ? make_twin(twin, graph, &s)
                                                : "making the profile's events";
    gpurun_leave_context(previous);
    if (failed)
        return gpurun_cuda_error(L, "%s", failed);
    /* A while loop may never end: the waits poll, so that Ctrl-C ends them. */
    stream->unbounded |= graph->has_loop;
    replay_twin(L, twin, stream, n, s.times, s.empties);
    for (lua_Integer r = 0; r < replays; r++)
        replay_twin(L, twin, stream, n, s.times + 2 * n * (size_t)r, s.empties + r);
    lua_closeslot(L, 4);
    lua_createtable(L, 0, 3);
    push_times(L, s.times, n * (size_t)replays, 0);
    lua_setfield(L, -2, "starts");
    push_times(L, s.times, n * (size_t)replays, 1);
    lua_setfield(L, -2, "ends");
    lua_createtable(L, (int)replays, 0);
    for (lua_Integer r = 0; r < replays; r++) {
        lua_pushnumber(L, (lua_Number)s.empties[r] * 1000.0 / EMPTY_BRACKETS);
        lua_rawseti(L, -2, r + 1);
    }
    lua_setfield(L, -2, "empty");
    return 1;
}

static const luaL_Reg core_functions[] = {
    {"record", profile_record},
    {NULL, NULL}
};

static const luaL_Reg twin_metamethods[] = {
    {"__close", twin_close},
    {"__gc", twin_close},
    {NULL, NULL}
};

static const struct gpurun_type twin_type = {
    &twin_tag, NULL, twin_metamethods, NULL, NULL,
};

void gpurun_open_graph_profile(lua_State *L)
{
    gpurun_register_type(L, &twin_type);
    gpurun_set_core_functions(L, "gpurun.graph_profile_core", core_functions);
}
