/* The C side of require("gpurun.dist"): the world of ranks (MPI, or one
 * process alone), and NCCL collectives on gpurun.Buffers over the world's
 * communicator, on a stream or inside a graph capture. lua/gpurun/dist.lua
 * holds the policy (which launcher, which device, defaults) and exports
 * most of these functions as they are. */
#include "types/dist.h"

#include <stdlib.h>
#include <string.h>

#include "types/buffer/buffer.h"
#include "types/graph_builder.h"
#include "types/launch.h"
#include "base/mpi_loader.h"
#include "base/nccl_loader.h"

#define COMMUNICATOR_KEY "gpurun.dist.communicator"

/* The NCCL communicator over the world: one per process, made by the first
 * collective, kept by every graph that captured one of its collectives. */
static const struct gpurun_tag communicator_tag = {"gpurun.Communicator"};

struct communicator {
    struct gpurun_object header;
    nccl_comm_t comm;
    CUcontext context;
    int device;
};

static struct {
    int started, uses_mpi;
    int rank, size, local_rank;
    int device; /* -1: none chosen (no GPU) */
} world = {0, 0, 0, 1, 0, -1};

/* ---- the world ------------------------------------------------------------ */

/* "dist.rank: call dist.init() first", named after the running function. */
static void require_started(lua_State *L)
{
    if (!world.started)
        gpurun_error(L, "%s: call dist.init() first", lua_tostring(L, lua_upvalueindex(1)));
}

static int raise_mpi_error(lua_State *L, const char *what)
{
    char message[1400];
    mpi_format_error(message, sizeof message);
    return gpurun_error(L, "%s: %s while %s", lua_tostring(L, lua_upvalueindex(1)), message,
                        what);
}

/* start(use_mpi) -> rank, size, local_rank. With MPI: loads it, starts it,
 * asks the world; the node-local rank comes from the launcher's variables
 * when it sets them, else from splitting the world by shared memory. */
static int core_start(lua_State *L)
{
    int use_mpi = lua_toboolean(L, 1);
    if (world.started && world.uses_mpi != use_mpi)
        return gpurun_error(L, "dist.init: gpurun.dist was already started %s", world.uses_mpi
                                   ? "under MPI" : "as a world of one");
    if (!world.started && use_mpi) {
        if (mpi_loader_load() != 0)
            return gpurun_error(L, "dist.init: %s", mpi_loader_error());
        if (mpi_start() != 0)
            return raise_mpi_error(L, "starting MPI");
        if (mpi_world_rank(&world.rank) != 0 || mpi_world_size(&world.size) != 0)
            return raise_mpi_error(L, "asking MPI for this process's rank");
        const char *local = getenv("OMPI_COMM_WORLD_LOCAL_RANK");
        if (local == NULL || *local == '\0')
            local = getenv("MPI_LOCALRANKID"); /* MPICH's Hydra */
        if (local && *local)
            world.local_rank = atoi(local);
        else if (mpi_node_rank(&world.local_rank) != 0)
            return raise_mpi_error(L, "finding the ranks on this node");
        world.uses_mpi = 1;
    }
    world.started = 1;
    lua_pushinteger(L, world.rank);
    lua_pushinteger(L, world.size);
    lua_pushinteger(L, world.local_rank);
    return 3;
}

/* set_device(ordinal | -1): the device the communicator will be made on. */
static int core_set_device(lua_State *L)
{
    require_started(L);
    lua_Integer ordinal = gpurun_check_integer(L, 1, NULL);
    if (ordinal < -1 || ordinal >= GPURUN_MAX_DEVICES)
        return gpurun_arg_error(L, 1, "device ordinal expected");
    world.device = (int)ordinal;
    return 0;
}

/* info() -> { started, uses_mpi, rank, size, local_rank, device, mpi, mpi_library } */
static int core_info(lua_State *L)
{
    lua_createtable(L, 0, 8);
    lua_pushboolean(L, world.started);
    lua_setfield(L, -2, "started");
    lua_pushboolean(L, world.uses_mpi);
    lua_setfield(L, -2, "uses_mpi");
    lua_pushinteger(L, world.rank);
    lua_setfield(L, -2, "rank");
    lua_pushinteger(L, world.size);
    lua_setfield(L, -2, "size");
    lua_pushinteger(L, world.local_rank);
    lua_setfield(L, -2, "local_rank");
    if (world.device >= 0) {
        lua_pushinteger(L, world.device);
        lua_setfield(L, -2, "device");
    }
    if (world.uses_mpi) {
        lua_pushstring(L, mpi_flavour_name(mpi_loader_flavour()));
        lua_setfield(L, -2, "mpi");
        lua_pushstring(L, mpi_library_version());
        lua_setfield(L, -2, "mpi_library");
    }
    return 1;
}

