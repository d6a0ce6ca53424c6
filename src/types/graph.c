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
 * the HostCallbacks its host nodes run (user value 6, a sequence): each
 * replay queues one run of each.
 *
 * Memory nodes: a Buffer made on a builder of the capture (gpurun.empty(n,
 * dtype, { stream = builder })) is an allocation node, and closing it while
 * the capture builds a free node. One still open when the capture ended
 * belongs to the graph (user value 4 lists them, 5 their addresses): each
 * launch makes its memory anew at the same address, so a launch is refused
 * while the last launch's is still held by an open buffer, unless the
 * graph was completed with { auto_free_on_launch = true }, where each launch
 * frees the last one's first. What a closed buffer no longer holds, the
 * graph frees after each launch itself. Such graphs cannot be copied, so
 * complete() takes the builder's graph over, as for conditional nodes. */
#include "types/graph.h"

#include <stdio.h>
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
#define ALLOCATIONS_VALUE 4  /* the Buffers its allocation nodes make, in order */
#define ADDRESSES_VALUE 5    /* their nodes' addresses (struct allocation) */
#define HOST_CALLBACKS_VALUE 6
#define LAUNCHED_ON_VALUE 7  /* 7..: the streams of launched_on */
#define LAUNCH_STREAMS 4
#define USER_VALUES (LAUNCHED_ON_VALUE + LAUNCH_STREAMS - 1)

struct allocation {
    struct gpurun_buffer *buffer; /* kept by ALLOCATIONS_VALUE */
    CUdeviceptr address;
};

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
    int has_memory_nodes;
    int auto_free;         /* instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
    size_t allocation_count;
    struct allocation *allocations;
    /* It keeps buffers of stream-ordered memory, whose frees must wait for
     * its replays: the streams it was launched on (held by user values),
     * told to those buffers when it lets go of them. */
    int keeps_ordered;
    int launches_lost;
    struct gpurun_stream *launched_on[LAUNCH_STREAMS];
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

/* A kernel node of a gpurun.Kernel, while push_kernel_nodes works. */
struct kernel_node {
    lua_Integer kept_at;      /* the Kernel's place in the kept sequence; 0: not one */
    struct node_launch *launch;
};

/* Whether `source` is still what `capture` (NULL: nobody) holds. */
static int source_held(const struct gpurun_capture *capture, CUgraph source)
{
    return capture == NULL
           || (capture->state == GPURUN_CAPTURE_BUILT && capture->graph == source);
}

/* Pushes { node index -> { kernel = Kernel, launch = node_launch } } for the
 * kernel nodes of `nodes` (count of them, of the graph `source`) whose
 * Kernel is in the sequence at kept_index, with each launch as the node
 * holds it. When the graph is a builder's (capture), a finalizer run by an
 * allocation here can close the builder and destroy the graph: so the
 * tables are made first, the nodes read after, and 0 is returned (nothing
 * pushed) when the builder no longer holds the graph; else 1. */
