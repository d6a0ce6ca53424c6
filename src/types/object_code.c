/* gpurun.ObjectCode: the PTX or CUBIN a Program compiled, and the kernels in
 * it. The code is loaded into the driver (as a CUlibrary) on the first
 * get_kernel(), the only step that needs a GPU. */
#include "types/object_code.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "types/kernel.h"
#include "base/ptx_params.h"

const struct gpurun_tag gpurun_object_code_tag = {"gpurun.ObjectCode"};

/* Uservalues: 1 = the code, 2 = name expression -> lowered name, 3 = the
 * program's name, 4 = NVRTC's log, 5 = the program's source, 6 = the
 * memory of the kernels' signatures. */
struct object_code {
    struct gpurun_object header;
    CUlibrary library; /* NULL until the first get_kernel loads it */
    enum nvrtc_target target;
    int from_cache;
    /* The kernels' parameter types from the PTX (kernel_count 0 when the
     * compile could not give them: the driver's sizes are used then). Their
     * memory is uservalue 6: Lua's, so that code made by a finalizer while
     * the state closes (when no new finalizer is set) leaks nothing. */
    struct ptx_signatures signatures;
};

static struct object_code *check_object_code(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_object_code_tag);
}

static int new_memory(lua_State *L)
{
    lua_newuserdatauv(L, (size_t)lua_tointeger(L, 1), 0);
    return 1;
}

void gpurun_push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
                             int from_cache, int source_index)
{
    source_index = lua_absindex(L, source_index);
    struct ptx_signatures signatures = {0};
    char why[256];
    if (output->signatures
        && !ptx_signatures_parse(output->signatures, output->signatures_size, &signatures, why,
                                 sizeof why))
        memset(&signatures, 0, sizeof signatures); /* typed by size alone */
    /* Allocated under protection: a memory error here would lose the
     * parsed block. */
    lua_pushcfunction(L, new_memory);
    lua_pushinteger(L, (lua_Integer)(signatures.kernels ? signatures.block_size : 1));
    if (lua_pcall(L, 1, 1, 0) != LUA_OK) {
        ptx_signatures_free(&signatures);
        gpurun_error_at(L, 0, "not enough memory for the kernels' signatures");
    }
    ptx_signatures_move(&signatures, lua_touserdata(L, -1));
    int memory = lua_gettop(L);
    struct object_code *code = gpurun_new_object(L, sizeof *code, 6, &gpurun_object_code_tag);
    code->target = target;
    code->from_cache = from_cache;
    code->signatures = signatures;
    lua_pushvalue(L, memory);
    lua_setiuservalue(L, -2, 6);
    lua_remove(L, memory);
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
    lua_pushvalue(L, source_index);
    lua_setiuservalue(L, -2, 5);
    code->header.closed = 0;
}

/* qsort comparison of C strings, so that lists never depend on the order
 * of the driver's enumeration. */
static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
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

/* Raises "kernel 'x' not found in the cubin of program.cu; it has: a, b".
 * Every allocation here can run a finalizer that closes the code and
 * unloads its library, with the kernels and the names the driver lent: the
 * code is checked after each, and each name copied into Lua before the next. */
static int kernel_not_found(lua_State *L, int index, const char *name)
{
    luaL_Buffer b;
    const char *description = push_code_description(L, index);
    struct object_code *code = check_object_code(L, index);
    unsigned int count = 0;
    CUkernel *kernels = NULL;
    const char **names = NULL;
    int listed = CUDA_CALL(cuLibraryGetKernelCount, &count, code->library) == CUDA_SUCCESS
                 && count < INT_MAX - 8 && lua_checkstack(L, (int)count + 8);
    if (listed) {
        kernels = gpurun_push_staging(L, (count + 1) * sizeof *kernels);
        names = gpurun_push_staging(L, (count + 1) * sizeof *names);
        code = check_object_code(L, index);
        listed = CUDA_CALL(cuLibraryEnumerateKernels, kernels, count, code->library)
                 == CUDA_SUCCESS;
    }
    for (unsigned int i = 0; listed && i < count; i++) {
        const char *lent = NULL;
        listed = CUDA_CALL(cuKernelGetName, &lent, kernels[i]) == CUDA_SUCCESS && lent;
        if (listed) {
            names[i] = lua_pushstring(L, lent); /* copied before it can run a finalizer */
            check_object_code(L, index);
        }
    }
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
    return gpurun_error(L, "%s", lua_tostring(L, -1));
}

/* get_kernel(name) -> Kernel. name is a kernel's name in the code or one of
 * the name expressions given to compile() ("scale<float>"). */
