/* gpurun.ObjectCode: device code and the kernels in it: what a Program
 * compiled, what a Linker linked, or code brought from elsewhere
 * (ObjectCode.from_cubin, from_ptx, from_fatbin, from_ltoir). The code is
 * loaded into the driver (as a CUlibrary) on the first get_kernel(), the
 * only step that needs a GPU. */
#include "types/object_code.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "types/kernel.h"
#include "base/fatbin.h"
#include "base/ptx_params.h"
#include "base/read_file.h"

const struct gpurun_tag gpurun_object_code_tag = {"gpurun.ObjectCode"};

/* Uservalues: 1 = the code, 2 = name expression -> lowered name (the
 * symbol mapping), 3 = the code's name, 4 = the compiler's or linker's
 * log, 5 = the program's source (nil when not compiled here), 6 = the
 * memory of the kernels' signatures. */
struct object_code {
    struct gpurun_object header;
    CUlibrary library; /* NULL until the first get_kernel loads it */
    enum device_code_type code_type;
    int from_cache;
    /* The kernels' parameter types from the PTX (kernel_count 0 when the
     * code carries no PTX to read them from: the driver's sizes are used
     * then). Their memory is uservalue 6: Lua's, so that code made by a
     * finalizer while the state closes (when no new finalizer is set)
     * leaks nothing. */
    struct ptx_signatures signatures;
};

static struct object_code *check_object_code(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_object_code_tag);
}

static int push_bytes(lua_State *L)
{
    lua_pushlstring(L, lua_touserdata(L, 1), (size_t)lua_tointeger(L, 2));
    return 1;
}

/* Pushes the `size` bytes at `data` as a string and frees `data`, whatever
 * happens: copied under protection, so that a memory error does not lose
 * the buffer; that error raises `message`. */
static void push_and_free(lua_State *L, void *data, size_t size, const char *message)
{
    lua_pushcfunction(L, push_bytes);
    lua_pushlightuserdata(L, data);
    lua_pushinteger(L, (lua_Integer)size);
    int status = lua_pcall(L, 2, 1, 0);
    free(data);
    if (status != LUA_OK)
        gpurun_error_at(L, 0, message);
}

static int new_memory(lua_State *L)
{
    lua_newuserdatauv(L, (size_t)lua_tointeger(L, 1), 0);
    return 1;
}

/* Pushes a new ObjectCode of `type` for the code string at code_index,
 * with the kernels' signatures read from `ptx` (PTX or its compact text;
 * NULL: none), and the name mapping table at names_index (0: an empty one),
 * the name, the log and the source (source_index 0: nil). */
static void push_code(lua_State *L, enum device_code_type type, const char *name,
                      const char *log, int code_index, int names_index, int source_index,
                      const char *ptx, size_t ptx_size, int from_cache)
{
    code_index = lua_absindex(L, code_index);
    names_index = names_index ? lua_absindex(L, names_index) : 0;
    source_index = source_index ? lua_absindex(L, source_index) : 0;
    struct ptx_signatures signatures = {0};
    char why[256];
    if (ptx && !ptx_signatures_parse(ptx, ptx_size, &signatures, why, sizeof why))
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
    code->code_type = type;
    code->from_cache = from_cache;
    code->signatures = signatures;
    lua_pushvalue(L, memory);
    lua_setiuservalue(L, -2, 6);
    lua_remove(L, memory);
    lua_pushvalue(L, code_index);
    lua_setiuservalue(L, -2, 1);
    if (names_index)
        lua_pushvalue(L, names_index);
    else
        lua_newtable(L);
    lua_setiuservalue(L, -2, 2);
    lua_pushstring(L, name);
    lua_setiuservalue(L, -2, 3);
    lua_pushstring(L, log);
    lua_setiuservalue(L, -2, 4);
    if (source_index)
        lua_pushvalue(L, source_index);
    else
        lua_pushnil(L);
    lua_setiuservalue(L, -2, 5);
    code->header.closed = 0;
}

void gpurun_push_object_code(lua_State *L, enum device_code_type type, const char *name,
                             const char *const *expressions, const struct nvrtc_output *output,
                             int from_cache, int source_index)
{
    source_index = lua_absindex(L, source_index);
    lua_pushlstring(L, output->code, output->code_size);
    lua_createtable(L, 0, (int)output->lowered_name_count);
    for (size_t i = 0; i < output->lowered_name_count; i++) {
        lua_pushstring(L, output->lowered_names[i]);
        lua_setfield(L, -2, expressions[i]);
    }
    push_code(L, type, name, output->log, -2, -1, source_index, output->signatures,
              output->signatures_size, from_cache);
    lua_replace(L, -3);
    lua_pop(L, 1);
}

