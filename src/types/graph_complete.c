/* GraphBuilder:complete(): a builder's captured graph made into a
 * gpurun.Graph, checked (device-launch rules), instantiated and uploaded.
 * graph.c is the Graph itself; this file only makes them. */
#include "types/graph.h"

#include <string.h>

#include "types/buffer/buffer.h"
#include "types/graph_builder.h"
#include "types/launch.h"
#include "types/stream.h"

/* The builder at 1, still an origin with a graph built: checked again
 * after each allocation, which can run a finalizer that closes it. */
static struct gpurun_capture *check_built(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->role != GPURUN_CAPTURE_ORIGIN)
        gpurun_error(L, "GraphBuilder:complete: a %s builder's work is part of the graph "
                        "of the builder it came from: complete that one",
                     capture->role == GPURUN_CAPTURE_FORK ? "split" : "conditional body");
    if (capture->state != GPURUN_CAPTURE_BUILT)
        gpurun_error(L, "GraphBuilder:complete: nothing built (it is %s): call "
                        "begin_building(), launch, end_building() first",
                     gpurun_capture_state_name(capture->state));
    return capture;
}

/* Takes over the buffers the capture's allocation nodes make: the sequence
 * at the top (popped), and a table of their addresses.
 *
 * Memory nodes: a Buffer made on a builder of the capture (gpurun.empty(n,
 * dtype, { stream = builder })) is an allocation node, and closing it while
 * the capture builds a free node. One still open when the capture ended
 * belongs to the graph: each launch makes its memory anew at the same
 * address, so a launch is refused while the last launch's is still held by
 * an open buffer, unless the graph was completed with
 * { auto_free_on_launch = true }, where each launch frees the last one's
 * first. What a closed buffer no longer holds, the graph frees after each
 * launch itself. Such graphs cannot be copied, so complete() takes the
 * builder's graph over, as for conditional nodes. Another graph's
 * allocation closed on a builder of the capture (a free node of it) is in
 * the sequence too, marked as one the graph frees. */
static void take_allocations(lua_State *L, struct gpurun_graph *graph, int graph_index)
{
    int sequence = lua_gettop(L);
    size_t count = lua_rawlen(L, sequence);
    struct gpurun_graph_allocation *allocations =
        lua_newuserdatauv(L, (count + 1) * sizeof *allocations, 0);
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, sequence, (lua_Integer)i + 1);
        struct gpurun_buffer *buffer = lua_touserdata(L, -1);
        allocations[i].buffer = buffer;
        allocations[i].address = buffer->graph_address;
        allocations[i].frees = buffer->freed_in_graph;
        if (!buffer->freed_in_graph)
            gpurun_buffer_graph_completed(L, -1, graph->auto_free);
        lua_pop(L, 1);
    }
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_ADDRESSES_VALUE);
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_ALLOCATIONS_VALUE);
    graph->allocations = allocations;
    graph->allocation_count = count;
}

/* What the driver lets a graph that kernels launch hold
 * (CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH), checked before the graph is
 * copied so that each refusal says which rule it broke. */
static void check_device_launch(lua_State *L, const struct gpurun_capture *capture, int auto_free)
{
    if (auto_free)
        gpurun_error(L, "GraphBuilder:complete: device_launch and auto_free_on_launch cannot be "
                        "combined (a graph launched from the device allocates nothing)");
    if (capture->has_memory_nodes)
        gpurun_error(L, "GraphBuilder:complete: a graph for device launch cannot allocate or free "
                        "memory: make its buffers before the capture, not on the builder");
    if (capture->has_conditional)
        gpurun_error(L, "GraphBuilder:complete: a graph for device launch cannot hold conditional "
                        "nodes");
}

/* Its nodes: kernels, copies, fills (and child graphs), at least one. */
static void check_device_launch_nodes(lua_State *L, const struct gpurun_graph *graph)
{
    int work = 0;
    for (size_t i = 0; i < graph->node_count; i++) {
        CUgraphNodeType type;
        CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, graph->nodes[i], &type);
        if (type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY
            || type == CU_GRAPH_NODE_TYPE_MEMSET)
            work = 1;
        else if (type != CU_GRAPH_NODE_TYPE_GRAPH)
            gpurun_error(L, "GraphBuilder:complete: a graph for device launch holds only kernel, "
                            "memcpy and memset nodes; node %d is a %s node", (int)i + 1,
                         gpurun_graph_node_kind(type));
    }
    if (!work)
        gpurun_error(L, "GraphBuilder:complete: a graph for device launch needs a kernel, memcpy "
                        "or memset node; this one has none");
}

