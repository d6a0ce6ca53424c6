/* gpurun.ProgramOptions: a read-only, validated set of NVRTC options. The
 * option strings are built once, in a fixed order, so that equal options
 * always give the same list (and the same kernel cache key). */
#include "lprogram.h"

#include <stdlib.h>

/* The keys, in the order their NVRTC options appear in as_list(). */
static const char *const option_keys[] = {
    "std", "arch", "defines", "include_paths", "line_info", "debug",
    "use_fast_math", "max_register_count", "relocatable_device_code", "extra", NULL
};

/* Uservalues: 1 = the normalised fields (a table), 2 = the NVRTC options. */
struct program_options {
    int closed;
};

static struct program_options *check_options(lua_State *L, int index)
{
    struct program_options *options = luaL_checkudata(L, index, GPURUN_PROGRAM_OPTIONS);
    if (options->closed)
        gpurun_closed_error(L, GPURUN_PROGRAM_OPTIONS);
    return options;
}

int gpurun_compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

void gpurun_replace_with_copy(lua_State *L)
{
    lua_newtable(L);
    for (lua_pushnil(L); lua_next(L, -3);) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_remove(L, -2);
}

/* ---- reading the options ------------------------------------------------ */

/* The offending value is on top of the stack. */
static int option_error(lua_State *L, const char *key, const char *expected)
{
    if (lua_type(L, -1) == LUA_TSTRING)
        return luaL_error(L, "gpurun.ProgramOptions: '%s' must be %s, got \"%s\"", key,
                          expected, lua_tostring(L, -1));
    return luaL_error(L, "gpurun.ProgramOptions: '%s' must be %s, got %s", key, expected,
                      luaL_typename(L, -1));
}

/* While building: the input table at 1, fields at 3, the option list at 4;
 * the value being read on top. */
#define INPUT 1
#define FIELDS 3
#define LIST 4

/* Pushes the input's value for key and returns its type; an absent option
 * pushes nothing and returns LUA_TNIL. */
static int push_input(lua_State *L, const char *key)
{
    int type = lua_getfield(L, INPUT, key);
    if (type == LUA_TNIL)
        lua_pop(L, 1);
    return type;
}

static void append_option(lua_State *L)
{
    lua_rawseti(L, LIST, (lua_Integer)lua_rawlen(L, LIST) + 1);
}

static void read_std(lua_State *L)
{
    if (push_input(L, "std") == LUA_TNIL)
        return;
    const char *std = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!std || !gpurun_has_prefix(std, "c++") || strlen(std) != 5
        || strspn(std + 3, "0123456789") != 2)
        option_error(L, "std", "a C++ standard such as \"c++17\"");
    lua_pushfstring(L, "--std=%s", std);
    append_option(L);
    lua_setfield(L, FIELDS, "std");
}

/* "sm_90", "90" (meaning sm_90), "compute_90"; a letter suffix ("sm_90a") is
 * kept. An integer 90 is read as "90". */
static void read_arch(lua_State *L)
{
    int type = push_input(L, "arch");
    if (type == LUA_TNIL)
        return;
    if (type == LUA_TNUMBER && lua_isinteger(L, -1))
        lua_tostring(L, -1); /* converts in place */
    const char *arch = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const char *digits = !arch ? NULL
                         : gpurun_has_prefix(arch, "sm_") ? arch + 3
                         : gpurun_has_prefix(arch, "compute_") ? arch + 8 : arch;
    size_t n = digits ? strspn(digits, "0123456789") : 0;
    int valid = n >= 2 && (digits[n] == '\0'
                           || (digits[n] >= 'a' && digits[n] <= 'z' && digits[n + 1] == '\0'));
    if (!valid)
        option_error(L, "arch", "an architecture such as \"sm_90\", \"90\" or \"compute_90\"");
    if (digits == arch)
        lua_pushfstring(L, "sm_%s", arch);
    else
        lua_pushvalue(L, -1);
    lua_pushfstring(L, "--gpu-architecture=%s", lua_tostring(L, -1));
    append_option(L);
    lua_setfield(L, FIELDS, "arch");
    lua_pop(L, 1);
}

/* {"NAME", "NAME=1", ...} and/or {NAME = "value" | number | true}: the list
 * first, in order, then the named ones sorted, so that the options (and the
 * cache key) never depend on table iteration order. */
