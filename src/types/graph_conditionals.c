/* GraphBuilder's conditional nodes (create_condition, if_then, if_else,
 * switch, while_loop: each body a builder of its own) and what
 * lua/gpurun/builtin/loops.lua builds the loops' decisions and cancel
 * checks with, in package.loaded["gpurun.graph_core"]. */
#include "types/graph_builder.h"

#include "types/condition.h"
#include "types/stream.h"

/* ---- conditional nodes -------------------------------------------------- */

/* Raises unless the driver has conditional nodes of this kind. */
static void require_driver_version(lua_State *L, int needed, const char *what)
{
    int version = 0;
    CHECK_CUDA(L, "reading the driver version", cuDriverGetVersion, &version);
    if (version < needed)
        gpurun_error(L, "%s needs a CUDA %d.%d driver or newer; this one is %d.%d", what,
                     needed / 1000, needed % 1000 / 10, version / 1000, version % 1000 / 10);
}

/* create_condition([default = 0]) -> Condition, set to `default` at every
 * launch of the graph, for the conditional nodes of this capture. */
static int builder_create_condition(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, "create_condition");
    lua_Integer value = gpurun_opt_integer(L, 2, 0, "integer default value");
    if (value < 0 || value > (lua_Integer)UINT32_MAX)
        return gpurun_arg_error(L, 2, "a default from 0 to 4294967295 expected, got %I",
                                (LUAI_UACINT)value);
    require_driver_version(L, 12030, "a graph condition");
    lua_settop(L, 1);
    gpurun_push_condition(L, 1, &builder->capture, (unsigned int)value);
    return 1;
}

/* The driver this gpurun is built for (13.0) has no call that reads a
 * conditional node's bodies back, so each node's are remembered when it is
 * made, for the race check (graph_facts.c): registry[BODIES_KEY][node] =
 * { body graph... } (light userdata). A node's address reused by a later
 * conditional node replaces its entry; other nodes never look theirs up. */
static const char BODIES_KEY = 'b';

static void remember_bodies(lua_State *L, CUgraphNode node, const CUgraph *bodies,
                            unsigned int count)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &BODIES_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &BODIES_KEY);
    }
    lua_createtable(L, (int)count, 0);
    for (unsigned int i = 0; i < count; i++) {
        lua_pushlightuserdata(L, bodies[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_rawsetp(L, -2, node);
    lua_pop(L, 1);
}

int gpurun_push_conditional_bodies(lua_State *L, CUgraphNode node)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &BODIES_KEY) != LUA_TTABLE) {
        lua_pop(L, 1);
        return 0;
    }
    if (lua_rawgetp(L, -1, node) != LUA_TTABLE) {
        lua_pop(L, 2);
        return 0;
    }
    lua_remove(L, -2);
    return 1;
}

/* Adds a conditional node after what was captured and pushes `count` body
 * builders (idle: begin_building() each). */
static int add_conditional(lua_State *L, const char *method, CUgraphConditionalNodeType type,
                           unsigned int count, int needed_driver)
{
    gpurun_check_building(L, 1, method);
    gpurun_check_open(L, 2, &gpurun_condition_tag);
    lua_settop(L, 2);
    /* The message allocates (and can run finalizers): before the checks
     * that read the capture, which are made again. */
    lua_pushfstring(L, "GraphBuilder:%s", method);
    require_driver_version(L, needed_driver, lua_tostring(L, -1));
    lua_settop(L, 2);
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, method);
    struct gpurun_condition *condition = gpurun_check_open(L, 2, &gpurun_condition_tag);
    if (condition->root != builder->capture.root)
        return gpurun_arg_error(L, 2, "a condition of this capture expected: it was made for "
                                      "another graph");
    CUgraph level = NULL;
    if (gpurun_capture_current_graph(&builder->capture, &level) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "reading a graph capture's graph");
    if (level != condition->graph)
        return gpurun_arg_error(L, 2, "a condition made on this builder (or one split from it) "
                                      "expected: a conditional body's nodes take conditions "
                                      "made on the body's builder, and the outer graph's on "
                                      "the outer builders");
    CUgraph bodies[256];
    if (count > sizeof bodies / sizeof bodies[0])
        return gpurun_error(L, "GraphBuilder:switch: at most %d cases",
                            (int)(sizeof bodies / sizeof bodies[0]));
    if (!lua_checkstack(L, (int)count + 4))
        return gpurun_error(L, "GraphBuilder:%s: too many bodies", method);
    CUgraphNode node = NULL;
    if (gpurun_capture_add_conditional(&builder->capture, condition->handle, type, count, &node,
                                       bodies)
        != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "adding a conditional node to a graph capture");
    remember_bodies(L, node, bodies, count);
    for (unsigned int i = 0; i < count; i++) {
        struct gpurun_graph_builder *body = gpurun_push_builder_child(L, 1, builder);
        body->capture.role = GPURUN_CAPTURE_BODY;
        body->capture.root = builder->capture.root;
        body->capture.graph = bodies[i];
    }
    return (int)count;
}

