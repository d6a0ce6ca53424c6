/* gpurun.StructLayout: a field list laid out by C's rules over base/dtype.c's
 * sizes and alignments (each field at the next multiple of its dtype's
 * alignment, the size a multiple of the largest), the one place gpurun
 * computes a struct's layout. Its values are types/struct.c's. */
#include "types/struct_layout.h"

#include <string.h>

#include "types/struct.h"

static const struct gpurun_tag layout_tag = {"gpurun.StructLayout"};

#define MAX_FIELDS 1024
#define MAX_NAME 64
/* The most bytes of parameters a kernel takes (CUDA 12.1 and later, on
 * Volta and later): no struct argument can be larger. */
#define MAX_SIZE 32764
#define MAX_ALIGN 4096

static size_t align_up(size_t size, size_t alignment)
{
    return (size + alignment - 1) / alignment * alignment;
}

/* C's identifier characters, by ASCII (isalpha would follow the locale). */
static int is_letter(char c)
{
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static int is_identifier(const char *name, size_t length)
{
    if (length == 0 || length > MAX_NAME || !is_letter(name[0]))
        return 0;
    for (size_t i = 1; i < length; i++)
        if (!is_letter(name[i]) && !(name[i] >= '0' && name[i] <= '9'))
            return 0;
    return 1;
}

/* The name of field i (from 1), whose entry is at `entry`, recorded in the
 * names table at `names` (name -> i, i -> name). */
static const char *check_name(lua_State *L, int i, int entry, int names)
{
    size_t length = 0;
    if (lua_rawgeti(L, entry, 1) != LUA_TSTRING)
        gpurun_arg_error(L, 1, "field %d: a name expected first, got %s", i,
                         gpurun_type_name(L, -1));
    const char *name = lua_tolstring(L, -1, &length);
    if (!is_identifier(name, length))
        gpurun_arg_error(L, 1, "field %d: name '%s' is not an identifier of at most %d "
                               "characters (letters, digits, _)", i, name, MAX_NAME);
    if (gpurun_struct_member(name))
        gpurun_arg_error(L, 1, "field %d: '%s' is a gpurun.Struct's own member (layout, "
                               "bytes): name the field otherwise", i, name);
    lua_pushvalue(L, -1);
    if (lua_rawget(L, names) != LUA_TNIL)
        gpurun_arg_error(L, 1, "field %d: '%s' is field %d's name too", i, name,
                         (int)lua_tointeger(L, -1));
    lua_pop(L, 1);
    lua_pushvalue(L, -1);
    lua_pushinteger(L, i);
    lua_rawset(L, names);
    lua_pushvalue(L, -1);
    lua_rawseti(L, names, i);
    return name; /* left on the stack, which keeps it */
}

/* Field i (from 1), whose entry { name, dtype [, count] } is at the top:
 * its dtype and count, placed at the first offset from *offset that its
 * dtype's alignment allows; *offset moves past it. Pops the entry. */
static void check_field(lua_State *L, int i, int names, struct gpurun_struct_field *field,
                        size_t *offset)
{
    int entry = lua_gettop(L);
    if (lua_type(L, entry) != LUA_TTABLE || lua_rawlen(L, entry) < 2 || lua_rawlen(L, entry) > 3)
        gpurun_arg_error(L, 1, "field %d: { name, dtype [, count] } expected, got %s", i,
                         lua_type(L, entry) == LUA_TTABLE ? "another table"
                                                          : gpurun_type_name(L, entry));
    const char *name = check_name(L, i, entry, names);
    if (lua_rawgeti(L, entry, 2) != LUA_TSTRING)
        gpurun_arg_error(L, 1, "field %d ('%s'): a dtype name expected second, got %s", i, name,
                         gpurun_type_name(L, -1));
    field->dtype = gpurun_dtype_from_name(lua_tostring(L, -1));
    if (field->dtype < 0)
        gpurun_arg_error(L, 1, "field %d ('%s'): unknown dtype '%s' (expected one of: %s)", i,
                         name, lua_tostring(L, -1), gpurun_dtype_names());
    lua_Integer count = 1;
    field->array = lua_rawgeti(L, entry, 3) != LUA_TNIL;
    if (field->array && (!gpurun_exact_integer(L, -1, &count) || count < 1 || count > MAX_SIZE))
        gpurun_arg_error(L, 1, "field %d ('%s'): count must be an integer from 1 to %d, got %s",
                         i, name, MAX_SIZE, gpurun_value_text(L, -1));
    const struct gpurun_dtype_info *info = &gpurun_dtypes[field->dtype];
    field->count = (uint32_t)count;
    field->offset = (uint32_t)align_up(*offset, info->align);
    *offset = field->offset + info->size * (size_t)count;
    if (*offset > MAX_SIZE)
        gpurun_arg_error(L, 1, "field %d ('%s') ends at byte %d, past the %d bytes a kernel's "
                               "parameters may take", i, name, (int)*offset, MAX_SIZE);
    lua_settop(L, entry - 1);
}

/* gpurun.struct(fields [, { align = }]) -> StructLayout */
static int module_struct(lua_State *L)
{
    static const char *const options[] = {"align", NULL};
    if (lua_type(L, 1) != LUA_TTABLE)
        gpurun_type_error(L, 1, "list of fields { {name, dtype [, count]}, ... }");
    gpurun_check_options(L, 2, options);
    size_t count = lua_rawlen(L, 1);
    if (count < 1 || count > MAX_FIELDS)
        gpurun_arg_error(L, 1, "a list of 1 to %d fields { {name, dtype [, count]}, ... } "
                               "expected, got %d", MAX_FIELDS, (int)count);
    lua_Integer align = gpurun_opt_integer_field(L, 2, "align", 0, "a power of two");
    lua_settop(L, 2);
    lua_createtable(L, (int)count, (int)count);
    struct gpurun_struct_layout *layout = gpurun_new_object(
        L, sizeof *layout + count * sizeof layout->fields[0], 1, &layout_tag);
    size_t offset = 0, natural = 1;
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, 1, (lua_Integer)i + 1);
        check_field(L, (int)i + 1, 3, &layout->fields[i], &offset);
        if (gpurun_dtypes[layout->fields[i].dtype].align > natural)
            natural = gpurun_dtypes[layout->fields[i].dtype].align;
    }
    if (align != 0 && (align < (lua_Integer)natural || align > MAX_ALIGN || (align & (align - 1))))
        gpurun_arg_error(L, 2, "option 'align' must be a power of two from %d (the fields' own "
                               "alignment) to %d, got %I", (int)natural, MAX_ALIGN,
                         (LUAI_UACINT)align);
    layout->align = align ? (size_t)align : natural;
    layout->size = align_up(offset, layout->align);
    if (layout->size > MAX_SIZE)
        gpurun_arg_error(L, 2, "aligned to %d, the struct is %d bytes, past the %d bytes a "
                               "kernel's parameters may take", (int)layout->align,
                         (int)layout->size, MAX_SIZE);
    layout->field_count = (int)count;
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 1);
    layout->header.closed = 0;
    return 1;
}

