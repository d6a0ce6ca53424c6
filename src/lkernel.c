/* gpurun.Kernel, gpurun.launch and launch plans (gpurun.LaunchPlan).
 *
 * The per-launch path is the reason this file exists in C: a launch checks
 * every argument against the parameter layout read once by get_kernel, packs
 * it into storage preallocated with the kernel, and calls cuLaunchKernel. It
 * allocates nothing and formats nothing unless it raises. */
#include "lkernel.h"

#include <float.h>
#include <math.h>
#include <stdarg.h>
#include <string.h>

/* ---- Kernel ------------------------------------------------------------- */

struct kernel {
    const struct gpurun_tag *tag;
    CUkernel handle;
    CUfunction function;     /* the kernel in the context current at get_kernel */
    struct gpurun_object_code_header *code;
    int closed;
    int param_count;
    int max_threads_per_block;
    int max_dynamic_shared;
    size_t storage_size;
    size_t *param_offsets;
    size_t *param_sizes;
    void **param_pointers;   /* param_pointers[i] = storage + param_offsets[i] */
    unsigned char *storage;  /* the packed arguments of the launch in progress */
    const char *name;
};

/* The kernel's own allocation holds its arrays, its storage and its name. */
static size_t align_up(size_t size, size_t alignment)
{
    return (size + alignment - 1) / alignment * alignment;
}

static int count_params(lua_State *L, CUkernel handle, size_t *storage_size)
{
    int count = 0;
    *storage_size = 0;
    for (;;) {
        size_t offset = 0, size = 0;
        CUresult result = CUDA_CALL(cuKernelGetParamInfo, handle, (size_t)count, &offset, &size);
        if (result == CUDA_ERROR_INVALID_VALUE)
            break;
        if (result != CUDA_SUCCESS)
            gpurun_cuda_error(L, "reading the parameters of a kernel");
        if (offset + size > *storage_size)
            *storage_size = offset + size;
        count++;
    }
    return count;
}

int gpurun_push_kernel(lua_State *L, int code_index, CUkernel handle, const char *name)
{
    code_index = lua_absindex(L, code_index);
    gpurun_require_context(L);
    size_t storage_size = 0;
    int count = count_params(L, handle, &storage_size);
    size_t name_length = strlen(name) + 1;
    size_t arrays = align_up(sizeof(struct kernel), 16);
    size_t storage_at = align_up(arrays + (size_t)count * (2 * sizeof(size_t) + sizeof(void *)), 16);
    size_t name_at = storage_at + align_up(storage_size, 16);

    unsigned char *block = lua_newuserdatauv(L, name_at + name_length, 1);
    struct kernel *kernel = (struct kernel *)block;
    memset(kernel, 0, sizeof *kernel);
    kernel->tag = &gpurun_tag_kernel;
    kernel->handle = handle;
    kernel->code = lua_touserdata(L, code_index);
    kernel->closed = 1;
    kernel->param_count = count;
    kernel->storage_size = storage_size;
    kernel->param_offsets = (size_t *)(block + arrays);
    kernel->param_sizes = kernel->param_offsets + count;
    kernel->param_pointers = (void **)(kernel->param_sizes + count);
    kernel->storage = block + storage_at;
    kernel->name = memcpy(block + name_at, name, name_length);
    memset(kernel->storage, 0, storage_size);
    luaL_setmetatable(L, GPURUN_KERNEL);
    lua_pushvalue(L, code_index);
    lua_setiuservalue(L, -2, 1);  /* the ObjectCode lives as long as its kernels */

    for (int i = 0; i < count; i++) {
        CHECK_CUDA(L, "reading the parameters of a kernel", cuKernelGetParamInfo, handle,
                   (size_t)i, &kernel->param_offsets[i], &kernel->param_sizes[i]);
        kernel->param_pointers[i] = kernel->storage + kernel->param_offsets[i];
    }
    CUdevice device;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, gpurun_runtime.current_device);
    CHECK_CUDA(L, "reading the kernel's thread limit", cuKernelGetAttribute,
               &kernel->max_threads_per_block, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, handle,
               device);
    CHECK_CUDA(L, "reading the kernel's shared memory limit", cuKernelGetAttribute,
               &kernel->max_dynamic_shared, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
               handle, device);
    /* Launching the context's CUfunction spares the driver from resolving
     * the context-independent CUkernel at every launch. */
    CHECK_CUDA(L, "getting the kernel's function for the current device", cuKernelGetFunction,
               &kernel->function, handle);
    kernel->closed = 0;
    return 1;
}

