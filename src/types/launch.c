/* gpurun.launch(target, config, kernel, args...), and Kernel:check_argument,
 * its check of one argument.
 *
 * The per-launch path is why this is C: it checks every argument against
 * the parameter layout the kernel read once, packs it into storage
 * preallocated with the kernel, and calls cuLaunchKernel. It allocates
 * nothing and formats nothing unless it raises. */
#include "types/launch.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

#include "types/buffer/pinned_buffer.h"
#include "types/condition.h"
#include "types/graph.h"
#include "types/graph_builder.h"
#include "types/scalar.h"
#include "types/struct.h"
#include "types/tensor_map.h"

void gpurun_check_launch_device(lua_State *L, const struct gpurun_kernel *kernel, int index,
                                const struct gpurun_capture *capture)
{
    const struct gpurun_stream_object *object = lua_touserdata(L, index);
    gpurun_check_kernel_device(L, kernel, capture ? capture->stream->device : object->stream.device);
}

struct gpurun_launch_config *gpurun_check_config(lua_State *L, int index)
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

/* Raises "kernel 'k' parameter 2 (.f32): why". */
static int param_error(lua_State *L, const struct gpurun_kernel *kernel, int i, const char *fmt,
                       ...)
{
    va_list args;
    va_start(args, fmt);
    const char *why = lua_pushvfstring(L, fmt, args);
    va_end(args);
    const char *type = kernel->param_types[i];
    if (type[0])
        return gpurun_error(L, "kernel '%s' parameter %d (%s): %s", kernel->name, i + 1, type, why);
    return gpurun_error(L, "kernel '%s' parameter %d: %s", kernel->name, i + 1, why);
}

/* The integer dtype of `size` bytes, signed (the unsigned one follows it in
 * the table), or -1. */
static int integer_dtype(size_t size)
{
    switch (size) {
    case 1: return GPURUN_INT8;
    case 2: return GPURUN_INT16;
    case 4: return GPURUN_INT32;
    case 8: return GPURUN_INT64;
    default: return -1;
    }
}

/* A number for an integer parameter: an integer or an integral float, in
 * the range of the signed or the unsigned type of that size (NVRTC's PTX
 * does not say which the parameter is). */
static void pack_integer(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                         unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    int dtype = integer_dtype(size);
    if (dtype < 0)
        param_error(L, kernel, i, "%s does not fit a %d-byte parameter (pass a gpurun scalar of that size)",
                    gpurun_value_text(L, index), (int)size);
    int integer = lua_isinteger(L, index);
    int64_t value = integer ? (int64_t)lua_tointeger(L, index) : 0;
    double real = lua_tonumber(L, index);
    enum gpurun_fit fit = integer ? gpurun_store_integer(dtype, value, slot)
                                  : gpurun_store_float(dtype, real, slot);
    if (fit == GPURUN_OUT_OF_RANGE)
        fit = integer ? gpurun_store_integer(dtype + 1, value, slot)
                      : gpurun_store_float(dtype + 1, real, slot);
    if (fit == GPURUN_NOT_INTEGRAL) /* the text only on the way out: it allocates */
        param_error(L, kernel, i, "%s is not an integer (the parameter is an integer)",
                    gpurun_value_text(L, index));
    if (fit != GPURUN_FITS)
        param_error(L, kernel, i, "integer %s does not fit a %d-byte parameter",
                    gpurun_value_text(L, index), (int)size);
}

