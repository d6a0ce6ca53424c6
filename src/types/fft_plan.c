/* gpurun.FftPlanCore, internal: one cuFFT plan with its own work area, made
 * for a stream's device; and the C side of gpurun.fft's plans
 * (lua/gpurun/compute/fft.lua), in package.loaded["gpurun.fft_core"].
 * Shapes, kinds, dtypes and sizes arrive checked by the Lua side; C checks
 * again only that each buffer holds what the transform reads or writes.
 * Auto-allocation is off and the work area is set once, so that a transform
 * allocates nothing and captures; a call formats nothing unless it raises. */
#include "types/fft_plan.h"

#include "base/cufft_loader.h"
#include "types/buffer/buffer.h"
#include "types/launch.h"

#include <stdint.h>

static const struct gpurun_tag fft_plan_tag = {"gpurun.FftPlanCore"};

struct fft_plan {
    struct gpurun_object header;
    cufft_handle handle;
    int made;            /* cufftCreate succeeded: the handle is to destroy */
    CUcontext context;
    int device;
    int type;            /* cufftType */
    CUdeviceptr work;    /* the plan's own work area, or 0 */
    size_t work_bytes;
};

/* Plans open now (for specs: none leak). */
static lua_Integer open_plans;

static int raise_cufft(lua_State *L, const char *call, cufft_result result, const char *what)
{
    char message[512];
    cufft_format_error(message, sizeof message, call, result);
    return gpurun_error(L, "%s while %s", message, what);
}

static void destroy_plan(void *handle)
{
    (void)cufft.cufftDestroy((cufft_handle)(intptr_t)handle);
}

/* cufftDestroy may wait for the device and the work area may still be in
 * use by queued work: both go once that work is done. */
static void release(struct fft_plan *plan)
{
    if (plan->made)
        (void)gpurun_release_after_device(destroy_plan, (void *)(intptr_t)plan->handle,
                                          plan->context);
    if (plan->work)
        (void)gpurun_free_memory(plan->work, plan->context);
    plan->made = 0;
    plan->work = 0;
    if (!plan->header.closed)
        open_plans--;
    plan->header.closed = 1;
}

/* close(plan): refused while a graph that captured a transform of it lives
 * (its nodes use the work area). */
static int core_close(lua_State *L)
{
    struct fft_plan *plan = gpurun_check_tagged(L, 1, &fft_plan_tag);
    if (plan->header.closed)
        return 0;
    if (plan->header.graph_users > 0)
        return gpurun_error(L, "gpurun.FftPlan is used by %d graph(s) or graph builder(s); "
                               "close them first", plan->header.graph_users);
    release(plan);
    return 0;
}

/* The collector finds no graph user: a graph keeps what it captured. */
static int plan_gc(lua_State *L)
{
    release(lua_touserdata(L, 1));
    return 0;
}

/* The target at index: a Stream, or a GraphBuilder that is building (then
 * *capture is set). */
static struct gpurun_stream *check_target(lua_State *L, int index, struct gpurun_capture **capture)
{
    gpurun_launch_target(L, index, capture);
    if (*capture)
        return (*capture)->stream;
    return &((struct gpurun_stream_object *)lua_touserdata(L, index))->stream;
}

static long long check_size(lua_State *L, int arg)
{
    lua_Integer value = gpurun_check_integer(L, arg, NULL);
    if (value < 1)
        gpurun_arg_error(L, arg, "a size of at least 1 expected");
    return (long long)value;
}

/* make(target, type, batch, n1 [, n2 [, n3]]) -> plan, work area bytes: a
 * plan of rank 1 to 3 (C order: n1 the slowest dimension) made in the
 * target's context, which it keeps alive. Inside a capture the thread is relaxed around the
 * allocations, which the capture would refuse. */
static int core_make(lua_State *L)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, 1, &capture);
    int type = (int)gpurun_check_integer(L, 2, NULL);
    long long batch = check_size(L, 3);
    int rank = lua_gettop(L) - 3;
    if (rank < 1 || rank > 3)
        gpurun_error(L, "fft: 1 to 3 dimensions expected, got %d", rank);
    long long n[3];
    for (int i = 0; i < rank; i++)
        n[i] = check_size(L, 4 + i);
    if (cufft_loader_load() != 0)
        gpurun_error(L, "%s", cufft_loader_error());
    struct fft_plan *plan = gpurun_new_object(L, sizeof *plan, 1, &fft_plan_tag);
    gpurun_push_context_keeper(L, 1);
    lua_setiuservalue(L, -2, 1);
    plan->context = stream->context;
    plan->device = stream->device;
    plan->type = type;
    open_plans++;
    plan->header.closed = 0; /* from here on a failure is cleaned up by the collector */
    CUcontext previous = gpurun_enter_context(stream->context);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    const char *call = "cufftCreate";
    cufft_result result = cufft.cufftCreate(&plan->handle);
    plan->made = result == CUFFT_SUCCESS;
    if (result == CUFFT_SUCCESS) {
        call = "cufftSetAutoAllocation";
        result = cufft.cufftSetAutoAllocation(plan->handle, 0);
    }
    if (result == CUFFT_SUCCESS) {
        call = "cufftMakePlanMany64";
        result = cufft.cufftMakePlanMany64(plan->handle, rank, n, NULL, 1, 0, NULL, 1, 0, type,
                                           batch, &plan->work_bytes);
    }
    CUresult allocated = CUDA_SUCCESS;
    if (result == CUFFT_SUCCESS && plan->work_bytes > 0)
        allocated = CUDA_CALL(cuMemAlloc, &plan->work, plan->work_bytes);
    if (result == CUFFT_SUCCESS && allocated == CUDA_SUCCESS && plan->work) {
        call = "cufftSetWorkArea";
        result = cufft.cufftSetWorkArea(plan->handle, (void *)plan->work);
    }
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    if (allocated != CUDA_SUCCESS) {
        plan->work = 0;
        gpurun_cuda_error(L, "allocating cuFFT's work area of %I bytes",
                          (LUAI_UACINT)plan->work_bytes);
    }
    if (result != CUFFT_SUCCESS)
        raise_cufft(L, call, result, "making an FFT plan");
    lua_pushinteger(L, (lua_Integer)plan->work_bytes);
    return 2;
}