static struct kernel *check_kernel(lua_State *L, int index)
{
    struct kernel *kernel = luaL_checkudata(L, index, GPURUN_KERNEL);
    if (kernel->closed || kernel->code->closed)
        gpurun_closed_error(L, kernel->closed ? GPURUN_KERNEL : GPURUN_OBJECT_CODE);
    return kernel;
}

static int kernel_close(lua_State *L)
{
    struct kernel *kernel = luaL_checkudata(L, 1, GPURUN_KERNEL);
    kernel->closed = 1; /* the CUkernel belongs to the ObjectCode's library */
    return 0;
}

/* params() -> { {offset=, size=}, ... } as cuKernelGetParamInfo reports. */
static int kernel_params(lua_State *L)
{
    struct kernel *kernel = check_kernel(L, 1);
    lua_createtable(L, kernel->param_count, 0);
    for (int i = 0; i < kernel->param_count; i++) {
        lua_createtable(L, 0, 2);
        lua_pushinteger(L, (lua_Integer)kernel->param_offsets[i]);
        lua_setfield(L, -2, "offset");
        lua_pushinteger(L, (lua_Integer)kernel->param_sizes[i]);
        lua_setfield(L, -2, "size");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

static int kernel_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_KERNEL))
        return 1;
    struct kernel *kernel = check_kernel(L, 1);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "name") == 0)
        lua_pushstring(L, kernel->name);
    else if (strcmp(key, "num_params") == 0)
        lua_pushinteger(L, kernel->param_count);
    else if (strcmp(key, "max_threads_per_block") == 0)
        lua_pushinteger(L, kernel->max_threads_per_block);
    else if (strcmp(key, "max_dynamic_shared_size") == 0)
        lua_pushinteger(L, kernel->max_dynamic_shared);
    else if (strcmp(key, "handle") == 0)
        lua_pushinteger(L, (lua_Integer)(uintptr_t)kernel->handle);
    else
        lua_pushnil(L);
    return 1;
}

static int kernel_tostring(lua_State *L)
{
    struct kernel *kernel = luaL_checkudata(L, 1, GPURUN_KERNEL);
    lua_pushfstring(L, "gpurun.Kernel(%s%s)", kernel->name, kernel->closed ? ", closed" : "");
    return 1;
}

/* ---- argument packing --------------------------------------------------- */

/* Set while packing for a graph builder: an argument error then also ends
 * the capture, so the stream is usable after the error is caught. */
static int packing_for_builder;

static int argument_error(lua_State *L, const char *fmt, ...)
{
    if (packing_for_builder)
        gpurun_abort_captures(L);
    va_list args;
    va_start(args, fmt);
    luaL_where(L, 1);
    lua_pushvfstring(L, fmt, args);
    va_end(args);
    lua_concat(L, 2);
    return lua_error(L);
}

/* A value's type as a message names it: the __name of a gpurun object. */
static const char *type_name(lua_State *L, int index)
{
    const char *name = luaL_typename(L, index);
    int field = luaL_getmetafield(L, index, "__name");
    if (field == LUA_TSTRING)
        name = lua_tostring(L, -1); /* left on the stack for the error */
    else if (field != LUA_TNIL)
        lua_pop(L, 1);
    return name;
}

