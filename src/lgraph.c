/* gpurun.GraphBuilder and gpurun.Graph: stream capture and replay.
 *
 * A builder captures the launches made on its stream between
 * begin_building() and end_building(); complete() instantiates the result.
 * Every Buffer and Kernel a capture used is kept by the builder and handed
 * to the Graph, which holds them (so the collector cannot free memory a
 * replay touches). Both count as their users (so closing one of them
 * explicitly is refused while a capture or a graph may still touch it). */
#include "gpurun.h"

#include <string.h>

enum builder_state { BUILDER_IDLE, BUILDER_BUILDING, BUILDER_BUILT, BUILDER_ABANDONED };

static const char *const state_names[] = {"idle", "building", "built", "abandoned"};

/* User values: 1 the Stream object, 2 the set of values the capture kept. */
struct gpurun_graph_builder {
    struct gpurun_stream *stream;
    enum builder_state state;
    CUgraph graph;
    int closed;
    int self_reference;  /* registry reference while capturing, else LUA_NOREF */
    struct gpurun_graph_builder *next_capturing;
};

/* User value 1: the sequence of kept values. */
struct graph {
    const struct gpurun_tag *tag;
    CUgraphExec exec;
    size_t node_count;
    int closed;
};

static struct gpurun_graph_builder *capturing;

static void unlink_capturing(struct gpurun_graph_builder *builder)
{
    for (struct gpurun_graph_builder **link = &capturing; *link; link = &(*link)->next_capturing) {
        if (*link == builder) {
            *link = builder->next_capturing;
            break;
        }
    }
    builder->next_capturing = NULL;
}

/* Lets go of the values the builder kept (user value 2), no longer counting
 * as their user. */
static void release_kept(lua_State *L, int builder_index)
{
    builder_index = lua_absindex(L, builder_index);
    if (lua_getiuservalue(L, builder_index, 2) == LUA_TTABLE) {
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1))
            gpurun_adjust_graph_users(L, -2, -1);
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, builder_index, 2);
}

/* The builder is no longer capturing: unlinks it and lets the stream take
 * plain launches again. */
static void stop_capturing(lua_State *L, struct gpurun_graph_builder *builder)
{
    unlink_capturing(builder);
    builder->stream->captured = 0;
    luaL_unref(L, LUA_REGISTRYINDEX, builder->self_reference);
    builder->self_reference = LUA_NOREF;
}

/* Ends the capture on the builder's stream and drops whatever it held. */
static void abandon_capture(lua_State *L, struct gpurun_graph_builder *builder)
{
    CUgraph partial = NULL;
    if (!builder->stream->closed
        && CUDA_CALL(cuStreamEndCapture, builder->stream->handle, &partial) == CUDA_SUCCESS
        && partial)
        (void)CUDA_CALL(cuGraphDestroy, partial);
    lua_rawgeti(L, LUA_REGISTRYINDEX, builder->self_reference);
    release_kept(L, -1);
    lua_pop(L, 1);
    stop_capturing(L, builder);
    builder->state = BUILDER_ABANDONED;
}

int gpurun_captured_stream_error(lua_State *L)
{
    gpurun_abort_captures(L);
    return luaL_error(L, "the stream is being captured by a GraphBuilder: launch on the builder, "
                         "so that the graph keeps what it uses (capture abandoned)");
}

int gpurun_capture_in_progress(void)
{
    return capturing != NULL;
}

void gpurun_abort_captures(lua_State *L)
{
    while (capturing)
        abandon_capture(L, capturing);
}

static void destroy_graph(struct gpurun_graph_builder *builder)
{
    if (builder->graph) {
        (void)CUDA_CALL(cuGraphDestroy, builder->graph);
        builder->graph = NULL;
    }
}

