/* Arguments as values: numbers, integers, strings, dtypes and elements,
 * each checked one way for every function. The element rules are base/dtype.c's;
 * this file turns their verdicts into messages. */
#include "runtime/runtime.h"

#include "base/ipc_descriptor.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

/* Whether the value at index has the metatable registered under the name
 * on top of the stack: a gpurun object, and not a table that only claims
 * its name. */
static int has_registered_metatable(lua_State *L, int index)
{
    if (!lua_getmetatable(L, index))
        return 0;
    lua_getfield(L, LUA_REGISTRYINDEX, lua_tostring(L, -2));
    int same = lua_rawequal(L, -1, -2);
    if (!same) {
        /* An object with a metatable of its own (runtime/object.c: one
         * that has looked methods up often) names its type's in
         * __metatable. */
        lua_getfield(L, -2, "__metatable");
        same = lua_rawequal(L, -1, -2);
        lua_pop(L, 1);
    }
    lua_pop(L, 2);
    return same;
}

const char *gpurun_type_name(lua_State *L, int index)
{
    if (lua_isnone(L, index))
        return "no value";
    index = lua_absindex(L, index);
    int field = luaL_getmetafield(L, index, "__name");
    if (field == LUA_TSTRING) {
        /* A name gpurun's own types use, on a value without their
         * metatable: "table named gpurun.Buffer", not "gpurun.Buffer". */
        if (strncmp(lua_tostring(L, -1), "gpurun.", 7) == 0 && !has_registered_metatable(L, index)) {
            lua_pushfstring(L, "%s named %s", luaL_typename(L, index), lua_tostring(L, -1));
            lua_replace(L, -2);
        }
        return lua_tostring(L, -1); /* left on the stack */
    }
    if (field != LUA_TNIL)
        lua_pop(L, 1);
    if (lua_type(L, index) == LUA_TLIGHTUSERDATA)
        return "light userdata";
    return luaL_typename(L, index);
}

const char *gpurun_value_text(lua_State *L, int index)
{
    if (lua_type(L, index) == LUA_TNUMBER) {
        lua_pushvalue(L, index);
        return lua_tostring(L, -1); /* converts the copy, left on the stack */
    }
    return gpurun_type_name(L, index);
}

int gpurun_type_error(lua_State *L, int arg, const char *expected)
{
    const char *got = gpurun_type_name(L, arg);
    return gpurun_arg_error(L, arg, "%s expected, got %s", expected, got);
}

int gpurun_exact_integer(lua_State *L, int index, lua_Integer *out)
{
    int exact = 0;
    if (lua_type(L, index) != LUA_TNUMBER)
        return 0;
    *out = lua_tointegerx(L, index, &exact);
    return exact;
}

lua_Integer gpurun_check_integer(lua_State *L, int arg, const char *expected)
{
    lua_Integer value = 0;
    if (gpurun_exact_integer(L, arg, &value))
        return value;
    if (expected == NULL) { /* as luaL_checkinteger says it */
        if (lua_type(L, arg) != LUA_TNUMBER)
            gpurun_type_error(L, arg, "number");
        gpurun_arg_error(L, arg, "number has no integer representation");
    }
    const char *got = gpurun_value_text(L, arg);
    return gpurun_arg_error(L, arg, "%s expected, got %s", expected, got);
}

lua_Integer gpurun_opt_integer(lua_State *L, int arg, lua_Integer fallback, const char *expected)
{
    return lua_isnoneornil(L, arg) ? fallback : gpurun_check_integer(L, arg, expected);
}

lua_Number gpurun_check_number(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        gpurun_type_error(L, arg, "number");
    return lua_tonumber(L, arg);
}

lua_Number gpurun_opt_number(lua_State *L, int arg, lua_Number fallback)
{
    return lua_isnoneornil(L, arg) ? fallback : gpurun_check_number(L, arg);
}

const char *gpurun_check_string(lua_State *L, int arg, size_t *length)
{
    /* Numbers pass, as they do for Lua's own string arguments. */
    const char *text = lua_tolstring(L, arg, length);
    if (text == NULL)
        gpurun_type_error(L, arg, "string");
    return text;
}

void gpurun_check_table(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        gpurun_type_error(L, arg, "table");
}

