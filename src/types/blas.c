/* gpurun.BlasHandle, internal: cuBLAS bound to one stream (and cuBLASLt
 * with its plans, from the first epilogue), made by the first BLAS call
 * on it and closed with it; the C side of gpurun.matmul, axpy, dot, nrm2
 * and scal (lua/gpurun/compute/blas.lua), in package.loaded
 * ["gpurun.blas_core"]. Shapes arrive checked by the Lua side, in cuBLAS's
 * column-major terms; C checks again only that every matrix lies inside
 * its buffer. Once a stream has its handle (and plan), a call allocates
 * nothing and formats nothing unless it raises. */
#include "types/blas.h"

#include "base/cublas_loader.h"
#include "base/cublaslt_plans.h"
#include "types/buffer/buffer.h"
#include "types/launch.h"

#include <limits.h>

static const struct gpurun_tag blas_handle_tag = {"gpurun.BlasHandle"};

/* The registry's table of handles, by the address of their stream. */
static const char handles_key = 0;

/* The workspace cuBLAS is given (cublasSetWorkspace), so that it never
 * allocates its own on a stream being captured: what NVIDIA advises per
 * stream, 32 MiB from Hopper on, 4 MiB before. */
#define WORKSPACE_HOPPER (32u << 20)
#define WORKSPACE_OLDER (4u << 20)

struct blas_handle {
    struct gpurun_object header;
    cublas_handle handle;
    CUcontext context;
    const struct gpurun_stream *stream; /* its key in the table, NULL once let go */
    CUdeviceptr workspace;              /* the handle's own memory, cuBLASLt's too */
    size_t workspace_bytes;
    int pointer_mode;                   /* as last set on the handle */
    struct cublaslt_plans lt;           /* no handle until the first epilogue */
};

static void destroy_handle(void *handle)
{
    (void)cublas.cublasDestroy_v2(handle);
}

static void destroy_lt_handle(void *handle)
{
    (void)cublaslt.cublasLtDestroy(handle);
}

/* Lets go of the stream's entry, if the table still names this handle. */
static void unregister(lua_State *L, struct blas_handle *blas)
{
    if (blas->stream == NULL)
        return;
    lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key);
    if (lua_istable(L, -1)) {
        lua_pushnil(L);
        lua_rawsetp(L, -2, blas->stream);
    }
    lua_pop(L, 1);
    blas->stream = NULL;
}

/* cublasDestroy waits for the device, and the workspace may still be in
 * use by queued work: both go once that work is done (and no capture is
 * in progress, which a wait would break). */
static int blas_handle_close(lua_State *L)
{
    struct blas_handle *blas = gpurun_check_tagged(L, 1, &blas_handle_tag);
    if (blas->header.closed)
        return 0;
    blas->header.closed = 1;
    unregister(L, blas);
    if (blas->handle)
        (void)gpurun_release_after_device(destroy_handle, blas->handle, blas->context);
    cublaslt_plans_clear(&blas->lt);
    if (blas->lt.handle)
        (void)gpurun_release_after_device(destroy_lt_handle, blas->lt.handle, blas->context);
    blas->lt.handle = NULL;
    if (blas->workspace)
        (void)gpurun_free_memory(blas->workspace, blas->context);
    blas->handle = NULL;
    blas->workspace = 0;
    return 0;
}

/* A closed stream's handle goes with it, unless a graph captured work on
 * it: the graph keeps the handle, and with it the workspace its nodes use,
 * until the graph is collected. */
static void close_stream_handle(lua_State *L, struct gpurun_stream *stream)
{
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key) != LUA_TTABLE) {
        lua_pop(L, 1);
        return;
    }
    if (lua_rawgetp(L, -1, stream) == LUA_TUSERDATA) {
        struct blas_handle *blas = lua_touserdata(L, -1);
        unregister(L, blas);
        if (blas->header.graph_users == 0) {
            lua_pushcfunction(L, blas_handle_close);
            lua_pushvalue(L, -2);
            lua_call(L, 1, 0);
        }
    }
    lua_pop(L, 2);
}

static int raise_cublas(lua_State *L, const char *call, cublas_status status, const char *what)
{
    char message[512];
    cublas_format_error(message, sizeof message, call, status);
    return gpurun_error(L, "%s while %s", message, what);
}

