/* A graph's nodes as Lua tables: what Graph:nodes() returns, and the two
 * lists a refused Graph:update compares (the Graph's, and the graph its
 * builder built). Child graph nodes list their own nodes. Each node is read
 * from the driver first and made into tables after; those tables'
 * allocations can run a finalizer that closes the Graph or the builder,
 * destroying the nodes, so the source is checked again before every read. */
#include "types/graph.h"

#include <stdint.h>
#include <string.h>

#include "types/kernel.h"

#define SOURCE_LOST "the GraphBuilder was closed or built again while its nodes were read"

/* Raises unless the source still holds its nodes; returns the Graph's
 * executable graph (NULL for a builder's). */
static CUgraphExec check_source(lua_State *L, const struct gpurun_node_source *source)
{
    if (source->capture == NULL)
        return gpurun_check_graph(L, source->owner)->exec;
    if (!gpurun_graph_source_held(source->capture, source->graph))
        gpurun_error(L, "%s", SOURCE_LOST);
    return NULL;
}

/* What is read of one node before any table is made. */
struct node_facts {
    CUgraphNodeType type;
    unsigned int enabled;
    int has_enabled;
    int has_priority;
    int priority;
    size_t bytes;              /* allocation nodes */
    CUdeviceptr address;       /* allocation and free nodes */
    lua_Integer kept_kernel;   /* a kernel node of a Kernel the graph keeps: its place */
    const char *lent_name;     /* else the driver's name, valid while the source is */
    size_t dependency_count;
};

/* The place in the kept sequence of the Kernel a kernel node launches, or 0. */
static lua_Integer find_kept_kernel(lua_State *L, int kept, const CUDA_KERNEL_NODE_PARAMS *params)
{
    lua_Integer count = lua_istable(L, kept) ? (lua_Integer)lua_rawlen(L, kept) : 0;
    for (lua_Integer k = 1; k <= count; k++) {
        lua_rawgeti(L, kept, k);
        const struct gpurun_kernel *kernel = gpurun_to_tagged(L, -1, &gpurun_kernel_tag);
        lua_pop(L, 1);
        if (kernel && (kernel->function == params->func || kernel->handle == params->kern))
            return k;
    }
    return 0;
}

/* Reads node `node` into facts, and its dependencies' places among
 * `nodes` (0: not among them) into indices; no allocation. */
static void read_node(lua_State *L, const struct gpurun_node_source *source, CUgraphExec exec,
                      const CUgraphNode *nodes, size_t count, size_t i, struct node_facts *facts,
                      CUgraphNode *dependencies, CUgraphEdgeData *edges, size_t *indices)
{
    CUgraphNode node = nodes[i];
    memset(facts, 0, sizeof *facts);
    facts->enabled = 1;
    CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &facts->type);
    CUgraphNodeType type = facts->type;
    if (type == CU_GRAPH_NODE_TYPE_KERNEL) {
        CUDA_KERNEL_NODE_PARAMS params;
        if (CUDA_CALL(cuGraphKernelNodeGetParams, node, &params) == CUDA_SUCCESS) {
            facts->kept_kernel = find_kept_kernel(L, source->kept, &params);
            if (!facts->kept_kernel
                && CUDA_CALL(cuFuncGetName, &facts->lent_name, params.func) != CUDA_SUCCESS)
                facts->lent_name = NULL;
        }
        CUkernelNodeAttrValue value;
        memset(&value, 0, sizeof value);
        facts->has_priority = CUDA_CALL(cuGraphKernelNodeGetAttribute, node,
                                        CU_LAUNCH_ATTRIBUTE_PRIORITY, &value) == CUDA_SUCCESS;
        facts->priority = value.priority;
    }
    facts->has_enabled = exec && (type == CU_GRAPH_NODE_TYPE_KERNEL
                                  || type == CU_GRAPH_NODE_TYPE_MEMCPY
                                  || type == CU_GRAPH_NODE_TYPE_MEMSET);
    if (facts->has_enabled)
        CHECK_CUDA(L, "reading whether a graph node is enabled", cuGraphNodeGetEnabled, exec, node,
                   &facts->enabled);
    if (type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        CUDA_MEM_ALLOC_NODE_PARAMS params;
        memset(&params, 0, sizeof params);
        CHECK_CUDA(L, "reading an allocation node", cuGraphMemAllocNodeGetParams, node, &params);
        facts->bytes = params.bytesize;
        facts->address = params.dptr;
    } else if (type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        CHECK_CUDA(L, "reading a free node", cuGraphMemFreeNodeGetParams, node, &facts->address);
    }
    /* Room for every node as a dependency, with its edge's data: the
     * driver refuses to drop edge data (programmatic edges have some). */
    facts->dependency_count = count + 1;
    CHECK_CUDA(L, "reading a graph node's dependencies", cuGraphNodeGetDependencies, node,
               dependencies, edges, &facts->dependency_count);
    for (size_t d = 0; d < facts->dependency_count; d++) {
        indices[d] = 0;
        for (size_t k = 0; k < count && !indices[d]; k++)
            if (nodes[k] == dependencies[d])
                indices[d] = k + 1;
    }
}