int gpurun_check_options(lua_State *L, int arg, const char *const *known)
{
    if (lua_isnoneornil(L, arg))
        return 0;
    if (lua_type(L, arg) != LUA_TTABLE)
        gpurun_type_error(L, arg, "table of options");
    for (lua_pushnil(L); lua_next(L, arg); lua_pop(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        const char *const *name = known;
        while (key && *name && strcmp(*name, key) != 0)
            name++;
        if (key && *name)
            continue;
        luaL_Buffer b;
        luaL_buffinit(L, &b);
        for (name = known; *name; name++) {
            if (name != known)
                luaL_addstring(&b, ", ");
            luaL_addstring(&b, *name);
        }
        luaL_pushresult(&b);
        if (key)
            gpurun_arg_error(L, arg, "unknown option '%s' (known: %s)", key, lua_tostring(L, -1));
        gpurun_arg_error(L, arg, "unknown option: a %s key (known: %s)", luaL_typename(L, -3),
                         lua_tostring(L, -1));
    }
    return 1;
}

/* Pushes the raw field `key` of the table at arg, or nil when arg is none. */
static int push_option(lua_State *L, int arg, const char *key)
{
    if (lua_type(L, arg) != LUA_TTABLE) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    lua_pushstring(L, key);
    return lua_rawget(L, arg);
}

int gpurun_opt_boolean_field(lua_State *L, int arg, const char *key, int fallback)
{
    int type = push_option(L, arg, key);
    int value = type == LUA_TNIL ? fallback : lua_toboolean(L, -1);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN) {
        const char *got = gpurun_type_name(L, -1);
        gpurun_arg_error(L, arg, "option '%s' must be a boolean, got %s", key, got);
    }
    lua_pop(L, 1);
    return value;
}

lua_Integer gpurun_opt_integer_field(lua_State *L, int arg, const char *key, lua_Integer fallback,
                                     const char *expected)
{
    lua_Integer value = fallback;
    if (push_option(L, arg, key) != LUA_TNIL && !gpurun_exact_integer(L, -1, &value)) {
        const char *got = gpurun_value_text(L, -1);
        gpurun_arg_error(L, arg, "option '%s' must be %s, got %s", key, expected, got);
    }
    lua_pop(L, 1);
    return value;
}

int gpurun_check_dtype(lua_State *L, int arg, int fallback)
{
    if (lua_isnoneornil(L, arg))
        return fallback;
    if (lua_type(L, arg) != LUA_TSTRING)
        gpurun_type_error(L, arg, "dtype name");
    const char *name = lua_tostring(L, arg);
    int dtype = gpurun_dtype_from_name(name);
    if (dtype < 0)
        gpurun_arg_error(L, arg, "unknown dtype '%s' (expected one of: %s)", name,
                         gpurun_dtype_names());
    return dtype;
}

size_t gpurun_check_count(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        gpurun_type_error(L, arg, "positive element count");
    lua_Integer count = 0;
    if (!gpurun_exact_integer(L, arg, &count)) {
        double value = lua_tonumber(L, arg);
        const char *text = gpurun_value_text(L, arg);
        if (value > 0 && value == floor(value))
            gpurun_arg_error(L, arg, "element count %s too large", text);
        gpurun_arg_error(L, arg, "positive element count expected, got %s", text);
    }
    if (count <= 0)
        gpurun_arg_error(L, arg, "positive element count expected, got %I", (LUAI_UACINT)count);
    return (size_t)count;
}

/* A complex element: a number (the real part) or a pair {re, im}. */
static const char *to_complex(lua_State *L, int index, int dtype, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    double parts[2] = {0, 0};
    if (lua_type(L, index) == LUA_TNUMBER) {
        parts[0] = lua_tonumber(L, index);
    } else if (lua_type(L, index) == LUA_TTABLE) {
        index = lua_absindex(L, index);
        for (int i = 0; i < 2; i++) {
            int type = lua_rawgeti(L, index, i + 1);
            parts[i] = lua_tonumber(L, -1);
            lua_pop(L, 1);
            if (type != LUA_TNUMBER)
                return lua_pushfstring(L, "{re, im} pair of numbers expected for %s, got %s "
                                          "as its %s", info->name, lua_typename(L, type),
                                       i == 0 ? "re" : "im");
        }
    } else {
        return lua_pushfstring(L, "number or {re, im} pair expected, got %s",
                               gpurun_type_name(L, index));
    }
    if (gpurun_store_complex(dtype, parts[0], parts[1], out) == GPURUN_FITS)
        return NULL;
    return lua_pushfstring(L, "{%f, %f} out of range for %s", parts[0], parts[1], info->name);
}

