/* gpurun.Kernel: a kernel's handles, limits and parameter layout. The
 * layout is read once here, at the kernel's first use, so that every launch
 * (types/launch.c) can check and pack its arguments without asking the
 * driver anything. */
#include "types/kernel.h"

#include <string.h>

const struct gpurun_tag gpurun_kernel_tag = {"gpurun.Kernel"};

static size_t align_up(size_t size, size_t alignment)
{
    return (size + alignment - 1) / alignment * alignment;
}

void gpurun_check_kernel_open(lua_State *L, const struct gpurun_kernel *kernel)
{
    if (kernel->header.closed)
        gpurun_closed_error(L, gpurun_kernel_tag.type_name);
    if (kernel->code->closed)
        gpurun_closed_error(L, kernel->code->tag->type_name);
}

void gpurun_check_kernel_device(lua_State *L, const struct gpurun_kernel *kernel, int device)
{
    if (__builtin_expect(device != kernel->device, 0))
        gpurun_error(L, "kernel '%s' belongs to device %d (get_kernel ran with it current) but "
                        "the launch goes to a stream of device %d: call get_kernel again with "
                        "device %d current", kernel->name, kernel->device, device, device);
}

/* The driver loads a library's code into a context when a function of it
 * is first asked for, which costs more than the rest of get_kernel: as in
 * cuda.core, get_kernel leaves that to the first use that needs the
 * function or its limits (a launch, a bind, a limit or attribute read). */
static void load_function(lua_State *L, struct gpurun_kernel *kernel, int index)
{
    CUcontext previous = gpurun_enter_context(kernel->context);
    /* Loading into a context is unsafe during a capture, where the kernels
     * of a loop's conditions are first used (types/object_code.c). */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUdevice device = 0;
    CUfunction function = NULL;
    int threads = 0, shared = 0;
    CUresult result = CUDA_CALL(cuDeviceGet, &device, kernel->device);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuKernelGetAttribute, &threads,
                           CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, kernel->handle, device);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuKernelGetFunction, &function, kernel->handle);
    /* From the function, which set_max_dynamic_shared_size_bytes changes
     * (also for another Kernel of the same code and name). */
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuFuncGetAttribute, &shared,
                           CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, function);
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS) {
        lua_getiuservalue(L, index, 1);
        lua_getiuservalue(L, -1, 3);
        const char *code_name = lua_tostring(L, -1);
        gpurun_cuda_error(L, "loading kernel '%s' of %s into device %d", kernel->name,
                          code_name && code_name[0] ? code_name : "code given as bytes",
                          kernel->device);
    }
    kernel->max_threads_per_block = threads;
    kernel->max_dynamic_shared = shared;
    /* Launching the context's CUfunction spares the driver from resolving
     * the context-independent CUkernel at every launch. */
    kernel->function = function;
}

/* The parameters whose layout one pass of the driver's answers keeps (a
 * kernel with more asks again for the rest). */
#define LAYOUT_KEPT 64

struct param_layout {
    size_t offset, size;
};

/* Reads the driver's layout of the kernel's parameters once, keeping the
 * first LAYOUT_KEPT in `layout`, and returns their count: `count` where
 * the signature gives it, else found by asking past the last parameter
 * (compute-sanitizer reports that call's error: a kernel whose signature
 * is known is never probed). *storage_size is the bytes they span: the
 * driver places them in order, so the last one ends it. */
static int read_layout(lua_State *L, CUkernel handle, int count,
                       struct param_layout layout[LAYOUT_KEPT], size_t *storage_size)
{
    *storage_size = 0;
    int known = count >= 0;
    int i = 0;
    for (; !known || i < count; i++) {
        size_t offset = 0, size = 0;
        CUresult result = CUDA_CALL(cuKernelGetParamInfo, handle, (size_t)i, &offset, &size);
        if (!known && result == CUDA_ERROR_INVALID_VALUE)
            break;
        if (result != CUDA_SUCCESS)
            gpurun_cuda_error(L, "reading the parameters of a kernel");
        if (offset + size > *storage_size)
            *storage_size = offset + size;
        if (i < LAYOUT_KEPT)
            layout[i] = (struct param_layout){offset, size};
    }
    return i;
}