static int core_rank(lua_State *L)
{
    require_started(L);
    lua_pushinteger(L, world.rank);
    return 1;
}

static int core_size(lua_State *L)
{
    require_started(L);
    lua_pushinteger(L, world.size);
    return 1;
}

static int core_local_rank(lua_State *L)
{
    require_started(L);
    lua_pushinteger(L, world.local_rank);
    return 1;
}

/* barrier(): every rank waits for the others (host-side only; order GPU
 * work between ranks with collectives). */
static int core_barrier(lua_State *L)
{
    require_started(L);
    if (world.uses_mpi && mpi_world_barrier() != 0)
        return raise_mpi_error(L, "waiting at a barrier");
    return 0;
}

/* nccl_version() -> major, minor, patch; raises when NCCL cannot be loaded. */
static int core_nccl_version(lua_State *L)
{
    if (nccl_loader_load() != 0)
        return gpurun_error(L, "dist.nccl_version: %s", nccl_loader_error());
    int version = nccl_loader_version();
    lua_pushinteger(L, version / 10000);
    lua_pushinteger(L, version / 100 % 100);
    lua_pushinteger(L, version % 100);
    return 3;
}

/* raise(message): an error at the script's call into gpurun.dist, ending
 * any capture in progress as gpurun's own errors do. */
static int core_raise(lua_State *L)
{
    const char *message = lua_tostring(L, 1);
    return gpurun_error_outside(L, "/gpurun/dist.lua", message ? message : "(no message)");
}

/* ---- the communicator ------------------------------------------------------- */

static int raise_nccl_error(lua_State *L, const char *what)
{
    char message[512];
    nccl_format_error(message, sizeof message);
    return gpurun_error(L, "%s: %s while %s", lua_tostring(L, lua_upvalueindex(1)), message,
                        what);
}

static int communicator_gc(lua_State *L)
{
    struct communicator *communicator = gpurun_check_tagged(L, 1, &communicator_tag);
    if (communicator->header.closed)
        return 0;
    communicator->header.closed = 1;
    CUcontext previous = gpurun_enter_context(communicator->context);
    /* At exit nobody is left to act on a failure. */
    (void)NCCL_CALL(ncclCommDestroy, communicator->comm);
    gpurun_leave_context(previous);
    communicator->comm = NULL;
    return 0;
}

/* Makes the world's communicator: rank 0 draws the id, MPI hands it to the
 * others, and every rank joins on its device. Collective across ranks. */
static void make_communicator(lua_State *L)
{
    const char *who = lua_tostring(L, lua_upvalueindex(1));
    if (world.device < 0)
        gpurun_error(L, "%s: no CUDA device was chosen by dist.init() (%d visible)", who,
                     cuda_driver_device_count());
    if (gpurun_capture_in_progress())
        gpurun_error(L, "%s: the world's NCCL communicator is made by the first collective, "
                        "which cannot be inside a graph capture: run a collective on a stream "
                        "before begin_building (capture abandoned)", who);
    if (nccl_loader_load() != 0)
        gpurun_error(L, "%s: %s", who, nccl_loader_error());
    nccl_unique_id id;
    memset(&id, 0, sizeof id);
    if (world.rank == 0 && NCCL_CALL(ncclGetUniqueId, &id) != NCCL_SUCCESS)
        raise_nccl_error(L, "making the NCCL communicator's id");
    if (world.uses_mpi && world.size > 1
        && mpi_world_broadcast(&id, (int)sizeof id, 0) != 0)
        raise_mpi_error(L, "handing the NCCL communicator's id to every rank");
    /* NVLink multicast (NVLS) stays off unless the user asks for it. */
    setenv("NCCL_NVLS_ENABLE", "0", 0);
    CUcontext context = gpurun_primary_context(L, world.device);
    struct communicator *communicator =
        gpurun_new_object(L, sizeof *communicator, 0, &communicator_tag);
    communicator->context = context;
    communicator->device = world.device;
    CUcontext previous = gpurun_enter_context(context);
    nccl_result result = NCCL_CALL(ncclCommInitRank, &communicator->comm, world.size, id,
                                   world.rank);
    gpurun_leave_context(previous);
    if (result != NCCL_SUCCESS)
        raise_nccl_error(L, "joining the NCCL communicator");
    communicator->header.closed = 0;
    lua_setfield(L, LUA_REGISTRYINDEX, COMMUNICATOR_KEY);
}

