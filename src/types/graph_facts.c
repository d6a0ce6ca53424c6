/* What a race check needs to know of a graph's nodes, read from the driver
 * as plain tables for lua/gpurun/builtin/graph_check.lua (Graph:check,
 * GraphBuilder:check), in package.loaded["gpurun.graph_core"]:
 * facts(graph | built builder) -> { nodes, buffers }, and
 * kernel_code(kernel) -> its ObjectCode. What a node holds is said at
 * fill_node; the top level comes first, in Graph:nodes()'s order, then each
 * conditional node's bodies. */
#include "types/graph_facts.h"

#include <stddef.h>
#include <string.h>

#include "types/buffer/buffer.h"
#include "types/buffer/pinned_buffer.h"
#include "types/graph.h"
#include "types/graph_builder.h"
#include "types/kernel.h"
#include "types/tensor_map.h"

#define MAX_DEPTH 32
#define MAX_ARGUMENTS 512

/* What is read: a Graph's clone of its capture, or a built builder's graph.
 * Every allocation can run a finalizer that closes either: checked again
 * before each read. */
struct reading {
    int is_graph;
    CUgraph top;
    int kept;         /* stack index of the sequence of kept objects */
    int kernel_nodes; /* a Graph's { index -> { kernel, launch } }, or 0 */
    int list;         /* the nodes' table being filled */
    CUgraphExec exec; /* a Graph's, for enabled */
};

static void check_reading(lua_State *L, const struct reading *r)
{
    if (r->is_graph) {
        const struct gpurun_graph *graph = gpurun_check_graph(L, 1);
        if (graph->source == r->top)
            return;
    } else {
        const struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
        if (builder->capture.state == GPURUN_CAPTURE_BUILT && builder->capture.graph == r->top)
            return;
    }
    gpurun_error(L, "the graph was closed or built again while it was read");
}

/* What one node's read gives, before any table is made. */
struct node_facts {
    CUgraphNodeType type;
    unsigned int enabled;
    int has_enabled;
    const struct gpurun_kernel *kernel; /* anchored in the kept sequence */
    lua_Integer kernel_at;              /* its place there */
    int argument_count;
    const char *opaque;
    CUdeviceptr src, dst;
    size_t src_bytes, dst_bytes;
    int has_src, has_dst;
    CUdeviceptr address;
    size_t bytes;
    /* Last: read up to argument_count, not cleared. */
    uint64_t arguments[MAX_ARGUMENTS];
    unsigned char is_argument[MAX_ARGUMENTS];
};

/* The span a side of a copy touches: from its first byte to its last. */
static int copy_side(CUmemorytype type, CUdeviceptr device, const void *host, size_t x, size_t y,
                     size_t z, size_t pitch, size_t height, const CUDA_MEMCPY3D *p,
                     CUdeviceptr *start, size_t *bytes)
{
    if (type == CU_MEMORYTYPE_ARRAY)
        return 0;
    CUdeviceptr base = type == CU_MEMORYTYPE_HOST ? (CUdeviceptr)(uintptr_t)host : device;
    *start = base + x + (y + z * height) * pitch;
    size_t rows = p->Height ? p->Height : 1, slices = p->Depth ? p->Depth : 1;
    *bytes = (slices - 1) * pitch * height + (rows - 1) * pitch + p->WidthInBytes;
    return 1;
}