static void set_param_type(struct gpurun_kernel *kernel, int i, const struct ptx_param *param)
{
    switch (param->kind) {
    case PTX_PARAM_UNSIGNED:
    case PTX_PARAM_SIGNED:
        kernel->param_kinds[i] = GPURUN_PARAM_INTEGER;
        break;
    case PTX_PARAM_FLOAT:
        kernel->param_kinds[i] = GPURUN_PARAM_FLOAT;
        break;
    case PTX_PARAM_AGGREGATE:
        kernel->param_kinds[i] = GPURUN_PARAM_AGGREGATE;
        break;
    default:
        kernel->param_kinds[i] = GPURUN_PARAM_UNTYPED;
        break;
    }
    kernel->param_pointer[i] = param->pointer == PTX_POINTER_YES ? GPURUN_POINTER_YES
                               : param->pointer == PTX_POINTER_UNKNOWN ? GPURUN_POINTER_MAYBE
                               : GPURUN_POINTER_NO;
    kernel->param_aligns[i] = param->align;
    ptx_param_describe(param, kernel->param_types[i], GPURUN_PARAM_TYPE_SIZE);
}

/* User values of a Kernel: 1 = the ObjectCode, 2 = the program's source,
 * 3 = the memory of its parameter layout, once read. */
#define KERNEL_LAYOUT_VALUE 3

/* Reads the layout of the open kernel at index into memory of its own: the
 * driver's offsets and sizes, the signature's types. Asked for at the first
 * use, as the driver's answers cost more than the rest of get_kernel. */
static void read_kernel_layout(lua_State *L, struct gpurun_kernel *kernel, int index)
{
    index = lua_absindex(L, index);
    size_t storage_size = 0;
    struct param_layout layout[LAYOUT_KEPT];
    int count = read_layout(L, kernel->handle,
                            kernel->signature ? (int)kernel->signature->param_count : -1, layout,
                            &storage_size);
    size_t per_param = 3 * sizeof(size_t) + sizeof(void *) + 2 + GPURUN_PARAM_TYPE_SIZE;
    size_t types_at = (size_t)count * (3 * sizeof(size_t) + sizeof(void *));
    /* The driver's offsets, not the PTX layout's: a parameter aligned to
     * more than the parameter bank's base (a 64-byte CUtensorMap) is
     * placed after padding that the PTX does not show. */
    size_t storage_at = align_up((size_t)count * per_param, 16);
    size_t block_size = storage_at + align_up(storage_size, 16) + 1;
    /* Zeroed: a parameter the signature does not type keeps an empty type
     * and kind, which the launch checks read. */
    unsigned char *block = memset(lua_newuserdatauv(L, block_size, 0), 0, block_size);
    /* The allocation can run a finalizer that closes the code: its library
     * (and so the handle) unloaded, the signature freed. */
    gpurun_check_kernel_open(L, kernel);
    lua_setiuservalue(L, index, KERNEL_LAYOUT_VALUE);
    kernel->param_offsets = (size_t *)block;
    kernel->param_sizes = kernel->param_offsets + count;
    kernel->param_aligns = kernel->param_sizes + count;
    kernel->param_pointers = (void **)(kernel->param_aligns + count);
    kernel->param_types = (char (*)[GPURUN_PARAM_TYPE_SIZE])(block + types_at);
    kernel->param_kinds = (unsigned char *)(kernel->param_types + count);
    kernel->param_pointer = kernel->param_kinds + count;
    kernel->storage = block + storage_at;
    kernel->storage_size = storage_size;
    const struct ptx_kernel_signature *signature = kernel->signature;
    for (int i = 0; i < count; i++) {
        if (i < LAYOUT_KEPT) {
            kernel->param_offsets[i] = layout[i].offset;
            kernel->param_sizes[i] = layout[i].size;
        } else {
            CHECK_CUDA(L, "reading the parameters of a kernel", cuKernelGetParamInfo,
                       kernel->handle, (size_t)i, &kernel->param_offsets[i],
                       &kernel->param_sizes[i]);
        }
        if (kernel->param_offsets[i] + kernel->param_sizes[i] > storage_size)
            gpurun_error(L, "kernel '%s': the driver places parameter %d past the %d bytes it "
                            "gave before", kernel->name, i + 1, (int)storage_size);
        kernel->param_pointers[i] = kernel->storage + kernel->param_offsets[i];
        if (signature && signature->params[i].size == kernel->param_sizes[i])
            set_param_type(kernel, i, &signature->params[i]);
        else
            kernel->param_pointer[i] = kernel->param_sizes[i] == 8 ? GPURUN_POINTER_MAYBE
                                                                   : GPURUN_POINTER_NO;
    }
    kernel->param_count = count; /* last: a failure above leaves it to be read again */
}