#define CUBLAS_CALL(name, ...) cublas.name(__VA_ARGS__)

static void require_cublas(lua_State *L)
{
    if (cublas_loader_load() != 0)
        gpurun_error(L, "%s", cublas_loader_error());
}

static size_t workspace_bytes(lua_State *L, int ordinal)
{
    CUdevice device;
    int major = 0;
    CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, ordinal);
    CHECK_CUDA(L, "reading the device's compute capability", cuDeviceGetAttribute, &major,
               CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    return major >= 9 ? WORKSPACE_HOPPER : WORKSPACE_OLDER;
}

/* Makes the stream's handle and pushes it; the call's target (index 1)
 * is that stream or its builder, whose context the handle keeps. Inside a
 * capture the thread is relaxed around the allocations, which the capture
 * would refuse. */
static struct blas_handle *push_new_handle(lua_State *L, struct gpurun_stream *stream)
{
    require_cublas(L);
    size_t bytes = workspace_bytes(L, stream->device);
    struct blas_handle *blas = gpurun_new_object(L, sizeof *blas, 1, &blas_handle_tag);
    gpurun_push_context_keeper(L, 1);
    lua_setiuservalue(L, -2, 1);
    blas->context = stream->context;
    blas->workspace_bytes = bytes;
    blas->pointer_mode = CUBLAS_POINTERS_HOST;
    CUcontext previous = gpurun_enter_context(stream->context);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult allocated = CUDA_CALL(cuMemAlloc, &blas->workspace, bytes);
    const char *call = "cublasCreate_v2";
    cublas_status status = CUBLAS_SUCCESS;
    if (allocated == CUDA_SUCCESS)
        status = CUBLAS_CALL(cublasCreate_v2, &blas->handle);
    if (allocated == CUDA_SUCCESS && status == CUBLAS_SUCCESS) {
        call = "cublasSetStream_v2";
        status = CUBLAS_CALL(cublasSetStream_v2, blas->handle, (cublas_stream)stream->handle);
    }
    if (allocated == CUDA_SUCCESS && status == CUBLAS_SUCCESS) {
        call = "cublasSetWorkspace_v2";
        status = CUBLAS_CALL(cublasSetWorkspace_v2, blas->handle, (void *)blas->workspace, bytes);
    }
    if (allocated == CUDA_SUCCESS && status == CUBLAS_SUCCESS) {
        /* Sums inside a GEMM of 16-bit floats stay float32. */
        call = "cublasSetMathMode";
        status = CUBLAS_CALL(cublasSetMathMode, blas->handle, CUBLAS_MATH_KEEP_COMPUTE_TYPE);
    }
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    /* Open from here on, so that a failure below is cleaned up by close. */
    blas->header.closed = 0;
    if (allocated != CUDA_SUCCESS) {
        blas->workspace = 0;
        gpurun_cuda_error(L, "allocating cuBLAS's workspace of %d MiB", (int)(bytes >> 20));
    }
    if (status != CUBLAS_SUCCESS)
        raise_cublas(L, call, status, "making the stream's cuBLAS handle");
    lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key);
    lua_pushvalue(L, -2);
    lua_rawsetp(L, -2, stream);
    lua_pop(L, 1);
    blas->stream = stream;
    return blas;
}

/* Pushes the stream's handle, made on first use. */
static struct blas_handle *push_handle(lua_State *L, struct gpurun_stream *stream)
{
    lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key);
    if (lua_rawgetp(L, -1, stream) == LUA_TUSERDATA) {
        lua_remove(L, -2);
        return lua_touserdata(L, -1);
    }
    lua_pop(L, 2);
    return push_new_handle(L, stream);
}

/* The call's target at index 1: a Stream, or a GraphBuilder that is
 * building (then *capture is set). */
static struct gpurun_stream *check_target(lua_State *L, struct gpurun_capture **capture)
{
    gpurun_launch_target(L, 1, capture);
    if (*capture)
        return (*capture)->stream;
    return &((struct gpurun_stream_object *)lua_touserdata(L, 1))->stream;
}

static int check_int(lua_State *L, int arg)
{
    lua_Integer value = gpurun_check_integer(L, arg, NULL);
    if (value < 0 || value > INT_MAX)
        gpurun_arg_error(L, arg, "0..%d expected", INT_MAX);
    return (int)value;
}