/* Pushes the world's communicator, made on first use. */
static struct communicator *push_communicator(lua_State *L)
{
    require_started(L);
    if (lua_getfield(L, LUA_REGISTRYINDEX, COMMUNICATOR_KEY) != LUA_TUSERDATA) {
        lua_pop(L, 1);
        make_communicator(L);
        lua_getfield(L, LUA_REGISTRYINDEX, COMMUNICATOR_KEY);
    }
    return lua_touserdata(L, -1);
}

/* ---- collectives ------------------------------------------------------------ */

/* Where a collective goes: a Stream or a building GraphBuilder at index, or
 * with none the current stream, or none at all (the device is waited for
 * before and after). */
struct target {
    CUstream stream;
    struct gpurun_capture *capture;
    int device;       /* the stream's; -1 for none */
    int from_current; /* the current stream, not an argument */
    int whole_device;
    int index;        /* where the stream or builder argument is */
};

/* Checked before the communicator is made, so that a bad argument raises
 * before any rank starts the collective work of making it. */
static struct target resolve_target(lua_State *L, int index)
{
    struct target target = {NULL, NULL, -1, 0, 0, index};
    if (lua_isnoneornil(L, index)) {
        struct gpurun_stream *current = gpurun_runtime.current_stream;
        if (current == NULL) {
            target.whole_device = 1;
            return target;
        }
        if (current->capture)
            gpurun_refuse_captured(L, 0, NULL, "pass the builder rather than leave the current "
                                               "stream to be used, so that the graph keeps what "
                                               "it uses");
        target.stream = current->handle;
        target.device = current->device;
        target.from_current = 1;
        return target;
    }
    target.stream = gpurun_launch_target(L, index, &target.capture);
    target.index = index;
    target.device = target.capture
        ? target.capture->stream->device
        : ((struct gpurun_stream_object *)lua_touserdata(L, index))->stream.device;
    return target;
}

static nccl_data_type check_nccl_type(lua_State *L, int arg, const struct gpurun_buffer *buffer)
{
    switch (buffer->dtype) {
    case GPURUN_FLOAT32: return NCCL_FLOAT32;
    case GPURUN_FLOAT64: return NCCL_FLOAT64;
    case GPURUN_INT32: return NCCL_INT32;
    case GPURUN_UINT32: return NCCL_UINT32;
    case GPURUN_INT64: return NCCL_INT64;
    case GPURUN_UINT64: return NCCL_UINT64;
    case GPURUN_INT8: return NCCL_INT8;
    case GPURUN_UINT8: return NCCL_UINT8;
    case GPURUN_FLOAT16: return NCCL_FLOAT16;
    case GPURUN_BFLOAT16: return NCCL_BFLOAT16;
    default:
        gpurun_arg_error(L, arg, "NCCL has no %s type (it moves float32, float64, int32, "
                                 "uint32, int64, uint64, int8, uint8, float16 and bfloat16)",
                         gpurun_dtypes[buffer->dtype].name);
        return NCCL_FLOAT32;
    }
}

static const char *const op_names[] = {"sum", "prod", "max", "min", "avg", NULL};

static nccl_red_op check_op(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg))
        return NCCL_SUM;
    if (lua_type(L, arg) != LUA_TSTRING)
        gpurun_type_error(L, arg, "reduction op name (sum, prod, max, min, avg)");
    const char *name = lua_tostring(L, arg);
    for (int i = 0; op_names[i]; i++)
        if (strcmp(name, op_names[i]) == 0)
            return (nccl_red_op)i;
    return gpurun_arg_error(L, arg, "unknown reduction op '%s' (expected one of: sum, prod, "
                                    "max, min, avg)", name);
}

/* Buffers at first..last: open, of a dtype NCCL moves. */
static void check_buffers(lua_State *L, int first, int last)
{
    for (int i = first; i <= last; i++)
        check_nccl_type(L, i, gpurun_check_buffer(L, i));
}

/* Pushes the communicator (made on first use), then: the buffers and the
 * stream on its device; the capture keeps the communicator and the
 * buffers; the buffers are checked again (making and keeping allocate, and
 * a finalizer could close one); with no stream, the device is waited for. */
