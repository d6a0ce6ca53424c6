/* gpurun.Struct values: fields read and set by name, each number checked
 * and stored by base/dtype.c's rules as it is set, so that a launch copies
 * bytes already packed (types/launch.c). A Struct owns nothing but its Lua
 * memory: it has no close. */
#include "types/struct.h"

#include <string.h>

const struct gpurun_tag gpurun_struct_tag = {"gpurun.Struct"};

/* Pushes the names table of the value at index's layout. */
static void push_names(lua_State *L, int index)
{
    lua_getiuservalue(L, index, 1);
    lua_getiuservalue(L, -1, 1);
    lua_remove(L, -2);
}

/* Raises that the key at key_index names no field of the value at index,
 * listing the first few it has. */
static int no_such_field(lua_State *L, int index, int key_index)
{
    const struct gpurun_struct *value = lua_touserdata(L, index);
    if (lua_type(L, key_index) != LUA_TSTRING)
        return gpurun_error(L, "gpurun.Struct fields are named by strings, got %s",
                            gpurun_type_name(L, key_index));
    push_names(L, index);
    int names = lua_gettop(L);
    luaL_Buffer list;
    luaL_buffinit(L, &list);
    int shown = value->layout->field_count < 16 ? value->layout->field_count : 16;
    for (int i = 1; i <= shown; i++) {
        if (i > 1)
            luaL_addstring(&list, ", ");
        lua_rawgeti(L, names, i);
        luaL_addvalue(&list);
    }
    if (shown < value->layout->field_count)
        luaL_addstring(&list, ", ...");
    luaL_pushresult(&list);
    return gpurun_error(L, "gpurun.Struct has no field '%s' (its fields: %s)",
                        lua_tostring(L, key_index), lua_tostring(L, -1));
}

/* The field the key at key_index names in the value at index, or an error. */
static const struct gpurun_struct_field *find_field(lua_State *L, int index, int key_index)
{
    const struct gpurun_struct *value = lua_touserdata(L, index);
    lua_Integer number = 0;
    if (lua_type(L, key_index) == LUA_TSTRING) {
        push_names(L, index);
        lua_pushvalue(L, key_index);
        lua_rawget(L, -2);
        number = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        lua_pop(L, 2);
    }
    if (number < 1 || number > value->layout->field_count)
        no_such_field(L, index, key_index);
    return &value->layout->fields[number - 1];
}

/* Sets the field from the value at value_index: a number, or for an array
 * field a sequence of `count` numbers. Nothing changes unless all fit. */
static void set_field(lua_State *L, struct gpurun_struct *value,
                      const struct gpurun_struct_field *field, int key_index, int value_index)
{
    const char *name = lua_tostring(L, key_index);
    const struct gpurun_dtype_info *info = &gpurun_dtypes[field->dtype];
    if (!field->array) {
        unsigned char element[GPURUN_MAX_ELEMENT_SIZE];
        const char *why = gpurun_to_element(L, value_index, field->dtype, element);
        if (why)
            gpurun_error(L, "gpurun.Struct field '%s': %s", name, why);
        memcpy(value->bytes + field->offset, element, info->size);
        return;
    }
    if (lua_type(L, value_index) != LUA_TTABLE
        || lua_rawlen(L, value_index) != (size_t)field->count) {
        const char *got = lua_type(L, value_index) == LUA_TTABLE
            ? lua_pushfstring(L, "a table of length %d", (int)lua_rawlen(L, value_index))
            : gpurun_type_name(L, value_index);
        gpurun_error(L, "gpurun.Struct field '%s' takes a sequence of %d %s values, got %s", name,
                     (int)field->count, info->name, got);
    }
    unsigned char *staged = gpurun_push_staging(L, field->count * info->size);
    for (uint32_t i = 0; i < field->count; i++) {
        lua_rawgeti(L, value_index, (lua_Integer)i + 1);
        const char *why = gpurun_to_element(L, -1, field->dtype, staged + i * info->size);
        if (why)
            gpurun_error(L, "gpurun.Struct field '%s' element %d: %s", name, (int)i + 1, why);
        lua_pop(L, 1);
    }
    memcpy(value->bytes + field->offset, staged, field->count * info->size);
    lua_pop(L, 1);
}

/* Sets every field the table at values_index names (raw reads). */
static void set_fields(lua_State *L, int index, int values_index)
{
    struct gpurun_struct *value = lua_touserdata(L, index);
    for (lua_pushnil(L); lua_next(L, values_index); lua_pop(L, 1)) {
        int key = lua_gettop(L) - 1;
        if (lua_type(L, key) != LUA_TSTRING)
            gpurun_error(L, "gpurun.Struct fields are set by name ({ x = 1.5 }), got a %s key",
                         luaL_typename(L, key));
        set_field(L, value, find_field(L, index, key), key, key + 1);
    }
}

