/* gpurun.Graph: an executable graph, replayed on streams (types/graph.c),
 * its nodes read and edited one by one (types/graph_nodes.c). What a Graph
 * is, for both. */
#ifndef GPURUN_TYPES_GRAPH_H
#define GPURUN_TYPES_GRAPH_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_graph_tag;

/* Its user values. A graph holds every Buffer and Kernel its capture used,
 * and the Graphs its kernels launch (KEPT, a sequence), and counts as their
 * user, so the collector cannot free memory a replay touches and an
 * explicit close is refused. It keeps a clone of the captured graph, whose nodes name the executable's (NODES
 * lists them), and for each kernel node whose Kernel it knows, that node's
 * launch as it now stands (KERNEL_NODES: node index -> { kernel, launch }),
 * and the HostCallbacks its host nodes run (HOST_CALLBACKS, a sequence):
 * each replay queues one run of each. */
#define GPURUN_GRAPH_KEPT_VALUE 1
#define GPURUN_GRAPH_NODES_VALUE 2
#define GPURUN_GRAPH_KERNEL_NODES_VALUE 3
#define GPURUN_GRAPH_ALLOCATIONS_VALUE 4  /* the Buffers its allocation nodes make, in order */
#define GPURUN_GRAPH_ADDRESSES_VALUE 5    /* their nodes' addresses (graph.c's allocations) */
#define GPURUN_GRAPH_HOST_CALLBACKS_VALUE 6
#define GPURUN_GRAPH_LAUNCHED_ON_VALUE 7  /* 7..: the streams of launched_on */
#define GPURUN_GRAPH_LAUNCH_STREAMS 4
/* A graph captured on a green context's stream: that stream's Context,
 * which keeps the green context alive while the graph may run. */
#define GPURUN_GRAPH_CONTEXT_VALUE (GPURUN_GRAPH_LAUNCHED_ON_VALUE + GPURUN_GRAPH_LAUNCH_STREAMS)
/* The stream of its latest launch, while it has a cancel flag. */
#define GPURUN_GRAPH_LAST_STREAM_VALUE (GPURUN_GRAPH_CONTEXT_VALUE + 1)
#define GPURUN_GRAPH_USER_VALUES GPURUN_GRAPH_LAST_STREAM_VALUE

struct gpurun_graph_allocation {
    struct gpurun_buffer *buffer; /* kept by GPURUN_GRAPH_ALLOCATIONS_VALUE */
    CUdeviceptr address;
    /* Not made here: another graph's allocation that a free node of this
     * graph frees (Buffer:close(builder)). */
    int frees;
};

struct gpurun_graph {
    struct gpurun_object header;
    CUgraphExec exec;
    CUgraph source;        /* the clone it was instantiated from */
    size_t node_count;
    CUgraphNode *nodes;    /* source's nodes, in cuGraphGetNodes order */
    int has_loop;          /* a while loop: a replay may not end */
    int cancel_slot;       /* its loops' cancel flag (runtime/cancel.c), 0: none */
    struct gpurun_stream *last_stream; /* of the latest launch, while cancel_slot */
    int host_callbacks;    /* HostCallbacks among what it keeps */
    CUcontext context; /* the captured stream's: the graph replays on its device only */
    int device;
    int has_memory_nodes;
    int auto_free;         /* instantiated with CUDA_GRAPH_INSTANTIATE_FLAG_AUTO_FREE_ON_LAUNCH */
    int device_launch;     /* with CUDA_GRAPH_INSTANTIATE_FLAG_DEVICE_LAUNCH: kernels launch it */
    int node_priority;     /* with CUDA_GRAPH_INSTANTIATE_FLAG_USE_NODE_PRIORITY */
    int has_conditional;   /* holds conditional nodes: no copy of it can be embedded */
    int uploaded;          /* uploaded or launched once: a kernel may launch it */
    size_t allocation_count;
    struct gpurun_graph_allocation *allocations;
    /* It keeps buffers of stream-ordered memory, whose frees must wait for
     * its replays: the streams it was launched on (held by user values),
     * told to those buffers when it lets go of them. */
    int keeps_ordered;
    int launches_lost;
    struct gpurun_stream *launched_on[GPURUN_GRAPH_LAUNCH_STREAMS];
};

/* A kernel node's launch as it now stands: set_args and set_config change
 * a part and set the whole. */
struct gpurun_node_launch {
    CUDA_KERNEL_NODE_PARAMS params;
    void **pointers;
    unsigned char *storage;
};


/* What graph.c shares with graph_complete.c, which makes Graphs. */

/* Pushes { node index -> { kernel = Kernel, launch = node_launch } } for the
 * kernel nodes of `nodes` whose Kernel is in the sequence at kept_index; 0
 * (nothing pushed) when the builder `capture` no longer holds `source`. */
int gpurun_graph_push_kernel_nodes(lua_State *L, const CUgraphNode *nodes, size_t count,
                                   int kept_index, const struct gpurun_capture *capture,
                                   CUgraph source);

/* Pushes the HostCallbacks of the sequence at kept_index; returns their count. */
int gpurun_graph_push_host_callbacks(lua_State *L, int kept_index);

/* Whether the sequence at index holds a Buffer of stream-ordered memory. */
int gpurun_graph_has_ordered_buffer(lua_State *L, int index);

/* The open Stream at index that `graph` may replay or upload on, or an error. */
struct gpurun_stream *gpurun_graph_replay_stream(lua_State *L, const struct gpurun_graph *graph,
                                                 int index);

/* Where a list of graph nodes is read from: a Graph (capture NULL) or the
 * graph a builder built (which it must still hold: capture->graph ==
 * graph), at stack index owner; its top-level nodes (valid while it holds
 * them), their launches { index -> { kernel, launch } } at kernel_nodes
 * and the sequence of what it keeps at kept (to name child graphs'
 * kernels). */
struct gpurun_node_source {
    int owner;
    const struct gpurun_capture *capture;
    CUgraph graph;
    const CUgraphNode *nodes;
    size_t count;
    int kernel_nodes;
    int kept;
};

/* Pushes the nodes as Graph:nodes() gives them (types/graph_node_list.c);
 * raises if the source lets go of them meanwhile. */
void gpurun_graph_push_node_list(lua_State *L, const struct gpurun_node_source *source);

/* GraphBuilder:complete (graph_complete.c), after gpurun_open_graph. */
void gpurun_open_graph_complete(lua_State *L);

/* Whether `source` is still what `capture` (NULL: nobody) holds: a
 * builder's graph, read while allocations may run finalizers. */
int gpurun_graph_source_held(const struct gpurun_capture *capture, CUgraph source);

/* Lets go of the sequence of kept objects at index, of the Graph at 1. */
void gpurun_graph_let_go(lua_State *L, const struct gpurun_graph *graph, int index);

/* package.loaded["gpurun.graph_core"].update (graph_update.c), the C side of
 * Graph:update (lua/gpurun/builtin/graph_update.lua). */
void gpurun_open_graph_update(lua_State *L);

/* GraphBuilder:embed (graph_embed.c), after gpurun_open_graph. */
void gpurun_open_graph_embed(lua_State *L);

/* A node kind's name as Graph:nodes() gives it ("kernel", "host", ...). */
const char *gpurun_graph_node_kind(CUgraphNodeType type);

/* The open Graph at index, or an error. */
struct gpurun_graph *gpurun_check_graph(lua_State *L, int index);

void gpurun_open_graph(lua_State *L);

#endif
