/* gpurun.ProgramOptions, gpurun.Program and gpurun.ObjectCode: CUDA C++
 * source through NVRTC (and the kernel cache) into PTX or CUBIN, and from
 * there into kernels.
 *
 * Compiling needs no GPU; only ObjectCode:get_kernel() does. */
#include "gpurun.h"

#include <stdlib.h>
#include <string.h>

#include "kernel_cache.h"
#include "nvrtc_compile.h"

#define DEFAULT_PROGRAM_NAME "program.cu"
#define COMPILE_OUTPUT "gpurun.CompileOutput" /* internal: frees NVRTC's output */

/* Scratch memory that Lua collects, so that an error never leaks it. */
static void *scratch(lua_State *L, size_t size)
{
    return lua_newuserdatauv(L, size ? size : 1, 0);
}

static int has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* ==== ProgramOptions ===================================================== */

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

static void append_option(lua_State *L)
{
    lua_rawseti(L, LIST, (lua_Integer)lua_rawlen(L, LIST) + 1);
}

static void read_std(lua_State *L)
{
    if (lua_getfield(L, INPUT, "std") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    const char *std = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    if (!std || !has_prefix(std, "c++") || strlen(std) != 5
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
    int type = lua_getfield(L, INPUT, "arch");
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    if (type == LUA_TNUMBER && lua_isinteger(L, -1))
        lua_tostring(L, -1); /* converts in place */
    const char *arch = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    const char *digits = !arch ? NULL
                         : has_prefix(arch, "sm_") ? arch + 3
                         : has_prefix(arch, "compute_") ? arch + 8 : arch;
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

static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* {"NAME", "NAME=1", ...} and/or {NAME = "value" | number | true}: the list
 * first, in order, then the named ones sorted, so that the options (and the
 * cache key) never depend on table iteration order. */
static void read_defines(lua_State *L)
{
    if (lua_getfield(L, INPUT, "defines") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
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
    const char **names = scratch(L, named * sizeof *names);
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
    qsort(names, count, sizeof *names, compare_strings);
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
    int type = lua_getfield(L, INPUT, key);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
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
    int type = lua_getfield(L, INPUT, key);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
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
    if (lua_getfield(L, INPUT, "max_register_count") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
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

/* Pushes a shallow copy of the table on top in its place. */
static void replace_with_copy(lua_State *L)
{
    lua_newtable(L);
    for (lua_pushnil(L); lua_next(L, -3);) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -4);
    }
    lua_remove(L, -2);
}

/* as_list() -> the NVRTC option strings, in order (a fresh table). */
static int options_as_list(lua_State *L)
{
    check_options(L, 1);
    lua_getiuservalue(L, 1, 2);
    replace_with_copy(L);
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
    if (gpurun_push_method(L))
        return 1;
    check_options(L, 1);
    lua_getiuservalue(L, 1, 1);
    lua_pushvalue(L, 2);
    if (lua_rawget(L, -2) == LUA_TTABLE)
        replace_with_copy(L); /* fields are read-only: changing a copy changes nothing */
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

/* ==== Program ============================================================ */

/* Uservalues: 1 = the source, 2 = its ProgramOptions. */
struct program {
    int closed;
};

static struct program *check_program(lua_State *L, int index)
{
    struct program *program = luaL_checkudata(L, index, GPURUN_PROGRAM);
    if (program->closed)
        gpurun_closed_error(L, GPURUN_PROGRAM);
    return program;
}

/* Program(source, "c++" [, options]) -- options: a ProgramOptions, a table
 * of them, or nil. Nothing is compiled until :compile(). */
static int program_new(lua_State *L)
{
    size_t length = 0;
    const char *source = luaL_checklstring(L, 1, &length);
    luaL_argcheck(L, strlen(source) == length, 1, "source contains a NUL byte");
    const char *code_type = luaL_checkstring(L, 2);
    if (strcmp(code_type, "c++") != 0)
        return luaL_argerror(L, 2, lua_pushfstring(L, "code type \"c++\" expected, got \"%s\"",
                                                   code_type));
    lua_settop(L, 3);
    if (lua_isnil(L, 3) || lua_istable(L, 3)) {
        lua_pushcfunction(L, options_new);
        lua_pushvalue(L, 3);
        lua_call(L, 1, 1);
        lua_replace(L, 3);
    } else if (!luaL_testudata(L, 3, GPURUN_PROGRAM_OPTIONS)) {
        return luaL_typeerror(L, 3, "gpurun.ProgramOptions or table");
    }
    check_options(L, 3);
    struct program *program = lua_newuserdatauv(L, sizeof *program, 2);
    program->closed = 0;
    luaL_setmetatable(L, GPURUN_PROGRAM);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

static const char *current_device_arch(lua_State *L)
{
    CUdevice device;
    int major = 0, minor = 0;
    CHECK_CUDA(L, "getting the current device", cuDeviceGet, &device,
               gpurun_runtime.current_device);
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &major,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &minor,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    return lua_pushfstring(L, "--gpu-architecture=sm_%d%d", major, minor);
}

static int names_an_arch(const char *option)
{
    return has_prefix(option, "--gpu-architecture") || has_prefix(option, "-arch");
}

/* Collects the options of the ProgramOptions at `options_index` into a C
 * array (strings anchored on the stack), adding the current device's arch
 * when none was given. */
static const char **collect_options(lua_State *L, int options_index, enum nvrtc_target target,
                                    size_t *count)
{
    lua_getiuservalue(L, options_index, 2);
    int list = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **options = scratch(L, (n + 1) * sizeof *options);
    const char *arch = NULL;
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, list, (lua_Integer)i + 1);
        options[i] = lua_tostring(L, -1); /* anchored in `list` */
        lua_pop(L, 1);
        if (names_an_arch(options[i]))
            arch = options[i];
    }
    if (!arch && gpurun_runtime.current_device >= 0) {
        options[n++] = current_device_arch(L);
    } else if (!arch && target == NVRTC_TARGET_CUBIN) {
        luaL_error(L, "cubin needs an arch: give ProgramOptions{arch=...} or make a device current");
    } else if (arch && target == NVRTC_TARGET_CUBIN && strstr(arch, "compute_")) {
        const char *value = strchr(arch, '=');
        luaL_error(L, "cubin needs a real architecture: %s makes only PTX; use sm_XX",
                   value ? value + 1 : arch);
    }
    *count = n;
    return options;
}

/* The {name_expressions = {...}, name = "x.cu"} table at `index`. */
static const char **collect_name_expressions(lua_State *L, int index, size_t *count)
{
    *count = 0;
    if (lua_isnoneornil(L, index))
        return NULL;
    int type = lua_getfield(L, index, "name_expressions");
    if (type == LUA_TNIL)
        return NULL;
    if (type != LUA_TTABLE)
        luaL_argerror(L, index, "name_expressions must be a list of strings");
    int list = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **names = scratch(L, n * sizeof *names);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, list, (lua_Integer)i + 1) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
            luaL_argerror(L, index, lua_pushfstring(L, "name_expressions[%d] must be a "
                                                       "non-empty string", (int)i + 1));
        names[i] = lua_tostring(L, -1); /* anchored in `list` */
        lua_pop(L, 1);
    }
    *count = n;
    return names;
}

static void check_compile_arguments(lua_State *L, int index)
{
    if (lua_isnoneornil(L, index))
        return;
    luaL_checktype(L, index, LUA_TTABLE);
    for (lua_pushnil(L); lua_next(L, index); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING)
            luaL_argerror(L, index, lua_pushfstring(L, "unexpected %s key (name_expressions or "
                                                       "name expected)", luaL_typename(L, -2)));
        const char *key = lua_tostring(L, -2);
        if (strcmp(key, "name_expressions") != 0 && strcmp(key, "name") != 0)
            luaL_argerror(L, index, lua_pushfstring(L, "unknown key '%s' (name_expressions or "
                                                       "name expected)", key));
    }
}

static int output_gc(lua_State *L)
{
    nvrtc_output_free(luaL_checkudata(L, 1, COMPILE_OUTPUT));
    return 0;
}

static int push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                            const char *const *expressions, struct nvrtc_output *output,
                            int from_cache);