/* A kernel node's gpurun.Kernel, from the kept objects, and its arguments. */
static void read_kernel(lua_State *L, const struct reading *r, CUgraphNode node, size_t top_index,
                        struct node_facts *f)
{
    const unsigned char *storage = NULL;
    CUDA_KERNEL_NODE_PARAMS params;
    memset(&params, 0, sizeof params);
    if (r->kernel_nodes && lua_rawgeti(L, r->kernel_nodes, (lua_Integer)top_index) == LUA_TTABLE) {
        /* A Graph's top-level node: its launch as set_args left it. */
        lua_getfield(L, -1, "kernel");
        f->kernel = lua_touserdata(L, -1);
        lua_getfield(L, -2, "launch");
        storage = ((const struct gpurun_node_launch *)lua_touserdata(L, -1))->storage;
        lua_pop(L, 3);
    } else {
        if (r->kernel_nodes)
            lua_pop(L, 1);
        CHECK_CUDA(L, "reading a kernel node", cuGraphKernelNodeGetParams, node, &params);
        lua_Integer count = (lua_Integer)lua_rawlen(L, r->kept);
        for (lua_Integer k = 1; k <= count && !f->kernel; k++) {
            lua_rawgeti(L, r->kept, k);
            const struct gpurun_kernel *kernel = gpurun_to_tagged(L, -1, &gpurun_kernel_tag);
            if (kernel && (kernel->function == params.func || kernel->handle == params.kern))
                f->kernel = kernel;
            lua_pop(L, 1);
        }
        if (f->kernel && params.kernelParams == NULL)
            f->opaque = "its arguments were given packed (extra)";
    }
    if (!f->kernel || f->opaque)
        return;
    gpurun_check_kernel_open(L, f->kernel);
    f->argument_count = f->kernel->param_count;
    if (f->argument_count > MAX_ARGUMENTS) {
        f->opaque = "it takes more parameters than the check reads";
        return;
    }
    for (int p = 0; p < f->argument_count; p++) {
        const struct gpurun_kernel *k = f->kernel;
        f->is_argument[p] = 0;
        if (strcmp(k->param_types[p], GPURUN_TENSOR_MAP_PARAM) == 0)
            f->opaque = "a TensorMap argument (its memory is not read from the node)";
        if (k->param_sizes[p] != sizeof(uint64_t) || k->param_pointer[p] == GPURUN_POINTER_NO)
            continue;
        const void *at = storage ? storage + k->param_offsets[p] : params.kernelParams[p];
        memcpy(&f->arguments[p], at, sizeof(uint64_t));
        f->is_argument[p] = 1;
    }
}

/* Reads one node into *f: no allocation. */
static void read_node(lua_State *L, const struct reading *r, CUgraphNode node, size_t top_index,
                      struct node_facts *f)
{
    memset(f, 0, offsetof(struct node_facts, arguments));
    CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, node, &f->type);
    f->has_enabled = r->exec && top_index
                     && (f->type == CU_GRAPH_NODE_TYPE_KERNEL || f->type == CU_GRAPH_NODE_TYPE_MEMCPY
                         || f->type == CU_GRAPH_NODE_TYPE_MEMSET);
    if (f->has_enabled)
        CHECK_CUDA(L, "reading whether a graph node is enabled", cuGraphNodeGetEnabled, r->exec,
                   node, &f->enabled);
    if (f->type == CU_GRAPH_NODE_TYPE_KERNEL) {
        read_kernel(L, r, node, top_index, f);
    } else if (f->type == CU_GRAPH_NODE_TYPE_MEMCPY) {
        CUDA_MEMCPY3D p;
        memset(&p, 0, sizeof p);
        CHECK_CUDA(L, "reading a memcpy node", cuGraphMemcpyNodeGetParams, node, &p);
        f->has_src = copy_side(p.srcMemoryType, p.srcDevice, p.srcHost, p.srcXInBytes, p.srcY,
                               p.srcZ, p.srcPitch, p.srcHeight, &p, &f->src, &f->src_bytes);
        f->has_dst = copy_side(p.dstMemoryType, p.dstDevice, p.dstHost, p.dstXInBytes, p.dstY,
                               p.dstZ, p.dstPitch, p.dstHeight, &p, &f->dst, &f->dst_bytes);
    } else if (f->type == CU_GRAPH_NODE_TYPE_MEMSET) {
        CUDA_MEMSET_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        CHECK_CUDA(L, "reading a memset node", cuGraphMemsetNodeGetParams, node, &p);
        size_t row = p.width * p.elementSize;
        f->has_dst = 1;
        f->dst = p.dst;
        f->dst_bytes = p.height > 1 ? (p.height - 1) * p.pitch + row : row;
    } else if (f->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
        CUDA_MEM_ALLOC_NODE_PARAMS p;
        memset(&p, 0, sizeof p);
        CHECK_CUDA(L, "reading an allocation node", cuGraphMemAllocNodeGetParams, node, &p);
        f->address = p.dptr;
        f->bytes = p.bytesize;
    } else if (f->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        CHECK_CUDA(L, "reading a free node", cuGraphMemFreeNodeGetParams, node, &f->address);
    }
}

