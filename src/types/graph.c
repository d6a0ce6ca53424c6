/* gpurun.Graph: what GraphBuilder:complete() instantiates, replayed with
 * graph:launch(stream), updated in place from a new capture of the same
 * pipeline (graph:update(builder)), and changed node by node (graph:nodes(),
 * set_args, set_config, set_enabled).
 *
 * A graph holds every Buffer and Kernel its capture used (user value 1, a
 * sequence) and counts as their user, so the collector cannot free memory a
 * replay touches and an explicit close is refused. It keeps a clone of the
 * captured graph, whose nodes name the executable's (user value 2 lists
 * them), and for each kernel node whose Kernel it knows, that node's launch
 * as it now stands (user value 3: node index -> { kernel, launch }), and
 * the HostCallbacks its host nodes run (user value 4, a sequence): each
 * replay queues one run of each. */
#include "types/graph.h"

#include <string.h>

#include "types/graph_builder.h"
#include "types/host_callback.h"
#include "types/kernel.h"
#include "types/launch.h"
#include "types/stream.h"

const struct gpurun_tag gpurun_graph_tag = {"gpurun.Graph"};

#define KEPT_VALUE 1
#define NODES_VALUE 2
#define KERNEL_NODES_VALUE 3
#define HOST_CALLBACKS_VALUE 4

struct graph {
    struct gpurun_object header;
    CUgraphExec exec;
    CUgraph source;        /* the clone it was instantiated from */
    size_t node_count;
    CUgraphNode *nodes;    /* source's nodes, in cuGraphGetNodes order */
    int has_loop;          /* a while loop: a replay may not end */
    int host_callbacks;    /* HostCallbacks among what it keeps */
    CUcontext context; /* the captured stream's: the graph replays on its device only */
    int device;
};

/* A kernel node's launch as it now stands: set_args and set_config change
 * a part and set the whole. */
struct node_launch {
    CUDA_KERNEL_NODE_PARAMS params;
    void **pointers;
    unsigned char *storage;
};

static struct graph *check_graph(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_graph_tag);
}

/* The Kernel in the sequence at kept_index that launches `function`. */
static int push_kernel_of(lua_State *L, int kept_index, CUfunction function)
{
    lua_Integer count = (lua_Integer)lua_rawlen(L, kept_index);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, kept_index, i);
        const struct gpurun_kernel *kernel = gpurun_to_tagged(L, -1, &gpurun_kernel_tag);
        if (kernel && kernel->function == function)
            return 1;
        lua_pop(L, 1);
    }
    return 0;
}

/* Pushes { node index -> { kernel = Kernel, launch = node_launch } } for the
 * kernel nodes of `nodes` (count of them) whose Kernel is in the sequence
 * at kept_index, with each launch as the node holds it. */