void gpurun_push_linked_code(lua_State *L, enum device_code_type type, const char *name,
                             const char *log, int code_index, const char *ptx, size_t ptx_size,
                             int from_cache)
{
    push_code(L, type, name, log, code_index, 0, 0, ptx, ptx_size, from_cache);
}

void gpurun_push_signatures_of(lua_State *L, int index)
{
    struct object_code *code = check_object_code(L, lua_absindex(L, index));
    if (code->signatures.kernel_count == 0) {
        lua_pushliteral(L, "");
        return;
    }
    size_t size = 0;
    char *text = ptx_signatures_format(&code->signatures, &size);
    if (!text)
        gpurun_error(L, "not enough memory for the kernels' signatures");
    push_and_free(L, text, size, "not enough memory for the kernels' signatures");
}

enum device_code_type gpurun_push_code_of(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    struct object_code *code = check_object_code(L, index);
    lua_getiuservalue(L, index, 1);
    lua_getiuservalue(L, index, 3);
    return code->code_type;
}

/* qsort comparison of C strings, so that lists never depend on the order
 * of the driver's enumeration. */
static int compare_strings(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* "the cubin of program.cu", for messages ("the cubin given as bytes"
 * for code without a name). */
static const char *push_code_description(lua_State *L, int index)
{
    struct object_code *code = lua_touserdata(L, index);
    lua_getiuservalue(L, index, 3);
    const char *name = lua_tostring(L, -1);
    const char *type = device_code_type_name(code->code_type);
    const char *description = name && name[0]
                                  ? lua_pushfstring(L, "the %s of %s", type, name)
                                  : lua_pushfstring(L, "the %s given as bytes", type);
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

/* The driver's JIT log. The driver loads lazily: PTX may be compiled at
 * the first kernel lookup, long after the load that named the buffer, so
 * the buffer lives as long as the process (one Lua state per process). */
#define JIT_LOG_SIZE 4096
static char jit_log[JIT_LOG_SIZE];

/* The JIT log without its trailing newlines, or "" when it is empty. */
static const char *jit_log_text(void)
{
    jit_log[JIT_LOG_SIZE - 1] = '\0';
    size_t length = strlen(jit_log);
    while (length > 0 && (jit_log[length - 1] == '\n' || jit_log[length - 1] == '\r'))
        jit_log[--length] = '\0';
    return jit_log;
}

/* Loads the code of the ObjectCode at index into the driver. PTX (alone
 * or in a fatbin) is compiled there: its error log (a PTX syntax error)
 * goes into the message. A cubin is not compiled, and loads without. */
static void load_library(lua_State *L, int index, struct object_code *code)
{
    jit_log[0] = '\0';
    CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *values[] = {jit_log, (void *)(uintptr_t)JIT_LOG_SIZE};
    unsigned int option_count = code->code_type == DEVICE_CODE_CUBIN ? 0 : 2;
    lua_getiuservalue(L, index, 1);
    /* A Lua string is NUL-terminated, as PTX must be; the driver keeps its
     * own copy of the code. */
    CUlibrary library = NULL;
    /* The driver counts loading as unsafe during a capture (it would end
     * it), and the kernels gpurun makes for a loop's conditions are loaded
     * while their loop is captured: relaxed for this call. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult loaded = CUDA_CALL(cuLibraryLoadData, &library, lua_tostring(L, -1),
                                option_count ? options : NULL, option_count ? values : NULL,
                                option_count, NULL, NULL, 0);
    gpurun_restore_captures(relaxed);
    if (loaded != CUDA_SUCCESS) {
        const char *log = jit_log_text();
        gpurun_cuda_error(L, "loading %s%s%s", push_code_description(L, index),
                          *log ? ": " : "", log);
    }
    code->library = library;
    lua_pop(L, 1);
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
    if (code->code_type != DEVICE_CODE_PTX && code->code_type != DEVICE_CODE_CUBIN
        && code->code_type != DEVICE_CODE_FATBIN)
        return gpurun_error(L, "%s cannot be loaded into the driver: link it into a cubin "
                               "first (gpurun.Linker)", push_code_description(L, 1));
    gpurun_require_driver(L);
    gpurun_require_context(L);
    if (code->library == NULL)
        load_library(L, 1, code);
    lua_getiuservalue(L, 1, 2);
    const char *symbol = lua_getfield(L, -1, name) == LUA_TSTRING ? lua_tostring(L, -1) : name;
    CUkernel kernel = NULL;
    jit_log[0] = '\0'; /* what a lazy load writes now, not an older load's log */
    struct gpurun_relaxed relaxed = gpurun_relax_captures(); /* as load_library */
    CUresult rc = CUDA_CALL(cuLibraryGetKernel, &kernel, code->library, symbol);
    gpurun_restore_captures(relaxed);
    if (rc == CUDA_ERROR_NOT_FOUND)
        return kernel_not_found(L, 1, name);
    if (rc != CUDA_SUCCESS) {
        const char *log = jit_log_text();
        return gpurun_cuda_error(L, "looking up kernel '%s' in %s%s%s", name,
                                 push_code_description(L, 1), *log ? ": " : "", log);
    }
    gpurun_push_kernel(L, 1, kernel, name, ptx_signatures_find(&code->signatures, symbol));
    lua_getiuservalue(L, 1, 5);
    gpurun_set_kernel_source(L, -2);
    return 1;
}

/* ---- code from elsewhere ------------------------------------------------ */

/* Reads the file of the { path = "..." } table at arg, refusing what is
 * not a regular file or is larger than DEVICE_CODE_MAX_FILE_SIZE before
 * reading any of it; pushes the path and then its bytes, and returns the
 * path. (On the stack, not only in the table: a finalizer run by an
 * allocation could take it out of the table.) */
static const char *push_file(lua_State *L, int arg)
{
    static const char *const known[] = {"path", NULL};
    gpurun_check_options(L, arg, known);
    lua_pushliteral(L, "path");
    if (lua_rawget(L, arg) != LUA_TSTRING || lua_rawlen(L, -1) == 0)
        gpurun_arg_error(L, arg, "{ path = \"...\" } needs a non-empty string path");
    size_t length;
    const char *path = lua_tolstring(L, -1, &length);
    if (strlen(path) != length)
        gpurun_arg_error(L, arg, "path contains a NUL byte");
    unsigned char *data = NULL;
    size_t size = 0;
    int error = read_whole_file(path, 0, DEVICE_CODE_MAX_FILE_SIZE, &data, &size);
    if (error == READ_FILE_NOT_REGULAR)
        gpurun_error(L, "cannot read device code from %s: it is %s, not a regular file", path,
                     file_kind(path));
    if (error == READ_FILE_TOO_LARGE) {
        char have[32], limit[32];
        gpurun_error(L, "cannot read device code from %s: it is %s, more than the %s gpurun "
                        "reads as device code", path, gpurun_format_size(have, sizeof have, size),
                     gpurun_format_size(limit, sizeof limit, DEVICE_CODE_MAX_FILE_SIZE));
    }
    if (error)
        gpurun_error(L, "cannot read device code from %s: %s", path, strerror(error));
    push_and_free(L, data, size, "not enough memory for the device code read from the file");
    return path;
}

/* The { name =, symbol_mapping = } table at arg: pushes the name (or
 * fallback) and then the mapping, a fresh table of strings, and returns
 * the name. */
static const char *check_code_options(lua_State *L, int arg, const char *fallback)
{
    static const char *const known[] = {"name", "symbol_mapping", NULL};
    gpurun_check_options(L, arg, known);
    lua_pushstring(L, fallback);
    if (!lua_isnoneornil(L, arg)) {
        lua_pushliteral(L, "name");
        int type = lua_rawget(L, arg);
        if (type == LUA_TNIL)
            lua_pop(L, 1);
        else if (type == LUA_TSTRING && strlen(lua_tostring(L, -1)) == lua_rawlen(L, -1))
            lua_replace(L, -2);
        else
            gpurun_arg_error(L, arg, "name must be a string without NUL bytes, got %s",
                             gpurun_type_name(L, -1));
    }
    const char *name = lua_tostring(L, -1); /* stays on the stack */
    lua_newtable(L);
    int mapping = lua_gettop(L);
    if (lua_isnoneornil(L, arg))
        return name;
    lua_pushliteral(L, "symbol_mapping");
    int type = lua_rawget(L, arg);
    if (type == LUA_TNIL) {
        lua_pop(L, 1);
        return name;
    }
    if (type != LUA_TTABLE)
        gpurun_arg_error(L, arg, "symbol_mapping must be a table of names, got %s",
                         gpurun_type_name(L, -1));
    for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
        if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING
            || lua_rawlen(L, -1) == 0 || strlen(lua_tostring(L, -1)) != lua_rawlen(L, -1))
            gpurun_arg_error(L, arg, "symbol_mapping must map names to non-empty strings "
                                     "without NUL bytes");
        lua_pushvalue(L, -2);
        lua_pushvalue(L, -2);
        lua_rawset(L, mapping);
    }
    lua_pop(L, 1);
    return name;
}

