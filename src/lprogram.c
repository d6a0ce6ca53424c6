/* gpurun.Program: CUDA C++ source with its ProgramOptions, compiled through
 * NVRTC (and the kernel cache) into a gpurun.ObjectCode; and the module
 * functions that report on that cache.
 *
 * Compiling needs no GPU; only ObjectCode:get_kernel() does. */
#include "lprogram.h"

#include "kernel_cache.h"

#define DEFAULT_PROGRAM_NAME "program.cu"
#define COMPILE_OUTPUT "gpurun.CompileOutput" /* internal: frees NVRTC's output */

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
    gpurun_to_program_options(L, 3);
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
    return gpurun_has_prefix(option, "--gpu-architecture") || gpurun_has_prefix(option, "-arch");
}

/* Collects the options of the ProgramOptions at `options_index` into a C
 * array (strings anchored on the stack), adding the current device's arch
 * when none was given. */
static const char **collect_options(lua_State *L, int options_index, enum nvrtc_target target,
                                    size_t *count)
{
    gpurun_push_option_list(L, options_index);
    int list = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **options = gpurun_scratch(L, (n + 1) * sizeof *options);
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
    lua_pushliteral(L, "name_expressions");
    int type = lua_rawget(L, index);
    if (type == LUA_TNIL)
        return NULL;
    if (type != LUA_TTABLE)
        luaL_argerror(L, index, "name_expressions must be a list of strings");
    int list = lua_gettop(L);
    size_t n = (size_t)lua_rawlen(L, list);
    const char **names = gpurun_scratch(L, n * sizeof *names);
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
    /* Raw reads of the options table: a metamethod there could run Lua code
     * that closes the program under us. */
    const char *name = DEFAULT_PROGRAM_NAME;
    if (lua_istable(L, 3) && (lua_pushliteral(L, "name"), lua_rawget(L, 3)) != LUA_TNIL) {
        if (lua_type(L, -1) != LUA_TSTRING || lua_rawlen(L, -1) == 0
            || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            return luaL_argerror(L, 3, "name must be a non-empty string");
        name = lua_tostring(L, -1); /* stays on the stack */
    }

    struct nvrtc_request request = {.target = target, .name = name};
    request.name_expressions = collect_name_expressions(L, 3, &request.name_expression_count);
    check_program(L, 1);
    lua_getiuservalue(L, 1, 1);
    request.source = lua_tostring(L, -1);
    lua_getiuservalue(L, 1, 2);
    request.options = collect_options(L, lua_gettop(L), target, &request.option_count);

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
    gpurun_push_object_code(L, target, name, request.name_expressions, output, from_cache);
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
    if (gpurun_push_method(L, GPURUN_PROGRAM))
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

void gpurun_open_program(lua_State *L)
{
    gpurun_new_type(L, GPURUN_PROGRAM, program_meth, program_metameth);
    gpurun_new_type(L, COMPILE_OUTPUT, NULL, output_metameth);
    lua_pop(L, 2);
    luaL_setfuncs(L, module_functions, 0);
    gpurun_open_program_options(L);
    gpurun_open_object_code(L);
}