static const char *instantiate_failure(CUgraphInstantiateResult result)
{
    switch (result) {
    case CUDA_GRAPH_INSTANTIATE_INVALID_STRUCTURE:
        return "its structure is invalid";
    case CUDA_GRAPH_INSTANTIATE_NODE_OPERATION_NOT_SUPPORTED:
        return "a node does what a graph launched from the device cannot (a kernel that "
               "launches kernels itself, a copy of host memory that is not mapped)";
    case CUDA_GRAPH_INSTANTIATE_MULTIPLE_CTXS_NOT_SUPPORTED:
        return "its nodes belong to more than one context";
    default:
        return NULL;
    }
}

/* Instantiates graph->source with `flags`, uploading on `upload` (NULL:
 * not); raises naming the node the driver blames. */
static void instantiate(lua_State *L, struct gpurun_graph *graph, cuuint64_t flags,
                        CUstream upload, int moved)
{
    CUDA_GRAPH_INSTANTIATE_PARAMS params;
    memset(&params, 0, sizeof params);
    params.flags = flags | (upload ? CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD : 0);
    params.hUploadStream = upload;
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = CUDA_CALL(cuGraphInstantiateWithParams, &graph->exec, graph->source,
                                &params);
    gpurun_leave_context(previous);
    if (result == CUDA_SUCCESS)
        return;
    graph->exec = NULL;
    if (moved) {
        (void)CUDA_CALL(cuGraphDestroy, graph->source);
        graph->source = NULL;
        cuda_last_failed_result = result;
        cuda_last_failed_call = "cuGraphInstantiateWithParams";
    }
    const char *step = flags & CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH
                           ? "instantiating a graph for device launch"
                           : "instantiating a graph";
    const char *why = instantiate_failure(params.result_out);
    size_t blamed = 0;
    for (size_t i = 0; why && i < graph->node_count && !blamed; i++)
        if (graph->nodes[i] == params.hErrNode_out)
            blamed = i + 1;
    if (why && blamed)
        gpurun_cuda_error(L, "%s: %s (node %d)", step, why, (int)blamed);
    if (why)
        gpurun_cuda_error(L, "%s: %s", step, why);
    gpurun_cuda_error(L, "%s", step);
}

/* builder:complete([{ auto_free_on_launch = false, device_launch = false,
 * use_node_priority = false, upload_stream = nil }]) -> Graph; with
 * use_node_priority its kernel nodes run at the priorities their launches
 * gave (LaunchConfig{ priority = }) rather than at the launch stream's. */
