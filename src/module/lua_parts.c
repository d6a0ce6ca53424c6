/* The loader of the module's parts written in Lua: each is compiled in
 * (CMakeLists.txt makes builtin_lua.h from lua/gpurun/builtin/), returns a
 * function that is called, once per Lua state, with the internals table
 * ({ raise, type_name, guard, proxy_type }), and that returns the
 * functions it adds to the module table; a `metatable` among them is registered under its
 * __name (so C can recognise its objects) instead, and `methods`
 * ({ Buffer = { save = f } }) adds methods to gpurun's registered types.
 * Opening the module again (busted drops package.loaded between files)
 * reuses what the first opening made, so objects made before still belong
 * to the type. */
#include "module/lua_parts.h"

#include <string.h>

/* Their text, so that the module opens without any file of the Lua library. */
static const struct {
    const char *name;
    const char *source;
} builtin_sources[] = {
#include "builtin_lua.h"
};

#define LUA_PARTS_KEY "gpurun.lua_parts"
/* The part that makes the types the other parts write in Lua: every other
 * part gets its function as internal.proxy_type. */
#define PROXY_TYPE_PART "proxy_type"

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

/* internal.guard(f) -> f guarded; internal.guard(t) guards every function
 * of t in place and returns t: for the methods of the objects a part makes
 * (gpurun_push_guarded). */
static int internal_guard(lua_State *L)
{
    if (lua_type(L, 1) == LUA_TTABLE) {
        gpurun_guard_table(L, 1);
        lua_settop(L, 1);
        return 1;
    }
    if (lua_type(L, 1) != LUA_TFUNCTION)
        gpurun_type_error(L, 1, "function or table");
    gpurun_push_guarded(L, 1);
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
    lua_pushcfunction(L, internal_guard);
    lua_setfield(L, -2, "guard");
    if (strcmp(name, PROXY_TYPE_PART) != 0) {
        push_lua_part(L, PROXY_TYPE_PART);
        lua_getfield(L, -1, PROXY_TYPE_PART);
        lua_setfield(L, -3, PROXY_TYPE_PART);
        lua_pop(L, 1);
    }
    lua_call(L, 1, 1);
    if (!lua_istable(L, -1))
        gpurun_error(L, "gpurun's Lua part %s gave no table of exports", name);
    int exports = lua_gettop(L);
    /* Every function it exports, and every method it adds, under the one
     * capture rule. */
    gpurun_guard_table(L, exports);
    if (lua_getfield(L, exports, "methods") == LUA_TTABLE)
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1))
            if (lua_type(L, -1) == LUA_TTABLE)
                gpurun_guard_table(L, -1);
    lua_settop(L, exports);
    /* A type written in Lua (ProgramOptions): its metamethods and methods
     * under the same rule. */
    if (lua_getfield(L, exports, "metatable") == LUA_TTABLE) {
        gpurun_guard_table(L, exports + 1);
        if (lua_getfield(L, exports + 1, "methods") == LUA_TTABLE)
            gpurun_guard_table(L, -1);
        lua_settop(L, exports + 1);
    }
    if (lua_type(L, exports + 1) == LUA_TTABLE
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

void gpurun_open_lua_part(lua_State *L, int module, const char *name)
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
