/* gpurun.ObjectCode: the PTX or CUBIN a Program compiled, and the kernels in
 * it. The code is loaded into the driver (as a CUlibrary) on the first
 * get_kernel(), the only step that needs a GPU. */
#include "lprogram.h"

#include <stdlib.h>

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

void gpurun_push_object_code(lua_State *L, enum nvrtc_target target, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
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
        kernels = gpurun_scratch(L, count * sizeof *kernels);
        listed = CUDA_CALL(cuLibraryEnumerateKernels, kernels, count, library) == CUDA_SUCCESS;
    }
    const char **names = listed ? gpurun_scratch(L, count * sizeof *names) : NULL;
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
        qsort(names, count, sizeof *names, gpurun_compare_strings);
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
    size_t length;
    const char *name = luaL_checklstring(L, 2, &length);
    luaL_argcheck(L, strlen(name) == length, 2, "kernel name contains a NUL byte");
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
        return luaL_error(L, "cannot close a gpurun.ObjectCode while %d graph(s) or graph "
                             "builder(s) use its kernels: close them first", code->header.graph_users);
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
    if (gpurun_push_method(L, GPURUN_OBJECT_CODE))
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
        gpurun_replace_with_copy(L);
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

void gpurun_open_object_code(lua_State *L)
{
    gpurun_new_type(L, GPURUN_OBJECT_CODE, object_code_meth, object_code_metameth);
    lua_pop(L, 1);
}
