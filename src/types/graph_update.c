/* The C side of Graph:update(builder): the same pipeline captured again
 * (other scalars, other buffers of the same kind) becomes the graph's
 * without a new instantiation (cuGraphExecUpdate). When the driver refuses,
 * it returns what it refused with, and both graphs' nodes as Graph:nodes()
 * lists them, for lua/gpurun/builtin/graph_update.lua to explain in one
 * line; the graph replays as before. In package.loaded["gpurun.graph_core"]. */
#include "types/graph.h"

#include <string.h>

#include "types/graph_builder.h"

#define BUILDER_LOST "the GraphBuilder was closed or built again during the update"

/* The driver's CUgraphExecUpdateResult as a word the explainer reads. */
static const char *update_result_name(CUgraphExecUpdateResult result)
{
    static const char *const names[] = {
        [CU_GRAPH_EXEC_UPDATE_SUCCESS] = "success",
        [CU_GRAPH_EXEC_UPDATE_ERROR] = "error",
        [CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED] = "topology_changed",
        [CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED] = "node_type_changed",
        [CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED] = "function_changed",
        [CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED] = "parameters_changed",
        [CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED] = "not_supported",
        [CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE] = "unsupported_function_change",
        [CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED] = "attributes_changed",
    };
    if ((size_t)result < sizeof names / sizeof names[0] && names[result])
        return names[result];
    return "unknown";
}

/* Lets go of the new kept sequence at kept_index (its users), then raises
 * `message`: the graph replays as before. */
static int update_failed(lua_State *L, int kept_index, const char *message)
{
    gpurun_release_users(L, kept_index);
    return gpurun_error(L, "Graph:update: %s; the graph replays as before", message);
}

/* The place of `node` among `count` nodes, or 0. */
static lua_Integer place_of(CUgraphNode node, const CUgraphNode *nodes, size_t count)
{
    for (size_t i = 0; node && i < count; i++)
        if (nodes[i] == node)
            return (lua_Integer)i + 1;
    return 0;
}

/* Pushes { result =, code =, status =, error_node =, from_node =, old = {
 * nodes... }, new = { nodes... } } for a refused update of the Graph at 1
 * by the builder at 2, whose graph's nodes (count of them, at the stack's
 * `nodes_index` as staging) and launches (at kernel_nodes) were read, and
 * what it kept (at kept, no longer counted). */
static void push_refusal(lua_State *L, CUresult status, const CUgraphExecUpdateResultInfo *info,
                         const CUgraphNode *nodes, size_t count, int kernel_nodes, int kept)
{
    const struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    lua_Integer error_node = place_of(info->errorNode, nodes, count);
    if (!error_node)
        error_node = place_of(info->errorNode, graph->nodes, graph->node_count);
    lua_Integer from_node = place_of(info->errorFromNode, nodes, count);
    if (!from_node)
        from_node = place_of(info->errorFromNode, graph->nodes, graph->node_count);
    const char *status_name = NULL;
    if (CUDA_CALL(cuGetErrorName, status, &status_name) != CUDA_SUCCESS)
        status_name = NULL;
    lua_createtable(L, 0, 7);
    lua_pushstring(L, update_result_name(info->result));
    lua_setfield(L, -2, "result");
    lua_pushinteger(L, (lua_Integer)info->result);
    lua_setfield(L, -2, "code");
    if (status_name) {
        lua_pushstring(L, status_name);
        lua_setfield(L, -2, "status");
    }
    if (error_node) {
        lua_pushinteger(L, error_node);
        lua_setfield(L, -2, "error_node");
    }
    if (from_node) {
        lua_pushinteger(L, from_node);
        lua_setfield(L, -2, "from_node");
    }
    int refusal = lua_gettop(L);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE);
    graph = gpurun_check_graph(L, 1);
    struct gpurun_node_source old = {
        .owner = 1, .nodes = graph->nodes, .count = graph->node_count,
        .kernel_nodes = refusal + 1, .kept = refusal + 2,
    };
    gpurun_graph_push_node_list(L, &old);
    lua_setfield(L, refusal, "old");
    const struct gpurun_graph_builder *builder = lua_touserdata(L, 2);
    struct gpurun_node_source new = {
        .owner = 2, .capture = &builder->capture, .graph = builder->capture.graph,
        .nodes = nodes, .count = count, .kernel_nodes = kernel_nodes, .kept = kept,
    };
    gpurun_graph_push_node_list(L, &new);
    lua_setfield(L, refusal, "new");
    lua_settop(L, refusal);
}

/* Reads the builder's graph: pushes its nodes (staging, returned) and
 * their launches; the kept sequence is at kept. */