static int push_kernel_nodes(lua_State *L, const CUgraphNode *nodes, size_t count, int kept_index,
                             const struct gpurun_capture *capture, CUgraph source)
{
    kept_index = lua_absindex(L, kept_index);
    int top = lua_gettop(L);
    struct kernel_node *found = gpurun_push_staging(L, (count + 1) * sizeof *found);
    if (!source_held(capture, source))
        goto lost;
    /* Which nodes launch a Kept kernel: no allocation. */
    for (size_t i = 0; i < count; i++) {
        found[i].kept_at = 0;
        found[i].launch = NULL;
        CUgraphNodeType type;
        CUDA_KERNEL_NODE_PARAMS params;
        if (CUDA_CALL(cuGraphNodeGetType, nodes[i], &type) != CUDA_SUCCESS
            || type != CU_GRAPH_NODE_TYPE_KERNEL
            || CUDA_CALL(cuGraphKernelNodeGetParams, nodes[i], &params) != CUDA_SUCCESS)
            continue;
        lua_Integer kept_count = (lua_Integer)lua_rawlen(L, kept_index);
        for (lua_Integer k = 1; k <= kept_count && !found[i].kept_at; k++) {
            lua_rawgeti(L, kept_index, k);
            const struct gpurun_kernel *kernel = gpurun_to_tagged(L, -1, &gpurun_kernel_tag);
            if (kernel && kernel->function == params.func)
                found[i].kept_at = k;
            lua_pop(L, 1);
        }
    }
    /* The tables and the launches' blocks. */
    lua_newtable(L);
    for (size_t i = 0; i < count; i++) {
        if (!found[i].kept_at)
            continue;
        lua_rawgeti(L, kept_index, found[i].kept_at);
        const struct gpurun_kernel *kernel = lua_touserdata(L, -1); /* anchored in kept */
        lua_createtable(L, 0, 2);
        lua_insert(L, -2);
        lua_setfield(L, -2, "kernel");
        size_t pointers_at = (sizeof(struct node_launch) + 15) / 16 * 16;
        size_t storage_at = pointers_at + (size_t)kernel->param_count * sizeof(void *);
        unsigned char *block = lua_newuserdatauv(L, storage_at + kernel->storage_size + 1, 0);
        found[i].launch = (struct node_launch *)block;
        found[i].launch->pointers = (void **)(block + pointers_at);
        found[i].launch->storage = block + storage_at;
        lua_setfield(L, -2, "launch");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (!source_held(capture, source))
        goto lost;
    /* The launches, read from the nodes: no allocation from here on. */
    for (size_t i = 0; i < count; i++) {
        if (!found[i].kept_at)
            continue;
        lua_rawgeti(L, kept_index, found[i].kept_at);
        const struct gpurun_kernel *kernel = lua_touserdata(L, -1);
        lua_pop(L, 1);
        struct node_launch *launch = found[i].launch;
        if (CUDA_CALL(cuGraphKernelNodeGetParams, nodes[i], &launch->params) != CUDA_SUCCESS)
            goto lost;
        for (int p = 0; p < kernel->param_count; p++) {
            launch->pointers[p] = launch->storage + kernel->param_offsets[p];
            memcpy(launch->pointers[p], launch->params.kernelParams[p], kernel->param_sizes[p]);
        }
        launch->params.kernelParams = launch->pointers;
        launch->params.extra = NULL;
    }
    lua_remove(L, top + 1); /* the staging */
    return 1;
lost:
    lua_settop(L, top);
    return 0;
}

/* Pushes the sequence of the HostCallbacks in the sequence of kept objects
 * at kept_index (what becomes the graph's user value 6); returns their count. */
static int push_host_callbacks(lua_State *L, int kept_index)
{
    kept_index = lua_absindex(L, kept_index);
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
    return count;
}

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

/* Whether the sequence at index holds a Buffer of stream-ordered memory. */
static int has_ordered_buffer(lua_State *L, int index)
{
    lua_Integer count = (lua_Integer)lua_rawlen(L, index);
    int found = 0;
    for (lua_Integer i = 1; i <= count && !found; i++) {
        lua_rawgeti(L, index, i);
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, -1, &gpurun_buffer_tag);
        found = buffer && gpurun_buffer_owner(buffer)->ordered;
        lua_pop(L, 1);
    }
    return found;
}

/* Takes over the buffers the capture's allocation nodes make: the sequence
 * at the top (popped), and a table of their addresses. */
static void take_allocations(lua_State *L, struct graph *graph, int graph_index)
{
    int sequence = lua_gettop(L);
    size_t count = lua_rawlen(L, sequence);
    struct allocation *allocations =
        lua_newuserdatauv(L, (count + 1) * sizeof *allocations, 0);
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, sequence, (lua_Integer)i + 1);
        struct gpurun_buffer *buffer = lua_touserdata(L, -1);
        allocations[i].buffer = buffer;
        allocations[i].address = buffer->graph_address;
        gpurun_buffer_graph_completed(L, -1);
        lua_pop(L, 1);
    }
    lua_setiuservalue(L, graph_index, ADDRESSES_VALUE);
    lua_setiuservalue(L, graph_index, ALLOCATIONS_VALUE);
    graph->allocations = allocations;
    graph->allocation_count = count;
}