static void pack_real(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                      unsigned char *slot)
{
    size_t size = kernel->param_sizes[i];
    if (size != 2 && size != 4 && size != 8)
        param_error(L, kernel, i, "a Lua number fits only a 2-, 4- or 8-byte floating-point "
                                  "parameter; this one is %d bytes", (int)size);
    /* Two bytes: a PTX .f16 or .bf16 (hand-written PTX; NVRTC passes __half
     * as a struct, which takes a typed scalar). */
    int dtype = size == 8 ? GPURUN_FLOAT64
              : size == 4 ? GPURUN_FLOAT32
              : strcmp(kernel->param_types[i], ".bf16") == 0 ? GPURUN_BFLOAT16 : GPURUN_FLOAT16;
    enum gpurun_fit fit = lua_isinteger(L, index)
        ? gpurun_store_integer(dtype, (int64_t)lua_tointeger(L, index), slot)
        : gpurun_store_float(dtype, lua_tonumber(L, index), slot);
    if (fit != GPURUN_FITS)
        param_error(L, kernel, i, "%s is out of range for %s", gpurun_value_text(L, index),
                    gpurun_dtypes[dtype].name);
}

/* A kernel whose parameter types are unknown: an integer by its size, a
 * float for a 4- or 8-byte parameter, and a float with an integral value
 * refused, since it may be meant for an integer of the same size, where its
 * float bits would be a wild count or index. */
static void pack_untyped(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                         unsigned char *slot)
{
    if (lua_isinteger(L, index)) {
        pack_integer(L, kernel, i, index, slot);
        return;
    }
    size_t size = kernel->param_sizes[i];
    double value = lua_tonumber(L, index);
    if (size != 4 && size != 8)
        param_error(L, kernel, i, "a float fits only a 4- or 8-byte parameter; this one is %d "
                                  "bytes", (int)size);
    pack_real(L, kernel, i, index, slot);
    if (value == floor(value) && isfinite(value))
        param_error(L, kernel, i, "%f is a float with an integral value; pass gpurun.f%d(x) for "
                                  "a floating-point parameter or math.tointeger(x) for an integer "
                                  "one", value, size == 4 ? 32 : 64);
}

static void pack_number(lua_State *L, const struct gpurun_kernel *kernel, int i, int index,
                        unsigned char *slot)
{
    switch (kernel->param_kinds[i]) {
    case GPURUN_PARAM_INTEGER: pack_integer(L, kernel, i, index, slot); break;
    case GPURUN_PARAM_FLOAT: pack_real(L, kernel, i, index, slot); break;
    case GPURUN_PARAM_AGGREGATE:
        param_error(L, kernel, i, "a %d-byte struct or vector takes no number: pass a "
                                  "gpurun.Struct of its layout, or its bytes as a string of "
                                  "that length", (int)kernel->param_sizes[i]);
        break;
    default: pack_untyped(L, kernel, i, index, slot); break;
    }
}

static void pack_scalar(lua_State *L, const struct gpurun_kernel *kernel, int i,
                        const struct gpurun_scalar *scalar, unsigned char *slot)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[scalar->dtype];
    size_t size = kernel->param_sizes[i];
    int kind = kernel->param_kinds[i];
    if (info->size != size)
        param_error(L, kernel, i, "takes %d bytes but gpurun.%s is %d", (int)size, info->short_name,
                    (int)info->size);
    if (kind == GPURUN_PARAM_FLOAT && info->kind != GPURUN_KIND_FLOAT)
        param_error(L, kernel, i, "floating-point, but gpurun.%s is an integer",
                    info->short_name);
    /* NVRTC passes __half and __nv_bfloat16 as 2-byte structs: a 16-bit
     * float fills one. */
    int half_struct = kind == GPURUN_PARAM_AGGREGATE && info->size == 2;
    if ((kind == GPURUN_PARAM_INTEGER || (kind == GPURUN_PARAM_AGGREGATE && !half_struct))
        && info->kind == GPURUN_KIND_FLOAT)
        param_error(L, kernel, i, "an integer, but gpurun.%s is floating-point",
                    info->short_name);
    memcpy(slot, scalar->bytes, size);
}