static int object_code_get_kernel(lua_State *L)
{
    check_object_code(L, 1);
    size_t length;
    const char *name = gpurun_check_string(L, 2, &length);
    if (strlen(name) != length)
        gpurun_arg_error(L, 2, "kernel name contains a NUL byte");
    /* After the name: a number made into one can run finalizers. */
    struct object_code *code = check_object_code(L, 1);
    gpurun_require_driver(L);
    gpurun_require_context(L);
    if (code->library == NULL) {
        lua_getiuservalue(L, 1, 1);
        /* A Lua string is NUL-terminated, as PTX must be; the driver keeps
         * its own copy of the code. */
        CUlibrary library = NULL;
        if (CUDA_CALL(cuLibraryLoadData, &library, lua_tostring(L, -1), NULL, NULL, 0,
                      NULL, NULL, 0) != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "loading %s", push_code_description(L, 1));
        code->library = library;
        lua_pop(L, 1);
    }
    lua_getiuservalue(L, 1, 2);
    const char *symbol = lua_getfield(L, -1, name) == LUA_TSTRING ? lua_tostring(L, -1) : name;
    CUkernel kernel = NULL;
    CUresult rc = CUDA_CALL(cuLibraryGetKernel, &kernel, code->library, symbol);
    if (rc == CUDA_ERROR_NOT_FOUND)
        return kernel_not_found(L, 1, name);
    if (rc != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "looking up kernel '%s' in %s", name,
                                 push_code_description(L, 1));
    gpurun_push_kernel(L, 1, kernel, name, ptx_signatures_find(&code->signatures, symbol));
    lua_getiuservalue(L, 1, 5);
    gpurun_set_kernel_source(L, -2);
    return 1;
}

static int object_code_close(lua_State *L)
{
    struct object_code *code = gpurun_check_tagged(L, 1, &gpurun_object_code_tag);
    if (code->header.closed)
        return 0;
    if (code->header.graph_users > 0)
        return gpurun_error(L, "cannot close a gpurun.ObjectCode while %d graph(s) or graph "
                               "builder(s) use its kernels: close them first",
                            code->header.graph_users);
    code->header.closed = 1;
    if (code->library && cuda.cuLibraryUnload) {
        /* Unloading fails only for a dead context or a bad handle; either
         * way the library is gone for this process. The collector may close
         * code while another graph is being captured, where the driver
         * counts an unload as unsafe and would end that capture. */
        struct gpurun_relaxed relaxed = gpurun_relax_captures();
        (void)CUDA_CALL(cuLibraryUnload, code->library);
        gpurun_restore_captures(relaxed);
    }
    code->library = NULL;
    memset(&code->signatures, 0, sizeof code->signatures);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 6);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1); /* the code itself can be large */
    return 0;
}

static struct object_code *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int object_code_code(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int object_code_code_type(lua_State *L)
{
    lua_pushstring(L, nvrtc_target_name(self(L)->target));
    return 1;
}

static int object_code_size(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    return 1;
}

static int object_code_from_cache(lua_State *L)
{
    lua_pushboolean(L, self(L)->from_cache);
    return 1;
}

static int object_code_name(lua_State *L)
{
    lua_getiuservalue(L, 1, 3);
    return 1;
}

static int object_code_log(lua_State *L)
{
    lua_getiuservalue(L, 1, 4);
    return 1;
}

/* A copy: changing it changes nothing. */
static int object_code_lowered_names(lua_State *L)
{
    lua_newtable(L);
    lua_getiuservalue(L, 1, 2);
    for (lua_pushnil(L); lua_next(L, -2);) {
        lua_pushvalue(L, -2);
        lua_insert(L, -2);
        lua_rawset(L, -5);
    }
    lua_pop(L, 1);
    return 1;
}

static int object_code_tostring(lua_State *L)
{
    struct object_code *code = gpurun_check_tagged(L, 1, &gpurun_object_code_tag);
    if (code->header.closed) {
        lua_pushliteral(L, "gpurun.ObjectCode(closed)");
    } else {
        lua_getiuservalue(L, 1, 1);
        lua_pushfstring(L, "gpurun.ObjectCode(%s, %d bytes%s)", nvrtc_target_name(code->target),
                        (int)lua_rawlen(L, -1), code->from_cache ? ", from the cache" : "");
    }
    return 1;
}

static const luaL_Reg object_code_methods[] = {
    {"get_kernel", object_code_get_kernel},
    {"close", object_code_close},
    {NULL, NULL}
};

static const luaL_Reg object_code_fields[] = {
    {"code", object_code_code},
    {"code_type", object_code_code_type},
    {"size", object_code_size},
    {"from_cache", object_code_from_cache},
    {"name", object_code_name},
    {"log", object_code_log},
    {"lowered_names", object_code_lowered_names},
    {NULL, NULL}
};

static const luaL_Reg object_code_metamethods[] = {
    {"__tostring", object_code_tostring},
    {"__close", object_code_close},
    {"__gc", object_code_close},
    {NULL, NULL}
};

static const struct gpurun_type object_code_type = {
    &gpurun_object_code_tag, object_code_methods, object_code_metamethods, object_code_fields,
    NULL,
};

void gpurun_open_object_code(lua_State *L)
{
    gpurun_register_type(L, &object_code_type);
}