int gpurun_push_graph_builder(lua_State *L, int stream_index)
{
    stream_index = lua_absindex(L, stream_index);
    struct gpurun_graph_builder *builder = lua_newuserdatauv(L, sizeof *builder, 2);
    memset(builder, 0, sizeof *builder);
    builder->stream = lua_touserdata(L, stream_index);
    builder->state = BUILDER_IDLE;
    builder->self_reference = LUA_NOREF;
    luaL_setmetatable(L, GPURUN_GRAPH_BUILDER);
    lua_pushvalue(L, stream_index);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static struct gpurun_graph_builder *check_builder(lua_State *L, int index)
{
    struct gpurun_graph_builder *builder = luaL_checkudata(L, index, GPURUN_GRAPH_BUILDER);
    if (builder->closed)
        gpurun_closed_error(L, GPURUN_GRAPH_BUILDER);
    if (builder->stream->closed)
        gpurun_closed_error(L, GPURUN_STREAM);
    return builder;
}

struct gpurun_graph_builder *gpurun_test_graph_builder(lua_State *L, int index)
{
    struct gpurun_graph_builder *builder = luaL_testudata(L, index, GPURUN_GRAPH_BUILDER);
    if (builder == NULL)
        return NULL;
    return check_builder(L, index);
}

CUstream gpurun_graph_builder_stream(lua_State *L, struct gpurun_graph_builder *builder)
{
    if (builder->state != BUILDER_BUILDING)
        luaL_error(L, "GraphBuilder is not building (it is %s): call begin_building() first",
                   state_names[builder->state]);
    return builder->stream->handle;
}

void gpurun_graph_builder_keep(lua_State *L, int builder_index, int value_index)
{
    value_index = lua_absindex(L, value_index);
    lua_getiuservalue(L, builder_index, 2);
    lua_pushvalue(L, value_index);
    if (lua_rawget(L, -2) == LUA_TNIL) {
        lua_pushvalue(L, value_index);
        lua_pushboolean(L, 1);
        lua_rawset(L, -4);
        gpurun_adjust_graph_users(L, value_index, +1);
    }
    lua_pop(L, 2);
}

static int builder_begin_building(lua_State *L)
{
    struct gpurun_graph_builder *builder = check_builder(L, 1);
    if (builder->state == BUILDER_BUILDING)
        return luaL_error(L, "GraphBuilder:begin_building: already building");
    if (builder->stream->captured)
        return luaL_error(L, "GraphBuilder:begin_building: another GraphBuilder is capturing "
                             "this stream");
    destroy_graph(builder);
    release_kept(L, 1);
    builder->state = BUILDER_IDLE;
    lua_newtable(L);
    lua_setiuservalue(L, 1, 2);
    /* Thread-local mode: a call that is unsafe during capture (an allocation,
     * a synchronize) fails instead of silently breaking the graph. */
    CHECK_CUDA(L, "beginning a graph capture", cuStreamBeginCapture, builder->stream->handle,
               CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    builder->state = BUILDER_BUILDING;
    builder->stream->captured = 1;
    lua_pushvalue(L, 1);
    builder->self_reference = luaL_ref(L, LUA_REGISTRYINDEX);
    builder->next_capturing = capturing;
    capturing = builder;
    lua_settop(L, 1);
    return 1;
}

static int builder_end_building(lua_State *L)
{
    struct gpurun_graph_builder *builder = check_builder(L, 1);
    if (builder->state != BUILDER_BUILDING)
        return luaL_error(L, "GraphBuilder:end_building: not building (it is %s)%s",
                          state_names[builder->state],
                          builder->state == BUILDER_ABANDONED
                              ? "; the capture was abandoned after an error" : "");
    stop_capturing(L, builder);
    CUgraph graph = NULL;
    if (CUDA_CALL(cuStreamEndCapture, builder->stream->handle, &graph) != CUDA_SUCCESS) {
        builder->state = BUILDER_ABANDONED;
        if (graph)
            (void)CUDA_CALL(cuGraphDestroy, graph);
        release_kept(L, 1);
        return gpurun_cuda_error(L, "ending a graph capture");
    }
    builder->graph = graph;
    builder->state = BUILDER_BUILT;
    lua_settop(L, 1);
    return 1;
}

static int builder_complete(lua_State *L)
{
    struct gpurun_graph_builder *builder = check_builder(L, 1);
    if (builder->state != BUILDER_BUILT)
        return luaL_error(L, "GraphBuilder:complete: nothing built (it is %s): call "
                             "begin_building(), launch, end_building() first",
                          state_names[builder->state]);
    size_t node_count = 0;
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, builder->graph, NULL, &node_count);

    struct graph *graph = lua_newuserdatauv(L, sizeof *graph, 1);
    graph->tag = &gpurun_tag_graph;
    graph->exec = NULL;
    graph->node_count = node_count;
    graph->closed = 1;
    luaL_setmetatable(L, GPURUN_GRAPH);
    CHECK_CUDA(L, "instantiating a graph", cuGraphInstantiateWithFlags, &graph->exec, builder->graph, 0);

    /* The graph's own sequence of what the capture kept; each is told it now
     * has one more graph using it. */
    int graph_index = lua_gettop(L);
    lua_newtable(L);
    lua_getiuservalue(L, 1, 2);
    lua_Integer kept = 0;
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_pop(L, 1);
        gpurun_adjust_graph_users(L, -1, +1);
        lua_pushvalue(L, -1);
        lua_rawseti(L, graph_index + 1, ++kept);
    }
    lua_pop(L, 1);
    lua_setiuservalue(L, graph_index, 1);
    graph->closed = 0;
    return 1;
}

static int builder_close(lua_State *L)
{
    struct gpurun_graph_builder *builder = luaL_checkudata(L, 1, GPURUN_GRAPH_BUILDER);
    if (builder->closed)
        return 0;
    if (builder->state == BUILDER_BUILDING)
        abandon_capture(L, builder);
    destroy_graph(builder);
    builder->closed = 1;
    release_kept(L, 1);
    return 0;
}