/* A buffer the call reads or writes: of the stream's device, with memory
 * for the work (a capture's own allocation only inside it). */
static struct gpurun_buffer *check_operand(lua_State *L, int arg, const struct gpurun_stream *stream,
                                           const struct gpurun_capture *capture)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, arg);
    if (buffer->device != stream->device)
        gpurun_arg_error(L, arg, "a buffer of device %d expected (the stream's), got one of "
                                 "device %d", stream->device, buffer->device);
    gpurun_check_buffer_memory(L, buffer, capture);
    return buffer;
}

/* Raises unless `count` elements from the start fit in the buffer. */
static void check_extent(lua_State *L, int arg, const struct gpurun_buffer *buffer,
                         long long count)
{
    if (count < 0 || (unsigned long long)count > buffer->count)
        gpurun_arg_error(L, arg, "the operation reaches element %I of a buffer of %I",
                         (LUAI_UACINT)count, (LUAI_UACINT)buffer->count);
}

/* A matrix of rows x cols (column-major, leading dimension ld) repeated
 * batch times, stride elements apart, must lie inside its buffer. */
static void check_matrix(lua_State *L, int arg, const struct gpurun_buffer *buffer, int rows,
                         int cols, int ld, long long stride, int batch)
{
    if (ld < (rows > 1 ? rows : 1) || stride < 0)
        gpurun_arg_error(L, arg, "a leading dimension of at least %d expected, got %d", rows, ld);
    if (rows == 0 || cols == 0)
        return;
    long long span = (long long)(cols - 1) * ld + rows;
    /* (batch - 1) * stride may pass 2^63: compared by division. */
    if (batch > 1 && stride > (LLONG_MAX - span) / (batch - 1))
        gpurun_arg_error(L, arg, "the operation reaches past element %I of a buffer of %I",
                         (LUAI_UACINT)LLONG_MAX, (LUAI_UACINT)buffer->count);
    check_extent(L, arg, buffer, (long long)(batch - 1) * stride + span);
}

/* After the operands were checked, with the handle at the top: a capture
 * keeps them and the handle (its workspace is in the graph's nodes);
 * plain work is noted on each stream-ordered buffer. */
static void note_operands(lua_State *L, struct gpurun_capture *capture,
                          struct gpurun_stream *stream, const int *args, int count)
{
    for (int i = 0; i < count; i++) {
        if (capture)
            gpurun_capture_keep(L, capture, args[i]);
        else
            gpurun_note_buffer_use(L, lua_touserdata(L, args[i]), args[i], stream, 1);
    }
    if (capture)
        gpurun_capture_keep(L, capture, -1);
}

static void set_pointer_mode(lua_State *L, struct blas_handle *blas, int mode)
{
    if (blas->pointer_mode == mode)
        return;
    cublas_status status = CUBLAS_CALL(cublasSetPointerMode_v2, blas->handle, mode);
    if (status != CUBLAS_SUCCESS)
        raise_cublas(L, "cublasSetPointerMode_v2", status, "setting where scalars are");
    blas->pointer_mode = mode;
}

/* A host scalar of the compute dtype (float32 or float64). */
union scalar {
    float f;
    double d;
};

static const void *host_scalar(union scalar *out, int dtype, lua_Number value)
{
    if (dtype == GPURUN_FLOAT64) {
        out->d = value;
        return &out->d;
    }
    out->f = (float)value;
    return &out->f;
}

static int compute_type(lua_State *L, int arg)
{
    int dtype = gpurun_check_dtype(L, arg, -1);
    if (dtype != GPURUN_FLOAT32 && dtype != GPURUN_FLOAT64)
        gpurun_arg_error(L, arg, "compute dtype float32 or float64 expected");
    return dtype;
}

/* matmul(target, transa, transb, m, n, k, alpha, a, lda, stride_a, b, ldb,
 *      stride_b, beta, c, ldc, stride_c, batch, compute): cuBLAS's
 * C = alpha op(A) op(B) + beta C, column-major, one call of GemmEx (batch
 * 1) or GemmStridedBatchedEx. A, B and C share a dtype. */
