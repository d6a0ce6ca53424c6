/* gpurun.launch(target, config, kernel, args...).
 *
 * The per-launch path is why this is C: it checks every argument against
 * the parameter layout the kernel read once, packs it into storage
 * preallocated with the kernel, and calls cuLaunchKernel. It allocates
 * nothing and formats nothing unless it raises. */
#include "llaunch.h"

#include <math.h>
#include <string.h>

#include "lgraph_builder.h"
#include "lscalar.h"

CUstream gpurun_launch_target(lua_State *L, int index, struct gpurun_capture **capture)
{
    *capture = NULL;
    const struct gpurun_stream_object *stream = gpurun_to_tagged(L, index, &gpurun_stream_tag);
    if (stream) {
        if (stream->header.closed)
            gpurun_closed_error(L, gpurun_stream_tag.type_name);
        if (stream->stream.capture)
            gpurun_error(L, "the stream is being captured by a GraphBuilder: launch on the "
                            "builder, so that the graph keeps what it uses (capture abandoned)");
        return stream->stream.handle;
    }
    struct gpurun_graph_builder *builder = gpurun_to_tagged(L, index, &gpurun_builder_tag);
    if (builder == NULL)
        gpurun_type_error(L, index, "gpurun.Stream or gpurun.GraphBuilder");
    builder = gpurun_check_builder(L, index);
    *capture = &builder->capture;
    return gpurun_builder_stream(L, builder);
}

void gpurun_check_launch_device(lua_State *L, const struct gpurun_kernel *kernel, int index,
                                const struct gpurun_capture *capture)
{
    const struct gpurun_stream_object *object = lua_touserdata(L, index);
    gpurun_check_kernel_device(L, kernel, capture ? capture->stream->device : object->stream.device);
}

const struct gpurun_launch_config *gpurun_check_config(lua_State *L, int index)
{
    return gpurun_check_tagged(L, index, &gpurun_config_tag);
}

void gpurun_check_launch(lua_State *L, const struct gpurun_kernel *kernel,
                         const struct gpurun_launch_config *config, int given)
{
    if (given != kernel->param_count)
        gpurun_error(L, "kernel '%s' takes %d parameter%s, got %d", kernel->name,
                     kernel->param_count, kernel->param_count == 1 ? "" : "s", given);
    unsigned int threads = config->block[0] * config->block[1] * config->block[2];
    if ((int)threads > kernel->max_threads_per_block)
        gpurun_error(L, "kernel '%s' runs at most %d threads per block; the LaunchConfig asks "
                        "for %d", kernel->name, kernel->max_threads_per_block, (int)threads);
    if ((int)config->shmem_size > kernel->max_dynamic_shared)
        gpurun_error(L, "kernel '%s' may use at most %d bytes of dynamic shared memory; the "
                        "LaunchConfig asks for %d", kernel->name, kernel->max_dynamic_shared,
                     (int)config->shmem_size);
}

/* The dtypes a parameter of `size` bytes may hold when only its size is
 * known: the signed one, else the unsigned one (so -1 and 4294967295 both
 * pass as 4 bytes). */
static int signed_dtype(size_t size)
{
    switch (size) {
    case 1: return GPURUN_INT8;
    case 2: return GPURUN_INT16;
    case 4: return GPURUN_INT32;
    case 8: return GPURUN_INT64;
    default: return -1;
    }
}

static void pack_integer(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                         unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    int dtype = signed_dtype(size);
    int64_t value = (int64_t)lua_tointeger(L, index);
    if (dtype < 0)
        gpurun_error(L, "kernel '%s' parameter %d is %d bytes: integer %I does not fit (pass a "
                        "gpurun scalar of that size)", kernel->name, i + 1, (int)size,
                     (LUAI_UACINT)value);
    if (gpurun_store_integer(dtype, value, slot) != GPURUN_FITS
        && gpurun_store_integer(dtype + 1, value, slot) != GPURUN_FITS)
        gpurun_error(L, "kernel '%s' parameter %d is %d bytes: integer %I does not fit",
                     kernel->name, i + 1, (int)size, (LUAI_UACINT)value);
}

static void pack_float(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                       unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    double value = lua_tonumber(L, index);
    if (size != 4 && size != 8)
        gpurun_error(L, "kernel '%s' parameter %d is %d bytes: a float fits only a 4- or 8-byte "
                        "parameter", kernel->name, i + 1, (int)size);
    if (gpurun_store_float(size == 4 ? GPURUN_FLOAT32 : GPURUN_FLOAT64, value, slot)
        != GPURUN_FITS)
        gpurun_error(L, "kernel '%s' parameter %d is a 4-byte value: %f is out of float range",
                     kernel->name, i + 1, value);
    /* A float with an integral value (2^20, 4.0) is the one case the subtype
     * does not settle: it may be meant for an integer parameter of the same
     * size, where its float bits would be a wild count or index. */
    if (value == floor(value) && isfinite(value))
        gpurun_error(L, "kernel '%s' parameter %d: %f is a float with an integral value; pass "
                        "gpurun.f%d(x) for a floating-point parameter or math.tointeger(x) "
                        "for an integer one", kernel->name, i + 1, value, size == 4 ? 32 : 64);
}

