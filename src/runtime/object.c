/* Objects and their types: the header every gpurun userdata starts with,
 * registering a type's metatable, and fast method lookup.
 *
 * A type's __index is a closure holding its methods table and its fields
 * table: a method costs one raw table read, which is what lets data be
 * fields (buf.dtype, graph.node_count) without slowing down the calls that
 * run in loops (graph:launch, plan:launch). */
#include "runtime/runtime.h"

#include <string.h>

void *gpurun_check_tagged(lua_State *L, int index, const struct gpurun_tag *tag)
{
    void *object = gpurun_to_tagged(L, index, tag);
    if (object == NULL)
        gpurun_type_error(L, index, tag->type_name);
    return object;
}

void *gpurun_check_open(lua_State *L, int index, const struct gpurun_tag *tag)
{
    struct gpurun_object *object = gpurun_check_tagged(L, index, tag);
    if (object->closed)
        gpurun_closed_error(L, tag->type_name);
    return object;
}

void *gpurun_new_object(lua_State *L, size_t size, int uservalues, const struct gpurun_tag *tag)
{
    struct gpurun_object *object = lua_newuserdatauv(L, size, uservalues);
    memset(object, 0, size);
    object->tag = tag;
    object->closed = 1;
    luaL_setmetatable(L, tag->type_name);
    return object;
}

/* "Buffer" of "gpurun.Buffer". */
static const char *short_name(const struct gpurun_tag *tag)
{
    const char *dot = strchr(tag->type_name, '.');
    return dot ? dot + 1 : tag->type_name;
}

/* Sets each function in the table at the top as a closure over its name,
 * prefix .. separator .. name. */
static void set_named(lua_State *L, const luaL_Reg *functions, const char *prefix,
                      const char *separator)
{
    for (; functions && functions->name; functions++) {
        lua_pushfstring(L, "%s%s%s", prefix, separator, functions->name);
        lua_pushcclosure(L, functions->func, 1);
        lua_setfield(L, -2, functions->name);
    }
}

/* Upvalues: 1 the name, 2 methods, 3 fields (key -> getter), 4 the tag,
 * 5 the getter for other keys (or nil). */
static int type_index(lua_State *L)
{
    const struct gpurun_tag *tag = lua_touserdata(L, lua_upvalueindex(4));
    if (lua_isnone(L, 1))
        gpurun_check_tagged(L, 1, tag); /* "got no value", before settop makes it nil */
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL)
        return 1;
    lua_pop(L, 1);
    lua_CFunction getter = NULL;
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        lua_rawget(L, lua_upvalueindex(3));
        getter = lua_tocfunction(L, -1);
        lua_pop(L, 1);
    } else {
        getter = lua_tocfunction(L, lua_upvalueindex(5));
    }
    gpurun_check_open(L, 1, tag);
    if (getter == NULL) {
        lua_pushnil(L);
        return 1;
    }
    /* Called directly, not through Lua: errors it raises name __index. */
    return getter(L);
}

void gpurun_register_type(lua_State *L, const struct gpurun_type *type)
{
    const char *name = short_name(type->tag);
    /* Opened again (busted drops package.loaded between files): the same
     * tables, so that methods a Lua part added the first time stay. */
    int reopened = !luaL_newmetatable(L, type->tag->type_name);
    set_named(L, type->metamethods, name, ".");

    if (!reopened || lua_getfield(L, -1, "methods") != LUA_TTABLE) {
        if (reopened)
            lua_pop(L, 1);
        lua_newtable(L);
    }
    set_named(L, type->methods, name, ":");
    lua_pushvalue(L, -1);
    lua_setfield(L, -3, "methods");
    if (!reopened || lua_getfield(L, -2, "fields") != LUA_TTABLE) {
        if (reopened)
            lua_pop(L, 1);
        lua_newtable(L);
    }
    for (const luaL_Reg *field = type->fields; field && field->name; field++) {
        lua_pushcfunction(L, field->func);
        lua_setfield(L, -2, field->name);
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, -4, "fields");

    if (type->fields == NULL && type->index_other == NULL) {
        /* Nothing but methods: the methods table itself, the fastest look-up. */
        lua_pop(L, 1);
        lua_setfield(L, -2, "__index");
    } else {
        lua_pushfstring(L, "%s.__index", name);
        lua_insert(L, -3);
        lua_pushlightuserdata(L, (void *)type->tag);
        if (type->index_other)
            lua_pushcfunction(L, type->index_other);
        else
            lua_pushnil(L);
        lua_pushcclosure(L, type_index, 5);
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
}

void gpurun_add_methods(lua_State *L, const struct gpurun_tag *tag, const luaL_Reg *methods)
{
    luaL_getmetatable(L, tag->type_name);
    lua_getfield(L, -1, "methods");
    set_named(L, methods, short_name(tag), ":");
    lua_pop(L, 2);
}

void gpurun_set_functions(lua_State *L, const luaL_Reg *functions)
{
    set_named(L, functions, "gpurun", ".");
}
