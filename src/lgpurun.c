/* The `gpurun` module opener: registers every type from one list, lowest
 * layer first, as Lua's linit.c opens its libraries, then the parts of the
 * module written in Lua (lua/gpurun/builtin/). Nothing else lives here. */
#include "runtime.h"

#include <string.h>

#include "lbuffer.h"
#include "lcompare.h"
#include "lcondition.h"
#include "ldevice.h"
#include "ldist.h"
#include "levent.h"
#include "lgraph.h"
#include "lgraph_builder.h"
#include "lkernel.h"
#include "llaunch.h"
#include "llaunch_config.h"
#include "llaunch_plan.h"
#include "lobject_code.h"
#include "lpinned.h"
#include "lprogram.h"
#include "lrng.h"
#include "lscalar.h"
#include "lstream.h"
#include "lsystem.h"
#include "module_open.h"

int luaopen_gpurun(lua_State *L);

/* Each adds its type's metatable and its functions to the module table at
 * the top of the stack. A type may use the ones above it in this list (and
 * give them methods: GraphBuilder adds Stream:create_graph_builder), never
 * the ones below. */
static void (*const openers[])(lua_State *L) = {
    gpurun_open_system,        /* device_count, versions, mem_info, perf_counter */
    gpurun_open_event,         /* gpurun.Event */
    gpurun_open_stream,        /* gpurun.Stream, set_current_stream */
    gpurun_open_device,        /* gpurun.Device */
    gpurun_open_condition,     /* gpurun.Condition */
    gpurun_open_graph_builder, /* gpurun.GraphBuilder, Stream:create_graph_builder, join */
    gpurun_open_pinned,        /* gpurun.PinnedBuffer, pinned */
    gpurun_open_buffer,        /* gpurun.Buffer, empty, zeros, full, array, from_bytes */
    gpurun_open_rng,           /* gpurun.Generator, default_rng */
    gpurun_open_compare,       /* compare, allclose */
    gpurun_open_scalar,        /* gpurun.Scalar, u64, f32, ... */
    gpurun_open_launch_config, /* gpurun.LaunchConfig */
    gpurun_open_kernel,        /* gpurun.Kernel */
    gpurun_open_object_code,   /* gpurun.ObjectCode */
    gpurun_open_program,       /* gpurun.Program, cache_info */
    gpurun_open_launch,        /* launch */
    gpurun_open_launch_plan,   /* gpurun.LaunchPlan, Kernel:bind */
    gpurun_open_graph,         /* gpurun.Graph, GraphBuilder:complete */
    gpurun_open_dist,          /* the C side of require("gpurun.dist") */
};

/* Parts of the module written in Lua: each module returns a function that
 * is called, once per Lua state, with the internals table ({ raise = f,
 * type_name = f }),
 * and returns the functions it adds to the module table; a `metatable`
 * among them is registered under its __name (so C can recognise its objects)
 * instead, and `methods` ({ Buffer = { save = f } }) adds methods to
 * gpurun's registered types. Opening the module again (busted drops
 * package.loaded between files) reuses what the first opening made, so
 * objects made before still belong to the type. */
static const char *const lua_parts[] = {
    "program_options", /* gpurun.ProgramOptions */
    "elementwise",     /* gpurun.elementwise, elementwise_pipeline */
    "graph_dot",       /* Graph:to_dot */
    "npy_files",       /* gpurun.load, Buffer:save */
};

/* Their text, compiled in from lua/gpurun/builtin/ (CMakeLists.txt), so that
 * the module opens without any file of the Lua library. */
static const struct {
    const char *name;
    const char *source;
} builtin_sources[] = {
#include "builtin_lua.h"
};

#define LUA_PARTS_KEY "gpurun.lua_parts"

/* internal.raise(message [, level]): raises as gpurun's C functions do,
 * ending every capture in progress first. The position is level's, counted
 * as error() counts (0: none), or without a level the first caller outside
 * gpurun's builtin Lua parts (and outside C), where a C function's error
 * would point. */
static int internal_raise(lua_State *L)
{
    const char *message = lua_tostring(L, 1);
    if (lua_isinteger(L, 2))
        return gpurun_error_at(L, (int)lua_tointeger(L, 2), message ? message : "(no message)");
    return gpurun_error_outside(L, "/gpurun/builtin/", message ? message : "(no message)");
}