/* builder:complete([{ auto_free_on_launch = false }]) -> Graph */
static int builder_complete(lua_State *L)
{
    static const char *const known[] = {"auto_free_on_launch", NULL};
    check_built(L);
    gpurun_check_options(L, 2, known);
    int auto_free = gpurun_opt_boolean_field(L, 2, "auto_free_on_launch", 0);
    lua_settop(L, 1);
    check_built(L);
    struct graph *graph = gpurun_new_object(L, sizeof *graph, USER_VALUES, &gpurun_graph_tag);
    int graph_index = lua_gettop(L);
    struct gpurun_capture *capture = check_built(L);
    graph->context = capture->stream->context;
    graph->device = capture->stream->device;
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
    size_t count = 0;
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, graph->source, NULL, &count);
    graph->nodes = lua_newuserdatauv(L, (count + 1) * sizeof(CUgraphNode), 0);
    lua_setiuservalue(L, graph_index, NODES_VALUE);
    if (count > 0)
        CHECK_CUDA(L, "listing graph nodes", cuGraphGetNodes, graph->source, graph->nodes,
                   &count);
    graph->node_count = count;
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = CUDA_CALL(cuGraphInstantiateWithFlags, &graph->exec, graph->source,
                                auto_free ? CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH : 0);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS) {
        graph->exec = NULL;
        if (moved) {
            (void)CUDA_CALL(cuGraphDestroy, graph->source);
            graph->source = NULL;
            cuda_last_failed_result = result;
            cuda_last_failed_call = "cuGraphInstantiateWithFlags";
        }
        gpurun_cuda_error(L, "instantiating a graph");
    }
    /* What the capture kept; a builder closed meanwhile let it go, and a
     * graph that kept nothing would replay memory freed under it. */
    struct gpurun_graph_builder *builder = lua_touserdata(L, 1);
    gpurun_capture_push_kept(L, capture);
    graph->keeps_ordered = has_ordered_buffer(L, lua_gettop(L));
    graph->host_callbacks = push_host_callbacks(L, -1);
    lua_setiuservalue(L, graph_index, HOST_CALLBACKS_VALUE);
    lua_setiuservalue(L, graph_index, KEPT_VALUE);
    if (builder->header.closed)
        return gpurun_closed_error(L, gpurun_builder_tag.type_name);
    lua_getiuservalue(L, graph_index, KEPT_VALUE);
    if (!push_kernel_nodes(L, graph->nodes, graph->node_count, -1, NULL, graph->source))
        return gpurun_error(L, "GraphBuilder:complete: the kernel nodes of the graph could "
                               "not be read");
    lua_setiuservalue(L, graph_index, KERNEL_NODES_VALUE);
    lua_settop(L, graph_index);
    graph->has_memory_nodes = capture->has_memory_nodes;
    graph->auto_free = auto_free;
    gpurun_capture_push_allocations(L, capture);
    take_allocations(L, graph, graph_index);
    lua_settop(L, graph_index);
    return 1;
}

/* The replay path: identity tags, no metatable look-ups. */
static struct gpurun_stream *replay_stream(lua_State *L, const struct graph *graph, int index)
{
    struct gpurun_stream_object *object = gpurun_check_open(L, index, &gpurun_stream_tag);
    if (object->stream.capture)
        gpurun_refuse_captured(L, 0, NULL, "launch on the builder, so that the graph keeps "
                                           "what it uses");
    if (object->stream.device != graph->device)
        gpurun_error(L, "the graph was captured on device %d and replays only there; the stream "
                        "belongs to device %d", graph->device, object->stream.device);
    return &object->stream;
}

typedef CUresult (*replay_call)(CUgraphExec, CUstream);

/* Before a launch: the memory the last launch allocated must be freed first,
 * by the driver (auto-free) or by closing the buffers that hold it. */