static int core_gemm(lua_State *L)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    int transa = lua_toboolean(L, 2), transb = lua_toboolean(L, 3);
    int m = check_int(L, 4), n = check_int(L, 5), k = check_int(L, 6);
    lua_Number alpha = gpurun_check_number(L, 7), beta = gpurun_check_number(L, 14);
    int lda = check_int(L, 9), ldb = check_int(L, 12), ldc = check_int(L, 16);
    long long stride_a = gpurun_check_integer(L, 10, NULL);
    long long stride_b = gpurun_check_integer(L, 13, NULL);
    long long stride_c = gpurun_check_integer(L, 17, NULL);
    int batch = check_int(L, 18);
    int compute = compute_type(L, 19);
    struct gpurun_buffer *a = check_operand(L, 8, stream, capture);
    struct gpurun_buffer *b = check_operand(L, 11, stream, capture);
    struct gpurun_buffer *c = check_operand(L, 15, stream, capture);
    if (a->dtype != c->dtype || b->dtype != c->dtype)
        gpurun_error(L, "gemm: A, B and C must share a dtype");
    if (batch < 1)
        gpurun_arg_error(L, 18, "a batch of at least 1 expected");
    check_matrix(L, 8, a, transa ? k : m, transa ? m : k, lda, stride_a, batch);
    check_matrix(L, 11, b, transb ? n : k, transb ? k : n, ldb, stride_b, batch);
    check_matrix(L, 15, c, m, n, ldc, stride_c, batch);
    struct blas_handle *blas = push_handle(L, stream);
    static const int operands[] = {8, 11, 15};
    note_operands(L, capture, stream, operands, 3);
    union scalar alpha_value, beta_value;
    const void *alpha_pointer = host_scalar(&alpha_value, compute, alpha);
    const void *beta_pointer = host_scalar(&beta_value, compute, beta);
    int type = gpurun_dtypes[c->dtype].library_type;
    int compute_code = compute == GPURUN_FLOAT64 ? CUBLAS_COMPUTE_FLOAT64 : CUBLAS_COMPUTE_FLOAT32;
    int op_a = transa ? CUBLAS_OPERATION_T : CUBLAS_OPERATION_N;
    int op_b = transb ? CUBLAS_OPERATION_T : CUBLAS_OPERATION_N;
    CUcontext previous = gpurun_enter_context(blas->context);
    set_pointer_mode(L, blas, CUBLAS_POINTERS_HOST);
    cublas_status status;
    const char *call;
    if (batch == 1) {
        call = "cublasGemmEx";
        status = CUBLAS_CALL(cublasGemmEx, blas->handle, op_a, op_b, m, n, k, alpha_pointer,
                             (const void *)a->pointer, type, lda, (const void *)b->pointer, type,
                             ldb, beta_pointer, (void *)c->pointer, type, ldc, compute_code,
                             CUBLAS_ALGORITHM_DEFAULT);
    } else {
        call = "cublasGemmStridedBatchedEx";
        status = CUBLAS_CALL(cublasGemmStridedBatchedEx, blas->handle, op_a, op_b, m, n, k,
                             alpha_pointer, (const void *)a->pointer, type, lda, stride_a,
                             (const void *)b->pointer, type, ldb, stride_b, beta_pointer,
                             (void *)c->pointer, type, ldc, stride_c, batch, compute_code,
                             CUBLAS_ALGORITHM_DEFAULT);
    }
    gpurun_leave_context(previous);
    if (status != CUBLAS_SUCCESS)
        raise_cublas(L, call, status, "multiplying matrices");
    return 0;
}

static int raise_cublaslt(lua_State *L, const char *call, cublas_status status)
{
    char message[512];
    cublaslt_format_error(message, sizeof message, call, status);
    return gpurun_error(L, "%s while multiplying matrices with an epilogue", message);
}

/* The handle's cuBLASLt handle, made on its first epilogue. */
static void require_lt(lua_State *L, struct blas_handle *blas)
{
    if (blas->lt.handle)
        return;
    if (cublaslt_loader_load() != 0)
        gpurun_error(L, "%s", cublaslt_loader_error());
    CUcontext previous = gpurun_enter_context(blas->context);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    cublas_status status = cublaslt.cublasLtCreate(&blas->lt.handle);
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    if (status != CUBLAS_SUCCESS) {
        blas->lt.handle = NULL;
        raise_cublaslt(L, "cublasLtCreate", status);
    }
}