const char *gpurun_to_element(lua_State *L, int index, int dtype, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_COMPLEX)
        return to_complex(L, index, dtype, out);
    if (lua_type(L, index) != LUA_TNUMBER)
        return lua_pushfstring(L, "number expected, got %s", gpurun_type_name(L, index));
    enum gpurun_fit fit = lua_isinteger(L, index)
        ? gpurun_store_integer(dtype, (int64_t)lua_tointeger(L, index), out)
        : gpurun_store_float(dtype, (double)lua_tonumber(L, index), out);
    if (fit == GPURUN_FITS)
        return NULL;
    const char *text = gpurun_value_text(L, index);
    if (fit == GPURUN_NOT_INTEGRAL)
        return lua_pushfstring(L, "integer expected for %s, got %s", info->name, text);
    if (info->range == NULL)
        return lua_pushfstring(L, "%s out of range for %s", text, info->name);
    return lua_pushfstring(L, "%s out of range for %s (%s)", text, info->name, info->range);
}

void gpurun_check_element(lua_State *L, int arg, int dtype, void *out)
{
    const char *why = gpurun_to_element(L, arg, dtype, out);
    if (why)
        gpurun_arg_error(L, arg, "%s", why);
}

/* Sets [1] and [2] of the pair table at the top: no allocation. */
static void set_pair(lua_State *L, double re, double im)
{
    lua_pushnumber(L, re);
    lua_rawseti(L, -2, 1);
    lua_pushnumber(L, im);
    lua_rawseti(L, -2, 2);
}

void gpurun_push_element(lua_State *L, int dtype, const void *p)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (info->kind == GPURUN_KIND_FLOAT) {
        lua_pushnumber(L, gpurun_float_element(dtype, p));
        return;
    }
    if (info->kind == GPURUN_KIND_COMPLEX) {
        double re, im;
        gpurun_complex_element(dtype, p, &re, &im); /* before the table can run a finalizer */
        lua_createtable(L, 2, 0);
        set_pair(L, re, im);
        return;
    }
    uint64_t bits = gpurun_integer_element(dtype, p);
    /* Lua has no integer above LUA_MAXINTEGER: those come back as floats. */
    if (info->kind == GPURUN_KIND_UNSIGNED && bits > (uint64_t)LUA_MAXINTEGER)
        lua_pushnumber(L, (lua_Number)bits);
    else
        lua_pushinteger(L, (lua_Integer)bits);
}

void gpurun_store_sequence(lua_State *L, int table_index, int arg, size_t count, int dtype,
                           void *out)
{
    table_index = lua_absindex(L, table_index);
    size_t size = gpurun_dtypes[dtype].size;
    unsigned char *bytes = out;
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, table_index, (lua_Integer)i + 1);
        const char *why = gpurun_to_element(L, -1, dtype, bytes + i * size);
        if (why)
            gpurun_arg_error(L, arg, "element %I: %s", (LUAI_UACINT)(i + 1), why);
        lua_pop(L, 1);
    }
}