static void read_defines(lua_State *L)
{
    if (push_input(L, "defines") == LUA_TNIL)
        return;
    if (!lua_istable(L, -1))
        option_error(L, "defines", "a table of macro names or NAME = value pairs");
    int defines = lua_gettop(L);
    lua_Integer length = (lua_Integer)lua_rawlen(L, defines);
    lua_newtable(L); /* the field: a copy */
    int copy = defines + 1;
    for (lua_Integer i = 1; i <= length; i++) {
        lua_rawgeti(L, defines, i);
        if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
            luaL_error(L, "gpurun.ProgramOptions: 'defines[%I]' must be a macro name "
                          "(a non-empty string), got %s", i, luaL_typename(L, -1));
        lua_pushfstring(L, "-D%s", lua_tostring(L, -1));
        append_option(L);
        lua_rawseti(L, copy, i);
    }
    size_t named = 0;
    for (lua_pushnil(L); lua_next(L, defines); lua_pop(L, 1))
        named += lua_type(L, -2) == LUA_TSTRING;
    const char **names = gpurun_scratch(L, named * sizeof *names);
    size_t count = 0;
    for (lua_pushnil(L); lua_next(L, defines); lua_pop(L, 1)) {
        if (lua_type(L, -2) == LUA_TSTRING) {
            names[count++] = lua_tostring(L, -2); /* anchored in `defines` */
            continue;
        }
        if (lua_isinteger(L, -2) && lua_tointeger(L, -2) >= 1 && lua_tointeger(L, -2) <= length)
            continue;
        luaL_error(L, "gpurun.ProgramOptions: 'defines' keys must be macro names or "
                      "list positions, got %s key", luaL_typename(L, -2));
    }
    qsort(names, count, sizeof *names, gpurun_compare_strings);
    for (size_t i = 0; i < count; i++) {
        if (!*names[i] || strchr(names[i], '='))
            luaL_error(L, "gpurun.ProgramOptions: 'defines' has a bad macro name '%s'", names[i]);
        int type = lua_getfield(L, defines, names[i]);
        if (type == LUA_TBOOLEAN && lua_toboolean(L, -1))
            lua_pushfstring(L, "-D%s", names[i]);
        else if (type == LUA_TSTRING || type == LUA_TNUMBER)
            lua_pushfstring(L, "-D%s=%s", names[i], lua_tostring(L, -1));
        else
            luaL_error(L, "gpurun.ProgramOptions: 'defines.%s' must be a string, a number "
                          "or true, got %s", names[i], luaL_typename(L, -1));
        append_option(L);
        lua_setfield(L, copy, names[i]);
    }
    lua_pop(L, 1); /* names */
    lua_setfield(L, FIELDS, "defines");
    lua_pop(L, 1);
}