/* internal.type_name(count, value): what gpurun's messages call the type
 * of value ("gpurun.Buffer", "number"), or "no value" when count is 0 (the
 * caller's select("#", ...)). */
static int internal_type_name(lua_State *L)
{
    if (lua_tointeger(L, 1) == 0)
        lua_pushliteral(L, "no value");
    else
        lua_pushstring(L, gpurun_type_name(L, 2));
    return 1;
}

/* Pushes the exports of the Lua part `name`, made once per Lua state. */
static void push_lua_part(lua_State *L, const char *name)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_PARTS_KEY);
    if (lua_getfield(L, -1, name) == LUA_TTABLE) {
        lua_remove(L, -2);
        return;
    }
    lua_pop(L, 1);
    const char *source = NULL;
    for (size_t i = 0; i < sizeof builtin_sources / sizeof builtin_sources[0]; i++)
        if (strcmp(builtin_sources[i].name, name) == 0)
            source = builtin_sources[i].source;
    if (source == NULL)
        gpurun_error(L, "gpurun was built without its Lua part %s", name);
    lua_pushfstring(L, "@lua/gpurun/builtin/%s.lua", name);
    if (luaL_loadbufferx(L, source, strlen(source), lua_tostring(L, -1), "t") != LUA_OK)
        gpurun_error(L, "%s", lua_tostring(L, -1)); /* a syntax error in gpurun itself */
    lua_remove(L, -2);
    lua_call(L, 0, 1);
    lua_newtable(L);
    lua_pushcfunction(L, internal_raise);
    lua_setfield(L, -2, "raise");
    lua_pushcfunction(L, internal_type_name);
    lua_setfield(L, -2, "type_name");
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1))
        gpurun_error(L, "gpurun's Lua part %s gave no table of exports", name);
    int exports = lua_gettop(L);
    if (lua_getfield(L, exports, "metatable") == LUA_TTABLE
        && lua_getfield(L, exports + 1, "__name") == LUA_TSTRING) {
        lua_pushvalue(L, exports + 1);
        lua_setfield(L, LUA_REGISTRYINDEX, lua_tostring(L, exports + 2));
    }
    lua_settop(L, exports);
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, name);
    lua_remove(L, -2);
}

/* Adds { Type = { name = function } } at the top to the types' methods. */
static void add_lua_methods(lua_State *L, const char *part)
{
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TTABLE)
            gpurun_error(L, "gpurun's Lua part %s gave methods that are not { Type = { ... } }", part);
        const char *type_name = lua_pushfstring(L, "gpurun.%s", lua_tostring(L, -2));
        if (luaL_getmetatable(L, type_name) != LUA_TTABLE
            || lua_getfield(L, -1, "methods") != LUA_TTABLE)
            gpurun_error(L, "gpurun's Lua part %s adds methods to %s, which is not registered",
                         part, type_name);
        for (lua_pushnil(L); lua_next(L, -5); lua_pop(L, 1)) {
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, -5);
        }
        lua_pop(L, 3);
    }
}

static void open_lua_part(lua_State *L, int module, const char *name)
{
    push_lua_part(L, name);
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (key && strcmp(key, "methods") == 0)
            add_lua_methods(L, name);
        else if (key && strcmp(key, "metatable") != 0) {
            lua_pushvalue(L, -2);
            lua_pushvalue(L, -2);
            lua_rawset(L, module);
        }
    }
    lua_settop(L, module);
}

int luaopen_gpurun(lua_State *L)
{
    /* The version check and the one-state guard, before the runtime's state
     * object, so that the guard's __gc runs after the runtime's. */
    gpurun_module_prologue(L);
    gpurun_open_runtime(L);
    lua_newtable(L);
    int module = lua_gettop(L);
    for (size_t i = 0; i < sizeof openers / sizeof openers[0]; i++)
        openers[i](L);
    /* The Lua parts may require gpurun's Lua library, which requires gpurun:
     * they find this table, not a second opening. */
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_pushvalue(L, module);
    lua_setfield(L, -2, "gpurun");
    lua_pop(L, 1);
    for (size_t i = 0; i < sizeof lua_parts / sizeof lua_parts[0]; i++)
        open_lua_part(L, module, lua_parts[i]);
    return 1;
}