static void pack_condition(lua_State *L, const struct gpurun_kernel *kernel, int i,
                           const struct gpurun_condition *condition, unsigned char *slot,
                           const struct gpurun_capture *capture)
{
    if (condition->header.closed)
        param_error(L, kernel, i, "attempt to use a closed gpurun.Condition");
    if (kernel->param_sizes[i] != sizeof condition->handle
        || kernel->param_kinds[i] == GPURUN_PARAM_FLOAT)
        param_error(L, kernel, i, "a gpurun.Condition passes as an 8-byte integer "
                                  "(cudaGraphConditionalHandle)");
    if (capture == NULL || capture->root != condition->root)
        param_error(L, kernel, i, "a gpurun.Condition is set by kernels of the graph it was made "
                                  "for: launch on a builder of that capture");
    memcpy(slot, &condition->handle, sizeof condition->handle);
}

/* A struct passes where the PTX declares a byte array of its size and
 * alignment; where the PTX is unknown, into an untyped parameter of its
 * size (the driver's offsets are from a padded base: they say nothing of
 * the alignment). */
static void pack_struct(lua_State *L, const struct gpurun_kernel *kernel, int i,
                        const struct gpurun_struct *value, unsigned char *slot)
{
    const struct gpurun_struct_layout *layout = value->layout;
    size_t size = kernel->param_sizes[i], align = kernel->param_aligns[i];
    int kind = kernel->param_kinds[i];
    if (kind != GPURUN_PARAM_AGGREGATE && kind != GPURUN_PARAM_UNTYPED)
        param_error(L, kernel, i, "not a struct: a gpurun.Struct passes only as a struct "
                                  "parameter (.align A .b8 name[N])");
    if (layout->size != size)
        param_error(L, kernel, i, "a %d-byte struct, but the gpurun.Struct is %d bytes",
                    (int)size, (int)layout->size);
    if (align != 0 && align != layout->align)
        param_error(L, kernel, i, "a struct aligned to %d bytes, but the gpurun.Struct's layout "
                                  "is aligned to %d", (int)align, (int)layout->align);
    memcpy(slot, value->bytes, size);
}

/* A TensorMap passes its 128 bytes to the parameter NVRTC declares for a
 * `const __grid_constant__ CUtensorMap` (or, with no signature, to a
 * 128-byte one), and nowhere else. The driver's offsets are from the
 * parameter bank's base, which the compiler pads to the alignment, so an
 * offset says nothing of it. */
static struct gpurun_buffer *pack_tensor_map(lua_State *L, const struct gpurun_kernel *kernel,
                                             int i, const struct gpurun_tensor_map *map,
                                             unsigned char *slot,
                                             const struct gpurun_capture *capture)
{
    if (map->header.closed)
        param_error(L, kernel, i, "attempt to use a closed gpurun.TensorMap");
    size_t size = kernel->param_sizes[i];
    int kind = kernel->param_kinds[i];
    if (size != sizeof(CUtensorMap)
        || (kind == GPURUN_PARAM_AGGREGATE
                ? strcmp(kernel->param_types[i], GPURUN_TENSOR_MAP_PARAM) != 0
                : kind != GPURUN_PARAM_UNTYPED))
        param_error(L, kernel, i, "a gpurun.TensorMap passes only as a `const __grid_constant__ "
                                  "CUtensorMap` (" GPURUN_TENSOR_MAP_PARAM ")");
    struct gpurun_buffer *buffer = map->buffer;
    if (buffer->header.closed)
        param_error(L, kernel, i, "the gpurun.TensorMap points at a closed gpurun.Buffer");
    if (gpurun_buffer_owner(buffer)->unallocated)
        gpurun_check_buffer_memory(L, buffer, capture);
    if (!gpurun_buffer_reachable(buffer, kernel->device))
        param_error(L, kernel, i, "the gpurun.TensorMap's buffer lives on device %d, which the "
                                  "kernel's device %d cannot reach", buffer->device,
                    kernel->device);
    memcpy(slot, map->map, sizeof(CUtensorMap));
    return gpurun_buffer_owner(buffer);
}

/* A Graph completed for device launch passes its CUgraphExec (a kernel's
 * cudaGraphExec_t) to an 8-byte integer parameter, only in a launch on a
 * builder: a kernel launches a graph only while it runs in one itself, and
 * that graph keeps this one (the launch keeps it before packing). */