/* A buffer the transform reads or writes: of the plan's device, with memory
 * for the work, holding at least count elements. */
static struct gpurun_buffer *check_operand(lua_State *L, int arg, const struct fft_plan *plan,
                                           const struct gpurun_capture *capture, long long count)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, arg);
    if (buffer->device != plan->device)
        gpurun_arg_error(L, arg, "a buffer of device %d expected (the plan's), got one of "
                                 "device %d", plan->device, buffer->device);
    gpurun_check_buffer_memory(L, buffer, capture);
    if (count < 0 || (unsigned long long)count > buffer->count)
        gpurun_arg_error(L, arg, "the transform reaches element %I of a buffer of %I",
                         (LUAI_UACINT)count, (LUAI_UACINT)buffer->count);
    return buffer;
}

/* execute(plan, target, input, output, direction, input count, output
 * count): one transform of the plan's type on the target (a C2C or Z2Z in
 * `direction`, -1 forward or 1 inverse). A capture keeps the plan and both
 * buffers; plain work is noted on each stream-ordered buffer. */
static int core_execute(lua_State *L)
{
    struct fft_plan *plan = gpurun_check_open(L, 1, &fft_plan_tag);
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, 2, &capture);
    if (stream->device != plan->device)
        gpurun_arg_error(L, 2, "a stream of device %d expected (the plan's), got one of device %d",
                         plan->device, stream->device);
    int direction = (int)gpurun_check_integer(L, 5, NULL);
    struct gpurun_buffer *in = check_operand(L, 3, plan, capture, gpurun_check_integer(L, 6, NULL));
    struct gpurun_buffer *out = check_operand(L, 4, plan, capture, gpurun_check_integer(L, 7, NULL));
    for (int arg = 3; arg <= 4; arg++) {
        if (capture)
            gpurun_capture_keep(L, capture, arg);
        else
            gpurun_note_buffer_use(L, lua_touserdata(L, arg), arg, stream, 2);
    }
    if (capture)
        gpurun_capture_keep(L, capture, 1);
    void *input = (void *)in->pointer, *output = (void *)out->pointer;
    CUcontext previous = gpurun_enter_context(plan->context);
    const char *call = "cufftSetStream";
    cufft_result result = cufft.cufftSetStream(plan->handle, (cufft_stream)stream->handle);
    if (result == CUFFT_SUCCESS) {
        switch (plan->type) {
        case CUFFT_TYPE_C2C:
            call = "cufftExecC2C";
            result = cufft.cufftExecC2C(plan->handle, input, output, direction);
            break;
        case CUFFT_TYPE_Z2Z:
            call = "cufftExecZ2Z";
            result = cufft.cufftExecZ2Z(plan->handle, input, output, direction);
            break;
        case CUFFT_TYPE_R2C:
            call = "cufftExecR2C";
            result = cufft.cufftExecR2C(plan->handle, input, output);
            break;
        case CUFFT_TYPE_D2Z:
            call = "cufftExecD2Z";
            result = cufft.cufftExecD2Z(plan->handle, input, output);
            break;
        case CUFFT_TYPE_C2R:
            call = "cufftExecC2R";
            result = cufft.cufftExecC2R(plan->handle, input, output);
            break;
        default:
            call = "cufftExecZ2D";
            result = cufft.cufftExecZ2D(plan->handle, input, output);
            break;
        }
    }
    gpurun_leave_context(previous);
    if (result != CUFFT_SUCCESS)
        raise_cufft(L, call, result, "running an FFT");
    return 0;
}

/* load() -> nil, or why cuFFT cannot be used. Never raises. */
static int core_load(lua_State *L)
{
    return gpurun_push_load_status(L, cufft_loader_load, cufft_loader_error);
}

/* plans() -> how many plans are open now. */
static int core_plans(lua_State *L)
{
    lua_pushinteger(L, open_plans);
    return 1;
}

/* context_of(target) -> the target's context as an integer: the one-call
 * functions' cache keys, so that a green context's streams get plans of
 * their own. A plan keeps its context, so no other takes its address. */
static int core_context_of(lua_State *L)
{
    struct gpurun_capture *capture;
    check_target(L, 1, &capture);
    lua_pushinteger(L, (lua_Integer)(uintptr_t)gpurun_launch_context(L, 1, capture));
    return 1;
}

static const luaL_Reg core_functions[] = {
    {"load", core_load},
    {"context_of", core_context_of},
    {"make", core_make},
    {"execute", core_execute},
    {"close", core_close},
    {"plans", core_plans},
    {NULL, NULL}
};

/* No script holds one: gpurun.FftPlan (lua/gpurun/builtin/fft.lua) does. */
static const luaL_Reg fft_plan_metamethods[] = {
    {"__gc", plan_gc},
    {NULL, NULL}
};

static const struct gpurun_type fft_plan_type = {
    &fft_plan_tag, NULL, fft_plan_metamethods, NULL, NULL,
};

void gpurun_open_fft_plan(lua_State *L)
{
    gpurun_register_type(L, &fft_plan_type);
    gpurun_set_core_functions(L, "gpurun.fft_core", core_functions);
}