static void push_kernel_nodes(lua_State *L, const CUgraphNode *nodes, size_t count, int kept_index)
{
    kept_index = lua_absindex(L, kept_index);
    lua_newtable(L);
    for (size_t i = 0; i < count; i++) {
        CUgraphNodeType type;
        if (CUDA_CALL(cuGraphNodeGetType, nodes[i], &type) != CUDA_SUCCESS
            || type != CU_GRAPH_NODE_TYPE_KERNEL)
            continue;
        CUDA_KERNEL_NODE_PARAMS params;
        if (CUDA_CALL(cuGraphKernelNodeGetParams, nodes[i], &params) != CUDA_SUCCESS
            || !push_kernel_of(L, kept_index, params.func))
            continue;
        const struct gpurun_kernel *kernel = lua_touserdata(L, -1);
        lua_createtable(L, 0, 2);
        lua_insert(L, -2);
        lua_setfield(L, -2, "kernel");
        size_t pointers_at = (sizeof(struct node_launch) + 15) / 16 * 16;
        size_t storage_at = pointers_at + (size_t)kernel->param_count * sizeof(void *);
        unsigned char *block = lua_newuserdatauv(L, storage_at + kernel->storage_size + 1, 0);
        struct node_launch *launch = (struct node_launch *)block;
        launch->params = params;
        launch->pointers = (void **)(block + pointers_at);
        launch->storage = block + storage_at;
        for (int p = 0; p < kernel->param_count; p++) {
            launch->pointers[p] = launch->storage + kernel->param_offsets[p];
            memcpy(launch->pointers[p], params.kernelParams[p], kernel->param_sizes[p]);
        }
        launch->params.kernelParams = launch->pointers;
        launch->params.extra = NULL;
        lua_setfield(L, -2, "launch");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

/* The HostCallbacks in the sequence of kept objects at kept_index become
 * the graph's (user value 4). */
static void collect_host_callbacks(lua_State *L, int graph_index, int kept_index)
{
    kept_index = lua_absindex(L, kept_index);
    struct graph *graph = lua_touserdata(L, graph_index);
    lua_newtable(L);
    int count = 0;
    lua_Integer kept = (lua_Integer)lua_rawlen(L, kept_index);
    for (lua_Integer i = 1; i <= kept; i++) {
        lua_rawgeti(L, kept_index, i);
        if (gpurun_to_tagged(L, -1, &gpurun_host_callback_tag))
            lua_rawseti(L, -2, ++count);
        else
            lua_pop(L, 1);
    }
    lua_setiuservalue(L, graph_index, HOST_CALLBACKS_VALUE);
    graph->host_callbacks = count;
}

/* builder:complete() -> Graph */
static int builder_complete(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->role != GPURUN_CAPTURE_ORIGIN)
        return gpurun_error(L, "GraphBuilder:complete: a %s builder's work is part of the graph "
                               "of the builder it came from: complete that one",
                            capture->role == GPURUN_CAPTURE_FORK ? "split" : "conditional body");
    if (capture->state != GPURUN_CAPTURE_BUILT)
        return gpurun_error(L, "GraphBuilder:complete: nothing built (it is %s): call "
                               "begin_building(), launch, end_building() first",
                            gpurun_capture_state_name(capture->state));
    struct graph *graph = gpurun_new_object(L, sizeof *graph, 4, &gpurun_graph_tag);
    int graph_index = lua_gettop(L);
    graph->context = capture->stream->context;
    graph->device = capture->stream->device;
    /* A copy, so that the builder can build again; the driver does not copy
     * graphs with conditional nodes, which the Graph then takes over (the
     * builder is idle again). */
    if (capture->has_conditional) {
        graph->source = capture->graph;
        capture->graph = NULL;
        capture->state = GPURUN_CAPTURE_IDLE;
    } else {
        CHECK_CUDA(L, "copying the captured graph", cuGraphClone, &graph->source,
                   capture->graph);
    }
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, graph->source, NULL,
               &graph->node_count);
    graph->nodes = lua_newuserdatauv(L, (graph->node_count + 1) * sizeof(CUgraphNode), 0);
    lua_setiuservalue(L, graph_index, NODES_VALUE);
    size_t count = graph->node_count;
    if (count > 0)
        CHECK_CUDA(L, "listing graph nodes", cuGraphGetNodes, graph->source, graph->nodes,
                   &count);
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = CUDA_CALL(cuGraphInstantiateWithFlags, &graph->exec, graph->source, 0);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "instantiating a graph");
    gpurun_capture_push_kept(L, capture);
    collect_host_callbacks(L, graph_index, -1);
    push_kernel_nodes(L, graph->nodes, graph->node_count, -1);
    lua_setiuservalue(L, graph_index, KERNEL_NODES_VALUE);
    lua_setiuservalue(L, graph_index, KEPT_VALUE);
    graph->has_loop = capture->has_loop;
    graph->header.closed = 0;
    return 1;
}