static void set_dims(lua_State *L, const char *key, unsigned int x, unsigned int y, unsigned int z)
{
    lua_createtable(L, 3, 0);
    lua_pushinteger(L, x);
    lua_rawseti(L, -2, 1);
    lua_pushinteger(L, y);
    lua_rawseti(L, -2, 2);
    lua_pushinteger(L, z);
    lua_rawseti(L, -2, 3);
    lua_setfield(L, -2, key);
}

/* Pushes argument p of a launch as a Lua value: an integer or a number as
 * the parameter's PTX type says (integers as unsigned: PTX says no more),
 * else its bytes. */
static void push_argument(lua_State *L, const struct gpurun_kernel *kernel,
                          const struct gpurun_node_launch *launch, int p)
{
    const unsigned char *at = launch->storage + kernel->param_offsets[p];
    size_t size = kernel->param_sizes[p];
    if (kernel->param_kinds[p] == GPURUN_PARAM_INTEGER && (size == 1 || size == 2 || size == 4
                                                           || size == 8)) {
        uint64_t value = 0;
        memcpy(&value, at, size); /* little-endian, as every CUDA host is */
        lua_pushinteger(L, (lua_Integer)value);
    } else if (kernel->param_kinds[p] == GPURUN_PARAM_FLOAT && size == sizeof(float)) {
        float value;
        memcpy(&value, at, sizeof value);
        lua_pushnumber(L, value);
    } else if (kernel->param_kinds[p] == GPURUN_PARAM_FLOAT && size == sizeof(double)) {
        double value;
        memcpy(&value, at, sizeof value);
        lua_pushnumber(L, value);
    } else {
        lua_pushlstring(L, (const char *)at, size);
    }
}

/* kernel, name, grid, block, shmem_size and args of a kernel node of a
 * Kernel, from its { kernel, launch } at entry, into the table at the top. */
static void set_launch(lua_State *L, int entry)
{
    entry = lua_absindex(L, entry);
    lua_getfield(L, entry, "kernel");
    const struct gpurun_kernel *kernel = lua_touserdata(L, -1);
    lua_pushstring(L, kernel->name);
    lua_setfield(L, -3, "name");
    lua_setfield(L, -2, "kernel");
    lua_getfield(L, entry, "launch");
    const struct gpurun_node_launch *launch = lua_touserdata(L, -1);
    lua_pop(L, 1); /* the entry anchors it */
    const CUDA_KERNEL_NODE_PARAMS *params = &launch->params;
    set_dims(L, "grid", params->gridDimX, params->gridDimY, params->gridDimZ);
    set_dims(L, "block", params->blockDimX, params->blockDimY, params->blockDimZ);
    lua_pushinteger(L, params->sharedMemBytes);
    lua_setfield(L, -2, "shmem_size");
    lua_createtable(L, kernel->param_count, 0);
    for (int p = 0; p < kernel->param_count; p++) {
        push_argument(L, kernel, launch, p);
        lua_rawseti(L, -2, p + 1);
    }
    lua_setfield(L, -2, "args");
}

static void push_list(lua_State *L, const struct gpurun_node_source *source,
                      const CUgraphNode *nodes, size_t count, int kernel_nodes, int top);

/* nodes = { ... } of the child graph node nodes[i], into the table at the top. */
static void set_child_nodes(lua_State *L, const struct gpurun_node_source *source,
                            const CUgraphNode *nodes, size_t i)
{
    CUgraph child = NULL;
    size_t count = 0;
    check_source(L, source);
    CHECK_CUDA(L, "reading a child graph node", cuGraphChildGraphNodeGetGraph, nodes[i], &child);
    CHECK_CUDA(L, "counting a child graph's nodes", cuGraphGetNodes, child, NULL, &count);
    CUgraphNode *children = gpurun_push_staging(L, (count + 1) * sizeof *children);
    check_source(L, source);
    CHECK_CUDA(L, "reading a child graph node", cuGraphChildGraphNodeGetGraph, nodes[i], &child);
    if (count > 0)
        CHECK_CUDA(L, "listing a child graph's nodes", cuGraphGetNodes, child, children, &count);
    push_list(L, source, children, count, 0, 0);
    lua_setfield(L, -3, "nodes");
    lua_pop(L, 1); /* the staging */
}