static struct communicator *begin_collective(lua_State *L, int first, int last,
                                             struct target *target)
{
    struct communicator *c = push_communicator(L);
    int communicator_index = lua_gettop(L);
    /* Making the communicator allocates, and a finalizer may have closed
     * the stream or the builder meanwhile. */
    *target = resolve_target(L, target->index);
    for (int i = first; i <= last; i++) {
        const struct gpurun_buffer *buffer = lua_touserdata(L, i);
        if (buffer->device != c->device)
            gpurun_arg_error(L, i, "the gpurun.Buffer lives on device %d but the NCCL "
                                   "communicator on device %d", buffer->device, c->device);
    }
    if (target->device >= 0 && target->device != c->device) {
        if (target->from_current)
            target->whole_device = 1;
        else
            gpurun_error(L, "%s: the stream belongs to device %d but the NCCL communicator to "
                            "device %d", lua_tostring(L, lua_upvalueindex(1)), target->device,
                         c->device);
    }
    if (target->capture) {
        gpurun_capture_keep(L, target->capture, communicator_index);
        for (int i = first; i <= last; i++)
            gpurun_capture_keep(L, target->capture, i);
    }
    for (int i = first; i <= last; i++) {
        gpurun_check_buffer_memory(L, gpurun_check_buffer(L, i), target->capture);
        if (!target->capture && !target->whole_device)
            gpurun_note_buffer_use_on(L, i, target->index);
    }
    if (target->whole_device) {
        target->stream = NULL;
        if (gpurun_wait_device(L, c->context, "a collective") != CUDA_SUCCESS)
            gpurun_cuda_error(L, "waiting for device %d before a collective", c->device);
    }
    return c;
}

static void end_collective(lua_State *L, const struct target *target,
                           const struct communicator *c, nccl_result result, const char *what)
{
    if (result != NCCL_SUCCESS)
        raise_nccl_error(L, what);
    if (target->whole_device) {
        if (gpurun_wait_device(L, c->context, what) != CUDA_SUCCESS)
            gpurun_cuda_error(L, "waiting for %s", what);
    }
}

/* all_reduce(buffer [, op = "sum" [, stream | builder]]): in place. */
static int core_all_reduce(lua_State *L)
{
    check_buffers(L, 1, 1);
    lua_settop(L, 3);
    nccl_red_op op = check_op(L, 2);
    struct target target = resolve_target(L, 3);
    struct communicator *c = begin_collective(L, 1, 1, &target);
    struct gpurun_buffer *buffer = lua_touserdata(L, 1);
    CUcontext previous = gpurun_enter_context(c->context);
    nccl_result result = NCCL_CALL(ncclAllReduce, (const void *)buffer->pointer,
                                   (void *)buffer->pointer, buffer->count,
                                   check_nccl_type(L, 1, buffer), op, c->comm, target.stream);
    gpurun_leave_context(previous);
    end_collective(L, &target, c, result, "all-reducing a gpurun.Buffer");
    return 0;
}

/* broadcast(buffer, root [, stream | builder]): root's contents everywhere. */
static int core_broadcast(lua_State *L)
{
    check_buffers(L, 1, 1);
    lua_Integer root = gpurun_check_integer(L, 2, "root rank");
    lua_settop(L, 3);
    struct target target = resolve_target(L, 3);
    require_started(L);
    if (root < 0 || root >= world.size)
        gpurun_arg_error(L, 2, "root rank %I out of range (0..%d)", (LUAI_UACINT)root,
                         world.size - 1);
    struct communicator *c = begin_collective(L, 1, 1, &target);
    struct gpurun_buffer *buffer = lua_touserdata(L, 1);
    CUcontext previous = gpurun_enter_context(c->context);
    nccl_result result = NCCL_CALL(ncclBroadcast, (const void *)buffer->pointer,
                                   (void *)buffer->pointer, buffer->count,
                                   check_nccl_type(L, 1, buffer), (int)root, c->comm,
                                   target.stream);
    gpurun_leave_context(previous);
    end_collective(L, &target, c, result, "broadcasting a gpurun.Buffer");
    return 0;
}

/* The buffer at large_arg holds size times the elements of the one at
 * small_arg; the input (argument 2) has the output's dtype. */
static void check_shapes(lua_State *L, int large_arg, int small_arg, const char *large_name)
{
    const struct gpurun_buffer *large = lua_touserdata(L, large_arg);
    const struct gpurun_buffer *small = lua_touserdata(L, small_arg);
    const struct gpurun_buffer *output = lua_touserdata(L, 1), *input = lua_touserdata(L, 2);
    require_started(L);
    if (output->dtype != input->dtype)
        gpurun_arg_error(L, 2, "gpurun.Buffer of %s expected (the output's dtype), got %s",
                         gpurun_dtypes[output->dtype].name, gpurun_dtypes[input->dtype].name);
    if (small->count > SIZE_MAX / (size_t)world.size
        || large->count != small->count * (size_t)world.size)
        gpurun_arg_error(L, large_arg, "the %s must hold size (%d) x %I = %I elements, it holds "
                                       "%I", large_name, world.size, (LUAI_UACINT)small->count,
                         (LUAI_UACINT)(small->count * (size_t)world.size),
                         (LUAI_UACINT)large->count);
}