static struct gpurun_struct_layout *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

/* The field number (from 1) the string at index names, or 0. */
static int field_number(lua_State *L, int index)
{
    if (lua_type(L, index) != LUA_TSTRING)
        return 0;
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, index);
    lua_rawget(L, -2);
    int number = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : 0;
    lua_pop(L, 2);
    return number;
}

/* layout:new([values]) and layout(values) -> Struct */
static int layout_new(lua_State *L)
{
    gpurun_check_open(L, 1, &layout_tag);
    if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TTABLE)
        gpurun_type_error(L, 2, "table of field values { name = value, ... }");
    gpurun_push_struct(L, 1, lua_istable(L, 2) ? 2 : 0);
    return 1;
}

/* layout:offsetof(name) -> the field's offset in bytes */
static int layout_offsetof(lua_State *L)
{
    struct gpurun_struct_layout *layout = gpurun_check_open(L, 1, &layout_tag);
    int number = field_number(L, 2);
    if (number == 0)
        gpurun_arg_error(L, 2, "field name expected, got %s", lua_type(L, 2) == LUA_TSTRING
                         ? lua_pushfstring(L, "'%s', which names no field", lua_tostring(L, 2))
                         : gpurun_type_name(L, 2));
    lua_pushinteger(L, layout->fields[number - 1].offset);
    return 1;
}

