/* gpurun.Graph: what GraphBuilder:complete() (types/graph_complete.c)
 * instantiates, replayed with graph:launch(stream); updated in place from a
 * new capture of the same pipeline in types/graph_update.c; its nodes are
 * read and changed one by one in types/graph_nodes.c, and what it holds is
 * in types/graph.h. */
#include "types/graph.h"

#include <stdio.h>
#include <string.h>

#include "types/buffer/buffer.h"
#include "types/graph_builder.h"
#include "types/host_callback.h"
#include "types/kernel.h"
#include "types/stream.h"

const struct gpurun_tag gpurun_graph_tag = {"gpurun.Graph"};

const char *gpurun_graph_node_kind(CUgraphNodeType type)
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

struct gpurun_graph *gpurun_check_graph(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_graph_tag);
}

/* A kernel node of a gpurun.Kernel, while push_kernel_nodes works. */
struct kernel_node {
    lua_Integer kept_at;      /* the Kernel's place in the kept sequence; 0: not one */
    struct gpurun_node_launch *launch;
};

int gpurun_graph_source_held(const struct gpurun_capture *capture, CUgraph source)
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
int gpurun_graph_push_kernel_nodes(lua_State *L, const CUgraphNode *nodes, size_t count, int kept_index,
                             const struct gpurun_capture *capture, CUgraph source)
{
    kept_index = lua_absindex(L, kept_index);
    int top = lua_gettop(L);
    struct kernel_node *found = gpurun_push_staging(L, (count + 1) * sizeof *found);
    if (!gpurun_graph_source_held(capture, source))
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
            /* A launch on a green context's stream passes the CUkernel. */
            if (kernel && (kernel->function == params.func || kernel->handle == params.kern))
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
        size_t pointers_at = (sizeof(struct gpurun_node_launch) + 15) / 16 * 16;
        size_t storage_at = pointers_at + (size_t)kernel->param_count * sizeof(void *);
        unsigned char *block = lua_newuserdatauv(L, storage_at + kernel->storage_size + 1, 0);
        found[i].launch = (struct gpurun_node_launch *)block;
        found[i].launch->pointers = (void **)(block + pointers_at);
        found[i].launch->storage = block + storage_at;
        lua_setfield(L, -2, "launch");
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (!gpurun_graph_source_held(capture, source))
        goto lost;
    /* The launches, read from the nodes: no allocation from here on. */
    for (size_t i = 0; i < count; i++) {
        if (!found[i].kept_at)
            continue;
        lua_rawgeti(L, kept_index, found[i].kept_at);
        const struct gpurun_kernel *kernel = lua_touserdata(L, -1);
        lua_pop(L, 1);
        struct gpurun_node_launch *launch = found[i].launch;
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
int gpurun_graph_push_host_callbacks(lua_State *L, int kept_index)
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

/* Whether the sequence at index holds a Buffer of stream-ordered memory. */
int gpurun_graph_has_ordered_buffer(lua_State *L, int index)
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

/* The replay path: identity tags, no metatable look-ups. */
struct gpurun_stream *gpurun_graph_replay_stream(lua_State *L, const struct gpurun_graph *graph,
                                           int index)
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
 * by the driver (auto-free), by closing the buffers that hold it, or by the
 * graph that frees it (Buffer:close(builder)); and what this graph frees of
 * another's must have been made since this one last freed it. */
static void check_allocations_freed(lua_State *L, const struct gpurun_graph *graph)
{
    int held = 0, awaited = 0, missing = 0;
    size_t bytes = 0;
    for (size_t i = 0; i < graph->allocation_count; i++) {
        const struct gpurun_graph_allocation *allocation = &graph->allocations[i];
        const struct gpurun_buffer *buffer = allocation->buffer;
        if (allocation->frees) {
            missing += buffer->unallocated;
        } else if (buffer->freed_in_graph) {
            awaited += !buffer->unallocated;
        } else if (!graph->auto_free && !buffer->header.closed && !buffer->unallocated) {
            held++;
            bytes += buffer->graph_bytes;
        }
    }
    if (missing > 0)
        gpurun_error(L, "Graph:launch: this graph frees %d allocation(s) of another graph "
                        "(Buffer:close on a GraphBuilder), which that graph has not made again "
                        "since: launch the graph that allocates first", missing);
    if (awaited > 0)
        gpurun_error(L, "Graph:launch: %d allocation(s) of this graph's last launch are freed by "
                        "another graph (Buffer:close on a GraphBuilder), not launched since: "
                        "launch that graph first", awaited);
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
 * what closed ones no longer hold is freed after the launch, unless another
 * graph frees it; what this graph frees of another's is gone. */
static void after_allocating_launch(lua_State *L, const struct gpurun_graph *graph,
                                    const struct gpurun_stream *stream)
{
    lua_getiuservalue(L, 1, GPURUN_GRAPH_ALLOCATIONS_VALUE);
    for (size_t i = 0; i < graph->allocation_count; i++) {
        const struct gpurun_graph_allocation *allocation = &graph->allocations[i];
        struct gpurun_buffer *buffer = allocation->buffer;
        if (allocation->frees) {
            buffer->unallocated = 1;
        } else if (buffer->header.closed && buffer->freed_in_graph) {
            buffer->unallocated = 0;
        } else if (buffer->header.closed) {
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
static void note_launch_stream(lua_State *L, struct gpurun_graph *graph,
                               struct gpurun_stream *stream)
{
    int slot = 0;
    while (slot < GPURUN_GRAPH_LAUNCH_STREAMS && graph->launched_on[slot]
           && graph->launched_on[slot] != stream)
        slot++;
    if (slot == GPURUN_GRAPH_LAUNCH_STREAMS) {
        graph->launches_lost = 1;
    } else if (graph->launched_on[slot] == NULL) {
        lua_pushvalue(L, 2);
        lua_setiuservalue(L, 1, GPURUN_GRAPH_LAUNCHED_ON_VALUE + slot);
        graph->launched_on[slot] = stream;
    }
}

/* A launch of a graph with a cancel flag: a cancel made since the flag was
 * last cleared must reach the launches queued before this one, so the
 * flag is cleared in stream order after them (launches of one graph run in
 * order, but a clear queued on another stream would not wait for them). */
static void rearm(lua_State *L, struct gpurun_graph *graph, struct gpurun_stream *stream)
{
    CUresult result = CUDA_SUCCESS;
    if (gpurun_cancel_is_set(graph->cancel_slot)) {
        CUcontext previous = gpurun_enter_context(graph->context);
        if (graph->last_stream && graph->last_stream != stream)
            result = gpurun_order_after(stream, graph->last_stream);
        if (result == CUDA_SUCCESS)
            result = gpurun_cancel_rearm(graph->cancel_slot, stream->handle);
        gpurun_leave_context(previous);
        if (result != CUDA_SUCCESS)
            gpurun_cuda_error(L, "clearing a graph's cancel flag before its launch");
    }
    if (graph->last_stream != stream) {
        lua_pushvalue(L, 2);
        lua_setiuservalue(L, 1, GPURUN_GRAPH_LAST_STREAM_VALUE);
        graph->last_stream = stream;
    }
}

/* graph:launch(stream) (runs = 1) and graph:upload(stream), in the graph's
 * context. */
static int replay(lua_State *L, replay_call call, const char *name, const char *what,
                  int runs)
{
    struct gpurun_graph *graph = gpurun_check_open(L, 1, &gpurun_graph_tag);
    struct gpurun_stream *stream = gpurun_graph_replay_stream(L, graph, 2);
    if (runs && graph->allocation_count)
        check_allocations_freed(L, graph);
    if (runs && graph->cancel_slot)
        rearm(L, graph, stream);
    CUcontext previous = gpurun_enter_context(graph->context);
    CUresult result = cuda_checked(call(graph->exec, stream->handle), name);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "%s", what);
    graph->uploaded = 1;
    /* A while loop may never end: waits for this stream become interruptible. */
    if (runs) {
        stream->unbounded |= graph->has_loop;
        /* Each host node runs once more, on the main thread while it
         * waits: counted first, so that no error below loses a run. */
        if (graph->host_callbacks) {
            lua_getiuservalue(L, 1, GPURUN_GRAPH_HOST_CALLBACKS_VALUE);
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

/* Lets go of the sequence of kept objects at index: its stream-ordered
 * buffers learn which streams the graph was launched on, so that their
 * frees wait for replays still running. */
void gpurun_graph_let_go(lua_State *L, const struct gpurun_graph *graph, int index)
{
    index = lua_absindex(L, index);
    lua_Integer count = graph->keeps_ordered ? (lua_Integer)lua_rawlen(L, index) : 0;
    for (lua_Integer i = 1; i <= count; i++) {
        lua_rawgeti(L, index, i);
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, -1, &gpurun_buffer_tag);
        if (buffer && gpurun_buffer_owner(buffer)->ordered) {
            if (graph->launches_lost)
                gpurun_buffer_owner(buffer)->uses_lost = 1;
            for (int k = 0; k < GPURUN_GRAPH_LAUNCH_STREAMS && graph->launched_on[k]; k++) {
                lua_getiuservalue(L, 1, GPURUN_GRAPH_LAUNCHED_ON_VALUE + k);
                gpurun_note_buffer_use(L, buffer, -2, graph->launched_on[k], lua_gettop(L));
                lua_pop(L, 1);
            }
        }
        lua_pop(L, 1);
    }
    gpurun_release_users(L, index);
}

/* close() and __close refuse while graphs launch this one from the device
 * (they keep it); the collector closes it when they are gone too. */
static int close_graph(lua_State *L, int explicit)
{
    struct gpurun_graph *graph = gpurun_check_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed)
        return 0;
    if (explicit && graph->header.graph_users > 0)
        return gpurun_error(L, "cannot close a gpurun.Graph while %d graph(s) or graph "
                               "builder(s) launch it from the device: close them first",
                            graph->header.graph_users);
    graph->header.closed = 1;
    /* As for unloading code (types/object_code.c): the collector may close
     * a graph while another is being captured, where the driver can count
     * destroying it as unsafe and end that capture. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    if (graph->exec && graph->device_launch) {
        /* A kernel queued before may still launch it. */
        (void)gpurun_destroy_exec_after_device(graph->exec, graph->context);
    } else if (graph->exec) { /* NULL when complete() failed before instantiating */
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
    if (lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE) == LUA_TTABLE)
        gpurun_graph_let_go(L, graph, -1);
    lua_pop(L, 1);
    graph->host_callbacks = 0;
    /* The buffers its allocation nodes made keep the last launch's memory. */
    if (lua_getiuservalue(L, 1, GPURUN_GRAPH_ALLOCATIONS_VALUE) == LUA_TTABLE) {
        for (size_t i = 0; i < graph->allocation_count; i++) {
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            if (graph->allocations[i].frees)
                gpurun_buffer_free_graph_closed(L, -1);
            else
                gpurun_buffer_graph_closed(L, -1);
            lua_pop(L, 1);
        }
    }
    lua_pop(L, 1);
    graph->allocation_count = 0;
    graph->allocations = NULL;
    graph->keeps_ordered = 0;
    gpurun_cancel_release(graph->cancel_slot);
    graph->cancel_slot = 0;
    graph->last_stream = NULL;
    for (int k = 0; k < GPURUN_GRAPH_LAUNCH_STREAMS; k++)
        graph->launched_on[k] = NULL;
    for (int value = GPURUN_GRAPH_KEPT_VALUE; value <= GPURUN_GRAPH_USER_VALUES; value++) {
        lua_pushnil(L);
        lua_setiuservalue(L, 1, value);
    }
    return 0;
}

static int graph_close(lua_State *L)
{
    return close_graph(L, 1);
}

static int graph_gc(lua_State *L)
{
    return close_graph(L, 0);
}

static int graph_node_count(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)((struct gpurun_graph *)lua_touserdata(L, 1))->node_count);
    return 1;
}

static int graph_has_loop(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->has_loop);
    return 1;
}

/* cancel() -> self: the while loops of the launches made so far end at
 * their next check on the device (each pass, and before the loop starts);
 * the graph's later launches run as usual. It makes no driver call, so a
 * host callback may call it. Loops made with { cancellable = false } never
 * check; a graph without cancellable loops has nothing to end. */
static int graph_cancel(lua_State *L)
{
    struct gpurun_graph *graph = gpurun_check_open(L, 1, &gpurun_graph_tag);
    gpurun_cancel_set(graph->cancel_slot);
    lua_settop(L, 1);
    return 1;
}

static int graph_cancellable(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->cancel_slot != 0);
    return 1;
}

static int graph_auto_free_on_launch(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->auto_free);
    return 1;
}