/* The replay path: identity tags, no metatable look-ups. */
static struct gpurun_stream *replay_stream(lua_State *L, const struct graph *graph, int index)
{
    struct gpurun_stream_object *object = gpurun_check_open(L, index, &gpurun_stream_tag);
    if (object->stream.capture)
        gpurun_error(L, "the stream is being captured by a GraphBuilder: launch on the builder, "
                        "so that the graph keeps what it uses (capture abandoned)");
    if (object->stream.device != graph->device)
        gpurun_error(L, "the graph was captured on device %d and replays only there; the stream "
                        "belongs to device %d", graph->device, object->stream.device);
    return &object->stream;
}

typedef CUresult (*replay_call)(CUgraphExec, CUstream);

/* graph:launch(stream) (runs = 1) and graph:upload(stream), in the graph's
 * context. */
static int replay(lua_State *L, replay_call call, const char *name, const char *what,
                  int runs)
{
    const struct graph *graph = gpurun_check_open(L, 1, &gpurun_graph_tag);
    struct gpurun_stream *stream = replay_stream(L, graph, 2);
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = cuda_checked(call(graph->exec, stream->handle), name);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "%s", what);
    /* A while loop may never end: waits for this stream become interruptible. */
    if (runs)
        stream->unbounded |= graph->has_loop;
    /* Each host node runs once more, on the main thread while it waits. */
    if (runs && graph->host_callbacks) {
        lua_getiuservalue(L, 1, HOST_CALLBACKS_VALUE);
        for (int i = 1; i <= graph->host_callbacks; i++) {
            lua_rawgeti(L, -1, i);
            struct gpurun_host_callback *callback = lua_touserdata(L, -1);
            gpurun_host_call_expect(L, &callback->call, -1, 1);
            lua_pop(L, 1);
        }
        lua_pop(L, 1);
    }
    return 0;
}

static int graph_launch(lua_State *L)
{
    return replay(L, cuda.cuGraphLaunch, "cuGraphLaunch", "launching a graph", 1);
}

static int graph_upload(lua_State *L)
{
    return replay(L, cuda.cuGraphUpload, "cuGraphUpload", "uploading a graph", 0);
}

/* ---- update ------------------------------------------------------------- */

static const char *update_failure(CUgraphExecUpdateResult result)
{
    switch (result) {
    case CU_GRAPH_EXEC_UPDATE_ERROR_TOPOLOGY_CHANGED:
        return "its topology differs (other nodes or dependencies)";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NODE_TYPE_CHANGED:
        return "a node is of another kind";
    case CU_GRAPH_EXEC_UPDATE_ERROR_FUNCTION_CHANGED:
        return "a kernel node launches another kernel";
    case CU_GRAPH_EXEC_UPDATE_ERROR_PARAMETERS_CHANGED:
        return "a node's parameters changed in a way an update cannot carry";
    case CU_GRAPH_EXEC_UPDATE_ERROR_UNSUPPORTED_FUNCTION_CHANGE:
        return "a kernel changed in a way an update cannot carry";
    case CU_GRAPH_EXEC_UPDATE_ERROR_ATTRIBUTES_CHANGED:
        return "a node's attributes changed";
    case CU_GRAPH_EXEC_UPDATE_ERROR_NOT_SUPPORTED:
        return "a node cannot be updated";
    default:
        return "the driver refused it";
    }
}

/* update(builder) -> self: the same pipeline captured again (other scalars,
 * other buffers of the same kind) becomes this graph's, without a new
 * instantiation. A changed topology is refused, and the graph replays as
 * before. Afterwards the graph keeps what the new capture used. */