/* all_gather(output, input [, stream | builder]): every rank's input, in
 * rank order, in every rank's output. */
static int core_all_gather(lua_State *L)
{
    check_buffers(L, 1, 2);
    lua_settop(L, 3);
    struct target target = resolve_target(L, 3);
    check_shapes(L, 1, 2, "output");
    struct communicator *c = begin_collective(L, 1, 2, &target);
    struct gpurun_buffer *output = lua_touserdata(L, 1), *input = lua_touserdata(L, 2);
    CUcontext previous = gpurun_enter_context(c->context);
    nccl_result result = NCCL_CALL(ncclAllGather, (const void *)input->pointer,
                                   (void *)output->pointer, input->count,
                                   check_nccl_type(L, 2, input), c->comm, target.stream);
    gpurun_leave_context(previous);
    end_collective(L, &target, c, result, "all-gathering gpurun.Buffers");
    return 0;
}

/* reduce_scatter(output, input [, op = "sum" [, stream | builder]]): the
 * reduction of every rank's input, rank r's slice in rank r's output. */
static int core_reduce_scatter(lua_State *L)
{
    check_buffers(L, 1, 2);
    lua_settop(L, 4);
    nccl_red_op op = check_op(L, 3);
    struct target target = resolve_target(L, 4);
    check_shapes(L, 2, 1, "input");
    struct communicator *c = begin_collective(L, 1, 2, &target);
    struct gpurun_buffer *output = lua_touserdata(L, 1), *input = lua_touserdata(L, 2);
    CUcontext previous = gpurun_enter_context(c->context);
    nccl_result result = NCCL_CALL(ncclReduceScatter, (const void *)input->pointer,
                                   (void *)output->pointer, output->count,
                                   check_nccl_type(L, 1, output), op, c->comm, target.stream);
    gpurun_leave_context(previous);
    end_collective(L, &target, c, result, "reduce-scattering gpurun.Buffers");
    return 0;
}

/* ---- registration ----------------------------------------------------------- */

static const luaL_Reg communicator_metamethods[] = {
    {"__gc", communicator_gc},
    {NULL, NULL}
};

static const struct gpurun_type communicator_type = {
    &communicator_tag, NULL, communicator_metamethods, NULL, NULL,
};

/* name in the core table, the function, the name errors call it by. */
static const struct {
    const char *key;
    lua_CFunction function;
    const char *name;
} core_functions[] = {
    {"start", core_start, "dist.init"},
    {"set_device", core_set_device, "dist.init"},
    {"info", core_info, "dist.info"},
    {"raise", core_raise, "dist"},
    {"rank", core_rank, "dist.rank"},
    {"size", core_size, "dist.size"},
    {"local_rank", core_local_rank, "dist.local_rank"},
    {"barrier", core_barrier, "dist.barrier"},
    {"nccl_version", core_nccl_version, "dist.nccl_version"},
    {"all_reduce", core_all_reduce, "dist.all_reduce"},
    {"broadcast", core_broadcast, "dist.broadcast"},
    {"all_gather", core_all_gather, "dist.all_gather"},
    {"reduce_scatter", core_reduce_scatter, "dist.reduce_scatter"},
};

/* The functions live in package.loaded["gpurun.dist_core"], set while the
 * gpurun module opens, so that dist.lua finds them with require wherever
 * gpurun itself was loaded from. They are registered as closures over the
 * names the user calls them by ("dist.all_reduce"), so that argument errors
 * name what the script called. */
void gpurun_open_dist(lua_State *L)
{
    gpurun_register_type(L, &communicator_type);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_createtable(L, 0, (int)(sizeof core_functions / sizeof core_functions[0]));
    for (size_t i = 0; i < sizeof core_functions / sizeof core_functions[0]; i++) {
        lua_pushstring(L, core_functions[i].name);
        lua_pushcclosure(L, core_functions[i].function, 1);
        lua_setfield(L, -2, core_functions[i].key);
    }
    lua_setfield(L, -2, "gpurun.dist_core");
    lua_pop(L, 1);
}