static void check_allocations_freed(lua_State *L, const struct graph *graph)
{
    if (graph->auto_free)
        return;
    int held = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < graph->allocation_count; i++) {
        const struct gpurun_buffer *buffer = graph->allocations[i].buffer;
        if (!buffer->header.closed && !buffer->unallocated) {
            held++;
            bytes += buffer->graph_bytes;
        }
    }
    if (held > 0) {
        char size[32];
        gpurun_error(L, "Graph:launch: %d buffer(s) this graph allocated at its last launch (%s) "
                        "are still open, and a launch makes their memory anew: close them "
                        "first, or complete the graph with { auto_free_on_launch = true } so that "
                        "each launch frees the last one's", held,
                     gpurun_format_size(size, sizeof size, bytes));
    }
}

/* After a launch on the stream at 2: open buffers have the new memory, and
 * what closed ones no longer hold is freed after the launch. */
static void after_allocating_launch(lua_State *L, const struct graph *graph,
                                    const struct gpurun_stream *stream)
{
    lua_getiuservalue(L, 1, ALLOCATIONS_VALUE);
    for (size_t i = 0; i < graph->allocation_count; i++) {
        const struct allocation *allocation = &graph->allocations[i];
        if (allocation->buffer->header.closed) {
            struct gpurun_relaxed relaxed = gpurun_relax_captures();
            CUresult result = CUDA_CALL(cuMemFreeAsync, allocation->address, stream->handle);
            gpurun_restore_captures(relaxed);
            if (result != CUDA_SUCCESS)
                gpurun_cuda_error(L, "freeing a graph's allocation after its launch");
        } else {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            gpurun_buffer_graph_launched(L, -1, 2);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
}

/* Remembers the stream of a launch, for the stream-ordered buffers the
 * graph keeps. */
static void note_launch_stream(lua_State *L, struct graph *graph, struct gpurun_stream *stream)
{
    int slot = 0;
    while (slot < LAUNCH_STREAMS && graph->launched_on[slot] && graph->launched_on[slot] != stream)
        slot++;
    if (slot == LAUNCH_STREAMS) {
        graph->launches_lost = 1;
    } else if (graph->launched_on[slot] == NULL) {
        lua_pushvalue(L, 2);
        lua_setiuservalue(L, 1, LAUNCHED_ON_VALUE + slot);
        graph->launched_on[slot] = stream;
    }
}

/* graph:launch(stream) (runs = 1) and graph:upload(stream), in the graph's
 * context. */
static int replay(lua_State *L, replay_call call, const char *name, const char *what,
                  int runs)
{
    struct graph *graph = gpurun_check_open(L, 1, &gpurun_graph_tag);
    struct gpurun_stream *stream = replay_stream(L, graph, 2);
    if (runs && graph->allocation_count)
        check_allocations_freed(L, graph);
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = cuda_checked(call(graph->exec, stream->handle), name);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "%s", what);
    /* A while loop may never end: waits for this stream become interruptible. */
    if (runs) {
        stream->unbounded |= graph->has_loop;
        /* Each host node runs once more, on the main thread while it
         * waits: counted first, so that no error below loses a run. */
        if (graph->host_callbacks) {
            lua_getiuservalue(L, 1, HOST_CALLBACKS_VALUE);
            for (int i = 1; i <= graph->host_callbacks; i++) {
                lua_rawgeti(L, -1, i);
                struct gpurun_host_callback *callback = lua_touserdata(L, -1);
                gpurun_host_call_expect(L, &callback->call, -1, 1);
                lua_pop(L, 1);
            }
            lua_pop(L, 1);
        }
        if (graph->allocation_count)
            after_allocating_launch(L, graph, stream);
        if (graph->keeps_ordered && graph->launched_on[0] != stream)
            note_launch_stream(L, graph, stream);
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

/* Lets go of the new kept sequence at kept_index (its users), then raises
 * `message`: the graph replays as before. */
static int update_failed(lua_State *L, int kept_index, const char *message)
{
    gpurun_release_users(L, kept_index);
    return gpurun_error(L, "Graph:update: %s; the graph replays as before", message);
}

#define BUILDER_LOST "the GraphBuilder was closed or built again during the update"

/* Lets go of the sequence of kept objects at index: its stream-ordered
 * buffers learn which streams the graph was launched on, so that their
 * frees wait for replays still running. */
static void let_go(lua_State *L, const struct graph *graph, int index)
{
    index = lua_absindex(L, index);
    lua_Integer count = graph->keeps_ordered ? (lua_Integer)lua_rawlen(L, index) : 0;
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, index, i);
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, -1, &gpurun_buffer_tag);
        if (buffer && gpurun_buffer_owner(buffer)->ordered) {
            if (graph->launches_lost)
                gpurun_buffer_owner(buffer)->uses_lost = 1;
            for (int k = 0; k < LAUNCH_STREAMS && graph->launched_on[k]; k++) {
                lua_getiuservalue(L, 1, LAUNCHED_ON_VALUE + k);
                gpurun_note_buffer_use(L, buffer, -2, graph->launched_on[k], lua_gettop(L));
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
    gpurun_release_users(L, index);
}

/* update(builder) -> self: the same pipeline captured again (other scalars,
 * other buffers of the same kind) becomes this graph's, without a new
 * instantiation. A changed topology is refused, and the graph replays as
 * before. Afterwards the graph keeps what the new capture used.
 *
 * Everything that allocates comes before the executable graph changes: an
 * allocation can run a finalizer that closes the builder (destroying its
 * graph) or this graph, which is checked after each. */
static int graph_update(lua_State *L)
{
    check_graph(L, 1);
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 2);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->role != GPURUN_CAPTURE_ORIGIN || capture->state != GPURUN_CAPTURE_BUILT)
        return gpurun_arg_error(L, 2, "a GraphBuilder that has ended building expected (it is %s%s)",
                                gpurun_capture_state_name(capture->state),
                                capture->role == GPURUN_CAPTURE_ORIGIN ? "" : ", and not one "
                                "that records into another builder's graph");
    const struct graph *target = check_graph(L, 1);
    if (target->has_memory_nodes || capture->has_memory_nodes)
        return gpurun_error(L, "Graph:update: a graph with memory allocation or free nodes cannot "
                               "be updated (the driver fixes their addresses when it "
                               "instantiates): complete a new graph from the builder");
    lua_settop(L, 2);
    CUgraph source = capture->graph;
    /* What the new capture kept, each counted as this graph's user. */
    gpurun_capture_push_kept(L, capture);
    int kept = lua_gettop(L);
    if (!source_held(capture, source))
        return update_failed(L, kept, BUILDER_LOST);
    size_t count = 0;
    if (CUDA_CALL(cuGraphGetNodes, source, NULL, &count) != CUDA_SUCCESS)
        return update_failed(L, kept, "counting the builder's graph nodes failed");
    CUgraphNode *nodes = gpurun_push_staging(L, (count + 1) * sizeof *nodes);
    if (!source_held(capture, source))
        return update_failed(L, kept, BUILDER_LOST);
    if (count > 0 && CUDA_CALL(cuGraphGetNodes, source, nodes, &count) != CUDA_SUCCESS)
        return update_failed(L, kept, "listing the builder's graph nodes failed");
    if (!push_kernel_nodes(L, nodes, count, kept, capture, source))
        return update_failed(L, kept, BUILDER_LOST);
    int kernel_nodes = lua_gettop(L);
    int host_callbacks = push_host_callbacks(L, kept);
    int host_callbacks_index = lua_gettop(L);
    struct graph *graph = gpurun_to_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed) {
        gpurun_release_users(L, kept);
        return gpurun_closed_error(L, gpurun_graph_tag.type_name);
    }

    CUgraphExecUpdateResultInfo info;
    memset(&info, 0, sizeof info);
    CUresult result = CUDA_CALL(cuGraphExecUpdate, graph->exec, source, &info);
    if (result != CUDA_SUCCESS || info.result != CU_GRAPH_EXEC_UPDATE_SUCCESS) {
        char code[32], why[256];
        if (result == CUDA_SUCCESS)
            snprintf(code, sizeof code, "CUDA_SUCCESS");
        else
            snprintf(code, sizeof code, "CUresult %d", (int)result);
        snprintf(why, sizeof why, "the builder's graph cannot update this one: %s (%s)",
                 update_failure(info.result), code);
        return update_failed(L, kept, why);
    }
    /* No allocation from here on: the new lists in, the old kept let go. */
    lua_pushvalue(L, kernel_nodes);
    lua_setiuservalue(L, 1, KERNEL_NODES_VALUE);
    lua_pushvalue(L, host_callbacks_index);
    lua_setiuservalue(L, 1, HOST_CALLBACKS_VALUE);
    graph->host_callbacks = host_callbacks;
    if (lua_getiuservalue(L, 1, KEPT_VALUE) == LUA_TTABLE)
        let_go(L, graph, lua_gettop(L));
    lua_pop(L, 1);
    graph->keeps_ordered = graph->keeps_ordered || has_ordered_buffer(L, kept);
    lua_pushvalue(L, kept);
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

/* bytes and address of an allocation node, address of a free node, in the
 * node's table at the top. */
/* What an allocation or free node holds: its size (allocations only) and
 * address. Read before nodes() makes tables, which can run finalizers. */
struct memory_node {
    size_t bytes;
    CUdeviceptr address;
};

static void read_memory_node(lua_State *L, CUgraphNode node, CUgraphNodeType type,
                             struct memory_node *memory)
{
    memory->bytes = 0;
    memory->address = 0;
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        CUDA_MEM_ALLOC_NODE_PARAMS params;
        memset(&params, 0, sizeof params);
        CHECK_CUDA(L, "reading an allocation node", cuGraphMemAllocNodeGetParams, node, &params);
        memory->bytes = params.bytesize;
        memory->address = params.dptr;
    } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        CHECK_CUDA(L, "reading a free node", cuGraphMemFreeNodeGetParams, node, &memory->address);
    }
}