/* A string or a list of strings, each becoming prefix .. string. */
static void read_string_list(lua_State *L, const char *key, const char *prefix)
{
    int type = push_input(L, key);
    if (type == LUA_TNIL)
        return;
    if (type == LUA_TSTRING) {
        lua_createtable(L, 1, 0);
        lua_insert(L, -2);
        lua_rawseti(L, -2, 1);
    } else if (type != LUA_TTABLE) {
        option_error(L, key, "a string or a list of strings");
    }
    lua_Integer length = (lua_Integer)lua_rawlen(L, -1);
    lua_createtable(L, (int)length, 0);
    for (lua_Integer i = 1; i <= length; i++) {
        if (lua_rawgeti(L, -2, i) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
            luaL_error(L, "gpurun.ProgramOptions: '%s[%I]' must be a non-empty string, got %s",
                       key, i, luaL_typename(L, -1));
        lua_pushfstring(L, "%s%s", prefix, lua_tostring(L, -1));
        append_option(L);
        lua_rawseti(L, -2, i);
    }
    lua_setfield(L, FIELDS, key);
    lua_pop(L, 1);
}

static void read_flag(lua_State *L, const char *key, const char *option)
{
    int type = push_input(L, key);
    if (type == LUA_TNIL)
        return;
    if (type != LUA_TBOOLEAN)
        option_error(L, key, "a boolean");
    if (lua_toboolean(L, -1)) {
        lua_pushstring(L, option);
        append_option(L);
    }
    lua_setfield(L, FIELDS, key);
}

static void read_max_register_count(lua_State *L)
{
    if (push_input(L, "max_register_count") == LUA_TNIL)
        return;
    int is_integer = 0;
    lua_Integer count = lua_tointegerx(L, -1, &is_integer);
    if (!is_integer || lua_type(L, -1) != LUA_TNUMBER || count < 1 || count > 255)
        option_error(L, "max_register_count", "an integer from 1 to 255");
    lua_pushfstring(L, "--maxrregcount=%I", count);
    append_option(L);
    lua_pushinteger(L, count);
    lua_setfield(L, FIELDS, "max_register_count");
    lua_pop(L, 1);
}

/* ProgramOptions{...} -> a read-only set of NVRTC options. */
static int options_new(lua_State *L)
{
    if (lua_isnoneornil(L, 1)) {
        lua_settop(L, 0);
        lua_newtable(L);
    }
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_settop(L, 1);
    for (lua_pushnil(L); lua_next(L, 1); lua_pop(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        int known = 0;
        for (int i = 0; key && option_keys[i] && !known; i++)
            known = strcmp(key, option_keys[i]) == 0;
        if (!known)
            return luaL_error(L, "gpurun.ProgramOptions: unknown option %s%s%s (known: std, arch, "
                                 "defines, include_paths, line_info, debug, use_fast_math, "
                                 "max_register_count, relocatable_device_code, extra)",
                              key ? "'" : "a ", key ? key : luaL_typename(L, -2), key ? "'" : " key");
    }
    struct program_options *options = lua_newuserdatauv(L, sizeof *options, 2);
    options->closed = 0;
    luaL_setmetatable(L, GPURUN_PROGRAM_OPTIONS);
    lua_newtable(L); /* FIELDS */
    lua_newtable(L); /* LIST */
    read_std(L);
    read_arch(L);
    read_defines(L);
    read_string_list(L, "include_paths", "--include-path=");
    read_flag(L, "line_info", "--generate-line-info");
    read_flag(L, "debug", "--device-debug");
    read_flag(L, "use_fast_math", "--use_fast_math");
    read_max_register_count(L);
    read_flag(L, "relocatable_device_code", "--relocatable-device-code=true");
    read_string_list(L, "extra", "");
    lua_setiuservalue(L, 2, 2);
    lua_setiuservalue(L, 2, 1);
    return 1;
}

#undef INPUT
#undef FIELDS
#undef LIST

/* ---- for Program -------------------------------------------------------- */

void gpurun_to_program_options(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    if (lua_isnil(L, index) || lua_istable(L, index)) {
        lua_pushcfunction(L, options_new);
        lua_pushvalue(L, index);
        lua_call(L, 1, 1);
        lua_replace(L, index);
    } else if (!luaL_testudata(L, index, GPURUN_PROGRAM_OPTIONS)) {
        luaL_typeerror(L, index, "gpurun.ProgramOptions or table");
    }
    check_options(L, index);
}

void gpurun_push_option_list(lua_State *L, int index)
{
    lua_getiuservalue(L, index, 2);
}

/* ---- methods ------------------------------------------------------------ */

/* as_list() -> the NVRTC option strings, in order (a fresh table). */
static int options_as_list(lua_State *L)
{
    check_options(L, 1);
    lua_getiuservalue(L, 1, 2);
    gpurun_replace_with_copy(L);
    return 1;
}

static int options_close(lua_State *L)
{
    struct program_options *options = luaL_checkudata(L, 1, GPURUN_PROGRAM_OPTIONS);
    options->closed = 1;
    return 0;
}

static int options_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_PROGRAM_OPTIONS))
        return 1;
    check_options(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) == LUA_TTABLE)
        gpurun_replace_with_copy(L); /* fields are read-only: changing a copy changes nothing */
    return 1;
}

static int options_newindex(lua_State *L)
{
    return luaL_error(L, "gpurun.ProgramOptions is read-only: make a new one with the "
                         "options you want");
}

static int options_tostring(lua_State *L)
{
    struct program_options *options = luaL_checkudata(L, 1, GPURUN_PROGRAM_OPTIONS);
    lua_settop(L, 1);
    if (options->closed) {
        lua_pushliteral(L, "gpurun.ProgramOptions(closed)");
        return 1;
    }
    luaL_Buffer b;
    lua_getiuservalue(L, 1, 2);
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "gpurun.ProgramOptions(");
    lua_Integer count = (lua_Integer)lua_rawlen(L, 2);
    for (lua_Integer i = 1; i <= count; i++) {
        if (i > 1)
            luaL_addchar(&b, ' ');
        lua_rawgeti(L, 2, i);
        luaL_addvalue(&b);
    }
    luaL_addchar(&b, ')');
    luaL_pushresult(&b);
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg options_meth[] = {
    {"as_list", options_as_list},
    {"close", options_close},
    {NULL, NULL}
};

static const luaL_Reg options_metameth[] = {
    {"__index", options_index},
    {"__newindex", options_newindex},
    {"__tostring", options_tostring},
    {"__close", options_close},
    {"__gc", options_close},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"ProgramOptions", options_new},
    {NULL, NULL}
};

void gpurun_open_program_options(lua_State *L)
{
    gpurun_new_type(L, GPURUN_PROGRAM_OPTIONS, options_meth, options_metameth);
    lua_pop(L, 1);
    luaL_setfuncs(L, module_functions, 0);
}
