/* Graph:nodes, set_args, set_arg, set_config and set_enabled: an executable
 * graph's nodes read, and changed one by one without a new capture. Each
 * kernel node of a gpurun.Kernel keeps its launch as it now stands
 * (struct gpurun_node_launch, made when the graph was completed or
 * updated): set_args and set_config change a part and set the whole. */
#include "types/graph_nodes.h"

#include <string.h>

#include "types/buffer/buffer.h"
#include "types/graph.h"
#include "types/kernel.h"
#include "types/launch.h"
#include "types/tensor_map.h"

/* nodes() -> { { index =, kind =, dependencies = { index... }, name =
 * (kernel nodes), kernel, grid, block, shmem_size, args (kernel nodes of a
 * gpurun.Kernel), priority (kernel nodes), enabled (kernel, memcpy and
 * memset nodes), bytes (allocation nodes), address (allocation and free
 * nodes), nodes = { ... } (child graph nodes: the child's own) }, ... }:
 * the graph's top-level nodes in a fixed order (conditional bodies not
 * listed), as types/graph_node_list.c reads them. */
static int graph_nodes(lua_State *L)
{
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    lua_settop(L, 1);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE);
    struct gpurun_node_source source = {
        .owner = 1, .nodes = graph->nodes, .count = graph->node_count, .kernel_nodes = 2,
        .kept = 3,
    };
    gpurun_graph_push_node_list(L, &source);
    return 1;
}

/* The node index at arg, 1-based. */
static CUgraphNode check_node(lua_State *L, const struct gpurun_graph *graph, int arg)
{
    return graph->nodes[gpurun_check_index(L, arg, graph->node_count, "node")];
}

/* Pushes the kernel and node_launch of kernel node `arg`, or raises. */
static struct gpurun_node_launch *check_kernel_node(lua_State *L, const struct gpurun_graph *graph,
                                                    int arg, const struct gpurun_kernel **kernel)
{
    check_node(L, graph, arg);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
    if (lua_rawgeti(L, -1, lua_tointeger(L, arg)) != LUA_TTABLE)
        gpurun_arg_error(L, arg, "a kernel node of a gpurun.Kernel expected: node %d is %s",
                         (int)lua_tointeger(L, arg), "not one (see graph:nodes())");
    lua_getfield(L, -1, "kernel");
    *kernel = lua_touserdata(L, -1);
    gpurun_check_kernel_open(L, *kernel);
    lua_getfield(L, -2, "launch");
    return lua_touserdata(L, -1);
}

/* A node changed: kernels launch what was uploaded, so a graph for device
 * launch must be uploaded again. */
static void set_kernel_node(lua_State *L, struct gpurun_graph *graph, int arg,
                            const struct gpurun_node_launch *launch)
{
    CHECK_CUDA(L, "setting a kernel node of an executable graph", cuGraphExecKernelNodeSetParams,
               graph->exec, graph->nodes[lua_tointeger(L, arg) - 1], &launch->params);
    graph->uploaded = 0;
}

/* Counts the Buffer at index as the graph's (once), so that it lives as
 * long as a replay may touch it. */
static void keep(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE);
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    int given = lua_gettop(L) - 2;
    const struct gpurun_kernel *kernel;
    struct gpurun_node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    if (given != kernel->param_count)
        return gpurun_error(L, "kernel '%s' takes %d parameter%s, got %d", kernel->name,
                            kernel->param_count, kernel->param_count == 1 ? "" : "s", given);
    /* Packed into scratch first: an error leaves the node as it was. The
     * usual few arguments fit on the C stack, so that setting them again
     * each step makes no garbage. */
    _Alignas(16) unsigned char scratch[256];
    unsigned char *packed = scratch;
    if (kernel->storage_size > sizeof scratch) {
        packed = gpurun_push_staging(L, kernel->storage_size);
        /* The scratch's allocation can run a finalizer that closes the
         * graph (its kept list and nodes let go) or the kernel's code. */
        graph = gpurun_check_graph(L, 1);
        gpurun_check_kernel_open(L, kernel);
    }
    for (int i = 0; i < given; i++)
        gpurun_pack_argument(L, kernel, i, 3 + i, packed + kernel->param_offsets[i], NULL);
    for (int i = 0; i < given; i++)
        if (gpurun_push_argument_memory(L, 3 + i)) {
            keep(L, lua_gettop(L));
            lua_pop(L, 1);
        }
    /* Keeping grows the kept list, which can run a finalizer too. */
    graph = gpurun_check_graph(L, 1);
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    const struct gpurun_kernel *kernel;
    int top = lua_gettop(L);
    struct gpurun_node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
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
        graph = gpurun_check_graph(L, 1);
        gpurun_check_kernel_open(L, kernel);
    }
    gpurun_pack_argument(L, kernel, i, 4, slot, NULL);
    if (gpurun_push_argument_memory(L, 4)) {
        keep(L, lua_gettop(L));
        lua_pop(L, 1);
        /* Keeping grows the kept list, which can run a finalizer too. */
        graph = gpurun_check_graph(L, 1);
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    check_node(L, graph, 2);
    const struct gpurun_launch_config *config = gpurun_check_config(L, 3);
    const struct gpurun_kernel *kernel;
    struct gpurun_node_launch *launch = check_kernel_node(L, graph, 2, &kernel);
    if (config->attribute_count > 0)
        return gpurun_arg_error(L, 3, "a LaunchConfig without launch attributes (cluster, "
                                      "cooperative, programmatic, priority) expected: a node's "
                                      "attributes are set when it is captured");
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    CUgraphNode node = check_node(L, graph, 2);
    if (lua_type(L, 3) != LUA_TBOOLEAN)
        return gpurun_type_error(L, 3, "boolean");
    CUgraphNodeType type;
    CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &type);
    if (type != CU_GRAPH_NODE_TYPE_KERNEL && type != CU_GRAPH_NODE_TYPE_MEMCPY
        && type != CU_GRAPH_NODE_TYPE_MEMSET)
        return gpurun_arg_error(L, 2, "a kernel, memcpy or memset node expected: node %d is %s",
                                (int)lua_tointeger(L, 2), gpurun_graph_node_kind(type));
    CHECK_CUDA(L, "enabling or disabling a graph node", cuGraphNodeSetEnabled, graph->exec, node,
               lua_toboolean(L, 3) ? 1 : 0);
    graph->uploaded = 0;
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg node_methods[] = {
    {"nodes", graph_nodes},
    {"set_args", graph_set_args},
    {"set_arg", graph_set_arg},
    {"set_config", graph_set_config},
    {"set_enabled", graph_set_enabled},
    {NULL, NULL}
};

void gpurun_open_graph_nodes(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_graph_tag, node_methods);
}