/* from_<type>(code [, { name =, symbol_mapping = }]) -> ObjectCode. code is
 * the code itself, a string of its bytes, or { path = "file" }: in Lua
 * both bytes and paths are strings, so a path must say it is one. */
static int from_code(lua_State *L, enum device_code_type type)
{
    if (lua_type(L, 1) != LUA_TTABLE && lua_type(L, 1) != LUA_TSTRING)
        return gpurun_type_error(L, 1, "string of code or { path = } table");
    lua_settop(L, 2);
    const char *path = NULL;
    if (lua_type(L, 1) == LUA_TTABLE)
        path = push_file(L, 1);
    else
        lua_pushvalue(L, 1);
    int code = lua_gettop(L);
    size_t size;
    const unsigned char *bytes = (const unsigned char *)lua_tolstring(L, code, &size);
    char why[256];
    if (!device_code_check(type, bytes, size, why, sizeof why)) {
        if (path)
            return gpurun_error(L, "%s %s", path, why);
        return gpurun_arg_error(L, 1, "the %s given as bytes %s", device_code_type_name(type),
                                why);
    }
    if (type == DEVICE_CODE_PTX && size > 0 && bytes[size - 1] == '\0') {
        lua_pushlstring(L, (const char *)bytes, size - 1); /* the text, as NVRTC's */
        lua_replace(L, code);
        bytes = (const unsigned char *)lua_tolstring(L, code, &size);
    }
    const char *ptx = type == DEVICE_CODE_PTX ? (const char *)bytes : NULL;
    size_t ptx_size = size;
    if (type == DEVICE_CODE_FATBIN) {
        /* Without PTX that can be read, the driver's sizes type the kernels. */
        char *text = fatbin_ptx(bytes, size, &ptx_size, why, sizeof why);
        if (text) {
            push_and_free(L, text, ptx_size, "not enough memory for the fatbin's PTX");
            ptx = lua_tostring(L, -1); /* stays on the stack */
        }
    }
    const char *name = check_code_options(L, 2, path ? path : "");
    int names = lua_gettop(L);
    push_code(L, type, name, "", code, names, 0, ptx, ptx_size, 0);
    return 1;
}