static int layout_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->size);
    return 1;
}

static int layout_align(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->align);
    return 1;
}

/* layout.fields -> { { name =, dtype =, offset =, size = [, count =] }, ... },
 * count for an array field only. */
static int layout_fields(lua_State *L)
{
    int count = self(L)->field_count;
    lua_getiuservalue(L, 1, 1);
    lua_createtable(L, count, 0);
    for (int i = 0; i < count; i++) {
        const struct gpurun_struct_field *field = &self(L)->fields[i];
        const struct gpurun_dtype_info *info = &gpurun_dtypes[field->dtype];
        lua_createtable(L, 0, 5);
        lua_rawgeti(L, -3, i + 1);
        lua_setfield(L, -2, "name");
        lua_pushstring(L, info->name);
        lua_setfield(L, -2, "dtype");
        lua_pushinteger(L, field->offset);
        lua_setfield(L, -2, "offset");
        lua_pushinteger(L, (lua_Integer)(info->size * field->count));
        lua_setfield(L, -2, "size");
        if (field->array) {
            lua_pushinteger(L, field->count);
            lua_setfield(L, -2, "count");
        }
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* "gpurun.StructLayout{ x: float32 @0, v: float32[4] @4; size 20, align 4 }" */
static int layout_tostring(lua_State *L)
{
    struct gpurun_struct_layout *layout = gpurun_check_tagged(L, 1, &layout_tag);
    lua_getiuservalue(L, 1, 1);
    int names = lua_gettop(L);
    luaL_Buffer text;
    luaL_buffinit(L, &text);
    luaL_addstring(&text, "gpurun.StructLayout{ ");
    for (int i = 0; i < layout->field_count; i++) {
        const struct gpurun_struct_field *field = &layout->fields[i];
        lua_rawgeti(L, names, i + 1);
        const char *name = lua_tostring(L, -1);
        if (field->array)
            lua_pushfstring(L, "%s%s: %s[%d] @%d", i ? ", " : "", name,
                            gpurun_dtypes[field->dtype].name, (int)field->count,
                            (int)field->offset);
        else
            lua_pushfstring(L, "%s%s: %s @%d", i ? ", " : "", name,
                            gpurun_dtypes[field->dtype].name, (int)field->offset);
        lua_remove(L, -2);
        luaL_addvalue(&text);
    }
    lua_pushfstring(L, "; size %d, align %d }", (int)layout->size, (int)layout->align);
    luaL_addvalue(&text);
    luaL_pushresult(&text);
    return 1;
}

static const luaL_Reg layout_methods[] = {
    {"new", layout_new},
    {"offsetof", layout_offsetof},
    {NULL, NULL}
};

static const luaL_Reg layout_fields_list[] = {
    {"size", layout_size},
    {"align", layout_align},
    {"fields", layout_fields},
    {NULL, NULL}
};

static const luaL_Reg layout_metamethods[] = {
    {"__call", layout_new},
    {"__tostring", layout_tostring},
    {NULL, NULL}
};

static const struct gpurun_type layout_type = {
    &layout_tag, layout_methods, layout_metamethods, layout_fields_list, NULL,
};

static const luaL_Reg module_functions[] = {
    {"struct", module_struct},
    {NULL, NULL}
};

void gpurun_open_struct_layout(lua_State *L)
{
    gpurun_register_type(L, &layout_type);
    gpurun_set_functions(L, module_functions);
}