static int integer_fits(lua_Integer value, size_t size)
{
    switch (size) {
    case 1: return value >= INT8_MIN && value <= UINT8_MAX;
    case 2: return value >= INT16_MIN && value <= UINT16_MAX;
    case 4: return value >= INT32_MIN && value <= (lua_Integer)UINT32_MAX;
    case 8: return 1;
    default: return 0;
    }
}

/* Writes the Lua value at `index` as parameter `i` of `kernel` into
 * `slot`. Returns the buffer it passed, or NULL for a non-buffer. */
static struct gpurun_buffer *pack_argument(lua_State *L, const struct kernel *kernel, int i,
                                           int index, unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    switch (lua_type(L, index)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, index)) {
            lua_Integer value = lua_tointeger(L, index);
            if (!integer_fits(value, size))
                argument_error(L, "kernel '%s' parameter %d is %d bytes: integer %I does not fit"
                                  "%s", kernel->name, i + 1, (int)size, value,
                               size > 8 ? " (pass a gpurun scalar of that size)" : "");
            /* Little-endian: the low bytes of the value are the narrow value. */
            int64_t wide = (int64_t)value;
            memcpy(slot, &wide, size);
        } else {
            lua_Number value = lua_tonumber(L, index);
            if (size != 4 && size != 8)
                argument_error(L, "kernel '%s' parameter %d is %d bytes: a float fits only a "
                                  "4- or 8-byte parameter", kernel->name, i + 1, (int)size);
            if (size == 4 && isfinite(value) && fabs(value) > FLT_MAX)
                argument_error(L, "kernel '%s' parameter %d is a 4-byte value: %f is out of "
                                  "float range", kernel->name, i + 1, value);
            /* A float with an integral value (2^20, 4.0) is the one case the
             * subtype does not settle: it may be meant for an integer
             * parameter of the same size, where its float bits would be a
             * wild count or index. */
            if (value == floor(value) && isfinite(value))
                argument_error(L, "kernel '%s' parameter %d: %f is a float with an integral value; "
                                  "pass gpurun.f%d(x) for a floating-point parameter or "
                                  "math.tointeger(x) for an integer one",
                               kernel->name, i + 1, value, size == 4 ? 32 : 64);
            if (size == 8) {
                double wide = (double)value;
                memcpy(slot, &wide, 8);
            } else {
                float narrow = (float)value;
                memcpy(slot, &narrow, 4);
            }
        }
        return NULL;
    case LUA_TBOOLEAN:
        if (size != 1)
            argument_error(L, "kernel '%s' parameter %d is %d bytes: a boolean passes as 1 byte",
                           kernel->name, i + 1, (int)size);
        *slot = (unsigned char)lua_toboolean(L, index);
        return NULL;
    case LUA_TUSERDATA: {
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, index, &gpurun_tag_buffer);
        if (buffer) {
            if (buffer->closed)
                argument_error(L, "kernel '%s' parameter %d: attempt to use a closed "
                                  GPURUN_BUFFER, kernel->name, i + 1);
            if (size != sizeof(CUdeviceptr))
                argument_error(L, "kernel '%s' parameter %d is %d bytes: a gpurun.Buffer passes "
                                  "as an 8-byte pointer", kernel->name, i + 1, (int)size);
            memcpy(slot, &buffer->pointer, sizeof buffer->pointer);
            return buffer;
        }
        const struct scalar *scalar = gpurun_to_tagged(L, index, &gpurun_tag_scalar);
        if (scalar) {
            if (gpurun_scalar_sizes[scalar->kind] != size)
                argument_error(L, "kernel '%s' parameter %d is %d bytes but gpurun.%s is %d",
                               kernel->name, i + 1, (int)size, gpurun_scalar_names[scalar->kind],
                               (int)gpurun_scalar_sizes[scalar->kind]);
            memcpy(slot, scalar->value.bytes, size);
            return NULL;
        }
    }
    /* fallthrough */
    default:
        argument_error(L, "kernel '%s' parameter %d: number, boolean, gpurun.Buffer or gpurun "
                          "scalar expected, got %s", kernel->name, i + 1, type_name(L, index));
        return NULL;
    }
}