static void pack_graph(lua_State *L, const struct gpurun_kernel *kernel, int i,
                       const struct gpurun_graph *graph, unsigned char *slot,
                       const struct gpurun_capture *capture)
{
    if (graph->header.closed)
        param_error(L, kernel, i, "attempt to use a closed gpurun.Graph");
    int kind = kernel->param_kinds[i];
    if (kernel->param_sizes[i] != sizeof graph->exec || kind == GPURUN_PARAM_FLOAT
        || kind == GPURUN_PARAM_AGGREGATE)
        param_error(L, kernel, i, "a gpurun.Graph passes as an 8-byte integer "
                                  "(cudaGraphExec_t)");
    if (capture == NULL)
        param_error(L, kernel, i, "a gpurun.Graph passes only in a launch on a GraphBuilder: "
                                  "a kernel launches a graph only while it runs in a graph");
    if (!graph->device_launch)
        param_error(L, kernel, i, "the gpurun.Graph was not completed for device launch: "
                                  "complete it with { device_launch = true }");
    if (!graph->uploaded)
        param_error(L, kernel, i, "the gpurun.Graph is not on the device yet: upload it first "
                                  "(graph:upload(stream), or complete{ upload_stream = stream })");
    if (graph->device != kernel->device)
        param_error(L, kernel, i, "the gpurun.Graph replays on device %d, the kernel runs on "
                                  "device %d", graph->device, kernel->device);
    memcpy(slot, &graph->exec, sizeof graph->exec);
}

/* A mapped PinnedBuffer passes its device address as a pointer; the host
 * then waits for the kernel's device before touching it (as a managed
 * buffer does). */
static void pack_pinned(lua_State *L, const struct gpurun_kernel *kernel, int i,
                        struct gpurun_pinned *pinned, unsigned char *slot)
{
    if (pinned->header.closed)
        param_error(L, kernel, i, "attempt to use a closed gpurun.PinnedBuffer");
    if (pinned->device_pointer == 0)
        param_error(L, kernel, i, "a gpurun.PinnedBuffer passes only when mapped: allocate it "
                                  "with gpurun.pinned(n, dtype, { mapped = true })");
    if (kernel->param_sizes[i] != sizeof(CUdeviceptr)
        || kernel->param_pointer[i] == GPURUN_POINTER_NO)
        param_error(L, kernel, i, "not a pointer: a mapped gpurun.PinnedBuffer passes only as one");
    memcpy(slot, &pinned->device_pointer, sizeof pinned->device_pointer);
    pinned->kernel_context = gpurun_runtime.current_context;
}

