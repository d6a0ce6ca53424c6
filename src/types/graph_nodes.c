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

static size_t node_index(const struct gpurun_graph *graph, CUgraphNode node)
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
    struct gpurun_graph *graph = gpurun_check_graph(L, 1);
    lua_getiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
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
    graph = gpurun_check_graph(L, 1);
    size_t total = graph->node_count;
    for (size_t i = 0; i < total; i++) {
        /* Each node is read from the driver first, then made into tables:
         * their allocations can run a finalizer that closes the graph,
         * destroying the nodes, so the graph is checked again each time. */
        graph = gpurun_check_graph(L, 1);
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
        lua_pushstring(L, gpurun_graph_node_kind(type));
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
            const struct gpurun_node_launch *launch = lua_touserdata(L, -1);
            set_node_shape(L, -2, &launch->params);
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