static void set_memory_node(lua_State *L, CUgraphNodeType type, const struct memory_node *memory)
{
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        lua_pushinteger(L, (lua_Integer)memory->bytes);
        lua_setfield(L, -2, "bytes");
    }
    lua_pushinteger(L, (lua_Integer)memory->address);
    lua_setfield(L, -2, "address");
}

/* nodes() -> { { index =, kind =, name = (kernel nodes), kernel, grid,
 * block, shmem_size (kernel nodes of a gpurun.Kernel), bytes (allocation
 * nodes), address (allocation and free nodes), dependencies = { index... },
 * enabled = (kernel, memcpy and memset nodes) }, ... }: the
 * graph's top-level nodes, in a fixed order (conditional bodies not listed). */
static int graph_nodes(lua_State *L)
{
    struct graph *graph = check_graph(L, 1);
    lua_getiuservalue(L, 1, KERNEL_NODES_VALUE);
    int kernel_nodes = lua_gettop(L);
    /* Room for every node as a dependency, with its edge's data: the driver
     * refuses to drop edge data (programmatic edges have some). */
    size_t room = graph->node_count + 1;
    CUgraphEdgeData *edges = gpurun_push_staging(
        L, room * (sizeof(CUgraphEdgeData) + sizeof(CUgraphNode) + sizeof(size_t)));
    CUgraphNode *dependencies = (CUgraphNode *)(edges + room);
    size_t *dependency_indices = (size_t *)(dependencies + room);
    lua_createtable(L, (int)graph->node_count, 0);
    int list = lua_gettop(L);
    /* Both allocations can run a finalizer that closes the graph. */
    graph = check_graph(L, 1);
    size_t total = graph->node_count;
    for (size_t i = 0; i < total; i++) {
        /* Each node is read from the driver first, then made into tables:
         * their allocations can run a finalizer that closes the graph,
         * destroying the nodes, so the graph is checked again each time. */
        graph = check_graph(L, 1);
        CUgraphNode node = graph->nodes[i];
        CUgraphNodeType type;
        CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &type);
        int has_kernel = type == CU_GRAPH_NODE_TYPE_KERNEL
                         && lua_rawgeti(L, kernel_nodes, (lua_Integer)i + 1) == LUA_TTABLE;
        if (type == CU_GRAPH_NODE_TYPE_KERNEL && !has_kernel)
            lua_pop(L, 1);
        const char *lent_name = NULL; /* the driver's, valid while the graph is */
        if (type == CU_GRAPH_NODE_TYPE_KERNEL && !has_kernel) {
            CUDA_KERNEL_NODE_PARAMS params;
            if (CUDA_CALL(cuGraphKernelNodeGetParams, node, &params) != CUDA_SUCCESS
                || CUDA_CALL(cuFuncGetName, &lent_name, params.func) != CUDA_SUCCESS)
                lent_name = NULL;
        }
        int has_enabled = type == CU_GRAPH_NODE_TYPE_KERNEL || type == CU_GRAPH_NODE_TYPE_MEMCPY
                          || type == CU_GRAPH_NODE_TYPE_MEMSET;
        unsigned int enabled = 1;
        if (has_enabled)
            CHECK_CUDA(L, "reading whether a graph node is enabled", cuGraphNodeGetEnabled,
                       graph->exec, node, &enabled);
        int is_memory = type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || type == CU_GRAPH_NODE_TYPE_MEM_FREE;
        struct memory_node memory;
        read_memory_node(L, node, type, &memory);
        size_t count = room;
        CHECK_CUDA(L, "reading a graph node's dependencies", cuGraphNodeGetDependencies, node,
                   dependencies, edges, &count);
        for (size_t d = 0; d < count; d++)
            dependency_indices[d] = node_index(graph, dependencies[d]);

        /* From here on nothing reads the graph. The name first: pushing it
         * copies it before anything can run a finalizer. */
        if (lent_name)
            lua_pushstring(L, lent_name);
        else
            lua_pushnil(L);
        lua_createtable(L, 0, 9);
        lua_insert(L, -2);
        lua_setfield(L, -2, "name"); /* nil: no name */
        lua_pushinteger(L, (lua_Integer)i + 1);
        lua_setfield(L, -2, "index");
        lua_pushstring(L, node_kind(type));
        lua_setfield(L, -2, "kind");
        if (has_kernel) {
            /* node's { kernel, launch } (below the node's table) lives in
             * kernel_nodes, anchored on the stack. */
            lua_getfield(L, -2, "kernel");
            lua_setfield(L, -2, "kernel");
            lua_getfield(L, -2, "kernel");
            lua_pushstring(L, ((const struct gpurun_kernel *)lua_touserdata(L, -1))->name);
            lua_setfield(L, -3, "name");
            lua_pop(L, 1);
            lua_getfield(L, -2, "launch");
            set_node_shape(L, -2, &((const struct node_launch *)lua_touserdata(L, -1))->params);
            lua_pop(L, 1);
        }
        if (is_memory)
            set_memory_node(L, type, &memory);
        if (has_enabled) {
            lua_pushboolean(L, enabled != 0);
            lua_setfield(L, -2, "enabled");
        }
        lua_createtable(L, (int)count, 0);
        for (size_t d = 0; d < count; d++) {
            lua_pushinteger(L, (lua_Integer)dependency_indices[d]);
            lua_rawseti(L, -2, (lua_Integer)d + 1);
        }
        lua_setfield(L, -2, "dependencies");
        lua_rawseti(L, list, (lua_Integer)i + 1);
        if (has_kernel)
            lua_pop(L, 1);
    }
    lua_settop(L, list);
    return 1;
}