struct gpurun_buffer *gpurun_pack_argument(lua_State *L, const struct gpurun_kernel *kernel,
                                           int i, int index, unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    switch (lua_type(L, index)) {
    case LUA_TNUMBER:
        if (lua_isinteger(L, index))
            pack_integer(L, kernel, i, index, slot);
        else
            pack_float(L, kernel, i, index, slot);
        return NULL;
    case LUA_TBOOLEAN:
        if (size != 1)
            gpurun_error(L, "kernel '%s' parameter %d is %d bytes: a boolean passes as 1 byte",
                         kernel->name, i + 1, (int)size);
        *slot = (unsigned char)lua_toboolean(L, index);
        return NULL;
    case LUA_TUSERDATA: {
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, index, &gpurun_buffer_tag);
        if (buffer) {
            if (buffer->header.closed)
                gpurun_error(L, "kernel '%s' parameter %d: attempt to use a closed gpurun.Buffer",
                             kernel->name, i + 1);
            if (size != sizeof(CUdeviceptr))
                gpurun_error(L, "kernel '%s' parameter %d is %d bytes: a gpurun.Buffer passes as "
                                "an 8-byte pointer", kernel->name, i + 1, (int)size);
            if (!gpurun_peer_enabled(kernel->device, buffer->device))
                gpurun_error(L, "kernel '%s' parameter %d: the gpurun.Buffer lives on device %d, "
                                "which the kernel's device %d cannot reach (enable peer access "
                                "first, or copy the buffer over)", kernel->name, i + 1,
                             buffer->device, kernel->device);
            memcpy(slot, &buffer->pointer, sizeof buffer->pointer);
            return buffer;
        }
        const struct gpurun_scalar *scalar = gpurun_to_tagged(L, index, &gpurun_scalar_tag);
        if (scalar) {
            const struct gpurun_dtype_info *info = &gpurun_dtypes[scalar->dtype];
            if (info->size != size)
                gpurun_error(L, "kernel '%s' parameter %d is %d bytes but gpurun.%s is %d",
                             kernel->name, i + 1, (int)size, info->short_name, (int)info->size);
            memcpy(slot, scalar->bytes, size);
            return NULL;
        }
    }
    /* fallthrough */
    default: {
        const char *got = gpurun_type_name(L, index);
        gpurun_error(L, "kernel '%s' parameter %d: number, boolean, gpurun.Buffer or gpurun "
                        "scalar expected, got %s", kernel->name, i + 1, got);
        return NULL;
    }
    }
}

void gpurun_launch_kernel(lua_State *L, const struct gpurun_kernel *kernel, CUfunction function,
                          const struct gpurun_launch_config *config, CUstream stream,
                          void **params)
{
    CUcontext previous = gpurun_enter_context(kernel->context);
    CUresult result = CUDA_CALL(cuLaunchKernel, function, config->grid[0], config->grid[1],
                                config->grid[2], config->block[0], config->block[1],
                                config->block[2], config->shmem_size, stream, params, NULL);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "launching kernel '%s'", kernel->name);
}

/* launch(stream | builder, config, kernel, args...) */
static int module_launch(lua_State *L)
{
    struct gpurun_capture *capture;
    CUstream stream = gpurun_launch_target(L, 1, &capture);
    const struct gpurun_launch_config *config = gpurun_check_config(L, 2);
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 3);
    gpurun_check_launch_device(L, kernel, 1, capture);
    int given = lua_gettop(L) - 3;
    gpurun_check_launch(L, kernel, config, given);
    if (capture) {
        /* Kept before packing: keeping allocates, and a finalizer run by
         * that allocation must not close a buffer already packed. */
        gpurun_capture_keep(L, capture, 3);
        for (int i = 0; i < given; i++)
            if (gpurun_to_tagged(L, 4 + i, &gpurun_buffer_tag))
                gpurun_capture_keep(L, capture, 4 + i);
    }
    for (int i = 0; i < given; i++)
        gpurun_pack_argument(L, kernel, i, 4 + i, kernel->storage + kernel->param_offsets[i]);
    gpurun_launch_kernel(L, kernel, kernel->function, config, stream, kernel->param_pointers);
    return 0;
}

static const luaL_Reg module_functions[] = {
    {"launch", module_launch},
    {NULL, NULL}
};

void gpurun_open_launch(lua_State *L)
{
    gpurun_set_functions(L, module_functions);
}