static void check_argument_count(lua_State *L, const struct kernel *kernel, int given)
{
    if (given != kernel->param_count)
        argument_error(L, "kernel '%s' takes %d parameter%s, got %d", kernel->name,
                       kernel->param_count, kernel->param_count == 1 ? "" : "s", given);
}

static void check_config_fits(lua_State *L, const struct kernel *kernel,
                              const struct launch_config *config)
{
    unsigned int threads = config->block[0] * config->block[1] * config->block[2];
    if ((int)threads > kernel->max_threads_per_block)
        argument_error(L, "kernel '%s' runs at most %d threads per block; the LaunchConfig "
                          "asks for %d", kernel->name, kernel->max_threads_per_block, (int)threads);
    if ((int)config->shmem_size > kernel->max_dynamic_shared)
        argument_error(L, "kernel '%s' may use at most %d bytes of dynamic shared memory; the "
                          "LaunchConfig asks for %d", kernel->name, kernel->max_dynamic_shared,
                       (int)config->shmem_size);
}

static struct launch_config *to_config(lua_State *L, int index)
{
    struct launch_config *config = gpurun_to_tagged(L, index, &gpurun_tag_config);
    if (config == NULL)
        luaL_typeerror(L, index, GPURUN_LAUNCH_CONFIG);
    return config;
}

static struct kernel *to_kernel(lua_State *L, int index)
{
    struct kernel *kernel = gpurun_to_tagged(L, index, &gpurun_tag_kernel);
    if (kernel == NULL)
        luaL_typeerror(L, index, GPURUN_KERNEL);
    if (kernel->closed || kernel->code->closed)
        gpurun_closed_error(L, kernel->closed ? GPURUN_KERNEL : GPURUN_OBJECT_CODE);
    return kernel;
}

/* The stream a launch goes on. A graph builder target sets *builder. */
static CUstream launch_target(lua_State *L, int index, struct gpurun_graph_builder **builder)
{
    *builder = NULL;
    const struct gpurun_stream *stream = gpurun_to_tagged(L, index, &gpurun_tag_stream);
    if (stream) {
        if (stream->closed)
            gpurun_closed_error(L, GPURUN_STREAM);
        if (stream->captured)
            gpurun_captured_stream_error(L);
        return stream->handle;
    }
    *builder = gpurun_test_graph_builder(L, index);
    if (*builder == NULL)
        luaL_typeerror(L, index, "gpurun.Stream or gpurun.GraphBuilder");
    return gpurun_graph_builder_stream(L, *builder);
}

static void launch_failed(lua_State *L, const struct kernel *kernel)
{
    gpurun_cuda_error(L, "launching kernel '%s'", kernel->name);
}

/* launch(stream | builder, config, kernel, args...) */
static int module_launch(lua_State *L)
{
    struct gpurun_graph_builder *builder;
    CUstream stream = launch_target(L, 1, &builder);
    const struct launch_config *config = to_config(L, 2);
    struct kernel *kernel = to_kernel(L, 3);
    int given = lua_gettop(L) - 3;
    packing_for_builder = builder != NULL;
    check_argument_count(L, kernel, given);
    check_config_fits(L, kernel, config);
    if (builder) {
        /* Kept before packing: keeping allocates, and a finalizer run by
         * that allocation must not close a buffer already packed. */
        gpurun_graph_builder_keep(L, 1, 3);
        for (int i = 0; i < given; i++)
            if (gpurun_to_tagged(L, 4 + i, &gpurun_tag_buffer))
                gpurun_graph_builder_keep(L, 1, 4 + i);
    }
    for (int i = 0; i < given; i++)
        pack_argument(L, kernel, i, 4 + i, kernel->storage + kernel->param_offsets[i]);
    packing_for_builder = 0;
    if (CUDA_CALL(cuLaunchKernel, kernel->function, config->grid[0], config->grid[1],
                  config->grid[2], config->block[0], config->block[1], config->block[2],
                  config->shmem_size, stream, kernel->param_pointers, NULL) != CUDA_SUCCESS)
        launch_failed(L, kernel);
    return 0;
}

