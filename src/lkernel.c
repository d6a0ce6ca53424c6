/* gpurun.Kernel: a kernel's handles, limits and parameter layout. The
 * layout is read once here so that every launch (llaunch.c) can check and
 * pack its arguments without asking the driver anything. */
#include "lkernel.h"

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

struct gpurun_kernel *gpurun_check_kernel(lua_State *L, int index)
{
    struct gpurun_kernel *kernel = gpurun_check_tagged(L, index, &gpurun_kernel_tag);
    gpurun_check_kernel_open(L, kernel);
    return kernel;
}

/* Without a signature, the count is found by asking past the last
 * parameter (compute-sanitizer reports that call's error: a kernel whose
 * signature is known is never probed). */
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
    ptx_param_describe(param, kernel->param_types[i], GPURUN_PARAM_TYPE_SIZE);
}

/* The kernel's own allocation holds its arrays, its storage and its name. */
void gpurun_push_kernel(lua_State *L, int code_index, CUkernel handle, const char *name,
                        const struct ptx_kernel_signature *signature)
{
    code_index = lua_absindex(L, code_index);
    gpurun_require_context(L);
    size_t storage_size = 0;
    int count = signature ? (int)signature->param_count : count_params(L, handle, &storage_size);
    size_t name_length = strlen(name) + 1;
    size_t per_param = 2 * sizeof(size_t) + sizeof(void *) + 2 + GPURUN_PARAM_TYPE_SIZE;
    size_t arrays = align_up(sizeof(struct gpurun_kernel), 16);
    size_t types_at = arrays + (size_t)count * (2 * sizeof(size_t) + sizeof(void *));
    size_t storage_at = align_up(arrays + (size_t)count * per_param, 16);
    /* With a signature the storage size is known only once the driver gave
     * the offsets: reserve what the PTX layout says, which is the same. */
    if (signature)
        storage_size = signature->param_bytes;
    size_t name_at = storage_at + align_up(storage_size, 16);

    unsigned char *block = gpurun_new_object(L, name_at + name_length, 1, &gpurun_kernel_tag);
    struct gpurun_kernel *kernel = (struct gpurun_kernel *)block;
    kernel->handle = handle;
    kernel->device = gpurun_runtime.current_device;
    kernel->context = gpurun_runtime.current_context;
    kernel->code = lua_touserdata(L, code_index);
    kernel->header.counts_for = kernel->code;
    kernel->param_count = count;
    kernel->storage_size = storage_size;
    kernel->param_offsets = (size_t *)(block + arrays);
    kernel->param_sizes = kernel->param_offsets + count;
    kernel->param_pointers = (void **)(kernel->param_sizes + count);
    kernel->param_types = (char (*)[GPURUN_PARAM_TYPE_SIZE])(block + types_at);
    kernel->param_kinds = (unsigned char *)(kernel->param_types + count);
    kernel->param_pointer = kernel->param_kinds + count;
    kernel->storage = block + storage_at;
    kernel->name = memcpy(block + name_at, name, name_length);
    lua_pushvalue(L, code_index);
    lua_setiuservalue(L, -2, 1); /* the ObjectCode lives as long as its kernels */

    for (int i = 0; i < count; i++) {
        CHECK_CUDA(L, "reading the parameters of a kernel", cuKernelGetParamInfo, handle,
                   (size_t)i, &kernel->param_offsets[i], &kernel->param_sizes[i]);
        if (kernel->param_offsets[i] + kernel->param_sizes[i] > storage_size)
            gpurun_error(L, "kernel '%s': the driver places parameter %d past the %d bytes its "
                            "PTX signature describes", name, i + 1, (int)storage_size);
        kernel->param_pointers[i] = kernel->storage + kernel->param_offsets[i];
        if (signature && signature->params[i].size == kernel->param_sizes[i])
            set_param_type(kernel, i, &signature->params[i]);
        else
            kernel->param_pointer[i] = kernel->param_sizes[i] == 8 ? GPURUN_POINTER_MAYBE
                                                                   : GPURUN_POINTER_NO;
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
    kernel->header.closed = 0;
}

static int kernel_close(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_tagged(L, 1, &gpurun_kernel_tag);
    kernel->header.closed = 1; /* the CUkernel belongs to the ObjectCode's library */
    return 0;
}

static const char *const kind_names[] = {"untyped", "integer", "float", "aggregate"};

/* params() -> { {offset=, size=, type=, kind=, pointer=}, ... }: offsets and
 * sizes as cuKernelGetParamInfo reports, the type as the PTX declares it. */
static int kernel_params(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    lua_createtable(L, kernel->param_count, 0);
    for (int i = 0; i < kernel->param_count; i++) {
        lua_createtable(L, 0, 5);
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

static int kernel_num_params(lua_State *L)
{
    lua_pushinteger(L, self(L)->param_count);
    return 1;
}

static int kernel_max_threads_per_block(lua_State *L)
{
    lua_pushinteger(L, self(L)->max_threads_per_block);
    return 1;
}

static int kernel_max_dynamic_shared_size(lua_State *L)
{
    lua_pushinteger(L, self(L)->max_dynamic_shared);
    return 1;
}

static int kernel_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

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
    {"close", kernel_close},
    {NULL, NULL}
};

static const luaL_Reg kernel_fields[] = {
    {"name", kernel_name},
    {"num_params", kernel_num_params},
    {"num_arguments", kernel_num_params},
    {"max_threads_per_block", kernel_max_threads_per_block},
    {"max_dynamic_shared_size", kernel_max_dynamic_shared_size},
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