static void set_span(lua_State *L, const char *key, CUdeviceptr start, size_t bytes)
{
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, (lua_Integer)start);
    lua_setfield(L, -2, "address");
    lua_pushinteger(L, (lua_Integer)bytes);
    lua_setfield(L, -2, "bytes");
    lua_setfield(L, -2, key);
}

/* The table of a node read into *f (already at the top: its name there):
 * { kind, name, dependencies = { index... }, conditional, branch (a body's
 * node: its conditional node's index, which body), enabled (a Graph's
 * top-level kernel, memcpy and memset nodes), and by kind: kernel =
 * Kernel, arguments = { [position] = 64-bit value } (a gpurun.Kernel's
 * 8-byte parameters that may be pointers), opaque = why they are not
 * known; src, dst = { address, bytes } (memcpy: each side's span, a CUDA
 * array's side nil; memset: dst); address, bytes (allocation and free
 * nodes) }. */
static void fill_node(lua_State *L, const struct reading *r, const struct node_facts *f)
{
    lua_pushstring(L, gpurun_graph_node_kind(f->type));
    lua_setfield(L, -2, "kind");
    if (f->has_enabled) {
        lua_pushboolean(L, f->enabled != 0);
        lua_setfield(L, -2, "enabled");
    }
    if (f->kernel) {
        lua_Integer count = (lua_Integer)lua_rawlen(L, r->kept);
        for (lua_Integer k = 1; k <= count; k++) {
            lua_rawgeti(L, r->kept, k);
            if (lua_touserdata(L, -1) == f->kernel) {
                lua_setfield(L, -2, "kernel");
                break;
            }
            lua_pop(L, 1);
        }
        if (f->opaque) {
            lua_pushstring(L, f->opaque);
            lua_setfield(L, -2, "opaque");
        } else {
            lua_createtable(L, 0, f->argument_count);
            for (int p = 0; p < f->argument_count; p++) {
                if (!f->is_argument[p])
                    continue;
                lua_pushinteger(L, (lua_Integer)f->arguments[p]);
                lua_rawseti(L, -2, p + 1);
            }
            lua_setfield(L, -2, "arguments");
        }
    }
    if (f->has_src)
        set_span(L, "src", f->src, f->src_bytes);
    if (f->has_dst)
        set_span(L, "dst", f->dst, f->dst_bytes);
    if (f->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC || f->type == CU_GRAPH_NODE_TYPE_MEM_FREE) {
        lua_pushinteger(L, (lua_Integer)f->address);
        lua_setfield(L, -2, "address");
        if (f->type == CU_GRAPH_NODE_TYPE_MEM_ALLOC) {
            lua_pushinteger(L, (lua_Integer)f->bytes);
            lua_setfield(L, -2, "bytes");
        }
    }
}

static void gather(lua_State *L, struct reading *r, CUgraph level, int conditional, int branch,
                   int depth);

/* The node handles of a level, in a staging userdata pushed (the top
 * level of a Graph: its own list, in Graph:nodes()'s order). */
static CUgraphNode *level_nodes(lua_State *L, struct reading *r, CUgraph level, int top,
                                size_t *count)
{
    CHECK_CUDA(L, "counting graph nodes", cuGraphGetNodes, level, NULL, count);
    size_t room = *count + 1;
    CUgraphNode *nodes = gpurun_push_staging(
        L, room * (2 * sizeof(CUgraphNode) + sizeof(CUgraphEdgeData) + sizeof(size_t)));
    check_reading(L, r);
    if (top && r->is_graph) {
        const struct gpurun_graph *graph = gpurun_check_graph(L, 1);
        *count = graph->node_count < room ? graph->node_count : room - 1;
        memcpy(nodes, graph->nodes, *count * sizeof *nodes);
    } else if (*count > 0) {
        CHECK_CUDA(L, "listing graph nodes", cuGraphGetNodes, level, nodes, count);
    }
    return nodes;
}