/* ---- LaunchPlan: arguments checked and packed once ---------------------- */

struct plan {
    const struct gpurun_tag *tag;
    CUfunction function;
    const struct kernel *kernel;
    struct launch_config config;
    int closed;
    int buffer_count;
    struct gpurun_buffer **buffers;  /* checked for closure at each launch */
    void **param_pointers;
    unsigned char *storage;
};

/* kernel:bind(config, args...) -> plan. The plan keeps the kernel and every
 * buffer it passes alive (user value 1: kernel, 2: buffers). */
static int kernel_bind(lua_State *L)
{
    struct kernel *kernel = check_kernel(L, 1);
    const struct launch_config *config = to_config(L, 2);
    int given = lua_gettop(L) - 2;
    packing_for_builder = 0;
    check_argument_count(L, kernel, given);
    check_config_fits(L, kernel, config);
    int count = kernel->param_count;
    size_t pointers_at = align_up(sizeof(struct plan), 16);
    size_t storage_at = align_up(pointers_at + (size_t)count * 2 * sizeof(void *), 16);
    unsigned char *block = lua_newuserdatauv(L, storage_at + kernel->storage_size, 2);
    struct plan *plan = (struct plan *)block;
    memset(plan, 0, sizeof *plan);
    plan->tag = &gpurun_tag_plan;
    plan->closed = 1;
    luaL_setmetatable(L, GPURUN_PLAN);
    plan->function = kernel->function;
    plan->kernel = kernel;
    plan->config = *config;
    plan->param_pointers = (void **)(block + pointers_at);
    plan->buffers = (struct gpurun_buffer **)(plan->param_pointers + count);
    plan->storage = block + storage_at;
    memset(plan->storage, 0, kernel->storage_size);
    int plan_index = lua_gettop(L);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, plan_index, 1);
    lua_newtable(L);
    for (int i = 0; i < given; i++) {
        unsigned char *slot = plan->storage + kernel->param_offsets[i];
        plan->param_pointers[i] = slot;
        struct gpurun_buffer *buffer = pack_argument(L, kernel, i, 3 + i, slot);
        if (buffer) {
            plan->buffers[plan->buffer_count++] = buffer;
            lua_pushvalue(L, 3 + i);
            lua_rawseti(L, -2, plan->buffer_count);
        }
    }
    lua_setiuservalue(L, plan_index, 2);
    plan->closed = 0;
    return 1;
}

static struct plan *check_plan(lua_State *L, int index)
{
    struct plan *plan = luaL_checkudata(L, index, GPURUN_PLAN);
    if (plan->closed)
        gpurun_closed_error(L, GPURUN_PLAN);
    return plan;
}