struct gpurun_kernel *gpurun_check_kernel(lua_State *L, int index)
{
    struct gpurun_kernel *kernel = gpurun_check_tagged(L, index, &gpurun_kernel_tag);
    gpurun_check_kernel_open(L, kernel);
    if (__builtin_expect(kernel->param_count < 0, 0))
        read_kernel_layout(L, kernel, index);
    if (__builtin_expect(kernel->function == NULL, 0))
        load_function(L, kernel, index);
    return kernel;
}

/* The kernel's own allocation holds its name; its layout and function
 * come at its first use (gpurun_check_kernel). */
void gpurun_push_kernel(lua_State *L, int code_index, CUkernel handle, const char *name,
                        const struct ptx_kernel_signature *signature)
{
    code_index = lua_absindex(L, code_index);
    gpurun_require_context(L);
    size_t name_length = strlen(name) + 1;
    size_t name_at = align_up(sizeof(struct gpurun_kernel), 16);
    unsigned char *block = gpurun_new_object(L, name_at + name_length, 3, &gpurun_kernel_tag);
    /* The allocation can run a finalizer that closes the code: its library
     * (and so `handle`) unloaded, `signature` freed. */
    const struct gpurun_object *code = lua_touserdata(L, code_index);
    if (code->closed)
        gpurun_closed_error(L, code->tag->type_name);
    struct gpurun_kernel *kernel = (struct gpurun_kernel *)block; /* zeroed */
    kernel->handle = handle;
    kernel->device = gpurun_runtime.current_device;
    kernel->context = gpurun_runtime.current_context;
    kernel->code = lua_touserdata(L, code_index);
    kernel->header.counts_for = kernel->code;
    kernel->signature = signature;
    kernel->param_count = -1;
    kernel->name = memcpy(block + name_at, name, name_length);
    lua_pushvalue(L, code_index);
    lua_setiuservalue(L, -2, 1); /* the ObjectCode lives as long as its kernels */
    kernel->header.closed = 0;
}

static int kernel_close(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_tagged(L, 1, &gpurun_kernel_tag);
    kernel->header.closed = 1; /* the CUkernel belongs to the ObjectCode's library */
    return 0;
}

static const char *const kind_names[] = {"untyped", "integer", "float", "aggregate"};

/* params() -> { {offset=, size=, type=, kind=, pointer= [, align=]}, ... }:
 * offsets and sizes as cuKernelGetParamInfo reports, the type (and a
 * struct's alignment) as the PTX declares it. */