/* compile("ptx" | "cubin" [, {name_expressions = {...}, name = "x.cu"}])
 * -> ObjectCode, from the kernel cache when it has it. */
static int program_compile(lua_State *L)
{
    check_program(L, 1);
    const char *target_name = luaL_checkstring(L, 2);
    enum nvrtc_target target;
    if (strcmp(target_name, "ptx") == 0)
        target = NVRTC_TARGET_PTX;
    else if (strcmp(target_name, "cubin") == 0)
        target = NVRTC_TARGET_CUBIN;
    else
        return luaL_argerror(L, 2, lua_pushfstring(L, "\"ptx\" or \"cubin\" expected, got \"%s\"",
                                                   target_name));
    check_compile_arguments(L, 3);
    lua_settop(L, 3);
    const char *name = DEFAULT_PROGRAM_NAME;
    if (lua_istable(L, 3) && lua_getfield(L, 3, "name") != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0
            || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            return luaL_argerror(L, 3, "name must be a non-empty string");
        name = lua_tostring(L, -1); /* stays on the stack */
    }

    struct nvrtc_request request = {.target = target, .name = name};
    lua_getiuservalue(L, 1, 1);
    request.source = lua_tostring(L, -1);
    lua_getiuservalue(L, 1, 2);
    request.options = collect_options(L, lua_gettop(L), target, &request.option_count);
    request.name_expressions = collect_name_expressions(L, 3, &request.name_expression_count);

    struct nvrtc_output *output = lua_newuserdatauv(L, sizeof *output, 0);
    memset(output, 0, sizeof *output);
    luaL_setmetatable(L, COMPILE_OUTPUT);
    int from_cache = 0;
    if (!kernel_cache_compile(&request, GPURUN_VERSION, output, &from_cache)) {
        size_t log_length = output->log ? strlen(output->log) : 0;
        while (log_length > 0 && (output->log[log_length - 1] == '\n'
                                  || output->log[log_length - 1] == '\r'))
            log_length--;
        luaL_where(L, 1);
        lua_pushfstring(L, "NVRTC compile of '%s' failed: %s%s", name, output->error,
                        log_length ? "\n" : "");
        lua_pushlstring(L, output->log ? output->log : "", log_length);
        lua_concat(L, 3);
        nvrtc_output_free(output);
        return lua_error(L);
    }
    push_object_code(L, target, name, request.name_expressions, output, from_cache);
    nvrtc_output_free(output);
    return 1;
}