/* plan:launch(stream | builder) */
static int plan_launch(lua_State *L)
{
    const struct plan *plan = gpurun_to_tagged(L, 1, &gpurun_tag_plan);
    if (plan == NULL)
        luaL_typeerror(L, 1, GPURUN_PLAN);
    if (plan->closed)
        gpurun_closed_error(L, GPURUN_PLAN);
    if (plan->kernel->closed || plan->kernel->code->closed)
        gpurun_closed_error(L, plan->kernel->closed ? GPURUN_KERNEL : GPURUN_OBJECT_CODE);
    struct gpurun_graph_builder *builder;
    CUstream stream = launch_target(L, 2, &builder);
    if (builder) {
        /* The kernel and buffers go on the stack first: keeping allocates, and
         * a finalizer could close the plan and drop its user values. */
        lua_getiuservalue(L, 1, 1);
        int kept = lua_gettop(L);
        lua_getiuservalue(L, 1, 2);
        lua_Integer count = (lua_Integer)lua_rawlen(L, kept + 1);
        luaL_checkstack(L, (int)count, "too many buffers in a LaunchPlan");
        for (lua_Integer i = 1; i <= count; i++)
            lua_rawgeti(L, kept + 1, i);
        lua_remove(L, kept + 1);
        for (int index = kept; index <= lua_gettop(L); index++)
            gpurun_graph_builder_keep(L, 2, index);
        lua_settop(L, kept - 1);
    }
    /* Checked after keeping, which allocates and can run finalizers. */
    if (plan->closed)
        gpurun_closed_error(L, GPURUN_PLAN);
    for (int i = 0; i < plan->buffer_count; i++)
        if (plan->buffers[i]->closed)
            return luaL_error(L, "LaunchPlan of kernel '%s': a gpurun.Buffer it passes was "
                                 "closed after bind", plan->kernel->name);
    const struct launch_config *config = &plan->config;
    if (CUDA_CALL(cuLaunchKernel, plan->function, config->grid[0], config->grid[1],
                  config->grid[2], config->block[0], config->block[1], config->block[2],
                  config->shmem_size, stream, plan->param_pointers, NULL) != CUDA_SUCCESS)
        launch_failed(L, plan->kernel);
    return 0;
}

static int plan_close(lua_State *L)
{
    struct plan *plan = luaL_checkudata(L, 1, GPURUN_PLAN);
    if (plan->closed)
        return 0;
    plan->closed = 1;
    plan->buffer_count = 0;
    /* Let the kernel and buffers go. */
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 2);
    return 0;
}

/* plan:kernel() -> the Kernel. A method, not a field: the plan's __index is
 * its methods table, so plan:launch() costs one table look-up. */
static int plan_kernel(lua_State *L)
{
    check_plan(L, 1);
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int plan_tostring(lua_State *L)
{
    struct plan *plan = luaL_checkudata(L, 1, GPURUN_PLAN);
    if (plan->closed)
        lua_pushliteral(L, "gpurun.LaunchPlan(closed)");
    else
        lua_pushfstring(L, "gpurun.LaunchPlan(%s)", plan->kernel->name);
    return 1;
}

void gpurun_adjust_graph_users(lua_State *L, int index, int delta)
{
    struct gpurun_buffer *buffer = gpurun_to_tagged(L, index, &gpurun_tag_buffer);
    struct kernel *kernel = gpurun_to_tagged(L, index, &gpurun_tag_kernel);
    if (buffer)
        buffer->graph_users += delta;
    else if (kernel)
        kernel->code->graph_users += delta;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg kernel_meth[] = {
    {"params", kernel_params},
    {"bind", kernel_bind},
    {"close", kernel_close},
    {NULL, NULL}
};

static const luaL_Reg kernel_metameth[] = {
    {"__index", kernel_index},
    {"__tostring", kernel_tostring},
    {"__close", kernel_close},
    {"__gc", kernel_close},
    {NULL, NULL}
};

static const luaL_Reg plan_meth[] = {
    {"launch", plan_launch},
    {"kernel", plan_kernel},
    {"close", plan_close},
    {NULL, NULL}
};

static const luaL_Reg plan_metameth[] = {
    {"__tostring", plan_tostring},
    {"__close", plan_close},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"launch", module_launch},
    {NULL, NULL}
};

void gpurun_open_kernel(lua_State *L)
{
    gpurun_new_type(L, GPURUN_KERNEL, kernel_meth, kernel_metameth);
    lua_pop(L, 1);
    gpurun_new_type(L, GPURUN_PLAN, plan_meth, plan_metameth);
    lua_pop(L, 1);
    luaL_setfuncs(L, module_functions, 0);
    gpurun_open_scalar(L);
    gpurun_open_launch_config(L);
}