static void gather(lua_State *L, struct reading *r, CUgraph level, int conditional, int branch,
                   int depth)
{
    if (depth > MAX_DEPTH)
        gpurun_error(L, "the graph nests conditional bodies more than %d deep", MAX_DEPTH);
    if (!lua_checkstack(L, 8))
        gpurun_error(L, "reading a graph: too many nested bodies for the Lua stack");
    size_t count = 0;
    CUgraphNode *nodes = level_nodes(L, r, level, conditional == 0, &count);
    int staging = lua_gettop(L);
    size_t room = count + 1;
    CUgraphNode *dependencies = nodes + room;
    CUgraphEdgeData *edges = (CUgraphEdgeData *)(dependencies + room);
    size_t *indices = (size_t *)(edges + room);
    struct node_facts *f = gpurun_push_staging(L, sizeof *f);
    lua_Integer base = (lua_Integer)lua_rawlen(L, r->list);
    for (size_t i = 0; i < count; i++) {
        check_reading(L, r);
        read_node(L, r, nodes[i], conditional == 0 ? i + 1 : 0, f);
        size_t n = room;
        CHECK_CUDA(L, "reading a graph node's dependencies", cuGraphNodeGetDependencies,
                   nodes[i], dependencies, edges, &n);
        for (size_t d = 0; d < n; d++) {
            indices[d] = 0;
            for (size_t j = 0; j < count && !indices[d]; j++)
                if (nodes[j] == dependencies[d])
                    indices[d] = j + 1;
        }
        const char *lent_name = NULL; /* the driver's, valid while the graph is */
        CUDA_KERNEL_NODE_PARAMS params;
        if (f->type == CU_GRAPH_NODE_TYPE_KERNEL && !f->kernel
            && (CUDA_CALL(cuGraphKernelNodeGetParams, nodes[i], &params) != CUDA_SUCCESS
                || CUDA_CALL(cuFuncGetName, &lent_name, params.func) != CUDA_SUCCESS))
            lent_name = NULL;
        /* From here on tables: nothing reads the graph until the next node. */
        if (f->kernel)
            lua_pushstring(L, f->kernel->name);
        else
            lua_pushstring(L, lent_name);
        lua_createtable(L, 0, 10);
        lua_insert(L, -2);
        lua_setfield(L, -2, "name");
        fill_node(L, r, f);
        lua_createtable(L, (int)n, 0);
        for (size_t d = 0; d < n; d++) {
            lua_pushinteger(L, base + (lua_Integer)indices[d]);
            lua_rawseti(L, -2, (lua_Integer)d + 1);
        }
        lua_setfield(L, -2, "dependencies");
        if (conditional) {
            lua_pushinteger(L, conditional);
            lua_setfield(L, -2, "conditional");
            lua_pushinteger(L, branch);
            lua_setfield(L, -2, "branch");
        }
        lua_rawseti(L, r->list, base + (lua_Integer)i + 1);
    }
    /* The bodies of this level's conditional nodes, after its nodes. */
    for (size_t i = 0; i < count; i++) {
        check_reading(L, r);
        CUgraphNodeType type;
        CHECK_CUDA(L, "reading a graph node's kind", cuGraphNodeGetType, nodes[i], &type);
        if (type != CU_GRAPH_NODE_TYPE_CONDITIONAL)
            continue;
        if (!gpurun_push_conditional_bodies(L, nodes[i])) {
            lua_rawgeti(L, r->list, base + (lua_Integer)i + 1);
            lua_pushliteral(L, "its bodies are not known (it was not made by a GraphBuilder)");
            lua_setfield(L, -2, "opaque");
            lua_pop(L, 1);
            continue;
        }
        int bodies = lua_gettop(L);
        lua_Integer body_count = (lua_Integer)lua_rawlen(L, bodies);
        for (lua_Integer b = 1; b <= body_count; b++) {
            lua_rawgeti(L, bodies, b);
            CUgraph body = lua_touserdata(L, -1);
            lua_pop(L, 1);
            check_reading(L, r);
            gather(L, r, body, (int)(base + (lua_Integer)i + 1), (int)b, depth + 1);
        }
        lua_pop(L, 1);
    }
    lua_settop(L, staging - 1);
}