void gpurun_new_sequence(lua_State *L, size_t count, int dtype, const char *what)
{
    if (count > INT_MAX)
        gpurun_error(L, "%s: %I elements are too many for a Lua table", what, (LUAI_UACINT)count);
    lua_createtable(L, (int)count, 0);
    if (gpurun_dtypes[dtype].kind != GPURUN_KIND_COMPLEX)
        return;
    /* The pairs too, so that filling them runs no collector. */
    for (size_t i = 0; i < count; i++) {
        lua_createtable(L, 2, 0);
        set_pair(L, 0, 0);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

void gpurun_fill_sequence(lua_State *L, int dtype, const void *p, size_t count)
{
    size_t size = gpurun_dtypes[dtype].size;
    const unsigned char *bytes = p;
    /* Numbers and a presized table: nothing here runs the collector. */
    if (gpurun_dtypes[dtype].kind == GPURUN_KIND_COMPLEX) {
        for (size_t i = 0; i < count; i++) {
            double re, im;
            gpurun_complex_element(dtype, bytes + i * size, &re, &im);
            lua_rawgeti(L, -1, (lua_Integer)i + 1);
            set_pair(L, re, im);
            lua_pop(L, 1);
        }
        return;
    }
    for (size_t i = 0; i < count; i++) {
        gpurun_push_element(L, dtype, bytes + i * size);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

void gpurun_push_sequence(lua_State *L, int dtype, const void *p, size_t count, const char *what)
{
    gpurun_new_sequence(L, count, dtype, what);
    gpurun_fill_sequence(L, dtype, p, count);
}

int gpurun_push_elements_field(lua_State *L, int dtype, size_t count)
{
    const char *key = lua_tostring(L, 2);
    if (strcmp(key, "dtype") == 0)
        lua_pushstring(L, gpurun_dtypes[dtype].name);
    else if (strcmp(key, "size") == 0)
        lua_pushinteger(L, (lua_Integer)count);
    else
        lua_pushinteger(L, (lua_Integer)(count * gpurun_dtypes[dtype].size));
    return 1;
}

size_t gpurun_check_index(lua_State *L, int arg, size_t count, const char *what)
{
    lua_Integer index = 0;
    if (!gpurun_exact_integer(L, arg, &index)) {
        const char *got = gpurun_value_text(L, arg);
        gpurun_arg_error(L, arg, "integer %s index expected, got %s", what, got);
    }
    if (index < 1 || (lua_Unsigned)index > count)
        gpurun_arg_error(L, arg, "%s index %I out of range (1..%I)", what, (LUAI_UACINT)index,
                         (LUAI_UACINT)count);
    return (size_t)index - 1;
}

int gpurun_opt_range(lua_State *L, int arg, size_t size, size_t default_count, size_t *first,
                     size_t *count)
{
    *first = 0;
    *count = size;
    if (lua_type(L, arg) != LUA_TNUMBER)
        return arg;
    *first = gpurun_check_index(L, arg, size, "element");
    int after = arg + 2;
    lua_Integer n;
    if (lua_type(L, arg + 1) == LUA_TNUMBER) {
        n = gpurun_check_integer(L, arg + 1, "integer element count");
        if (n < 1)
            gpurun_arg_error(L, arg + 1, "positive element count expected, got %I",
                             (LUAI_UACINT)n);
    } else {
        if (!lua_isnoneornil(L, arg + 1))
            after = arg + 1;
        n = default_count ? (lua_Integer)default_count : (lua_Integer)(size - *first);
    }
    if ((lua_Unsigned)n > size - *first)
        gpurun_arg_error(L, lua_type(L, arg + 1) == LUA_TNUMBER ? arg + 1 : arg,
                         "%I elements from element %I run past the last (%I)", (LUAI_UACINT)n,
                         (LUAI_UACINT)(*first + 1), (LUAI_UACINT)size);
    *count = (size_t)n;
    return after;
}

void *gpurun_push_staging(lua_State *L, size_t bytes)
{
    return lua_newuserdatauv(L, bytes ? bytes : 1, 0);
}

const char *gpurun_format_size(char *text, size_t size, size_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(text, size, "%zu bytes", bytes);
        return text;
    }
    double scaled = (double)bytes / 1024;
    size_t unit = 0;
    while (scaled >= 1024 && unit + 1 < sizeof units / sizeof units[0]) {
        scaled /= 1024;
        unit++;
    }
    snprintf(text, size, "%.2f %s", scaled, units[unit]);
    return text;
}

void gpurun_check_ipc_descriptor(lua_State *L, int arg, int kind, struct ipc_descriptor *descriptor)
{
    if (lua_type(L, arg) != LUA_TSTRING)
        gpurun_type_error(L, arg, "string (an IPC descriptor)");
    size_t length = 0;
    const char *bytes = lua_tolstring(L, arg, &length);
    char why[160];
    if (ipc_descriptor_decode((const unsigned char *)bytes, length, descriptor, why, sizeof why)
        != 0)
        gpurun_arg_error(L, arg, "bad IPC descriptor: %s", why);
    if (descriptor->kind != kind)
        gpurun_arg_error(L, arg, "IPC descriptor of a %s expected, got one of a %s",
                         ipc_descriptor_kind_name(kind), ipc_descriptor_kind_name(descriptor->kind));
    gpurun_require_driver(L);
    int count = cuda_driver_device_count();
    if (descriptor->device >= count)
        gpurun_arg_error(L, arg, "the descriptor names CUDA device %d: %d device(s) visible",
                         descriptor->device, count);
}

int gpurun_push_load_status(lua_State *L, int (*load)(void), const char *(*why)(void))
{
    if (load() == 0)
        lua_pushnil(L);
    else
        lua_pushstring(L, why());
    return 1;
}