static int graph_update(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 2);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->role != GPURUN_CAPTURE_ORIGIN || capture->state != GPURUN_CAPTURE_BUILT)
        return gpurun_arg_error(L, 2, "a GraphBuilder that has ended building expected (it is %s%s)",
                                gpurun_capture_state_name(capture->state),
                                capture->role == GPURUN_CAPTURE_ORIGIN ? "" : ", and not one "
                                "that records into another builder's graph");
    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult result = CUDA_CALL(cuGraphExecUpdate, graph->exec, capture->graph, &info);
    if (result != CUDA_SUCCESS || info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS)
        return gpurun_error(L, "Graph:update: the builder's graph cannot update this one: %s "
                               "(%s); the graph replays as before", update_failure(info.result),
                            result == CUDA_SUCCESS ? "CUDA_SUCCESS"
                                                   : lua_pushfstring(L, "CUresult %d", (int)result));
    /* What the new capture kept, then let go of what the old one did. */
    gpurun_capture_push_kept(L, capture);
    int kept = lua_gettop(L);
    collect_host_callbacks(L, 1, kept);
    size_t count = 0;
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, capture->graph, NULL, &count);
    CUgraphNode *nodes = gpurun_push_staging(L, (count + 1) * sizeof *nodes);
    if (count > 0)
        CHECK_CUDA(L, "listing graph nodes", cuGraphGetNodes, capture->graph, nodes, &count);
    push_kernel_nodes(L, nodes, count, kept);
    lua_setiuservalue(L, 1, KERNEL_NODES_VALUE);
    lua_pop(L, 1);
    if (lua_getiuservalue(L, 1, KEPT_VALUE) == LUA_TTABLE)
        gpurun_release_users(L, -1);
    lua_pop(L, 1);
    lua_setiuservalue(L, 1, KEPT_VALUE);
    graph->has_loop = capture->has_loop;
    lua_settop(L, 1);
    return 1;
}

/* ---- nodes -------------------------------------------------------------- */

static const char *node_kind(CUgraphNodeType type)
{
    static const char *const kinds[] = {
        [CU_GRAPH_NODE_TYPE_KERNEL] = "kernel", [CU_GRAPH_NODE_TYPE_MEMCPY] = "memcpy",
        [CU_GRAPH_NODE_TYPE_MEMSET] = "memset", [CU_GRAPH_NODE_TYPE_HOST] = "host",
        [CU_GRAPH_NODE_TYPE_GRAPH] = "graph", [CU_GRAPH_NODE_TYPE_EMPTY] = "empty",
        [CU_GRAPH_NODE_TYPE_WAIT_EVENT] = "wait_event",
        [CU_GRAPH_NODE_TYPE_EVENT_RECORD] = "event_record",
        [CU_GRAPH_NODE_TYPE_EXT_SEMAS_SIGNAL] = "semaphore_signal",
        [CU_GRAPH_NODE_TYPE_EXT_SEMAS_WAIT] = "semaphore_wait",
        [CU_GRAPH_NODE_TYPE_MEM_ALLOC] = "mem_alloc", [CU_GRAPH_NODE_TYPE_MEM_FREE] = "mem_free",
        [CU_GRAPH_NODE_TYPE_BATCH_MEM_OP] = "batch_mem_op",
        [CU_GRAPH_NODE_TYPE_CONDITIONAL] = "conditional",
    };
    if ((size_t)type < sizeof kinds / sizeof kinds[0] && kinds[type])
        return kinds[type];
    return "other";
}

static size_t node_index(const struct graph *graph, CUgraphNode node)
{
    for (size_t i = 0; i < graph->node_count; i++)
        if (graph->nodes[i] == node)
            return i + 1;
    return 0;
}

static void set_dims(lua_State *L, int table, const char *key, unsigned int x, unsigned int y,
                     unsigned int z)
{
    table = lua_absindex(L, table);
    lua_createtable(L, 3, 0);
    lua_pushinteger(L, x);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, y);
    lua_rawseti(L, -2, 2);
    lua_pushinteger(L, z);
    lua_rawseti(L, -2, 3);
    lua_setfield(L, table, key);
}

/* grid, block and shmem_size of a kernel node, as its launch now stands. */
static void set_node_shape(lua_State *L, int table, const CUDA_KERNEL_NODE_PARAMS *params)
{
    table = lua_absindex(L, table);
    set_dims(L, table, "grid", params->gridDimX, params->gridDimY, params->gridDimZ);
    set_dims(L, table, "block", params->blockDimX, params->blockDimY, params->blockDimZ);
    lua_pushinteger(L, params->sharedMemBytes);
    lua_setfield(L, table, "shmem_size");
}