/* The rest of node i's table (at the top), from its facts: no driver reads
 * but a child graph's. */
static void set_facts(lua_State *L, const struct gpurun_node_source *source,
                      const CUgraphNode *nodes, size_t i, const struct node_facts *facts,
                      const size_t *indices, int kernel_nodes)
{
    lua_pushinteger(L, (lua_Integer)i + 1);
    lua_setfield(L, -2, "index");
    lua_pushstring(L, gpurun_graph_node_kind(facts->type));
    lua_setfield(L, -2, "kind");
    if (facts->type == CU_GRAPH_NODE_TYPE_KERNEL && kernel_nodes
        && lua_rawgeti(L, kernel_nodes, (lua_Integer)i + 1) == LUA_TTABLE) {
        lua_insert(L, -2);
        set_launch(L, -2);
        lua_insert(L, -2);
        lua_pop(L, 1);
    } else {
        if (facts->type == CU_GRAPH_NODE_TYPE_KERNEL && kernel_nodes)
            lua_pop(L, 1);
        if (facts->kept_kernel) {
            lua_rawgeti(L, source->kept, facts->kept_kernel);
            lua_pushstring(L, ((const struct gpurun_kernel *)lua_touserdata(L, -1))->name);
            lua_setfield(L, -3, "name");
            lua_setfield(L, -2, "kernel");
        }
    }
    if (facts->has_priority) {
        lua_pushinteger(L, facts->priority);
        lua_setfield(L, -2, "priority");
    }
    if (facts->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        lua_pushinteger(L, (lua_Integer)facts->bytes);
        lua_setfield(L, -2, "bytes");
    }
    if (facts->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || facts->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        lua_pushinteger(L, (lua_Integer)facts->address);
        lua_setfield(L, -2, "address");
    }
    if (facts->has_enabled) {
        lua_pushboolean(L, facts->enabled != 0);
        lua_setfield(L, -2, "enabled");
    }
    lua_createtable(L, (int)facts->dependency_count, 0);
    for (size_t d = 0; d < facts->dependency_count; d++) {
        lua_pushinteger(L, (lua_Integer)indices[d]);
        lua_rawseti(L, -2, (lua_Integer)d + 1);
    }
    lua_setfield(L, -2, "dependencies");
    if (facts->type == CU_GRAPH_NODE_TYPE_GRAPH)
        set_child_nodes(L, source, nodes, i);
}

/* Pushes the list of `count` nodes (nodes stays valid while the source
 * holds them); kernel_nodes: the stack index of their launches, or 0; top:
 * the graph's own nodes, which alone the executable graph enables. */
static void push_list(lua_State *L, const struct gpurun_node_source *source,
                      const CUgraphNode *nodes, size_t count, int kernel_nodes, int top)
{
    size_t room = count + 1;
    CUgraphEdgeData *edges = gpurun_push_staging(
        L, room * (sizeof(CUgraphEdgeData) + sizeof(CUgraphNode) + sizeof(size_t)));
    CUgraphNode *dependencies = (CUgraphNode *)(edges + room);
    size_t *indices = (size_t *)(dependencies + room);
    lua_createtable(L, (int)count, 0);
    int list = lua_gettop(L);
    for (size_t i = 0; i < count; i++) {
        struct node_facts facts;
        CUgraphExec exec = check_source(L, source);
        read_node(L, source, top ? exec : NULL, nodes, count, i, &facts, dependencies, edges, indices);
        /* The driver's name first: pushing it copies it before anything
         * can run a finalizer. */
        if (facts.lent_name)
            lua_pushstring(L, facts.lent_name);
        else
            lua_pushnil(L);
        lua_createtable(L, 0, 12);
        lua_insert(L, -2);
        lua_setfield(L, -2, "name");
        set_facts(L, source, nodes, i, &facts, indices, kernel_nodes);
        lua_rawseti(L, list, (lua_Integer)i + 1);
    }
    lua_remove(L, list - 1); /* the staging */
}

void gpurun_graph_push_node_list(lua_State *L, const struct gpurun_node_source *source)
{
    check_source(L, source);
    push_list(L, source, source->nodes, source->count, source->kernel_nodes, 1);
}
