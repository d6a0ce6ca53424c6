/* gpurun.Program: CUDA C++ source with its ProgramOptions, compiled through
 * NVRTC (and the kernel cache) into a gpurun.ObjectCode; and the module
 * functions that report on that cache.
 *
 * ProgramOptions is written in Lua (lua/gpurun/builtin/program_options.lua):
 * it validates the options and, at compile time, says which NVRTC option
 * strings to pass (adding the current device's arch); this file compiles.
 * Compiling needs no GPU; only ObjectCode:get_kernel() does. */
#include "types/program.h"

#include <string.h>
#include <sys/stat.h>

#include "base/kernel_cache.h"
#include "types/object_code.h"

const struct gpurun_tag gpurun_program_tag = {"gpurun.Program"};

#define COMPILE_OUTPUT "gpurun.CompileOutput" /* internal: frees NVRTC's output */

/* Uservalues: 1 = the source, 2 = its ProgramOptions. */
struct program {
    struct gpurun_object header;
};

static struct program *check_program(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_program_tag);
}

void gpurun_push_options_function(lua_State *L, const char *type_name, const char *name)
{
    luaL_getmetatable(L, type_name);
    lua_getfield(L, -1, "builtin");
    lua_getfield(L, -1, name);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

/* Pushes ProgramOptions' function `name` (program_options.lua's builtin). */
static void push_options_function(lua_State *L, const char *name)
{
    gpurun_push_options_function(L, "gpurun.ProgramOptions", name);
}

const char **gpurun_option_strings(lua_State *L, int list, size_t *count)
{
    list = lua_absindex(L, list);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **options = gpurun_push_staging(L, (n + 1) * sizeof *options);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, list, (lua_Integer)i + 1);
        options[i] = lua_tostring(L, -1); /* anchored in `list` */
        lua_pop(L, 1);
    }
    *count = n;
    return options;
}

/* Program(source, "c++" [, options]) -- options: a ProgramOptions, a table
 * of them, or nil. Nothing is compiled until :compile(). */
static int program_new(lua_State *L)
{
    size_t length = 0;
    const char *source = gpurun_check_string(L, 1, &length);
    if (strlen(source) != length)
        gpurun_arg_error(L, 1, "source contains a NUL byte");
    const char *code_type = gpurun_check_string(L, 2, NULL);
    if (strcmp(code_type, "c++") != 0)
        return gpurun_arg_error(L, 2, "code type \"c++\" expected, got \"%s\"", code_type);
    lua_settop(L, 3);
    push_options_function(L, "coerce");
    lua_pushvalue(L, 3);
    lua_pushinteger(L, 3);
    lua_pushliteral(L, "gpurun.Program");
    lua_call(L, 3, 1);
    lua_replace(L, 3);
    struct program *program = gpurun_new_object(L, sizeof *program, 2, &gpurun_program_tag);
    program->header.closed = 0;
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    lua_pushvalue(L, 3);
    lua_setiuservalue(L, -2, 2);
    return 1;
}

void gpurun_push_current_arch(lua_State *L)
{
    if (gpurun_runtime.current_device < 0) {
        lua_pushnil(L);
        return;
    }
    CUdevice device;
    int major = 0, minor = 0;
    CHECK_CUDA(L, "getting the current device", cuDeviceGet, &device,
               gpurun_runtime.current_device);
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &major,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &minor,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    lua_pushfstring(L, "%d%d", major, minor);
}

/* Pushes the CUDA toolkit's include folder, or nil when it is not there
 * (a gpurun installed without the toolkit's headers). */
static void push_cuda_include_dir(lua_State *L)
{
    struct stat info;
    if (stat(GPURUN_CUDA_INCLUDE_DIR, &info) == 0 && S_ISDIR(info.st_mode))
        lua_pushliteral(L, GPURUN_CUDA_INCLUDE_DIR);
    else
        lua_pushnil(L);
}

/* The NVRTC options of the ProgramOptions at options_index for `target`
 * and the source at source_index, as a C array whose strings stay anchored
 * on the stack. */
static const char **collect_options(lua_State *L, int options_index, enum nvrtc_target target,
                                    int source_index, size_t *count)
{
    push_options_function(L, "compile_options");
    lua_pushvalue(L, options_index);
    lua_pushstring(L, nvrtc_target_name(target));
    gpurun_push_current_arch(L);
    push_cuda_include_dir(L);
    lua_pushvalue(L, source_index);
    lua_call(L, 5, 1);
    return gpurun_option_strings(L, -1, count);
}

/* The {name_expressions = {...}, name = "x.cu"} table at `index`. */
static const char **collect_name_expressions(lua_State *L, int index, size_t *count)
{
    *count = 0;
    if (lua_isnoneornil(L, index))
        return NULL;
    lua_pushliteral(L, "name_expressions");
    int type = lua_rawget(L, index);
    if (type == LUA_TNIL)
        return NULL;
    if (type != LUA_TTABLE)
        gpurun_arg_error(L, index, "name_expressions must be a list of strings");
    int list = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **names = gpurun_push_staging(L, n * sizeof *names);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, list, (lua_Integer)i + 1) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
            gpurun_arg_error(L, index, "name_expressions[%d] must be a non-empty string",
                             (int)i + 1);
        if (strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            gpurun_arg_error(L, index, "name_expressions[%d] contains a NUL byte", (int)i + 1);
        names[i] = lua_tostring(L, -1); /* anchored in `list` */
        lua_pop(L, 1);
    }
    *count = n;
    return names;
}

static void check_compile_arguments(lua_State *L, int index)
{
    static const char *const known[] = {"name_expressions", "name", NULL};
    gpurun_check_options(L, index, known);
}