static int from_cubin(lua_State *L) { return from_code(L, DEVICE_CODE_CUBIN); }
static int from_ptx(lua_State *L) { return from_code(L, DEVICE_CODE_PTX); }
static int from_ltoir(lua_State *L) { return from_code(L, DEVICE_CODE_LTOIR); }
static int from_fatbin(lua_State *L) { return from_code(L, DEVICE_CODE_FATBIN); }
static int from_object(lua_State *L) { return from_code(L, DEVICE_CODE_OBJECT); }
static int from_library(lua_State *L) { return from_code(L, DEVICE_CODE_LIBRARY); }

/* save(path) -> self: writes the code, as it would be given to from_<type>. */
static int object_code_save(lua_State *L)
{
    check_object_code(L, 1);
    if (lua_type(L, 2) != LUA_TSTRING)
        return gpurun_type_error(L, 2, "path string");
    size_t length;
    const char *path = lua_tolstring(L, 2, &length);
    if (length == 0)
        gpurun_arg_error(L, 2, "path is empty");
    if (strlen(path) != length)
        gpurun_arg_error(L, 2, "path contains a NUL byte");
    lua_getiuservalue(L, 1, 1);
    size_t size;
    const char *code = lua_tolstring(L, -1, &size);
    int error = write_whole_file(path, code, size);
    if (error == READ_FILE_NOT_REGULAR)
        return gpurun_error(L, "ObjectCode:save: cannot write %s: it is %s, not a regular file",
                            path, file_kind(path));
    if (error)
        return gpurun_error(L, "ObjectCode:save: cannot write %s: %s", path, strerror(error));
    lua_settop(L, 1);
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
    lua_pushstring(L, device_code_type_name(self(L)->code_type));
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
        lua_pushfstring(L, "gpurun.ObjectCode(%s, %d bytes%s)",
                        device_code_type_name(code->code_type),
                        (int)lua_rawlen(L, -1), code->from_cache ? ", from the cache" : "");
    }
    return 1;
}

static const luaL_Reg object_code_methods[] = {
    {"get_kernel", object_code_get_kernel},
    {"save", object_code_save},
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

/* gpurun.ObjectCode.from_cubin and the rest, cuda.core's constructors. */
static const luaL_Reg object_code_constructors[] = {
    {"from_cubin", from_cubin},
    {"from_ptx", from_ptx},
    {"from_ltoir", from_ltoir},
    {"from_fatbin", from_fatbin},
    {"from_object", from_object},
    {"from_library", from_library},
    {NULL, NULL}
};

void gpurun_open_object_code(lua_State *L)
{
    gpurun_register_type(L, &object_code_type);
    gpurun_set_type_functions(L, &gpurun_object_code_tag, object_code_constructors);
}