static int graph_device_launch(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->device_launch);
    return 1;
}

static int graph_use_node_priority(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->node_priority);
    return 1;
}

static int graph_has_memory_nodes(lua_State *L)
{
    lua_pushboolean(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->has_memory_nodes);
    return 1;
}

static int graph_device(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_graph *)lua_touserdata(L, 1))->device);
    return 1;
}

static int graph_tostring(lua_State *L)
{
    struct gpurun_graph *graph = gpurun_check_tagged(L, 1, &gpurun_graph_tag);
    if (graph->header.closed)
        lua_pushliteral(L, "gpurun.Graph(closed)");
    else
        lua_pushfstring(L, "gpurun.Graph(%d nodes)", (int)graph->node_count);
    return 1;
}

static const luaL_Reg graph_methods[] = {
    {"launch", graph_launch},
    {"upload", graph_upload},
    {"cancel", graph_cancel},
    {"close", graph_close},
    {NULL, NULL}
};

static const luaL_Reg graph_fields[] = {
    {"node_count", graph_node_count},
    {"has_loop", graph_has_loop},
    {"cancellable", graph_cancellable},
    {"has_memory_nodes", graph_has_memory_nodes},
    {"auto_free_on_launch", graph_auto_free_on_launch},
    {"device_launch", graph_device_launch},
    {"use_node_priority", graph_use_node_priority},
    {"device", graph_device},
    {NULL, NULL}
};

static const luaL_Reg graph_metamethods[] = {
    {"__tostring", graph_tostring},
    {"__close", graph_close},
    {"__gc", graph_gc},
    {NULL, NULL}
};

static const struct gpurun_type graph_type = {
    &gpurun_graph_tag, graph_methods, graph_metamethods, graph_fields, NULL,
};

void gpurun_open_graph(lua_State *L)
{
    gpurun_register_type(L, &graph_type);
}