/* if_then(condition) -> body: runs when the condition is non-zero. */
static int builder_if_then(lua_State *L)
{
    return add_conditional(L, "if_then", CU_GRAPH_COND_TYPE_IF, 1, 12030);
}

/* if_else(condition) -> then_body, else_body */
static int builder_if_else(lua_State *L)
{
    return add_conditional(L, "if_else", CU_GRAPH_COND_TYPE_IF, 2, 12080);
}

/* switch(condition, n) -> body 0, ..., body n-1: the body whose index is the
 * condition's value runs, none when it is n or more. */
static int builder_switch(lua_State *L)
{
    gpurun_check_building(L, 1, "switch");
    gpurun_check_open(L, 2, &gpurun_condition_tag);
    lua_Integer count = gpurun_check_integer(L, 3, "integer case count");
    if (count < 1 || count > 256)
        return gpurun_arg_error(L, 3, "a case count from 1 to 256 expected, got %I",
                                (LUAI_UACINT)count);
    return add_conditional(L, "switch", CU_GRAPH_COND_TYPE_SWITCH, (unsigned int)count, 12080);
}

/* while_loop(condition) -> body: runs while the condition is non-zero,
 * checked before each pass; the body's kernels set it. */
static int builder_while_loop(lua_State *L)
{
    return add_conditional(L, "while_loop", CU_GRAPH_COND_TYPE_WHILE, 1, 12030);
}

/* ---- what lua/gpurun/builtin/loops.lua builds the loops' checks with ---- */

/* cancel_address(builder) -> integer: the device address of the cancel
 * flag of the graph the builder records into (a 32-bit word, non-zero when
 * cancelled), taken on first use; the Graph completed from it keeps it. */
static int core_cancel_address(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, "while_loop");
    struct gpurun_capture *root = builder->capture.root;
    /* A new page of flags is allocated here, during the loop's capture,
     * where the driver counts that unsafe: relaxed for the call. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult taken = root->cancel_slot ? CUDA_SUCCESS : gpurun_cancel_take(&root->cancel_slot);
    gpurun_restore_captures(relaxed);
    if (taken != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "allocating a loop's cancel flag (mapped page-locked memory)");
    lua_pushinteger(L, (lua_Integer)gpurun_cancel_address(root->cancel_slot));
    return 1;
}

/* set_closing(body, function): end_building runs function(body) first. */
static int core_set_closing(lua_State *L)
{
    struct gpurun_graph_builder *body = gpurun_check_builder(L, 1);
    if (body->capture.role != GPURUN_CAPTURE_BODY || body->capture.state != GPURUN_CAPTURE_IDLE)
        return gpurun_arg_error(L, 1, "a conditional body not yet built expected");
    if (lua_type(L, 2) != LUA_TFUNCTION)
        return gpurun_type_error(L, 2, "function");
    lua_settop(L, 2);
    lua_setiuservalue(L, 1, GPURUN_BUILDER_CLOSING_VALUE);
    return 0;
}

static const luaL_Reg core_functions[] = {
    {"cancel_address", core_cancel_address},
    {"set_closing", core_set_closing},
    {NULL, NULL}
};

static const luaL_Reg conditional_methods[] = {
    {"create_condition", builder_create_condition},
    {"create_conditional_handle", builder_create_condition},
    {"if_then", builder_if_then},
    {"if_cond", builder_if_then},
    {"if_else", builder_if_else},
    {"switch", builder_switch},
    {"while_loop", builder_while_loop},
    {NULL, NULL}
};

void gpurun_open_graph_conditionals(lua_State *L)
{
    gpurun_add_methods(L, &gpurun_builder_tag, conditional_methods);
    gpurun_set_core_functions(L, "gpurun.graph_core", core_functions);
    /* The conditional nodes as this file makes them, under their method
     * names, for the Lua part that takes the methods' places. */
    gpurun_push_core_table(L, "gpurun.graph_core");
    luaL_getmetatable(L, gpurun_builder_tag.type_name);
    lua_getfield(L, -1, "methods");
    static const char *const nodes[] = {"while_loop", "if_then", "if_cond", "if_else"};
    for (size_t i = 0; i < sizeof nodes / sizeof nodes[0]; i++) {
        lua_getfield(L, -1, nodes[i]);
        lua_setfield(L, -4, nodes[i]);
    }
    lua_pop(L, 3);
}