/* matmul_lt(target, transa, transb, m, n, k, alpha, a, lda, b, ldb, beta,
 *      c, ldc, compute, epilogue, bias): cuBLASLt's C = epilogue(alpha
 * op(A) op(B) + beta C [+ bias]), column-major, one matrix each; bias
 * (nil unless the epilogue adds one) holds m elements of C's dtype. */
static int core_gemm_lt(lua_State *L)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    int transa = lua_toboolean(L, 2), transb = lua_toboolean(L, 3);
    int m = check_int(L, 4), n = check_int(L, 5), k = check_int(L, 6);
    lua_Number alpha = gpurun_check_number(L, 7), beta = gpurun_check_number(L, 12);
    int lda = check_int(L, 9), ldb = check_int(L, 11), ldc = check_int(L, 14);
    int compute = compute_type(L, 15);
    int epilogue = check_int(L, 16);
    struct gpurun_buffer *a = check_operand(L, 8, stream, capture);
    struct gpurun_buffer *b = check_operand(L, 10, stream, capture);
    struct gpurun_buffer *c = check_operand(L, 13, stream, capture);
    struct gpurun_buffer *bias = NULL;
    if (a->dtype != c->dtype || b->dtype != c->dtype)
        gpurun_error(L, "gemm: A, B and C must share a dtype");
    check_matrix(L, 8, a, transa ? k : m, transa ? m : k, lda, 0, 1);
    check_matrix(L, 10, b, transb ? n : k, transb ? k : n, ldb, 0, 1);
    check_matrix(L, 13, c, m, n, ldc, 0, 1);
    if (epilogue & CUBLASLT_EPILOGUE_BIAS) {
        bias = check_operand(L, 17, stream, capture);
        if (bias->dtype != c->dtype)
            gpurun_arg_error(L, 17, "a bias of dtype %s expected", gpurun_dtypes[c->dtype].name);
        check_extent(L, 17, bias, m);
    }
    struct blas_handle *blas = push_handle(L, stream);
    require_lt(L, blas);
    static const int operands[] = {8, 10, 13, 17};
    note_operands(L, capture, stream, operands, bias ? 4 : 3);
    union scalar alpha_value, beta_value;
    const void *alpha_pointer = host_scalar(&alpha_value, compute, alpha);
    const void *beta_pointer = host_scalar(&beta_value, compute, beta);
    const void *bias_pointer = bias ? (const void *)bias->pointer : NULL;
    struct cublaslt_shape shape = {
        transa, transb, m, n, k, lda, ldb, ldc, gpurun_dtypes[c->dtype].library_type,
        compute == GPURUN_FLOAT64 ? CUBLAS_COMPUTE_FLOAT64 : CUBLAS_COMPUTE_FLOAT32,
        gpurun_dtypes[compute].library_type, epilogue,
        cublaslt_alignment((const void *)a->pointer), cublaslt_alignment((const void *)b->pointer),
        cublaslt_alignment((const void *)c->pointer), cublaslt_alignment(bias_pointer)};
    const char *call = NULL;
    cublas_status status = CUBLAS_SUCCESS;
    CUcontext previous = gpurun_enter_context(blas->context);
    const struct cublaslt_plan *plan =
        cublaslt_plan_for(&blas->lt, &shape, blas->workspace_bytes, &call, &status);
    if (plan)
        status = cublaslt_plan_run(&blas->lt, plan, alpha_pointer, (const void *)a->pointer,
                                   (const void *)b->pointer, beta_pointer, (void *)c->pointer,
                                   bias_pointer, (void *)blas->workspace, blas->workspace_bytes,
                                   (cublas_stream)stream->handle, &call);
    gpurun_leave_context(previous);
    if (status != CUBLAS_SUCCESS)
        raise_cublaslt(L, call, status);
    return 0;
}

/* EPILOGUES: the cuBLASLt epilogues gpurun.matmul takes, by their
 * lower-cased CUBLASLT_EPILOGUE_* names. */