/* The node index at arg, 1-based. */
static CUgraphNode check_node(lua_State *L, const struct graph *graph, int arg)
{
    return graph->nodes[gpurun_check_index(L, arg, graph->node_count, "node")];
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
    /* Growing the list can run a finalizer that closes the graph, which let
     * go of its list: the buffer is not counted for a list nobody holds. */
    struct graph *graph = check_graph(L, 1);
    gpurun_adjust_users(L, index, +1);
    lua_pop(L, 1);
    graph->keeps_ordered |= gpurun_buffer_owner(lua_touserdata(L, index))->ordered;
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
    /* The scratch's allocation can run a finalizer that closes the graph
     * (its kept list and nodes let go) or the kernel's code. */
    graph = check_graph(L, 1);
    gpurun_check_kernel_open(L, kernel);
    for (int i = 0; i < given; i++)
        gpurun_pack_argument(L, kernel, i, 3 + i, packed + kernel->param_offsets[i], NULL);
    for (int i = 0; i < given; i++)
        if (gpurun_to_tagged(L, 3 + i, &gpurun_buffer_tag))
            keep(L, 3 + i);
    /* Keeping grows the kept list, which can run a finalizer too. */
    graph = check_graph(L, 1);
    launch = check_kernel_node(L, graph, 2, &kernel);
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
    int top = lua_gettop(L);
    struct node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    /* What the lookup pushed goes (the graph's node table keeps it), so that
     * a missing position reads as one. */
    lua_settop(L, top);
    lua_Integer k = gpurun_check_integer(L, 3, "integer argument position");
    lua_settop(L, 4);
    if (k < 1 || k > kernel->param_count)
        return gpurun_arg_error(L, 3, "argument position %I out of range (kernel '%s' takes %d)",
                                (LUAI_UACINT)k, kernel->name, kernel->param_count);
    int i = (int)k - 1;
    unsigned char packed[16];
    unsigned char *slot = kernel->param_sizes[i] <= sizeof packed
                              ? packed
                              : gpurun_push_staging(L, kernel->param_sizes[i]);
    if (slot != packed) {
        /* As in set_args: the allocation can run a finalizer. */
        graph = check_graph(L, 1);
        gpurun_check_kernel_open(L, kernel);
    }
    gpurun_pack_argument(L, kernel, i, 4, slot, NULL);
    if (gpurun_to_tagged(L, 4, &gpurun_buffer_tag)) {
        keep(L, 4);
        /* Keeping grows the kept list, which can run a finalizer too. */
        graph = check_graph(L, 1);
        launch = check_kernel_node(L, graph, 2, &kernel);
    }
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
    /* As for unloading code (types/object_code.c): the collector may close
     * a graph while another is being captured, where the driver can count
     * destroying it as unsafe and end that capture. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    if (graph->exec) { /* NULL when complete() failed before instantiating */
        CUcontext previous = gpurun_enter_context(graph->context);
        (void)CUDA_CALL(cuGraphExecDestroy, graph->exec);
        gpurun_leave_context(previous);
    }
    graph->exec = NULL;
    if (graph->source)
        (void)CUDA_CALL(cuGraphDestroy, graph->source);
    gpurun_restore_captures(relaxed);
    graph->source = NULL;
    graph->node_count = 0;
    if (lua_getiuservalue(L, 1, KEPT_VALUE) == LUA_TTABLE)
        let_go(L, graph, -1);
    lua_pop(L, 1);
    graph->host_callbacks = 0;
    /* The buffers its allocation nodes made keep the last launch's memory. */
    if (lua_getiuservalue(L, 1, ALLOCATIONS_VALUE) == LUA_TTABLE) {
        for (size_t i = 0; i < graph->allocation_count; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            gpurun_buffer_graph_closed(L, -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    graph->allocation_count = 0;
    graph->allocations = NULL;
    graph->keeps_ordered = 0;
    for (int k = 0; k < LAUNCH_STREAMS; k++)
        graph->launched_on[k] = NULL;
    for (int value = KEPT_VALUE; value <= USER_VALUES; value++) {
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

static int graph_auto_free_on_launch(lua_State *L)
{
    lua_pushboolean(L, ((struct graph *)lua_touserdata(L, 1))->auto_free);
    return 1;
}

static int graph_has_memory_nodes(lua_State *L)
{
    lua_pushboolean(L, ((struct graph *)lua_touserdata(L, 1))->has_memory_nodes);
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
    {"has_memory_nodes", graph_has_memory_nodes},
    {"auto_free_on_launch", graph_auto_free_on_launch},
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