struct gpurun_struct *gpurun_push_struct(lua_State *L, int layout_index, int values_index)
{
    layout_index = lua_absindex(L, layout_index);
    if (values_index)
        values_index = lua_absindex(L, values_index);
    const struct gpurun_struct_layout *layout = lua_touserdata(L, layout_index);
    struct gpurun_struct *value =
        gpurun_new_object(L, sizeof *value + layout->size, 1, &gpurun_struct_tag);
    value->layout = layout;
    lua_pushvalue(L, layout_index);
    lua_setiuservalue(L, -2, 1);
    value->header.closed = 0;
    if (values_index)
        set_fields(L, lua_gettop(L), values_index);
    return value;
}

/* value.layout -> its StructLayout */
static int struct_layout(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    return 1;
}

/* value.bytes -> its bytes, as a kernel receives them */
static int struct_bytes(lua_State *L)
{
    const struct gpurun_struct *value = lua_touserdata(L, 1);
    lua_pushlstring(L, (const char *)value->bytes, value->layout->size);
    return 1;
}

static const luaL_Reg struct_fields[] = {
    {"layout", struct_layout},
    {"bytes", struct_bytes},
    {NULL, NULL}
};

int gpurun_struct_member(const char *name)
{
    for (const luaL_Reg *field = struct_fields; field->name; field++)
        if (strcmp(name, field->name) == 0)
            return 1;
    return 0;
}

/* value.name -> the field's number (a sequence for an array field), or
 * one of the value's own members. */
static int struct_index(lua_State *L)
{
    struct gpurun_struct *value = gpurun_check_tagged(L, 1, &gpurun_struct_tag);
    lua_settop(L, 2);
    for (const luaL_Reg *own = struct_fields; own->name && lua_type(L, 2) == LUA_TSTRING; own++)
        if (strcmp(lua_tostring(L, 2), own->name) == 0)
            return own->func(L);
    const struct gpurun_struct_field *field = find_field(L, 1, 2);
    if (field->array)
        gpurun_push_sequence(L, field->dtype, value->bytes + field->offset, field->count,
                             "gpurun.Struct");
    else
        gpurun_push_element(L, field->dtype, value->bytes + field->offset);
    return 1;
}

/* value.name = number (or a sequence, for an array field) */
static int struct_newindex(lua_State *L)
{
    struct gpurun_struct *value = gpurun_check_tagged(L, 1, &gpurun_struct_tag);
    lua_settop(L, 3);
    set_field(L, value, find_field(L, 1, 2), 2, 3);
    return 0;
}

/* "gpurun.Struct{ x = 1.5, v = { 1, 2 } }" */
static int struct_tostring(lua_State *L)
{
    struct gpurun_struct *value = gpurun_check_tagged(L, 1, &gpurun_struct_tag);
    push_names(L, 1);
    int names = lua_gettop(L);
    luaL_Buffer text;
    luaL_buffinit(L, &text);
    luaL_addstring(&text, "gpurun.Struct{ ");
    for (int i = 0; i < value->layout->field_count; i++) {
        const struct gpurun_struct_field *field = &value->layout->fields[i];
        size_t size = gpurun_dtypes[field->dtype].size;
        if (i > 0)
            luaL_addstring(&text, ", ");
        lua_rawgeti(L, names, i + 1);
        luaL_addvalue(&text);
        luaL_addstring(&text, field->array ? " = { " : " = ");
        for (uint32_t k = 0; k < field->count; k++) {
            if (k > 0)
                luaL_addstring(&text, ", ");
            gpurun_push_element(L, field->dtype, value->bytes + field->offset + k * size);
            luaL_tolstring(L, -1, NULL);
            lua_remove(L, -2);
            luaL_addvalue(&text);
        }
        if (field->array)
            luaL_addstring(&text, " }");
    }
    luaL_addstring(&text, " }");
    luaL_pushresult(&text);
    return 1;
}

static const luaL_Reg struct_metamethods[] = {
    {"__newindex", struct_newindex},
    {"__tostring", struct_tostring},
    {NULL, NULL}
};

static const struct gpurun_type struct_type = {
    &gpurun_struct_tag, NULL, struct_metamethods, struct_fields, NULL,
};

void gpurun_open_struct(lua_State *L)
{
    gpurun_register_type(L, &struct_type);
    /* Every other string key is a field of the layout or an error, which
     * the registered __index (methods, then getters, then nil) cannot say. */
    luaL_getmetatable(L, gpurun_struct_tag.type_name);
    lua_pushliteral(L, "Struct.__index");
    lua_pushcclosure(L, struct_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pop(L, 1);
}
