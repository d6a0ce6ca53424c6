/* Objects and their types: the header every gpurun userdata starts with,
 * registering a type's metatable, and method lookup by plain table reads
 * (docs/architecture.md, "Objects and types", says why it is done so). */
#include "runtime/runtime.h"

#include <string.h>

/* Keys (their addresses) of the type's metatable and of an object's own
 * __index table: the object's metatable made from the type's, and the object. */
static const char own_metatable_key = 0;
static const char object_key = 0;

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

/* Gives the object at the top the metatable of its own that the type's
 * metatable (at -2) describes in `template` (at -1): { metatable entries
 * (key, value, key, value...), ... } whose field "index" is the metatable
 * of the object's __index table. Pops the template. */
static void set_own_metatable(lua_State *L)
{
    int object = lua_gettop(L) - 2, type = object + 1, template = object + 2;
    lua_Integer count = (lua_Integer)lua_rawlen(L, template);
    lua_createtable(L, 0, (int)(count / 2) + 2);
    int metatable = lua_gettop(L);
    for (lua_Integer i = 1; i < count; i += 2) {
        lua_rawgeti(L, template, i);
        lua_rawgeti(L, template, i + 1);
        lua_rawset(L, metatable);
    }
    lua_pushvalue(L, type);
    lua_setfield(L, metatable, "__metatable");
    /* Room for the object and the first few methods it is asked for. */
    lua_createtable(L, 0, 5);
    lua_pushvalue(L, object);
    lua_rawsetp(L, -2, &object_key);
    lua_getfield(L, template, "index");
    lua_setmetatable(L, -2);
    lua_setfield(L, metatable, "__index");
    lua_setmetatable(L, object);
    lua_settop(L, object);
}

void *gpurun_new_object(lua_State *L, size_t size, int uservalues, const struct gpurun_tag *tag)
{
    struct gpurun_object *object = lua_newuserdatauv(L, size, uservalues);
    memset(object, 0, size);
    object->tag = tag;
    object->closed = 1;
    luaL_getmetatable(L, tag->type_name);
    lua_setmetatable(L, -2);
    return object;
}

/* A method must cost one table read, which is what lets data be fields
 * (buf.dtype, graph.node_count) without slowing down the calls that run in
 * loops (graph:launch, plan:launch). A type with no fields has its methods
 * table as its __index. A type with fields cannot: when __index is a table,
 * Lua looks a missing key up in that table's own metatable with the table,
 * not the object, so no getter could see which object it was asked about.
 * So an object of such a type that is asked for its methods often enough
 * (PROMOTE_AFTER look-ups: one that is made, used once and closed never is,
 * so making objects stays cheap) gets a metatable of its own (the type's
 * metamethods, copied) whose __index is a table of its own, holding a
 * reference to the object: a key it lacks goes to one C function that finds
 * the object there, answers a method and keeps it in the table (the next
 * look-up is a plain read), or reads a field. `__metatable` makes
 * getmetatable(object) the type's metatable. Until then the type's
 * __index, one C function, answers. */
#define PROMOTE_AFTER 3

/* Gives the object at 1 its own metatable, when its type makes them. */
static void promote(lua_State *L)
{
    int top = lua_gettop(L);
    lua_pushvalue(L, 1);
    if (lua_getmetatable(L, 1) && lua_rawgetp(L, -1, &own_metatable_key) == LUA_TTABLE)
        set_own_metatable(L);
    lua_settop(L, top);
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

/* The index closures' upvalues: 1 the name, 2 methods, 3 fields (key ->
 * getter), 4 the tag, 5 the getter for other keys (or nil). */
enum { NAME = 1, METHODS, FIELDS, TAG, OTHER, UPVALUES = OTHER };

/* A key that is not a method, of the object at 1 (the key at 2): a field,
 * an element (buf[i]) or nil, each for an open object only. */
static int index_field(lua_State *L)
{
    const struct gpurun_tag *tag = lua_touserdata(L, lua_upvalueindex(TAG));
    lua_CFunction getter = NULL;
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        lua_rawget(L, lua_upvalueindex(FIELDS));
        getter = lua_tocfunction(L, -1);
        lua_pop(L, 1);
    } else {
        getter = lua_tocfunction(L, lua_upvalueindex(OTHER));
    }
    gpurun_check_open(L, 1, tag);
    if (getter == NULL) {
        lua_pushnil(L);
        return 1;
    }
    /* Called directly, not through Lua: errors it raises name __index. */
    return getter(L);
}

/* The type's __index (object, key): what a call by hand (and an object of a
 * type without methods) reaches. */