static int program_close(lua_State *L)
{
    struct program *program = luaL_checkudata(L, 1, GPURUN_PROGRAM);
    if (program->closed)
        return 0;
    program->closed = 1;
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 2);
    return 0;
}

static int program_index(lua_State *L)
{
    if (gpurun_push_method(L))
        return 1;
    check_program(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "source") == 0)
        lua_getiuservalue(L, 1, 1);
    else if (strcmp(key, "options") == 0)
        lua_getiuservalue(L, 1, 2);
    else if (strcmp(key, "code_type") == 0)
        lua_pushliteral(L, "c++");
    else
        lua_pushnil(L);
    return 1;
}

static int program_tostring(lua_State *L)
{
    struct program *program = luaL_checkudata(L, 1, GPURUN_PROGRAM);
    if (program->closed) {
        lua_pushliteral(L, "gpurun.Program(closed)");
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "gpurun.Program(c++, %d bytes of source)", (int)lua_rawlen(L, -1));
    }
    return 1;
}

/* ==== ObjectCode ========================================================= */

/* Uservalues: 1 = the code, 2 = name expression -> lowered name, 3 = the
 * program's name, 4 = NVRTC's log. */
struct object_code {
    struct gpurun_object_code_header header; /* first: Kernels read it */
    enum nvrtc_target target;
    int from_cache;
};

static struct object_code *check_object_code(lua_State *L, int index)
{
    struct object_code *code = luaL_checkudata(L, index, GPURUN_OBJECT_CODE);
    if (code->header.closed)
        gpurun_closed_error(L, GPURUN_OBJECT_CODE);
    return code;
}

static int push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                            const char *const *expressions, struct nvrtc_output *output,
                            int from_cache)
{
    struct object_code *code = lua_newuserdatauv(L, sizeof *code, 4);
    memset(code, 0, sizeof *code);
    code->target = target;
    code->from_cache = from_cache;
    luaL_setmetatable(L, GPURUN_OBJECT_CODE);
    lua_pushlstring(L, output->code, output->code_size);
    lua_setiuservalue(L, -2, 1);
    lua_createtable(L, 0, (int)output->lowered_name_count);
    for (size_t i = 0; i < output->lowered_name_count; i++) {
        lua_pushstring(L, output->lowered_names[i]);
        lua_setfield(L, -2, expressions[i]);
    }
    lua_setiuservalue(L, -2, 2);
    lua_pushstring(L, name);
    lua_setiuservalue(L, -2, 3);
    lua_pushstring(L, output->log);
    lua_setiuservalue(L, -2, 4);
    return 1;
}