struct gpurun_buffer *gpurun_pack_argument(lua_State *L, const struct gpurun_kernel *kernel,
                                           int i, int index, unsigned char *slot,
                                           const struct gpurun_capture *capture)
{
    size_t size = kernel->param_sizes[i];
    int kind = kernel->param_kinds[i];
    switch (lua_type(L, index)) {
    case LUA_TNUMBER:
        pack_number(L, kernel, i, index, slot);
        return NULL;
    case LUA_TBOOLEAN:
        if (size != 1 || kind == GPURUN_PARAM_FLOAT)
            param_error(L, kernel, i, "a boolean passes as a 1-byte integer; this parameter is %d "
                                      "bytes%s", (int)size,
                        kind == GPURUN_PARAM_FLOAT ? " and floating-point" : "");
        *slot = (unsigned char)lua_toboolean(L, index);
        return NULL;
    case LUA_TSTRING:
        if (kind == GPURUN_PARAM_AGGREGATE) {
            if (lua_rawlen(L, index) != size)
                param_error(L, kernel, i, "a %d-byte struct or vector: a string of %d bytes "
                                          "expected, got %d", (int)size, (int)size,
                            (int)lua_rawlen(L, index));
            memcpy(slot, lua_tostring(L, index), size);
            return NULL;
        }
        break;
    case LUA_TUSERDATA: {
        struct gpurun_buffer *buffer = gpurun_to_tagged(L, index, &gpurun_buffer_tag);
        if (buffer) {
            if (buffer->header.closed)
                param_error(L, kernel, i, "attempt to use a closed gpurun.Buffer");
            if (gpurun_buffer_owner(buffer)->unallocated)
                gpurun_check_buffer_memory(L, buffer, capture);
            if (size != sizeof(CUdeviceptr))
                param_error(L, kernel, i, "a gpurun.Buffer passes as an 8-byte pointer; this "
                                          "parameter is %d bytes", (int)size);
            if (kernel->param_pointer[i] == GPURUN_POINTER_NO)
                param_error(L, kernel, i, "not a pointer: a gpurun.Buffer passes only as one");
            if (!gpurun_buffer_reachable(buffer, kernel->device))
                param_error(L, kernel, i, "the gpurun.Buffer lives on device %d, which the "
                                          "kernel's device %d cannot reach (enable peer access "
                                          "or the pool's access for it first, or copy the "
                                          "buffer over)", buffer->device,
                            kernel->device);
            memcpy(slot, &buffer->pointer, sizeof buffer->pointer);
            return buffer;
        }
        const struct gpurun_scalar *scalar = gpurun_to_tagged(L, index, &gpurun_scalar_tag);
        if (scalar) {
            pack_scalar(L, kernel, i, scalar, slot);
            return NULL;
        }
        const struct gpurun_struct *value = gpurun_to_tagged(L, index, &gpurun_struct_tag);
        if (value) {
            pack_struct(L, kernel, i, value, slot);
            return NULL;
        }
        const struct gpurun_condition *condition = gpurun_to_tagged(L, index, &gpurun_condition_tag);
        if (condition) {
            pack_condition(L, kernel, i, condition, slot, capture);
            return NULL;
        }
        const struct gpurun_tensor_map *map = gpurun_to_tagged(L, index, &gpurun_tensor_map_tag);
        if (map)
            return pack_tensor_map(L, kernel, i, map, slot, capture);
        const struct gpurun_graph *graph = gpurun_to_tagged(L, index, &gpurun_graph_tag);
        if (graph) {
            pack_graph(L, kernel, i, graph, slot, capture);
            return NULL;
        }
        struct gpurun_pinned *pinned = gpurun_to_tagged(L, index, &gpurun_pinned_tag);
        if (pinned) {
            pack_pinned(L, kernel, i, pinned, slot);
            return NULL;
        }
        break;
    }
    default:
        break;
    }
    const char *got = gpurun_type_name(L, index);
    param_error(L, kernel, i, "number, boolean, gpurun.Buffer, gpurun scalar or gpurun.Struct "
                              "expected, got %s", got);
    return NULL;
}

/* A priority in the device's range, as create_stream{ priority = } asks
 * (the driver would clamp it silently). */
static void check_priority(lua_State *L, const struct gpurun_kernel *kernel, int priority)
{
    int least = 0, greatest = 0;
    CUcontext previous = gpurun_enter_context(kernel->context);
    CUresult result = CUDA_CALL(cuCtxGetStreamPriorityRange, &least, &greatest);
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "reading the stream priority range");
    if (priority > least || priority < greatest)
        gpurun_error(L, "kernel '%s': priority %d out of range: this device's stream priorities "
                        "run from %d (least, the default) to %d (greatest)", kernel->name, priority, least, greatest);
}

/* The device limits a config's attributes must fit, asked of the driver
 * once per kernel and device. */