static int builder_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_GRAPH_BUILDER))
        return 1;
    struct gpurun_graph_builder *builder = check_builder(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "state") == 0)
        lua_pushstring(L, state_names[builder->state]);
    else if (strcmp(key, "stream") == 0)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushnil(L);
    return 1;
}

static int builder_tostring(lua_State *L)
{
    struct gpurun_graph_builder *builder = luaL_checkudata(L, 1, GPURUN_GRAPH_BUILDER);
    lua_pushfstring(L, "gpurun.GraphBuilder(%s)",
                    builder->closed ? "closed" : state_names[builder->state]);
    return 1;
}

/* ---- Graph -------------------------------------------------------------- */

static struct graph *check_graph(lua_State *L, int index)
{
    struct graph *graph = luaL_checkudata(L, index, GPURUN_GRAPH);
    if (graph->closed)
        gpurun_closed_error(L, GPURUN_GRAPH);
    return graph;
}

/* The replay path: identity tags instead of metatable look-ups. */
static CUstream replay_stream(lua_State *L, int index)
{
    const struct gpurun_stream *stream = gpurun_to_tagged(L, index, &gpurun_tag_stream);
    if (stream == NULL)
        luaL_typeerror(L, index, GPURUN_STREAM);
    if (stream->closed)
        gpurun_closed_error(L, GPURUN_STREAM);
    if (stream->captured)
        gpurun_captured_stream_error(L);
    return stream->handle;
}

static const struct graph *replay_graph(lua_State *L, int index)
{
    const struct graph *graph = gpurun_to_tagged(L, index, &gpurun_tag_graph);
    if (graph == NULL)
        luaL_typeerror(L, index, GPURUN_GRAPH);
    if (graph->closed)
        gpurun_closed_error(L, GPURUN_GRAPH);
    return graph;
}

static int graph_launch(lua_State *L)
{
    const struct graph *graph = replay_graph(L, 1);
    CUstream stream = replay_stream(L, 2);
    if (CUDA_CALL(cuGraphLaunch, graph->exec, stream) != CUDA_SUCCESS)
        gpurun_cuda_error(L, "launching a graph");
    return 0;
}

static int graph_upload(lua_State *L)
{
    const struct graph *graph = replay_graph(L, 1);
    CUstream stream = replay_stream(L, 2);
    CHECK_CUDA(L, "uploading a graph", cuGraphUpload, graph->exec, stream);
    return 0;
}

static int graph_close(lua_State *L)
{
    struct graph *graph = luaL_checkudata(L, 1, GPURUN_GRAPH);
    if (graph->closed)
        return 0;
    graph->closed = 1;
    (void)CUDA_CALL(cuGraphExecDestroy, graph->exec);
    graph->exec = NULL;
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE) {
        lua_Integer count = (lua_Integer)lua_rawlen(L, -1);
        for (lua_Integer i = 1; i <= count; i++) {
            lua_rawgeti(L, -1, i);
            gpurun_adjust_graph_users(L, -1, -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

/* A method, not a field: Graph's __index is its methods table, so that
 * graph:launch() costs one table look-up and no C call. */
static int graph_node_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)check_graph(L, 1)->node_count);
    return 1;
}

static int graph_tostring(lua_State *L)
{
    struct graph *graph = luaL_checkudata(L, 1, GPURUN_GRAPH);
    if (graph->closed)
        lua_pushliteral(L, "gpurun.Graph(closed)");
    else
        lua_pushfstring(L, "gpurun.Graph(%d nodes)", (int)graph->node_count);
    return 1;
}

static const luaL_Reg builder_meth[] = {
    {"begin_building", builder_begin_building},
    {"end_building", builder_end_building},
    {"complete", builder_complete},
    {"close", builder_close},
    {NULL, NULL}
};

static const luaL_Reg builder_metameth[] = {
    {"__index", builder_index},
    {"__tostring", builder_tostring},
    {"__close", builder_close},
    {"__gc", builder_close},
    {NULL, NULL}
};

static const luaL_Reg graph_meth[] = {
    {"launch", graph_launch},
    {"upload", graph_upload},
    {"node_count", graph_node_count},
    {"close", graph_close},
    {NULL, NULL}
};

static const luaL_Reg graph_metameth[] = {
    {"__tostring", graph_tostring},
    {"__close", graph_close},
    {"__gc", graph_close},
    {NULL, NULL}
};

void gpurun_open_graph(lua_State *L)
{
    gpurun_new_type(L, GPURUN_GRAPH_BUILDER, builder_meth, builder_metameth);
    lua_pop(L, 1);
    gpurun_new_type(L, GPURUN_GRAPH, graph_meth, graph_metameth);
    lua_pop(L, 1);
}
