/* GraphBuilder:embed(graph | builder): a child graph node running a copy
 * of a completed Graph's graph, or of what another builder built, after
 * the work captured so far (cuda.core's add_child; a conditional body's
 * builder embeds into its body). The capture keeps what the child's nodes
 * use, as if their work had been launched on the builder, so that the
 * child may be closed while the graph still runs its copy. */
#include "types/graph.h"

#include "types/graph_builder.h"
#include "types/host_callback.h"

/* Whether the sequence at index holds a HostCallback. */
static int holds_host_callback(lua_State *L, int index)
{
    lua_Integer count = (lua_Integer)lua_rawlen(L, index);
    int found = 0;
    for (lua_Integer i = 1; i <= count && !found; i++) {
        lua_rawgeti(L, index, i);
        found = gpurun_to_tagged(L, -1, &gpurun_host_callback_tag) != NULL;
        lua_pop(L, 1);
    }
    return found;
}

/* What a child graph may not hold (the driver copies no graph with memory
 * or conditional nodes into a node; a host node's runs are counted per
 * Graph): refused, naming the argument. */
static void check_child_nodes(lua_State *L, int memory, int conditional, int host)
{
    if (memory)
        gpurun_arg_error(L, 2, "a graph without memory allocation or free nodes expected (the "
                               "driver cannot copy those into a child graph node): make its "
                               "buffers before its capture");
    if (conditional)
        gpurun_arg_error(L, 2, "a graph without conditional nodes expected (the driver cannot "
                               "copy those into a child graph node)");
    if (host)
        gpurun_arg_error(L, 2, "a graph without host callback nodes expected (each Graph "
                               "counts the runs of its own)");
}

/* The graph to copy from the Graph or built GraphBuilder at 2, checked;
 * pushes what its nodes use (a sequence at 3). */
static CUgraph check_child(lua_State *L, const struct gpurun_graph_builder *builder, int *device)
{
    if (gpurun_to_tagged(L, 2, &gpurun_graph_tag)) {
        struct gpurun_graph *graph = gpurun_check_graph(L, 2);
        lua_getiuservalue(L, 2, GPURUN_GRAPH_KEPT_VALUE);
        check_child_nodes(L, graph->has_memory_nodes, graph->has_conditional,
                          graph->host_callbacks > 0);
        *device = graph->device;
        return graph->source;
    }
    if (!gpurun_to_tagged(L, 2, &gpurun_builder_tag))
        gpurun_type_error(L, 2, "gpurun.Graph or gpurun.GraphBuilder");
    struct gpurun_graph_builder *other = gpurun_check_builder(L, 2);
    struct gpurun_capture *capture = &other->capture;
    if (lua_rawequal(L, 1, 2) || capture->root == builder->capture.root)
        gpurun_arg_error(L, 2, "another builder's graph expected: this one is the graph being "
                               "built, which cannot contain itself");
    if (capture->role != GPURUN_CAPTURE_ORIGIN)
        gpurun_arg_error(L, 2, "a builder from stream:create_graph_builder() expected: a %s "
                               "builder's work is part of another builder's graph",
                         capture->role == GPURUN_CAPTURE_FORK ? "split" : "conditional body");
    if (capture->state != GPURUN_CAPTURE_BUILT)
        gpurun_arg_error(L, 2, "a GraphBuilder that has ended building expected (it is %s)",
                         gpurun_capture_state_name(capture->state));
    gpurun_capture_push_kept(L, capture);
    int host = holds_host_callback(L, 3);
    /* The sequence anchors them; counted by this capture once kept. */
    gpurun_release_users(L, 3);
    check_child_nodes(L, capture->has_memory_nodes, capture->has_conditional, host);
    *device = capture->stream->device;
    return capture->graph;
}

/* embed(graph | builder) -> self */
static int builder_embed(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
        return gpurun_error(L, "GraphBuilder:embed: not building (it is %s)",
                            gpurun_capture_state_name(builder->capture.state));
    if (lua_isnone(L, 2))
        gpurun_type_error(L, 2, "gpurun.Graph or gpurun.GraphBuilder");
    lua_settop(L, 2);
    int device = 0;
    int from_builder = gpurun_to_tagged(L, 2, &gpurun_builder_tag) != NULL;
    CUgraph child = check_child(L, builder, &device);
    if (device != builder->capture.stream->device)
        return gpurun_arg_error(L, 2, "a graph of device %d expected (the builder captures on "
                                      "it), got one of device %d",
                                builder->capture.stream->device, device);
    /* Kept as a launch keeps its arguments; keeping allocates, which can
     * run a finalizer that closes either builder or the graph, all checked
     * again after. */
    lua_Integer count = (lua_Integer)lua_rawlen(L, 3);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, 3, i);
        gpurun_capture_keep(L, &builder->capture, -1);
        lua_pop(L, 1);
    }
    builder = gpurun_check_builder(L, 1);
    if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
        return gpurun_error(L, "GraphBuilder:embed: the builder was closed while the child's "
                               "objects were kept");
    if (from_builder) {
        const struct gpurun_capture *capture = &gpurun_check_builder(L, 2)->capture;
        if (capture->state != GPURUN_CAPTURE_BUILT || capture->graph != child)
            return gpurun_error(L, "GraphBuilder:embed: the builder to embed was closed or built "
                                   "again meanwhile");
    } else if (gpurun_check_graph(L, 2)->source != child) {
        return gpurun_error(L, "GraphBuilder:embed: the graph to embed changed meanwhile");
    }
    if (gpurun_capture_add_child_graph(&builder->capture, child) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "adding a child graph node to a graph capture");
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg builder_methods[] = {
    {"embed", builder_embed},
    {NULL, NULL}
};

void gpurun_open_graph_embed(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_builder_tag, builder_methods);
}