static int kernel_params(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    lua_createtable(L, kernel->param_count, 0);
    for (int i = 0; i < kernel->param_count; i++) {
        lua_createtable(L, 0, 6);
        lua_pushinteger(L, (lua_Integer)kernel->param_offsets[i]);
        lua_setfield(L, -2, "offset");
        lua_pushinteger(L, (lua_Integer)kernel->param_sizes[i]);
        lua_setfield(L, -2, "size");
        if (kernel->param_types[i][0]) {
            lua_pushstring(L, kernel->param_types[i]);
            lua_setfield(L, -2, "type");
        }
        lua_pushstring(L, kind_names[kernel->param_kinds[i]]);
        lua_setfield(L, -2, "kind");
        /* What a gpurun.Struct's layout must match (types/launch.c). */
        if (kernel->param_kinds[i] == GPURUN_PARAM_AGGREGATE) {
            lua_pushinteger(L, (lua_Integer)kernel->param_aligns[i]);
            lua_setfield(L, -2, "align");
        }
        /* true, false, or "maybe" where the PTX does not mark pointers */
        if (kernel->param_pointer[i] == GPURUN_POINTER_MAYBE)
            lua_pushliteral(L, "maybe");
        else
            lua_pushboolean(L, kernel->param_pointer[i] == GPURUN_POINTER_YES);
        lua_setfield(L, -2, "pointer");
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* One CU_FUNC_ATTRIBUTE_* of the function launches use. */
static int function_attribute(lua_State *L, const struct gpurun_kernel *kernel,
                              CUfunction_attribute attribute)
{
    int value = 0;
    CHECK_CUDA(L, "reading a kernel attribute", cuFuncGetAttribute, &value, attribute,
               kernel->function);
    return value;
}

static int device_attribute(lua_State *L, const struct gpurun_kernel *kernel,
                            CUdevice_attribute attribute)
{
    CUdevice device;
    int value = 0;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, kernel->device);
    CHECK_CUDA(L, "reading a device attribute", cuDeviceGetAttribute, &value, attribute, device);
    return value;
}

/* set_max_dynamic_shared_size_bytes(bytes) -> self: lets launches ask for
 * up to `bytes` of dynamic shared memory, past the 48 KiB every kernel may
 * use, up to the device's opt-in limit less the kernel's static shared
 * memory. */
static int kernel_set_max_dynamic_shared_size_bytes(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    lua_Integer bytes = gpurun_check_integer(L, 2, "integer number of bytes");
    int optin = device_attribute(L, kernel, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    int static_bytes = function_attribute(L, kernel, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
    lua_Integer limit = (lua_Integer)optin - static_bytes;
    if (bytes < 0 || bytes > limit)
        return gpurun_arg_error(L, 2, "kernel '%s' can use from 0 to %I bytes of dynamic shared "
                                      "memory on device %d (max_shared_memory_per_block_optin %d "
                                      "less its %d static bytes), got %I", kernel->name,
                                (LUAI_UACINT)limit, kernel->device, optin, static_bytes,
                                (LUAI_UACINT)bytes);
    CHECK_CUDA(L, "setting a kernel's dynamic shared memory limit", cuFuncSetAttribute,
               kernel->function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, (int)bytes);
    kernel->max_dynamic_shared = (int)bytes;
    lua_settop(L, 1);
    return 1;
}

/* Threads per block in an options table: an integer or {x [, y [, z]]},
 * as LaunchConfig takes a block. */
static int option_block(lua_State *L, int arg, const struct gpurun_kernel *kernel)
{
    lua_pushliteral(L, "block");
    int type = lua_rawget(L, arg);
    lua_Integer threads = -1;
    if (type == LUA_TNUMBER && !gpurun_exact_integer(L, -1, &threads)) {
        threads = -1;
    } else if (type == LUA_TTABLE) {
        lua_Integer length = (lua_Integer)lua_rawlen(L, -1);
        threads = length >= 1 && length <= 3 ? 1 : -1;
        for (lua_Integer i = 1; threads > 0 && i <= length; i++) {
            lua_Integer n = 0;
            lua_rawgeti(L, -1, i);
            threads = gpurun_exact_integer(L, -1, &n) && n >= 1 && n <= 1024 ? threads * n : -1;
            lua_pop(L, 1);
        }
    }
    if (threads < 1 || threads > kernel->max_threads_per_block) {
        const char *got = type != LUA_TTABLE ? gpurun_value_text(L, -1)
            : threads > 0 ? lua_pushfstring(L, "{x, y, z} of %I threads", (LUAI_UACINT)threads)
                          : "a table that is not {x [, y [, z]]}";
        gpurun_arg_error(L, arg, "option 'block' must be the threads per block, from 1 to %d for "
                                 "kernel '%s', got %s", kernel->max_threads_per_block,
                         kernel->name, got);
    }
    lua_pop(L, 1);
    return (int)threads;
}

/* shmem_size in an options table: 0 up to what a launch may ask for. */
static size_t option_shmem_size(lua_State *L, int arg, const struct gpurun_kernel *kernel)
{
    lua_Integer bytes = gpurun_opt_integer_field(L, arg, "shmem_size", 0,
                                                 "an integer number of bytes");
    if (bytes < 0 || bytes > kernel->max_dynamic_shared)
        gpurun_arg_error(L, arg, "option 'shmem_size' must be from 0 to %d bytes for kernel "
                                 "'%s' (its limit: raise it with "
                                 "set_max_dynamic_shared_size_bytes), got %I",
                         kernel->max_dynamic_shared, kernel->name, (LUAI_UACINT)bytes);
    return (size_t)bytes;
}

/* occupancy{ block = threads, shmem_size = 0 } -> { max_active_blocks_per_multiprocessor,
 * active_warps_per_multiprocessor, max_warps_per_multiprocessor, occupancy }: how many
 * blocks of that size fit on one multiprocessor at once, and the fraction of
 * its warps they keep busy. */
static int kernel_occupancy(lua_State *L)
{
    static const char *const known[] = {"block", "shmem_size", NULL};
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    if (lua_type(L, 2) != LUA_TTABLE)
        gpurun_type_error(L, 2, "table { block = , shmem_size = }");
    gpurun_check_options(L, 2, known);
    int threads = option_block(L, 2, kernel);
    size_t shmem = option_shmem_size(L, 2, kernel);
    int blocks = 0;
    CHECK_CUDA(L, "computing a kernel's occupancy", cuOccupancyMaxActiveBlocksPerMultiprocessor,
               &blocks, kernel->function, threads, shmem);
    int warp = device_attribute(L, kernel, CU_DEVICE_ATTRIBUTE_WARP_SIZE);
    int max_threads = device_attribute(L, kernel, CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR);
    int active_warps = blocks * ((threads + warp - 1) / warp);
    int max_warps = max_threads / warp;
    lua_createtable(L, 0, 4);
    lua_pushinteger(L, blocks);
    lua_setfield(L, -2, "max_active_blocks_per_multiprocessor");
    lua_pushinteger(L, active_warps);
    lua_setfield(L, -2, "active_warps_per_multiprocessor");
    lua_pushinteger(L, max_warps);
    lua_setfield(L, -2, "max_warps_per_multiprocessor");
    lua_pushnumber(L, max_warps > 0 ? (double)active_warps / max_warps : 0.0);
    lua_setfield(L, -2, "occupancy");
    return 1;
}

/* max_potential_block_size([{ shmem_size = 0, block_size_limit = 0 }]) ->
 * { min_grid_size, max_block_size }: the block size that reaches the
 * kernel's best occupancy with that much dynamic shared memory per block,
 * and the fewest blocks that fill the device with it (cuda.core's names;
 * block_size_limit 0: the kernel's own limit). */
static int kernel_max_potential_block_size(lua_State *L)
{
    static const char *const known[] = {"shmem_size", "block_size_limit", NULL};
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    gpurun_check_options(L, 2, known);
    size_t shmem = option_shmem_size(L, 2, kernel);
    lua_Integer limit = gpurun_opt_integer_field(L, 2, "block_size_limit", 0, "an integer");
    if (limit < 0 || limit > kernel->max_threads_per_block)
        gpurun_arg_error(L, 2, "option 'block_size_limit' must be from 0 (none) to %d, got %I",
                         kernel->max_threads_per_block, (LUAI_UACINT)limit);
    int min_grid = 0, block = 0;
    /* No block-size-to-shared-memory callback: the same shmem_size for every size. */
    CHECK_CUDA(L, "computing a kernel's best block size", cuOccupancyMaxPotentialBlockSize,
               &min_grid, &block, kernel->function, NULL, shmem, (int)limit);
    lua_createtable(L, 0, 2);
    lua_pushinteger(L, min_grid);
    lua_setfield(L, -2, "min_grid_size");
    lua_pushinteger(L, block);
    lua_setfield(L, -2, "max_block_size");
    return 1;
}

/* Fields: the generic __index checked the kernel; its code is checked here. */
static struct gpurun_kernel *self(lua_State *L)
{
    struct gpurun_kernel *kernel = lua_touserdata(L, 1);
    gpurun_check_kernel_open(L, kernel);
    return kernel;
}

static int kernel_name(lua_State *L)
{
    lua_pushstring(L, self(L)->name);
    return 1;
}

void gpurun_set_kernel_source(lua_State *L, int index)
{
    lua_setiuservalue(L, index, 2);
}

/* The CUDA C the kernel's program was compiled from (nil when not known):
 * what says which pointer parameters are const, which PTX does not. */
static int kernel_source(lua_State *L)
{
    lua_getiuservalue(L, 1, 2);
    return 1;
}

/* The count without loading the function into a context. */
static int kernel_num_params(lua_State *L)
{
    struct gpurun_kernel *kernel = self(L);
    if (kernel->param_count < 0)
        read_kernel_layout(L, kernel, 1);
    lua_pushinteger(L, kernel->param_count);
    return 1;
}

static int kernel_max_threads_per_block(lua_State *L)
{
    lua_pushinteger(L, gpurun_check_kernel(L, 1)->max_threads_per_block);
    return 1;
}

static int kernel_max_dynamic_shared_size(lua_State *L)
{
    lua_pushinteger(L, gpurun_check_kernel(L, 1)->max_dynamic_shared);
    return 1;
}

static int kernel_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

#define FUNCTION_ATTRIBUTE_FIELD(field, attribute)                                     \
    static int kernel_##field(lua_State *L)                                            \
    {                                                                                  \
        lua_pushinteger(L, function_attribute(L, gpurun_check_kernel(L, 1), attribute)); \
        return 1;                                                                      \
    }
FUNCTION_ATTRIBUTE_FIELD(num_regs, CU_FUNC_ATTRIBUTE_NUM_REGS)
FUNCTION_ATTRIBUTE_FIELD(shared_size_bytes, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)
FUNCTION_ATTRIBUTE_FIELD(const_size_bytes, CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)
FUNCTION_ATTRIBUTE_FIELD(local_size_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)
FUNCTION_ATTRIBUTE_FIELD(ptx_version, CU_FUNC_ATTRIBUTE_PTX_VERSION)
FUNCTION_ATTRIBUTE_FIELD(binary_version, CU_FUNC_ATTRIBUTE_BINARY_VERSION)

static int kernel_handle(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(uintptr_t)self(L)->handle);
    return 1;
}

static int kernel_tostring(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_tagged(L, 1, &gpurun_kernel_tag);
    lua_pushfstring(L, "gpurun.Kernel(%s%s)", kernel->name, kernel->header.closed ? ", closed" : "");
    return 1;
}

static const luaL_Reg kernel_methods[] = {
    {"params", kernel_params},
    {"set_max_dynamic_shared_size_bytes", kernel_set_max_dynamic_shared_size_bytes},
    {"occupancy", kernel_occupancy},
    {"max_potential_block_size", kernel_max_potential_block_size},
    {"close", kernel_close},
    {NULL, NULL}
};

static const luaL_Reg kernel_fields[] = {
    {"name", kernel_name},
    {"source", kernel_source},
    {"num_params", kernel_num_params},
    {"num_arguments", kernel_num_params},
    {"max_threads_per_block", kernel_max_threads_per_block},
    {"max_dynamic_shared_size", kernel_max_dynamic_shared_size},
    {"max_dynamic_shared_size_bytes", kernel_max_dynamic_shared_size},
    {"num_regs", kernel_num_regs},
    {"shared_size_bytes", kernel_shared_size_bytes},
    {"const_size_bytes", kernel_const_size_bytes},
    {"local_size_bytes", kernel_local_size_bytes},
    {"ptx_version", kernel_ptx_version},
    {"binary_version", kernel_binary_version},
    {"handle", kernel_handle},
    {"device", kernel_device},
    {NULL, NULL}
};

static const luaL_Reg kernel_metamethods[] = {
    {"__tostring", kernel_tostring},
    {"__close", kernel_close},
    {"__gc", kernel_close},
    {NULL, NULL}
};

static const struct gpurun_type kernel_type = {
    &gpurun_kernel_tag, kernel_methods, kernel_metamethods, kernel_fields, NULL,
};

void gpurun_open_kernel(lua_State *L)
{
    gpurun_register_type(L, &kernel_type);
}