/* { { object, address, bytes } } of the Buffers and mapped PinnedBuffers
 * in the kept sequence. */
static void push_buffers(lua_State *L, int kept)
{
    lua_newtable(L);
    lua_Integer count = (lua_Integer)lua_rawlen(L, kept), n = 0;
    for (lua_Integer k = 1; k <= count; k++) {
        lua_rawgeti(L, kept, k);
        CUdeviceptr address = 0;
        size_t bytes = 0;
        const struct gpurun_buffer *buffer = gpurun_to_tagged(L, -1, &gpurun_buffer_tag);
        const struct gpurun_pinned *pinned = gpurun_to_tagged(L, -1, &gpurun_pinned_tag);
        if (buffer && !buffer->header.closed) {
            address = buffer->pointer;
            bytes = buffer->count * buffer->element_size;
        } else if (pinned && !pinned->header.closed) {
            address = pinned->device_pointer ? pinned->device_pointer
                                             : (CUdeviceptr)(uintptr_t)pinned->host;
            bytes = pinned->count * pinned->element_size;
        }
        if (bytes == 0) {
            lua_pop(L, 1);
            continue;
        }
        lua_createtable(L, 0, 3);
        lua_insert(L, -2);
        lua_setfield(L, -2, "object");
        lua_pushinteger(L, (lua_Integer)address);
        lua_setfield(L, -2, "address");
        lua_pushinteger(L, (lua_Integer)bytes);
        lua_setfield(L, -2, "bytes");
        lua_rawseti(L, -2, ++n);
    }
}

/* facts(graph | builder) -> { nodes, buffers } */
static int core_facts(lua_State *L)
{
    struct reading r;
    memset(&r, 0, sizeof r);
    lua_settop(L, 1);
    if (gpurun_to_tagged(L, 1, &gpurun_graph_tag)) {
        struct gpurun_graph *graph = gpurun_check_graph(L, 1);
        r.is_graph = 1;
        r.top = graph->source;
        r.exec = graph->exec;
        lua_getiuservalue(L, 1, GPURUN_GRAPH_KEPT_VALUE);
        r.kept = lua_gettop(L);
        lua_getiuservalue(L, 1, GPURUN_GRAPH_KERNEL_NODES_VALUE);
        r.kernel_nodes = lua_istable(L, -1) ? lua_gettop(L) : 0;
    } else {
        struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
        const struct gpurun_capture *capture = &builder->capture;
        if (capture->role != GPURUN_CAPTURE_ORIGIN || capture->state != GPURUN_CAPTURE_BUILT)
            return gpurun_error(L, "GraphBuilder:check: nothing built to check (it is %s%s): "
                                   "check the builder the capture began on, after "
                                   "end_building() and before complete()",
                                gpurun_capture_state_name(capture->state),
                                capture->role == GPURUN_CAPTURE_ORIGIN ? "" : ", not an origin");
        r.top = capture->graph;
        gpurun_capture_push_objects(L, capture);
        r.kept = lua_gettop(L);
        check_reading(L, &r);
    }
    if (!lua_istable(L, r.kept))
        return gpurun_error(L, "the graph keeps nothing: it was closed");
    lua_createtable(L, 0, 2);
    int result = lua_gettop(L);
    lua_newtable(L);
    r.list = lua_gettop(L);
    gather(L, &r, r.top, 0, 0, 0);
    lua_setfield(L, result, "nodes");
    push_buffers(L, r.kept);
    lua_setfield(L, result, "buffers");
    lua_settop(L, result);
    return 1;
}

/* kernel_code(kernel) -> the ObjectCode it came from */
static int core_kernel_code(lua_State *L)
{
    gpurun_check_kernel(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static const luaL_Reg core_functions[] = {
    {"facts", core_facts},
    {"kernel_code", core_kernel_code},
    {NULL, NULL}
};

void gpurun_open_graph_facts(lua_State *L)
{
    gpurun_set_core_functions(L, "gpurun.graph_core", core_functions);
}