static int type_index(lua_State *L)
{
    if (lua_isnone(L, 1)) /* "got no value", before settop makes it nil */
        gpurun_check_tagged(L, 1, lua_touserdata(L, lua_upvalueindex(TAG)));
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(METHODS)) != LUA_TNIL) {
        struct gpurun_object *object =
            gpurun_to_tagged(L, 1, lua_touserdata(L, lua_upvalueindex(TAG)));
        if (object && ++object->method_lookups == PROMOTE_AFTER)
            promote(L);
        return 1;
    }
    lua_pop(L, 1);
    return index_field(L);
}

/* The __index of an object's own __index table (table, key), for a key the
 * table lacks: a method is kept in the table, so that the next look-up of
 * it reads the table alone. */
static int own_index(lua_State *L)
{
    lua_settop(L, 2);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(METHODS)) != LUA_TNIL) {
        lua_pushvalue(L, 2);
        lua_pushvalue(L, -2);
        lua_rawset(L, 1);
        return 1;
    }
    lua_pop(L, 1);
    lua_rawgetp(L, 1, &object_key);
    lua_replace(L, 1);
    return index_field(L);
}

/* Pushes the 5 upvalues of the index closures (methods at -2, fields at -1
 * on entry, left there). */
static void push_index_closure(lua_State *L, const struct gpurun_type *type, lua_CFunction index)
{
    lua_pushfstring(L, "%s.__index", short_name(type->tag));
    lua_pushvalue(L, -3);
    lua_pushvalue(L, -3);
    lua_pushlightuserdata(L, (void *)type->tag);
    if (type->index_other)
        lua_pushcfunction(L, type->index_other);
    else
        lua_pushnil(L);
    lua_pushcclosure(L, index, UPVALUES);
}

/* The template an object's own metatable is made from (see
 * set_own_metatable), for the type's metatable at -3 (methods and fields
 * above it), set in it. */
static void set_template(lua_State *L, const struct gpurun_type *type)
{
    int metatable = lua_gettop(L) - 2;
    lua_newtable(L);
    int template = lua_gettop(L);
    lua_Integer n = 0;
    for (lua_pushnil(L); lua_next(L, metatable); lua_pop(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (key == NULL || strncmp(key, "__", 2) != 0 || strcmp(key, "__index") == 0)
            continue;
        lua_pushvalue(L, -2);
        lua_rawseti(L, template, ++n);
        lua_pushvalue(L, -1);
        lua_rawseti(L, template, ++n);
    }
    lua_createtable(L, 0, 1);
    lua_pushvalue(L, template - 2);
    lua_pushvalue(L, template - 1);
    push_index_closure(L, type, own_index);
    lua_setfield(L, -4, "__index");
    lua_pop(L, 2);
    lua_setfield(L, template, "index");
    lua_rawsetp(L, metatable, &own_metatable_key);
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
        /* Nothing but methods: the methods table itself. */
        lua_pushvalue(L, -2);
        lua_setfield(L, -4, "__index");
    } else {
        push_index_closure(L, type, type_index);
        lua_setfield(L, -4, "__index");
        /* Methods to look up as well: each object its own metatable. */
        if (type->methods != NULL)
            set_template(L, type);
    }
    lua_pop(L, 3);
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

void gpurun_set_methods_of(lua_State *L, const struct gpurun_tag *tag, const luaL_Reg *functions)
{
    set_named(L, functions, short_name(tag), ":");
}

void gpurun_push_core_table(lua_State *L, const char *name)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    luaL_getsubtable(L, -1, name);
    lua_remove(L, -2);
}

void gpurun_set_core_functions(lua_State *L, const char *name, const luaL_Reg *functions)
{
    gpurun_push_core_table(L, name);
    gpurun_set_functions(L, functions);
    lua_pop(L, 1);
}

/* __call of a type's table of constructors: the type's own constructor,
 * upvalue 1, with the arguments after the table. */
static int call_constructor(lua_State *L)
{
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_replace(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

void gpurun_set_type_functions(lua_State *L, const struct gpurun_tag *tag,
                               const luaL_Reg *functions)
{
    if (lua_getfield(L, -1, short_name(tag)) == LUA_TFUNCTION) {
        /* The type's constructor (gpurun.Event{...}): its table of other
         * constructors stays callable as it was. */
        lua_newtable(L);
        lua_createtable(L, 0, 1);
        lua_pushvalue(L, -3);
        lua_pushcclosure(L, call_constructor, 1);
        lua_setfield(L, -2, "__call");
        lua_setmetatable(L, -2);
        lua_remove(L, -2);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, short_name(tag));
    } else {
        lua_pop(L, 1);
        luaL_getsubtable(L, -1, short_name(tag));
    }
    set_named(L, functions, tag->type_name, ".");
    lua_pop(L, 1);
}