/* "the cubin of program.cu", for messages. */
static const char *push_code_description(lua_State *L, int index)
{
    struct object_code *code = lua_touserdata(L, index);
    lua_getiuservalue(L, index, 3);
    const char *description = lua_pushfstring(L, "the %s of %s", nvrtc_target_name(code->target),
                                              lua_tostring(L, -1));
    lua_remove(L, -2);
    return description;
}

/* Raises "kernel 'x' not found in the cubin of program.cu; it has: a, b". */
static int kernel_not_found(lua_State *L, int index, CUlibrary library, const char *name)
{
    luaL_Buffer b;
    const char *description = push_code_description(L, index);
    unsigned int count = 0;
    CUkernel *kernels = NULL;
    int listed = CUDA_CALL(cuLibraryGetKernelCount, &count, library) == CUDA_SUCCESS;
    if (listed) {
        kernels = scratch(L, count * sizeof *kernels);
        listed = CUDA_CALL(cuLibraryEnumerateKernels, kernels, count, library) == CUDA_SUCCESS;
    }
    const char **names = listed ? scratch(L, count * sizeof *names) : NULL;
    for (unsigned int i = 0; listed && i < count; i++)
        listed = CUDA_CALL(cuKernelGetName, &names[i], kernels[i]) == CUDA_SUCCESS;
    luaL_where(L, 1);
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "kernel '");
    luaL_addstring(&b, name);
    luaL_addstring(&b, "' not found in ");
    luaL_addstring(&b, description);
    if (listed && count == 0) {
        luaL_addstring(&b, "; it has no kernels");
    } else if (listed) {
        qsort(names, count, sizeof *names, compare_strings);
        luaL_addstring(&b, "; it has: ");
        for (unsigned int i = 0; i < count; i++) {
            if (i > 0)
                luaL_addstring(&b, ", ");
            luaL_addstring(&b, names[i]);
        }
    }
    luaL_pushresult(&b);
    lua_concat(L, 2);
    return lua_error(L);
}

/* get_kernel(name) -> Kernel. name is a kernel's name in the code or one of
 * the name expressions given to compile() ("scale<float>"). */
static int object_code_get_kernel(lua_State *L)
{
    struct object_code *code = check_object_code(L, 1);
    const char *name = luaL_checkstring(L, 2);
    gpurun_require_driver(L);
    gpurun_require_context(L);
    if (code->header.library == NULL) {
        lua_getiuservalue(L, 1, 1);
        /* A Lua string is NUL-terminated, as PTX must be; the driver keeps
         * its own copy of the code. */
        CUlibrary library = NULL;
        if (CUDA_CALL(cuLibraryLoadData, &library, lua_tostring(L, -1), NULL, NULL, 0,
                      NULL, NULL, 0) != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "loading %s", push_code_description(L, 1));
        code->header.library = library;
        lua_pop(L, 1);
    }
    lua_getiuservalue(L, 1, 2);
    const char *symbol = lua_getfield(L, -1, name) == LUA_TSTRING ? lua_tostring(L, -1) : name;
    CUkernel kernel = NULL;
    CUresult rc = CUDA_CALL(cuLibraryGetKernel, &kernel, code->header.library, symbol);
    if (rc == CUDA_ERROR_NOT_FOUND)
        return kernel_not_found(L, 1, code->header.library, name);
    if (rc != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "looking up kernel '%s' in %s", name,
                                 push_code_description(L, 1));
    return gpurun_push_kernel(L, 1, kernel, name);
}

static int object_code_close(lua_State *L)
{
    struct object_code *code = luaL_checkudata(L, 1, GPURUN_OBJECT_CODE);
    if (code->header.closed)
        return 0;
    if (code->header.graph_users > 0)
        return luaL_error(L, "cannot close a gpurun.ObjectCode while %d graph(s) launch its "
                             "kernels: close the graphs first", code->header.graph_users);
    code->header.closed = 1;
    if (code->header.library && cuda.cuLibraryUnload) {
        /* Unloading fails only for a dead context or a bad handle; either
         * way the library is gone for this process. */
        (void)CUDA_CALL(cuLibraryUnload, code->header.library);
    }
    code->header.library = NULL;
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1); /* the code itself can be large */
    return 0;
}