static const struct {
    const char *name;
    int code;
} epilogues[] = {
    {"relu", CUBLASLT_EPILOGUE_RELU},           {"gelu", CUBLASLT_EPILOGUE_GELU},
    {"bias", CUBLASLT_EPILOGUE_BIAS},           {"relu_bias", CUBLASLT_EPILOGUE_RELU_BIAS},
    {"gelu_bias", CUBLASLT_EPILOGUE_GELU_BIAS},
};

/* A vector of n elements at arg, and the scalar there (a number, or a
 * 1-element buffer of the compute dtype: device pointer mode). */
static void check_vector(lua_State *L, int arg, const struct gpurun_buffer *buffer, int n)
{
    check_extent(L, arg, buffer, n);
}

/* The alpha at arg: sets *mode and returns where it is. */
static const void *alpha_at(lua_State *L, int arg, int compute, union scalar *value,
                            const struct gpurun_stream *stream,
                            const struct gpurun_capture *capture, int *mode)
{
    if (lua_type(L, arg) == LUA_TNUMBER) {
        *mode = CUBLAS_POINTERS_HOST;
        return host_scalar(value, compute, lua_tonumber(L, arg));
    }
    struct gpurun_buffer *buffer = check_operand(L, arg, stream, capture);
    if (buffer->dtype != compute)
        gpurun_arg_error(L, arg, "alpha of dtype %s expected", gpurun_dtypes[compute].name);
    check_extent(L, arg, buffer, 1);
    *mode = CUBLAS_POINTERS_DEVICE;
    return (const void *)buffer->pointer;
}

/* axpy(target, n, alpha, x, y, compute) and scal(target, n, alpha, x,
 * compute): y = alpha x + y, x = alpha x. */
static int level1_scaled(lua_State *L, int axpy)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    int n = check_int(L, 2);
    int compute = compute_type(L, axpy ? 6 : 5);
    struct gpurun_buffer *x = check_operand(L, 4, stream, capture);
    struct gpurun_buffer *y = axpy ? check_operand(L, 5, stream, capture) : NULL;
    check_vector(L, 4, x, n);
    if (y) {
        check_vector(L, 5, y, n);
        if (y->dtype != x->dtype)
            gpurun_error(L, "axpy: x and y must share a dtype");
    }
    union scalar value;
    int mode;
    const void *alpha = alpha_at(L, 3, compute, &value, stream, capture, &mode);
    struct blas_handle *blas = push_handle(L, stream);
    static const int axpy_operands[] = {4, 5, 3}, scal_operands[] = {4, 3};
    note_operands(L, capture, stream, axpy ? axpy_operands : scal_operands,
                  (axpy ? 2 : 1) + (mode == CUBLAS_POINTERS_DEVICE));
    int type = gpurun_dtypes[x->dtype].library_type;
    int alpha_type = gpurun_dtypes[compute].library_type;
    CUcontext previous = gpurun_enter_context(blas->context);
    set_pointer_mode(L, blas, mode);
    cublas_status status =
        axpy ? CUBLAS_CALL(cublasAxpyEx, blas->handle, n, alpha, alpha_type,
                           (const void *)x->pointer, type, 1, (void *)y->pointer, type, 1,
                           alpha_type)
             : CUBLAS_CALL(cublasScalEx, blas->handle, n, alpha, alpha_type, (void *)x->pointer,
                           type, 1, alpha_type);
    gpurun_leave_context(previous);
    if (status != CUBLAS_SUCCESS)
        raise_cublas(L, axpy ? "cublasAxpyEx" : "cublasScalEx", status,
                     axpy ? "adding a scaled vector" : "scaling a vector");
    return 0;
}

static int core_axpy(lua_State *L)
{
    return level1_scaled(L, 1);
}

static int core_scal(lua_State *L)
{
    return level1_scaled(L, 0);
}

/* dot(target, n, x, y, out, compute) and nrm2(target, n, x, out, compute):
 * the result into out's first element (device pointer mode), of x's dtype. */