static int builder_complete(lua_State *L)
{
    /* check is graph_check.lua's (taken out before this call), named so
     * that the refusal of an unknown option lists every one. */
    static const char *const known[] = {"auto_free_on_launch", "check", "device_launch",
                                        "use_node_priority", "upload_stream", NULL};
    check_built(L);
    int has_options = gpurun_check_options(L, 2, known);
    int auto_free = gpurun_opt_boolean_field(L, 2, "auto_free_on_launch", 0);
    int device_launch = gpurun_opt_boolean_field(L, 2, "device_launch", 0);
    int node_priority = gpurun_opt_boolean_field(L, 2, "use_node_priority", 0);
    /* The upload stream (or nil) stays at 2. */
    if (has_options) {
        lua_pushliteral(L, "upload_stream");
        lua_rawget(L, 2);
    } else {
        lua_pushnil(L);
    }
    if (!lua_isnil(L, -1) && !gpurun_to_tagged(L, -1, &gpurun_stream_tag)) {
        const char *got = gpurun_type_name(L, -1);
        gpurun_arg_error(L, 2, "option 'upload_stream' must be a gpurun.Stream, got %s", got);
    }
    lua_replace(L, 2);
    lua_settop(L, 2);
    int upload = !lua_isnil(L, 2);
    if (device_launch)
        check_device_launch(L, check_built(L), auto_free);
    struct gpurun_graph *graph =
        gpurun_new_object(L, sizeof *graph, GPURUN_GRAPH_USER_VALUES, &gpurun_graph_tag);
    int graph_index = lua_gettop(L);
    struct gpurun_capture *capture = check_built(L);
    graph->context = capture->stream->context;
    graph->device = capture->stream->device;
    gpurun_push_context_keeper(L, 1);
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_CONTEXT_VALUE);
    /* A copy, so that the builder can build again; the driver copies no
     * graph with conditional or memory nodes, which the Graph then takes
     * over (the builder is idle again). */
    int moved = capture->has_conditional || capture->has_memory_nodes;
    if (moved) {
        graph->source = capture->graph;
        capture->graph = NULL;
        capture->state = GPURUN_CAPTURE_IDLE;
    } else {
        CHECK_CUDA(L, "copying the captured graph", cuGraphClone, &graph->source,
                   capture->graph);
    }
    /* The Graph's own from here: its close (at collection too) frees it. */
    graph->header.closed = 0;
    graph->has_loop = capture->has_loop;
    graph->cancel_slot = capture->cancel_slot;
    gpurun_cancel_retain(graph->cancel_slot);
    graph->has_conditional = capture->has_conditional;
    size_t count = 0;
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, graph->source, NULL, &count);
    graph->nodes = lua_newuserdatauv(L, (count + 1) * sizeof(CUgraphNode), 0);
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_NODES_VALUE);
    if (count > 0)
        CHECK_CUDA(L, "listing graph nodes", cuGraphGetNodes, graph->source, graph->nodes,
                   &count);
    graph->node_count = count;
    if (device_launch)
        check_device_launch_nodes(L, graph);
    /* Checked after the allocations above, which may run a finalizer. */
    CUstream upload_stream = upload ? gpurun_graph_replay_stream(L, graph, 2)->handle : NULL;
    instantiate(L, graph,
                (auto_free ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0)
                    | (device_launch ? CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH : 0)
                    | (node_priority ? CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY : 0),
                upload_stream, moved);
    graph->device_launch = device_launch;
    graph->node_priority = node_priority;
    graph->uploaded = upload;
    /* What the capture kept; a builder closed meanwhile let it go, and a
     * graph that kept nothing would replay memory freed under it. */
    struct gpurun_graph_builder *builder = lua_touserdata(L, 1);
    gpurun_capture_push_kept(L, capture);
    graph->keeps_ordered = gpurun_graph_has_ordered_buffer(L, lua_gettop(L));
    graph->host_callbacks = gpurun_graph_push_host_callbacks(L, -1);
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_HOST_CALLBACKS_VALUE);
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_KEPT_VALUE);
    if (builder->header.closed)
        return gpurun_closed_error(L, gpurun_builder_tag.type_name);
    lua_getiuservalue(L, graph_index, GPURUN_GRAPH_KEPT_VALUE);
    if (!gpurun_graph_push_kernel_nodes(L, graph->nodes, graph->node_count, -1, NULL, graph->source))
        return gpurun_error(L, "GraphBuilder:complete: the kernel nodes of the graph could "
                               "not be read");
    lua_setiuservalue(L, graph_index, GPURUN_GRAPH_KERNEL_NODES_VALUE);
    lua_settop(L, graph_index);
    graph->has_memory_nodes = capture->has_memory_nodes;
    graph->auto_free = auto_free;
    gpurun_capture_push_allocations(L, capture);
    take_allocations(L, graph, graph_index);
    lua_settop(L, graph_index);
    return 1;
}

static const luaL_Reg builder_methods[] = {
    {"complete", builder_complete},
    {NULL, NULL}
};

void gpurun_open_graph_complete(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_builder_tag, builder_methods);
    /* Also in gpurun.graph_core: lua/gpurun/builtin/graph_check.lua's
     * complete, which may check the graph first, calls it. */
    gpurun_push_core_table(L, "gpurun.graph_core");
    luaL_getmetatable(L, gpurun_builder_tag.type_name);
    lua_getfield(L, -1, "methods");
    lua_getfield(L, -1, "complete");
    lua_setfield(L, -4, "complete");
    lua_pop(L, 3);
}
