/* gpurun.Graph: what GraphBuilder:complete() instantiates, replayed with
 * graph:launch(stream). A graph holds every Buffer and Kernel its capture
 * used (user value 1, a sequence) and counts as their user, so the collector
 * cannot free memory a replay touches and an explicit close is refused. */
#include "lgraph.h"

#include "lgraph_builder.h"
#include "lstream.h"

const struct gpurun_tag gpurun_graph_tag = {"gpurun.Graph"};

struct graph {
    struct gpurun_object header;
    CUgraphExec exec;
    size_t node_count;
    CUcontext context; /* the captured stream's: the graph replays on its device only */
    int device;
};

/* builder:complete() -> Graph */
static int builder_complete(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->state != GPURUN_CAPTURE_BUILT)
        return gpurun_error(L, "GraphBuilder:complete: nothing built (it is %s): call "
                               "begin_building(), launch, end_building() first",
                            gpurun_capture_state_name(capture->state));
    size_t node_count = 0;
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, capture->graph, NULL, &node_count);
    struct graph *graph = gpurun_new_object(L, sizeof *graph, 1, &gpurun_graph_tag);
    graph->node_count = node_count;
    graph->context = capture->stream->context;
    graph->device = capture->stream->device;
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = CUDA_CALL(cuGraphInstantiateWithFlags, &graph->exec, capture->graph, 0);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "instantiating a graph");
    gpurun_capture_push_kept(L, capture);
    lua_setiuservalue(L, -2, 1);
    graph->header.closed = 0;
    return 1;
}

/* The replay path: identity tags, no metatable look-ups. */
static CUstream replay_stream(lua_State *L, const struct graph *graph, int index)
{
    const struct gpurun_stream_object *object = gpurun_check_open(L, index, &gpurun_stream_tag);
    if (object->stream.capture)
        gpurun_error(L, "the stream is being captured by a GraphBuilder: launch on the builder, "
                        "so that the graph keeps what it uses (capture abandoned)");
    if (object->stream.device != graph->device)
        gpurun_error(L, "the graph was captured on device %d and replays only there; the stream "
                        "belongs to device %d", graph->device, object->stream.device);
    return object->stream.handle;
}

typedef CUresult (*replay_call)(CUgraphExec, CUstream);

/* graph:launch(stream) and graph:upload(stream), in the graph's context. */
static int replay(lua_State *L, replay_call call, const char *name, const char *what)
{
    const struct graph *graph = gpurun_check_open(L, 1, &gpurun_graph_tag);
    CUstream stream = replay_stream(L, graph, 2);
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = cuda_checked(call(graph->exec, stream), name);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "%s", what);
    return 0;
}

static int graph_launch(lua_State *L)
{
    return replay(L, cuda.cuGraphLaunch, "cuGraphLaunch", "launching a graph");
}

static int graph_upload(lua_State *L)
{
    return replay(L, cuda.cuGraphUpload, "cuGraphUpload", "uploading a graph");
}

static int graph_close(lua_State *L)
{
    struct graph *graph = gpurun_check_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed)
        return 0;
    graph->header.closed = 1;
    CUcontext previous = gpurun_enter_context(graph->context);
    (void)CUDA_CALL(cuGraphExecDestroy, graph->exec);
    gpurun_leave_context(previous);
    graph->exec = NULL;
    if (lua_getiuservalue(L, 1, 1) == LUA_TTABLE)
        gpurun_release_users(L, -1);
    lua_pop(L, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    return 0;
}

static int graph_node_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)((struct graph *)lua_touserdata(L, 1))->node_count);
    return 1;
}

static int graph_device(lua_State *L)
{
    lua_pushinteger(L, ((struct graph *)lua_touserdata(L, 1))->device);
    return 1;
}

static int graph_tostring(lua_State *L)
{
    struct graph *graph = gpurun_check_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed)
        lua_pushliteral(L, "gpurun.Graph(closed)");
    else
        lua_pushfstring(L, "gpurun.Graph(%d nodes)", (int)graph->node_count);
    return 1;
}

static const luaL_Reg graph_methods[] = {
    {"launch", graph_launch},
    {"upload", graph_upload},
    {"close", graph_close},
    {NULL, NULL}
};

static const luaL_Reg graph_fields[] = {
    {"node_count", graph_node_count},
    {"device", graph_device},
    {NULL, NULL}
};

static const luaL_Reg graph_metamethods[] = {
    {"__tostring", graph_tostring},
    {"__close", graph_close},
    {"__gc", graph_close},
    {NULL, NULL}
};

static const struct gpurun_type graph_type = {
    &gpurun_graph_tag, graph_methods, graph_metamethods, graph_fields, NULL,
};

static const luaL_Reg builder_methods[] = {
    {"complete", builder_complete},
    {NULL, NULL}
};

void gpurun_open_graph(lua_State *L)
{
    gpurun_register_type(L, &graph_type);
    gpurun_add_methods(L, &gpurun_builder_tag, builder_methods);
}