/* nodes() -> { { index =, kind =, name = (kernel nodes), kernel, grid,
 * block, shmem_size (kernel nodes of a gpurun.Kernel), dependencies =
 * { index... }, enabled = (kernel, memcpy and memset nodes) }, ... }: the
 * graph's top-level nodes, in a fixed order (conditional bodies not listed). */
static int graph_nodes(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    lua_getiuservalue(L, 1, KERNEL_NODES_VALUE);
    int kernel_nodes = lua_gettop(L);
    /* Room for every node as a dependency, with its edge's data: the driver
     * refuses to drop edge data (programmatic edges have some). */
    size_t room = graph->node_count + 1;
    CUgraphNode *dependencies =
        gpurun_push_staging(L, room * (sizeof(CUgraphNode) + sizeof(CUgraphEdgeData)));
    CUgraphEdgeData *edges = (CUgraphEdgeData *)(dependencies + room);
    lua_createtable(L, (int)graph->node_count, 0);
    for (size_t i = 0; i < graph->node_count; i++) {
        CUgraphNode node = graph->nodes[i];
        CUgraphNodeType type;
        CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &type);
        lua_createtable(L, 0, 9);
        lua_pushinteger(L, (lua_Integer)i + 1);
        lua_setfield(L, -2, "index");
        lua_pushstring(L, node_kind(type));
        lua_setfield(L, -2, "kind");
        if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
            if (lua_rawgeti(L, kernel_nodes, (lua_Integer)i + 1) == LUA_TTABLE) {
                lua_getfield(L, -1, "kernel");
                lua_setfield(L, -3, "kernel");
                lua_getfield(L, -2, "kernel");
                lua_pushstring(L, ((const struct gpurun_kernel *)lua_touserdata(L, -1))->name);
                lua_setfield(L, -4, "name");
                lua_getfield(L, -2, "launch");
                set_node_shape(L, -4, &((const struct node_launch *)lua_touserdata(L, -1))->params);
                lua_pop(L, 2);
            } else {
                CUDA_KERNEL_NODE_PARAMS params;
                const char *name = NULL;
                if (CUDA_CALL(cuGraphKernelNodeGetParams, node, &params) == CUDA_SUCCESS
                    && CUDA_CALL(cuFuncGetName, &name, params.func) == CUDA_SUCCESS && name) {
                    lua_pushstring(L, name);
                    lua_setfield(L, -3, "name");
                }
            }
            lua_pop(L, 1);
        }
        if (type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY
            || type == CU_GRAPH_NODE_TYPE_MEMSET) {
            unsigned int enabled = 1;
            CHECK_CUDA(L, "reading whether a graph node is enabled", cuGraphNodeGetEnabled,
                       graph->exec, node, &enabled);
            lua_pushboolean(L, enabled != 0);
            lua_setfield(L, -2, "enabled");
        }
        size_t count = room;
        CHECK_CUDA(L, "reading a graph node's dependencies", cuGraphNodeGetDependencies, node,
                   dependencies, edges, &count);
        lua_createtable(L, (int)count, 0);
        for (size_t d = 0; d < count; d++) {
            lua_pushinteger(L, (lua_Integer)node_index(graph, dependencies[d]));
            lua_rawseti(L, -2, (lua_Integer)d + 1);
        }
        lua_setfield(L, -2, "dependencies");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* The node index at arg, 1-based. */
static CUgraphNode check_node(lua_State *L, const struct graph *graph, int arg)
{
    lua_Integer index = gpurun_check_integer(L, arg, "integer node index");
    if (index < 1 || (size_t)index > graph->node_count)
        gpurun_arg_error(L, arg, "node index %I out of range (1..%d)", (LUAI_UACINT)index,
                         (int)graph->node_count);
    return graph->nodes[index - 1];
}