static CUgraphNode *read_builder_graph(lua_State *L, const struct gpurun_capture *capture,
                                       CUgraph source, int kept, size_t *count)
{
    *count = 0;
    if (CUDA_CALL(cuGraphGetNodes, source, NULL, count) != CUDA_SUCCESS)
        update_failed(L, kept, "counting the builder's graph nodes failed");
    CUgraphNode *nodes = gpurun_push_staging(L, (*count + 1) * sizeof *nodes);
    if (!gpurun_graph_source_held(capture, source))
        update_failed(L, kept, BUILDER_LOST);
    if (*count > 0 && CUDA_CALL(cuGraphGetNodes, source, nodes, count) != CUDA_SUCCESS)
        update_failed(L, kept, "listing the builder's graph nodes failed");
    if (!gpurun_graph_push_kernel_nodes(L, nodes, *count, kept, capture, source))
        update_failed(L, kept, BUILDER_LOST);
    return nodes;
}

/* update(builder) -> self, or the refusal's table. A changed topology is
 * refused, and the graph replays as before. Afterwards the graph keeps
 * what the new capture used.
 *
 * Everything that allocates comes before the executable graph changes: an
 * allocation can run a finalizer that closes the builder (destroying its
 * graph) or this graph, which is checked after each. */
static int graph_update(lua_State *L)
{
    gpurun_check_graph(L, 1);
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 2);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->role != GPURUN_CAPTURE_ORIGIN || capture->state != GPURUN_CAPTURE_BUILT)
        return gpurun_arg_error(L, 2, "a GraphBuilder that has ended building expected (it is %s%s)",
                                gpurun_capture_state_name(capture->state),
                                capture->role == GPURUN_CAPTURE_ORIGIN ? "" : ", and not one "
                                "that records into another builder's graph");
    const struct gpurun_graph *target = gpurun_check_graph(L, 1);
    if (target->has_memory_nodes || capture->has_memory_nodes)
        return gpurun_error(L, "Graph:update: a graph with memory allocation or free nodes cannot "
                               "be updated (the driver fixes their addresses when it "
                               "instantiates): complete a new graph from the builder");
    lua_settop(L, 2);
    CUgraph source = capture->graph;
    /* What the new capture kept, each counted as this graph's user. */
    gpurun_capture_push_kept(L, capture);
    int kept = lua_gettop(L);
    if (!gpurun_graph_source_held(capture, source))
        return update_failed(L, kept, BUILDER_LOST);
    size_t count = 0;
    CUgraphNode *nodes = read_builder_graph(L, capture, source, kept, &count);
    int kernel_nodes = lua_gettop(L);
    int host_callbacks = gpurun_graph_push_host_callbacks(L, kept);
    int host_callbacks_index = lua_gettop(L);
    struct gpurun_graph *graph = gpurun_to_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed) {
        gpurun_release_users(L, kept);
        return gpurun_closed_error(L, gpurun_graph_tag.type_name);
    }

    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult result = CUDA_CALL(cuGraphExecUpdate, graph->exec, source, &info);
    if (result != CUDA_SUCCESS || info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        gpurun_release_users(L, kept);
        push_refusal(L, result, &info, nodes, count, kernel_nodes, kept);
        return 1;
    }
    /* No allocation from here on: the new lists in, the old kept let go. */
    lua_pushvalue(L, kernel_nodes);
    lua_setiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
    lua_pushvalue(L, host_callbacks_index);
    lua_setiuservalue(L, 1, GPURUN_GRAPH_HOST_CALLBACKS_VALUE);
    graph->host_callbacks = host_callbacks;
    if (lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE) == LUA_TTABLE)
        gpurun_graph_let_go(L, graph, lua_gettop(L));
    lua_pop(L, 1);
    graph->keeps_ordered = graph->keeps_ordered || gpurun_graph_has_ordered_buffer(L, kept);
    lua_pushvalue(L, kept);
    lua_setiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE);
    graph->has_loop = capture->has_loop;
    /* The new kernels read the builder's cancel flag. */
    gpurun_cancel_retain(capture->cancel_slot);
    gpurun_cancel_release(graph->cancel_slot);
    graph->cancel_slot = capture->cancel_slot;
    /* Kernels launch what was uploaded: the update reaches them once
     * uploaded again. */
    graph->uploaded = 0;
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg core_functions[] = {
    {"update", graph_update},
    {NULL, NULL}
};

void gpurun_open_graph_update(lua_State *L)
{
    gpurun_push_core_table(L, "gpurun.graph_core");
    gpurun_set_methods_of(L, &gpurun_graph_tag, core_functions);
    lua_pop(L, 1);
}