static enum device_code_type code_type_of(enum nvrtc_target target)
{
    return target == NVRTC_TARGET_CUBIN   ? DEVICE_CODE_CUBIN
           : target == NVRTC_TARGET_LTOIR ? DEVICE_CODE_LTOIR
                                          : DEVICE_CODE_PTX;
}

static int output_gc(lua_State *L)
{
    nvrtc_output_free(lua_touserdata(L, 1));
    return 0;
}

/* compile("ptx" | "cubin" | "ltoir" [, {name_expressions = {...}, name = "x.cu"}])
 * -> ObjectCode, from the kernel cache when it has it. Without a name the
 * program is called after its first kernel ("vec_add.cu"). */
static int program_compile(lua_State *L)
{
    check_program(L, 1);
    const char *target_name = gpurun_check_string(L, 2, NULL);
    enum nvrtc_target target;
    if (strcmp(target_name, "ptx") == 0)
        target = NVRTC_TARGET_PTX;
    else if (strcmp(target_name, "cubin") == 0)
        target = NVRTC_TARGET_CUBIN;
    else if (strcmp(target_name, "ltoir") == 0)
        target = NVRTC_TARGET_LTOIR;
    else
        return gpurun_arg_error(L, 2, "\"ptx\", \"cubin\" or \"ltoir\" expected, got \"%s\"",
                                target_name);
    check_compile_arguments(L, 3);
    lua_settop(L, 3);
    /* Raw reads of the options table: a metamethod there could run Lua code
     * that closes the program under us. */
    const char *name;
    if (lua_istable(L, 3) && (lua_pushliteral(L, "name"), lua_rawget(L, 3)) != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0
            || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            return gpurun_arg_error(L, 3, "name must be a non-empty string");
        name = lua_tostring(L, -1); /* stays on the stack */
    } else {
        /* The default: named after the source's first kernel (policy: Lua). */
        push_options_function(L, "default_name");
        check_program(L, 1);
        lua_getiuservalue(L, 1, 1);
        lua_call(L, 1, 1);
        name = lua_tostring(L, -1); /* stays on the stack */
    }

    struct nvrtc_request request = {.target = target, .name = name};
    request.name_expressions = collect_name_expressions(L, 3, &request.name_expression_count);
    check_program(L, 1);
    lua_getiuservalue(L, 1, 1);
    int source_index = lua_gettop(L);
    request.source = lua_tostring(L, -1);
    lua_getiuservalue(L, 1, 2);
    request.options = collect_options(L, lua_gettop(L), target, source_index,
                                      &request.option_count);

    struct nvrtc_output *output = lua_newuserdatauv(L, sizeof *output, 0);
    memset(output, 0, sizeof *output);
    luaL_setmetatable(L, COMPILE_OUTPUT);
    int from_cache = 0;
    if (!kernel_cache_compile(&request, GPURUN_VERSION, output, &from_cache)) {
        size_t log_length = output->log ? strlen(output->log) : 0;
        while (log_length > 0 && (output->log[log_length - 1] == '\n'
                                  || output->log[log_length - 1] == '\r'))
            log_length--;
        lua_pushfstring(L, "NVRTC compile of '%s' failed: %s%s", name, output->error,
                        log_length ? "\n" : "");
        lua_pushlstring(L, output->log ? output->log : "", log_length);
        lua_concat(L, 2);
        nvrtc_output_free(output);
        return gpurun_error(L, "%s", lua_tostring(L, -1));
    }
    gpurun_push_object_code(L, code_type_of(target), name, request.name_expressions, output,
                            from_cache, source_index);
    nvrtc_output_free(output);
    return 1;
}

static int program_close(lua_State *L)
{
    struct program *program = gpurun_check_tagged(L, 1, &gpurun_program_tag);
    if (program->header.closed)
        return 0;
    program->header.closed = 1;
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 2);
    return 0;
}

static int program_source(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int program_options(lua_State *L)
{
    lua_getiuservalue(L, 1, 2);
    return 1;
}

static int program_code_type(lua_State *L)
{
    lua_pushliteral(L, "c++");
    return 1;
}

static int program_tostring(lua_State *L)
{
    struct program *program = gpurun_check_tagged(L, 1, &gpurun_program_tag);
    if (program->header.closed) {
        lua_pushliteral(L, "gpurun.Program(closed)");
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "gpurun.Program(c++, %d bytes of source)", (int)lua_rawlen(L, -1));
    }
    return 1;
}

/* ---- the kernel cache --------------------------------------------------- */

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

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg program_methods[] = {
    {"compile", program_compile},
    {"close", program_close},
    {NULL, NULL}
};

static const luaL_Reg program_fields[] = {
    {"source", program_source},
    {"options", program_options},
    {"code_type", program_code_type},
    {NULL, NULL}
};

static const luaL_Reg program_metamethods[] = {
    {"__tostring", program_tostring},
    {"__close", program_close},
    {"__gc", program_close},
    {NULL, NULL}
};

static const luaL_Reg output_metameth[] = {
    {"__gc", output_gc},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"Program", program_new},
    {"cache_info", module_cache_info},
    {"clear_cache_counters", module_clear_cache_counters},
    {NULL, NULL}
};

static const struct gpurun_type program_type = {
    &gpurun_program_tag, program_methods, program_metamethods, program_fields, NULL,
};

void gpurun_open_program(lua_State *L)
{
    gpurun_register_type(L, &program_type);
    luaL_newmetatable(L, COMPILE_OUTPUT);
    luaL_setfuncs(L, output_metameth, 0);
    lua_pop(L, 1);
    gpurun_set_functions(L, module_functions);
}