/* Pushes the kernel and node_launch of kernel node `arg`, or raises. */
static struct node_launch *check_kernel_node(lua_State *L, const struct graph *graph, int arg,
                                             const struct gpurun_kernel **kernel)
{
    check_node(L, graph, arg);
    lua_getiuservalue(L, 1, KERNEL_NODES_VALUE);
    if (lua_rawgeti(L, -1, lua_tointeger(L, arg)) != LUA_TTABLE)
        gpurun_arg_error(L, arg, "a kernel node of a gpurun.Kernel expected: node %d is %s",
                         (int)lua_tointeger(L, arg), "not one (see graph:nodes())");
    lua_getfield(L, -1, "kernel");
    *kernel = lua_touserdata(L, -1);
    gpurun_check_kernel_open(L, *kernel);
    lua_getfield(L, -2, "launch");
    return lua_touserdata(L, -1);
}

static void set_kernel_node(lua_State *L, const struct graph *graph, int arg,
                            const struct node_launch *launch)
{
    CHECK_CUDA(L, "setting a kernel node of an executable graph", cuGraphExecKernelNodeSetParams,
               graph->exec, graph->nodes[lua_tointeger(L, arg) - 1], &launch->params);
}

/* Counts the Buffer at index as the graph's (once), so that it lives as
 * long as a replay may touch it. */
static void keep(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    lua_getiuservalue(L, 1, KEPT_VALUE);
    lua_Integer count = (lua_Integer)lua_rawlen(L, -1);
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, -1, i);
        int same = lua_rawequal(L, -1, index);
        lua_pop(L, 1);
        if (same) {
            lua_pop(L, 1);
            return;
        }
    }
    lua_pushvalue(L, index);
    lua_rawseti(L, -2, count + 1);
    gpurun_adjust_users(L, index, +1);
    lua_pop(L, 1);
}

/* set_args(i, args...) -> self: new arguments for kernel node i, checked
 * against its kernel as a launch's are. Buffers passed are kept by the graph
 * from then on (those the node no longer uses stay kept until an update or
 * close). */
static int graph_set_args(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    int given = lua_gettop(L) - 2;
    const struct gpurun_kernel *kernel;
    struct node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    if (given != kernel->param_count)
        return gpurun_error(L, "kernel '%s' takes %d parameter%s, got %d", kernel->name,
                            kernel->param_count, kernel->param_count == 1 ? "" : "s", given);
    /* Packed into scratch first: an error leaves the node as it was. */
    unsigned char *packed = gpurun_push_staging(L, kernel->storage_size + 1);
    for (int i = 0; i < given; i++)
        gpurun_pack_argument(L, kernel, i, 3 + i, packed + kernel->param_offsets[i], NULL);
    for (int i = 0; i < given; i++)
        if (gpurun_to_tagged(L, 3 + i, &gpurun_buffer_tag))
            keep(L, 3 + i);
    memcpy(launch->storage, packed, kernel->storage_size);
    set_kernel_node(L, graph, 2, launch);
    lua_settop(L, 1);
    return 1;
}

/* set_arg(i, k, value) -> self: argument k of kernel node i alone, the
 * others as the node has them (cheaper than set_args, and needs none of
 * the buffers the node was captured with: gpurun.pipeline sets a scalar so,
 * also in nodes whose buffers a capture made and freed). */