static void check_attributes(lua_State *L, const struct gpurun_kernel *kernel,
                             struct gpurun_launch_config *config)
{
    CUdevice device;
    CHECK_CUDA(L, "getting the kernel's device", cuDeviceGet, &device, kernel->device);
    int major = 0;
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &major,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    if ((config->cluster[0] || config->programmatic) && major < 9)
        gpurun_error(L, "kernel '%s': %s needs a device of compute capability 9.0 or newer; "
                        "this one is %d.x", kernel->name,
                     config->cluster[0] ? "a thread block cluster"
                                        : "programmatic stream serialization", major);
    unsigned int threads = config->block[0] * config->block[1] * config->block[2];
    if (config->cooperative) {
        int supported = 0, per_multiprocessor = 0, multiprocessors = 0;
        CHECK_CUDA(L, "reading whether the device launches cooperative kernels",
                   cuDeviceGetAttribute, &supported, CU_DEVICE_ATTRIBUTE_COOPERATIVE_LAUNCH,
                   device);
        if (!supported)
            gpurun_error(L, "kernel '%s': this device does not launch cooperative kernels",
                         kernel->name);
        CHECK_CUDA(L, "reading the kernel's occupancy", cuOccupancyMaxActiveBlocksPerMultiprocessor,
                   &per_multiprocessor, kernel->function, (int)threads, config->shmem_size);
        CHECK_CUDA(L, "reading the device's multiprocessor count", cuDeviceGetAttribute,
                   &multiprocessors, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
        unsigned long long blocks =
            (unsigned long long)config->blocks[0] * config->blocks[1] * config->blocks[2];
        unsigned long long resident = (unsigned long long)per_multiprocessor * multiprocessors;
        if (blocks > resident)
            gpurun_error(L, "kernel '%s': a cooperative grid of %I blocks is more than can be "
                            "resident at once (%d per multiprocessor x %d multiprocessors = %I "
                            "blocks of %d threads)", kernel->name, (LUAI_UACINT)blocks,
                         per_multiprocessor, multiprocessors, (LUAI_UACINT)resident, (int)threads);
    }
    if (config->cluster[0]) {
        CUlaunchConfig launch;
        memset(&launch, 0, sizeof launch);
        launch.gridDimX = config->blocks[0];
        launch.gridDimY = config->blocks[1];
        launch.gridDimZ = config->blocks[2];
        launch.blockDimX = config->block[0];
        launch.blockDimY = config->block[1];
        launch.blockDimZ = config->block[2];
        launch.sharedMemBytes = config->shmem_size;
        launch.attrs = config->attributes; /* the cluster is always the first */
        launch.numAttrs = 1;
        int clusters = 0;
        CUresult result = CUDA_CALL(cuOccupancyMaxActiveClusters, &clusters, kernel->function,
                                    &launch);
        if (result != CUDA_SUCCESS || clusters == 0)
            gpurun_error(L, "kernel '%s': a cluster of %d x %d x %d blocks of %d threads cannot "
                            "run on this device (at most 8 blocks per cluster are portable)",
                         kernel->name, (int)config->cluster[0], (int)config->cluster[1],
                         (int)config->cluster[2], (int)threads);
    }
    if (config->has_priority)
        check_priority(L, kernel, config->priority);
    config->checked_kernel = kernel;
    config->checked_device = kernel->device;
}

void gpurun_launch_kernel(lua_State *L, const struct gpurun_kernel *kernel, CUfunction function,
                          struct gpurun_launch_config *config, CUstream stream,
                          CUcontext stream_context, void **params)
{
    /* A CUfunction belongs to the context it was loaded in: the primary
     * one's would run on every multiprocessor of the device. */
    if (__builtin_expect(stream_context != kernel->context, 0))
        function = (CUfunction)kernel->handle;
    gpurun_check_not_in_host_call(L, "a launch");
    /* Checked before entering the kernel's context: a check that raises
     * must not leave another context current. */
    if (config->attribute_count > 0
        && (config->checked_kernel != kernel || config->checked_device != kernel->device))
        check_attributes(L, kernel, config);
    CUresult result;
    CUcontext previous = gpurun_enter_context(kernel->context);
    if (config->attribute_count == 0) {
        result = CUDA_CALL(cuLaunchKernel, function, config->blocks[0], config->blocks[1],
                           config->blocks[2], config->block[0], config->block[1],
                           config->block[2], config->shmem_size, stream, params, NULL);
    } else {
        CUlaunchConfig launch = {
            .gridDimX = config->blocks[0], .gridDimY = config->blocks[1],
            .gridDimZ = config->blocks[2], .blockDimX = config->block[0],
            .blockDimY = config->block[1], .blockDimZ = config->block[2],
            .sharedMemBytes = config->shmem_size, .hStream = stream,
            .attrs = config->attributes, .numAttrs = config->attribute_count,
        };
        result = CUDA_CALL(cuLaunchKernelEx, &launch, function, params, NULL);
    }
    gpurun_leave_context(previous);
    if (result != CUDA_SUCCESS)
        gpurun_cuda_error(L, "launching kernel '%s'", kernel->name);
}

/* What the graph of a capture keeps for the argument at index: the memory
 * a Buffer or TensorMap passes, or a Graph the kernel launches. */
static int push_kept_argument(lua_State *L, int index)
{
    if (gpurun_push_argument_memory(L, index))
        return 1;
    if (gpurun_to_tagged(L, index, &gpurun_graph_tag)) {
        lua_pushvalue(L, index);
        return 1;
    }
    return 0;
}

/* launch(stream | builder, config, kernel, args...) */
static int module_launch(lua_State *L)
{
    struct gpurun_capture *capture;
    CUstream stream = gpurun_launch_target(L, 1, &capture);
    struct gpurun_launch_config *config = gpurun_check_config(L, 2);
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 3);
    gpurun_check_launch_device(L, kernel, 1, capture);
    int given = lua_gettop(L) - 3;
    gpurun_check_launch(L, kernel, config, given);
    if (capture) {
        /* Kept before packing: keeping allocates, and a finalizer run by
         * that allocation must not close a buffer already packed. */
        gpurun_capture_keep(L, capture, 3);
        for (int i = 0; i < given; i++)
            if (push_kept_argument(L, 4 + i)) {
                gpurun_capture_keep(L, capture, -1);
                lua_pop(L, 1);
            }
    }
    for (int i = 0; i < given; i++) {
        struct gpurun_buffer *buffer = gpurun_pack_argument(
            L, kernel, i, 4 + i, kernel->storage + kernel->param_offsets[i], capture);
        /* A pool's memory is freed in stream order: its free must also wait
         * for the streams it was used on. */
        if (buffer && capture == NULL)
            gpurun_note_buffer_use(L, buffer, 4 + i,
                                   &((struct gpurun_stream_object *)lua_touserdata(L, 1))->stream, 1);
    }
    gpurun_launch_kernel(L, kernel, kernel->function, config, stream,
                         gpurun_launch_context(L, 1, capture), kernel->param_pointers);
    return 0;
}

/* kernel:check_argument(position, value) -> kernel: raises what a launch
 * raises for value as argument `position`, and does nothing else: the
 * launch's own check, for checks ahead of a launch (gpurun.pipeline's
 * declarations). A buffer is checked as a launch outside a capture checks
 * it. */
static int kernel_check_argument(lua_State *L)
{
    const struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    size_t i = gpurun_check_index(L, 2, (size_t)kernel->param_count, "parameter");
    lua_settop(L, 3);
    unsigned char *slot = gpurun_push_staging(L, kernel->param_sizes[i]);
    gpurun_pack_argument(L, kernel, (int)i, 3, slot, NULL);
    lua_settop(L, 1);
    return 1;
}

static const luaL_Reg module_functions[] = {
    {"launch", module_launch},
    {NULL, NULL}
};

static const luaL_Reg kernel_methods[] = {
    {"check_argument", kernel_check_argument},
    {NULL, NULL}
};

void gpurun_open_launch(lua_State *L)
{
    gpurun_set_functions(L, module_functions);
    gpurun_add_methods(L, &gpurun_kernel_tag, kernel_methods);
}