static int level1_result(lua_State *L, int dot)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    int n = check_int(L, 2);
    int out_arg = dot ? 5 : 4;
    int compute = compute_type(L, out_arg + 1);
    struct gpurun_buffer *x = check_operand(L, 3, stream, capture);
    struct gpurun_buffer *y = dot ? check_operand(L, 4, stream, capture) : NULL;
    struct gpurun_buffer *out = check_operand(L, out_arg, stream, capture);
    check_vector(L, 3, x, n);
    if (y) {
        check_vector(L, 4, y, n);
        if (y->dtype != x->dtype)
            gpurun_error(L, "dot: x and y must share a dtype");
    }
    check_extent(L, out_arg, out, 1);
    if (out->dtype != x->dtype)
        gpurun_arg_error(L, out_arg, "out of dtype %s expected", gpurun_dtypes[x->dtype].name);
    struct blas_handle *blas = push_handle(L, stream);
    static const int dot_operands[] = {3, 4, 5}, nrm2_operands[] = {3, 4};
    note_operands(L, capture, stream, dot ? dot_operands : nrm2_operands, dot ? 3 : 2);
    int type = gpurun_dtypes[x->dtype].library_type;
    int execution = gpurun_dtypes[compute].library_type;
    CUcontext previous = gpurun_enter_context(blas->context);
    set_pointer_mode(L, blas, CUBLAS_POINTERS_DEVICE);
    cublas_status status =
        dot ? CUBLAS_CALL(cublasDotEx, blas->handle, n, (const void *)x->pointer, type, 1,
                          (const void *)y->pointer, type, 1, (void *)out->pointer, type,
                          execution)
            : CUBLAS_CALL(cublasNrm2Ex, blas->handle, n, (const void *)x->pointer, type, 1,
                          (void *)out->pointer, type, execution);
    gpurun_leave_context(previous);
    if (status != CUBLAS_SUCCESS)
        raise_cublas(L, dot ? "cublasDotEx" : "cublasNrm2Ex", status,
                     dot ? "taking a dot product" : "taking a norm");
    return 0;
}

static int core_dot(lua_State *L)
{
    return level1_result(L, 1);
}

static int core_nrm2(lua_State *L)
{
    return level1_result(L, 0);
}

/* load() -> nil, or why cuBLAS cannot be used. Never raises. */
static int core_load(lua_State *L)
{
    return gpurun_push_load_status(L, cublas_loader_load, cublas_loader_error);
}

/* load_lt() -> nil, or why cuBLASLt cannot be used. Never raises. */
static int core_load_lt(lua_State *L)
{
    return gpurun_push_load_status(L, cublaslt_loader_load, cublaslt_loader_error);
}

/* handles() -> how many streams have a handle now (for specs: none leak). */
static int core_handles(lua_State *L)
{
    lua_Integer count = 0;
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key) == LUA_TTABLE)
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1))
            count++;
    lua_pushinteger(L, count);
    return 1;
}

/* Named as the public functions they serve, which their errors name. */
static const luaL_Reg core_functions[] = {
    {"load", core_load},
    {"load_lt", core_load_lt},
    {"matmul", core_gemm},
    {"matmul_lt", core_gemm_lt},
    {"axpy", core_axpy},
    {"scal", core_scal},
    {"dot", core_dot},
    {"nrm2", core_nrm2},
    {"handles", core_handles},
    {NULL, NULL}
};

/* No script holds one: the collector and the stream's close close it. */
static const luaL_Reg blas_handle_metamethods[] = {
    {"__gc", blas_handle_close},
    {NULL, NULL}
};

static const struct gpurun_type blas_handle_type = {
    &blas_handle_tag, NULL, blas_handle_metamethods, NULL, NULL,
};

void gpurun_open_blas(lua_State *L)
{
    gpurun_register_type(L, &blas_handle_type);
    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &handles_key) != LUA_TTABLE) {
        lua_newtable(L);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &handles_key);
    }
    lua_pop(L, 1);
    gpurun_add_stream_close_hook(close_stream_handle);
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    lua_newtable(L);
    gpurun_set_functions(L, core_functions);
    lua_createtable(L, 0, (int)(sizeof epilogues / sizeof epilogues[0]));
    for (size_t i = 0; i < sizeof epilogues / sizeof epilogues[0]; i++) {
        lua_pushinteger(L, epilogues[i].code);
        lua_setfield(L, -2, epilogues[i].name);
    }
    lua_setfield(L, -2, "EPILOGUES");
    lua_setfield(L, -2, "gpurun.blas_core");
    lua_pop(L, 1);
}