static int graph_set_arg(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    const struct gpurun_kernel *kernel;
    lua_settop(L, 4);
    struct node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    lua_Integer k = gpurun_check_integer(L, 3, "integer argument position");
    if (k < 1 || k > kernel->param_count)
        return gpurun_arg_error(L, 3, "argument position %I out of range (kernel '%s' takes %d)",
                                (LUAI_UACINT)k, kernel->name, kernel->param_count);
    int i = (int)k - 1;
    unsigned char packed[16];
    unsigned char *slot = kernel->param_sizes[i] <= sizeof packed
                              ? packed
                              : gpurun_push_staging(L, kernel->param_sizes[i]);
    gpurun_pack_argument(L, kernel, i, 4, slot, NULL);
    if (gpurun_to_tagged(L, 4, &gpurun_buffer_tag))
        keep(L, 4);
    memcpy(launch->storage + kernel->param_offsets[i], slot, kernel->param_sizes[i]);
    set_kernel_node(L, graph, 2, launch);
    lua_settop(L, 1);
    return 1;
}

/* set_config(i, config) -> self: a new grid, block and shared memory for
 * kernel node i (launch attributes cannot be set on a node). */
static int graph_set_config(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    check_node(L, graph, 2);
    const struct gpurun_launch_config *config = gpurun_check_config(L, 3);
    const struct gpurun_kernel *kernel;
    struct node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    if (config->attribute_count > 0)
        return gpurun_arg_error(L, 3, "a LaunchConfig without cluster, cooperative or "
                                      "programmatic attributes expected: a node's attributes "
                                      "are set when it is captured");
    gpurun_check_launch(L, kernel, config, kernel->param_count);
    CUDA_KERNEL_NODE_PARAMS *params = &launch->params;
    params->gridDimX = config->blocks[0];
    params->gridDimY = config->blocks[1];
    params->gridDimZ = config->blocks[2];
    params->blockDimX = config->block[0];
    params->blockDimY = config->block[1];
    params->blockDimZ = config->block[2];
    params->sharedMemBytes = config->shmem_size;
    set_kernel_node(L, graph, 2, launch);
    lua_settop(L, 1);
    return 1;
}

/* set_enabled(i, on) -> self: a disabled node does nothing at replays
 * (kernel, memcpy and memset nodes). */
static int graph_set_enabled(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    CUgraphNode node = check_node(L, graph, 2);
    if (lua_type(L, 3) != LUA_TBOOLEAN)
        return gpurun_type_error(L, 3, "boolean");
    CUgraphNodeType type;
    CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &type);
    if (type != CU_GRAPH_NODE_TYPE_KERNEL && type != CU_GRAPH_NODE_TYPE_MEMCPY
        && type != CU_GRAPH_NODE_TYPE_MEMSET)
        return gpurun_arg_error(L, 2, "a kernel, memcpy or memset node expected: node %d is %s",
                                (int)lua_tointeger(L, 2), node_kind(type));
    CHECK_CUDA(L, "enabling or disabling a graph node", cuGraphNodeSetEnabled, graph->exec, node,
               lua_toboolean(L, 3) ? 1 : 0);
    lua_settop(L, 1);
    return 1;
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
    if (graph->source)
        (void)CUDA_CALL(cuGraphDestroy, graph->source);
    graph->source = NULL;
    graph->node_count = 0;
    if (lua_getiuservalue(L, 1, KEPT_VALUE) == LUA_TTABLE)
        gpurun_release_users(L, -1);
    lua_pop(L, 1);
    graph->host_callbacks = 0;
    for (int value = KEPT_VALUE; value <= HOST_CALLBACKS_VALUE; value++) {
        lua_pushnil(L);
        lua_setiuservalue(L, 1, value);
    }
    return 0;
}

static int graph_node_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)((struct graph *)lua_touserdata(L, 1))->node_count);
    return 1;
}

static int graph_has_loop(lua_State *L)
{
    lua_pushboolean(L, ((struct graph *)lua_touserdata(L, 1))->has_loop);
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
    {"update", graph_update},
    {"nodes", graph_nodes},
    {"set_args", graph_set_args},
    {"set_arg", graph_set_arg},
    {"set_config", graph_set_config},
    {"set_enabled", graph_set_enabled},
    {"close", graph_close},
    {NULL, NULL}
};

static const luaL_Reg graph_fields[] = {
    {"node_count", graph_node_count},
    {"has_loop", graph_has_loop},
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