static int object_code_index(lua_State *L)
{
    if (gpurun_push_method(L))
        return 1;
    struct object_code *code = check_object_code(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "code") == 0)
        lua_getiuservalue(L, 1, 1);
    else if (strcmp(key, "code_type") == 0)
        lua_pushstring(L, nvrtc_target_name(code->target));
    else if (strcmp(key, "size") == 0) {
        lua_getiuservalue(L, 1, 1);
        lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    } else if (strcmp(key, "from_cache") == 0)
        lua_pushboolean(L, code->from_cache);
    else if (strcmp(key, "name") == 0)
        lua_getiuservalue(L, 1, 3);
    else if (strcmp(key, "log") == 0)
        lua_getiuservalue(L, 1, 4);
    else if (strcmp(key, "lowered_names") == 0) {
        lua_getiuservalue(L, 1, 2);
        replace_with_copy(L);
    } else
        lua_pushnil(L);
    return 1;
}

static int object_code_tostring(lua_State *L)
{
    struct object_code *code = luaL_checkudata(L, 1, GPURUN_OBJECT_CODE);
    if (code->header.closed) {
        lua_pushliteral(L, "gpurun.ObjectCode(closed)");
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "gpurun.ObjectCode(%s, %d bytes%s)", nvrtc_target_name(code->target),
                        (int)lua_rawlen(L, -1), code->from_cache ? ", from the cache" : "");
    }
    return 1;
}

/* ==== the kernel cache =================================================== */

/* cache_info() -> {enabled, dir, hits, misses, stores, corrupt, errors}. */
static int module_cache_info(lua_State *L)
{
    struct kernel_cache_stats stats;
    kernel_cache_get_stats(&stats);
    lua_createtable(L, 0, 7);
    lua_pushboolean(L, stats.enabled);
    lua_setfield(L, -2, "enabled");
    if (stats.dir) {
        lua_pushstring(L, stats.dir);
        lua_setfield(L, -2, "dir");
    }
    const struct {
        const char *name;
        uint64_t value;
    } counters[] = {
        {"hits", stats.hits}, {"misses", stats.misses}, {"stores", stats.stores},
        {"corrupt", stats.corrupt}, {"errors", stats.errors},
    };
    for (size_t i = 0; i < sizeof counters / sizeof counters[0]; i++) {
        lua_pushinteger(L, (lua_Integer)counters[i].value);
        lua_setfield(L, -2, counters[i].name);
    }
    return 1;
}

static int module_clear_cache_counters(lua_State *L)
{
    (void)L;
    kernel_cache_reset_counters();
    return 0;
}

/* ==== registration ======================================================= */

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

static const luaL_Reg program_meth[] = {
    {"compile", program_compile},
    {"close", program_close},
    {NULL, NULL}
};

static const luaL_Reg program_metameth[] = {
    {"__index", program_index},
    {"__tostring", program_tostring},
    {"__close", program_close},
    {"__gc", program_close},
    {NULL, NULL}
};

static const luaL_Reg object_code_meth[] = {
    {"get_kernel", object_code_get_kernel},
    {"close", object_code_close},
    {NULL, NULL}
};

static const luaL_Reg object_code_metameth[] = {
    {"__index", object_code_index},
    {"__tostring", object_code_tostring},
    {"__close", object_code_close},
    {"__gc", object_code_close},
    {NULL, NULL}
};

static const luaL_Reg output_metameth[] = {
    {"__gc", output_gc},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"ProgramOptions", options_new},
    {"Program", program_new},
    {"cache_info", module_cache_info},
    {"clear_cache_counters", module_clear_cache_counters},
    {NULL, NULL}
};

void gpurun_open_program(lua_State *L)
{
    gpurun_new_type(L, GPURUN_PROGRAM_OPTIONS, options_meth, options_metameth);
    gpurun_new_type(L, GPURUN_PROGRAM, program_meth, program_metameth);
    gpurun_new_type(L, GPURUN_OBJECT_CODE, object_code_meth, object_code_metameth);
    gpurun_new_type(L, COMPILE_OUTPUT, NULL, output_metameth);
    lua_pop(L, 4);
    luaL_setfuncs(L, module_functions, 0);
}
