/* gpurun.CsrMatrix: row offsets, column indices and values in three
 * Buffers (user values 1..3), with cuSPARSE's descriptor of them and a
 * plan per product shape (dense descriptors and the work buffer cuSPARSE
 * asked for), all made on the first product and kept until close; and the
 * C side of gpurun.csr, spmv and spmm (lua/gpurun/compute/sparse.lua) in
 * package.loaded["gpurun.sparse_core"]. Lua checks everything first; C
 * checks again that the products stay inside their buffers. */
#include "types/csr_matrix.h"

#include "base/cusparse_loader.h"
#include "types/buffer/buffer.h"
#include "types/launch.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

static const struct gpurun_tag csr_matrix_tag = {"gpurun.CsrMatrix"};
static const struct gpurun_tag handles_tag = {"gpurun.SparseHandles"};

enum { SPMV, SPMM };

/* One product's shape and what cuSPARSE keeps for it. cuSPARSE wants one
 * work buffer per matrix and operation, the same at every call (its 12.6
 * release notes), so a plan's buffer never changes. */
struct csr_plan {
    int kind, transpose;
    int n;                 /* SpMM: the dense matrices' cols */
    long long ldb, ldc;    /* SpMM: their leading dimensions */
    void *x, *y;           /* dense descriptors (vectors, or B and C) */
    CUdeviceptr buffer;    /* gpurun's, freed with the matrix */
};

struct csr_matrix {
    struct gpurun_object header;
    int rows, cols, nnz, dtype, device;
    CUcontext context;
    cusparse_sp_mat descriptor; /* made on the first product */
    struct csr_plan *plans;
    int plan_count, plan_capacity;
};

/* One handle per device, made on its first product; each call points it
 * at its own stream (cusparseSetStream only sets a field). */
static struct {
    cusparse_handle handle;
    CUcontext context;
} handles[GPURUN_MAX_DEVICES];

static void destroy_handle(void *handle)
{
    (void)cusparse.cusparseDestroy(handle);
}

static int raise_cusparse(lua_State *L, const char *call, cusparse_status status,
                          const char *what)
{
    char message[512];
    cusparse_format_error(message, sizeof message, call, status);
    return gpurun_error(L, "%s while %s", message, what);
}

static void require_cusparse(lua_State *L)
{
    if (cusparse_loader_load() != 0)
        gpurun_error(L, "%s", cusparse_loader_error());
}

static void destroy_plan(struct csr_matrix *matrix, struct csr_plan *plan)
{
    if (plan->kind == SPMV) {
        if (plan->x)
            (void)cusparse.cusparseDestroyDnVec(plan->x);
        if (plan->y)
            (void)cusparse.cusparseDestroyDnVec(plan->y);
    } else {
        if (plan->x)
            (void)cusparse.cusparseDestroyDnMat(plan->x);
        if (plan->y)
            (void)cusparse.cusparseDestroyDnMat(plan->y);
    }
    if (plan->buffer)
        (void)gpurun_free_memory_after_device(plan->buffer, matrix->context);
}

static int release(struct csr_matrix *matrix)
{
    matrix->header.closed = 1;
    for (int i = 0; i < matrix->plan_count; i++)
        destroy_plan(matrix, &matrix->plans[i]);
    free(matrix->plans);
    matrix->plans = NULL;
    matrix->plan_count = matrix->plan_capacity = 0;
    if (matrix->descriptor)
        (void)cusparse.cusparseDestroySpMat(matrix->descriptor);
    matrix->descriptor = NULL;
    return 0;
}

/* The descriptors are host memory; the work buffers are freed once the
 * device's queued work is done. A graph that captured a product keeps the
 * matrix, so an explicit close waits for its graphs to go. */
static int csr_close(lua_State *L)
{
    struct csr_matrix *matrix = gpurun_check_tagged(L, 1, &csr_matrix_tag);
    if (matrix->header.closed)
        return 0;
    if (matrix->header.graph_users > 0)
        return gpurun_error(L, "gpurun.CsrMatrix is used by %d graph(s) or graph builder(s); "
                               "close them first", matrix->header.graph_users);
    return release(matrix);
}

static int csr_gc(lua_State *L)
{
    struct csr_matrix *matrix = lua_touserdata(L, 1);
    if (!matrix->header.closed)
        release(matrix);
    return 0;
}

static int check_size(lua_State *L, int arg, lua_Integer minimum)
{
    lua_Integer value = gpurun_check_integer(L, arg, NULL);
    if (value < minimum || value > INT_MAX)
        gpurun_arg_error(L, arg, "%d..%d expected", (int)minimum, INT_MAX);
    return (int)value;
}

static struct gpurun_buffer *check_part(lua_State *L, int arg, int dtype_a, int dtype_b,
                                        size_t count)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, arg);
    if (buffer->dtype != dtype_a && buffer->dtype != dtype_b)
        gpurun_arg_error(L, arg, "a buffer of %s%s%s expected, got %s",
                         gpurun_dtypes[dtype_a].name, dtype_b != dtype_a ? " or " : "",
                         dtype_b != dtype_a ? gpurun_dtypes[dtype_b].name : "",
                         gpurun_dtypes[buffer->dtype].name);
    if (buffer->count < count)
        gpurun_arg_error(L, arg, "at least %I elements expected, got %I", (LUAI_UACINT)count,
                         (LUAI_UACINT)buffer->count);
    return buffer;
}

/* csr(row_offsets, col_indices, values, rows, cols) -> gpurun.CsrMatrix:
 * nnz is the values' length; the three on one device. */
static int core_csr(lua_State *L)
{
    int rows = check_size(L, 4, 1), cols = check_size(L, 5, 1);
    struct gpurun_buffer *values = check_part(L, 3, GPURUN_FLOAT32, GPURUN_FLOAT64, 0);
    if (values->count > INT_MAX)
        gpurun_arg_error(L, 3, "at most %d values expected", INT_MAX);
    int nnz = (int)values->count;
    struct gpurun_buffer *offsets = check_part(L, 1, GPURUN_INT32, GPURUN_INT32, (size_t)rows + 1);
    struct gpurun_buffer *indices = check_part(L, 2, GPURUN_INT32, GPURUN_INT32, (size_t)nnz);
    if (offsets->device != values->device || indices->device != values->device)
        gpurun_error(L, "gpurun.csr: the three buffers must be on one device");
    struct csr_matrix *matrix = gpurun_new_object(L, sizeof *matrix, 3, &csr_matrix_tag);
    for (int i = 1; i <= 3; i++) {
        lua_pushvalue(L, i);
        lua_setiuservalue(L, -2, i);
    }
    matrix->rows = rows;
    matrix->cols = cols;
    matrix->nnz = nnz;
    matrix->dtype = values->dtype;
    matrix->device = values->device;
    matrix->context = values->context;
    matrix->header.closed = 0;
    return 1;
}

/* The matrix at arg, open, with its three buffers open (pushed, in order,
 * for the caller to keep or note); returns them through parts. */
static struct csr_matrix *push_matrix(lua_State *L, int arg, struct gpurun_buffer *parts[3],
                                      const struct gpurun_capture *capture)
{
    struct csr_matrix *matrix = gpurun_check_open(L, arg, &csr_matrix_tag);
    for (int i = 1; i <= 3; i++) {
        lua_getiuservalue(L, arg, i);
        parts[i - 1] = gpurun_check_buffer(L, -1);
        gpurun_check_buffer_memory(L, parts[i - 1], capture);
    }
    return matrix;
}

/* The device's handle, made on first use (relaxed: inside a capture,
 * cusparseCreate's allocation would break it). */
static cusparse_handle device_handle(lua_State *L, int device, CUcontext context)
{
    if (handles[device].handle)
        return handles[device].handle;
    require_cusparse(L);
    CUcontext previous = gpurun_enter_context(context);
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    cusparse_status status = cusparse.cusparseCreate(&handles[device].handle);
    gpurun_restore_captures(relaxed);
    gpurun_leave_context(previous);
    if (status != CUSPARSE_SUCCESS) {
        handles[device].handle = NULL;
        raise_cusparse(L, "cusparseCreate", status, "making the device's cuSPARSE handle");
    }
    handles[device].context = context;
    return handles[device].handle;
}

static void make_descriptor(lua_State *L, struct csr_matrix *matrix, struct gpurun_buffer *parts[3])
{
    int type = gpurun_dtypes[matrix->dtype].library_type;
    cusparse_status status = cusparse.cusparseCreateCsr(
        &matrix->descriptor, matrix->rows, matrix->cols, matrix->nnz, (void *)parts[0]->pointer,
        (void *)parts[1]->pointer, (void *)parts[2]->pointer, CUSPARSE_INDEX_32I,
        CUSPARSE_INDEX_32I, CUSPARSE_INDEX_BASE_ZERO, type);
    if (status != CUSPARSE_SUCCESS) {
        matrix->descriptor = NULL;
        raise_cusparse(L, "cusparseCreateCsr", status, "describing a CSR matrix");
    }
}

/* The plan of this shape, or NULL. */
static struct csr_plan *find_plan(struct csr_matrix *matrix, int kind, int transpose, int n,
                                  long long ldb, long long ldc)
{
    for (int i = 0; i < matrix->plan_count; i++) {
        struct csr_plan *plan = &matrix->plans[i];
        if (plan->kind == kind && plan->transpose == transpose && plan->n == n
            && plan->ldb == ldb && plan->ldc == ldc)
            return plan;
    }
    return NULL;
}

static struct csr_plan *add_plan(lua_State *L, struct csr_matrix *matrix)
{
    if (matrix->plan_count == matrix->plan_capacity) {
        int capacity = matrix->plan_capacity ? 2 * matrix->plan_capacity : 4;
        struct csr_plan *grown = realloc(matrix->plans, (size_t)capacity * sizeof *grown);
        if (grown == NULL)
            gpurun_error(L, "out of host memory for a sparse product's plan");
        matrix->plans = grown;
        matrix->plan_capacity = capacity;
    }
    struct csr_plan *plan = &matrix->plans[matrix->plan_count];
    *plan = (struct csr_plan){0};
    return plan;
}

/* The work buffer cuSPARSE asked for: gpurun's own memory, allocated once
 * per plan (relaxed inside a capture) and kept with the matrix, so that a
 * graph's nodes use memory that outlives the capture. */
static CUresult allocate_work(struct csr_plan *plan, size_t bytes)
{
    if (bytes == 0)
        return CUDA_SUCCESS;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUresult result = CUDA_CALL(cuMemAlloc, &plan->buffer, bytes);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS)
        plan->buffer = 0;
    return result;
}

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

/* The call's target at index 1, on the matrix's device. */
static struct gpurun_stream *check_target(lua_State *L, struct gpurun_capture **capture)
{
    gpurun_launch_target(L, 1, capture);
    if (*capture)
        return (*capture)->stream;
    return &((struct gpurun_stream_object *)lua_touserdata(L, 1))->stream;
}

static struct gpurun_buffer *check_dense(lua_State *L, int arg, const struct csr_matrix *matrix,
                                         long long reach, const struct gpurun_capture *capture)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, arg);
    if (buffer->dtype != matrix->dtype)
        gpurun_arg_error(L, arg, "a buffer of %s expected (the matrix's values)",
                         gpurun_dtypes[matrix->dtype].name);
    if (buffer->device != matrix->device)
        gpurun_arg_error(L, arg, "a buffer of device %d expected (the matrix's)", matrix->device);
    if (reach < 0 || (unsigned long long)reach > buffer->count)
        gpurun_arg_error(L, arg, "the product reaches element %I of a buffer of %I",
                         (LUAI_UACINT)reach, (LUAI_UACINT)buffer->count);
    gpurun_check_buffer_memory(L, buffer, capture);
    return buffer;
}

/* After the checks: a capture keeps the matrix, its parts (pushed at
 * parts_top - 2..parts_top) and the dense operands; plain work is noted on
 * each stream-ordered buffer. */
static void keep_operands(lua_State *L, struct gpurun_capture *capture,
                          struct gpurun_stream *stream, int parts_top, int first, int count)
{
    if (capture)
        gpurun_capture_keep(L, capture, 2);
    for (int i = parts_top - 2; i <= parts_top; i++) {
        if (capture)
            gpurun_capture_keep(L, capture, i);
        else
            gpurun_note_buffer_use(L, lua_touserdata(L, i), i, stream, 1);
    }
    for (int i = first; i < first + count; i++) {
        if (capture)
            gpurun_capture_keep(L, capture, i);
        else
            gpurun_note_buffer_use(L, lua_touserdata(L, i), i, stream, 1);
    }
}

/* A new SpMV plan: the vectors' descriptors and the work buffer's size;
 * NULL, or the call that failed with its status. */
static const char *plan_spmv(cusparse_handle handle, struct csr_matrix *matrix,
                      struct csr_plan *plan, const void *alpha, const void *beta,
                      CUdeviceptr x, CUdeviceptr y, size_t *bytes,
                      cusparse_status *status_out)
{
    int type = gpurun_dtypes[matrix->dtype].library_type;
    int op = plan->transpose ? CUSPARSE_OP_TRANSPOSE : CUSPARSE_OP_NON_TRANSPOSE;
    int64_t x_size = plan->transpose ? matrix->rows : matrix->cols;
    int64_t y_size = plan->transpose ? matrix->cols : matrix->rows;
    const char *call = "cusparseCreateDnVec";
    cusparse_status status = cusparse.cusparseCreateDnVec((cusparse_dn_vec *)&plan->x, x_size,
                                                          (void *)x, type);
    if (status == CUSPARSE_SUCCESS)
        status = cusparse.cusparseCreateDnVec((cusparse_dn_vec *)&plan->y, y_size, (void *)y, type);
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSpMV_bufferSize";
        status = cusparse.cusparseSpMV_bufferSize(handle, op, alpha, matrix->descriptor, plan->x,
                                                  beta, plan->y, type, CUSPARSE_SPMV_DEFAULT,
                                                  bytes);
    }
    *status_out = status;
    return status == CUSPARSE_SUCCESS ? NULL : call;
}

/* A new SpMM plan, as plan_spmv. */
static const char *plan_spmm(cusparse_handle handle, struct csr_matrix *matrix,
                      struct csr_plan *plan, const void *alpha, const void *beta,
                      CUdeviceptr b, CUdeviceptr c, size_t *bytes,
                      cusparse_status *status_out)
{
    int type = gpurun_dtypes[matrix->dtype].library_type;
    int op = plan->transpose ? CUSPARSE_OP_TRANSPOSE : CUSPARSE_OP_NON_TRANSPOSE;
    int64_t k = plan->transpose ? matrix->rows : matrix->cols;
    int64_t m = plan->transpose ? matrix->cols : matrix->rows;
    const char *call = "cusparseCreateDnMat";
    cusparse_status status = cusparse.cusparseCreateDnMat(
        (cusparse_dn_mat *)&plan->x, k, plan->n, plan->ldb, (void *)b, type, CUSPARSE_ORDER_ROW);
    if (status == CUSPARSE_SUCCESS)
        status = cusparse.cusparseCreateDnMat((cusparse_dn_mat *)&plan->y, m, plan->n, plan->ldc,
                                              (void *)c, type, CUSPARSE_ORDER_ROW);
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSpMM_bufferSize";
        status = cusparse.cusparseSpMM_bufferSize(handle, op, CUSPARSE_OP_NON_TRANSPOSE, alpha,
                                                  matrix->descriptor, plan->x, beta, plan->y,
                                                  type, CUSPARSE_SPMM_DEFAULT, bytes);
    }
    *status_out = status;
    return status == CUSPARSE_SUCCESS ? NULL : call;
}

/* The plan for this shape, made (with the matrix's descriptor) on first
 * use; one that fails is undone before raising. */
static struct csr_plan *plan_for(lua_State *L, cusparse_handle handle, struct csr_matrix *matrix,
                                 struct gpurun_buffer *parts[3], int kind, int transpose, int n,
                                 long long ldb, long long ldc, const void *alpha,
                                 const void *beta, CUdeviceptr x, CUdeviceptr y)
{
    struct csr_plan *plan = find_plan(matrix, kind, transpose, n, ldb, ldc);
    if (plan)
        return plan;
    if (matrix->descriptor == NULL)
        make_descriptor(L, matrix, parts);
    plan = add_plan(L, matrix);
    plan->kind = kind;
    plan->transpose = transpose;
    plan->n = n;
    plan->ldb = ldb;
    plan->ldc = ldc;
    size_t bytes = 0;
    cusparse_status status;
    CUcontext previous = gpurun_enter_context(matrix->context);
    const char *failed = kind == SPMV
        ? plan_spmv(handle, matrix, plan, alpha, beta, x, y, &bytes, &status)
        : plan_spmm(handle, matrix, plan, alpha, beta, x, y, &bytes, &status);
    CUresult allocated = failed ? CUDA_SUCCESS : allocate_work(plan, bytes);
    gpurun_leave_context(previous);
    if (failed || allocated != CUDA_SUCCESS) {
        destroy_plan(matrix, plan);
        if (failed)
            raise_cusparse(L, failed, status, kind == SPMV
                           ? "planning a sparse matrix-vector product"
                           : "planning a sparse matrix-matrix product");
        gpurun_cuda_error(L, "allocating cuSPARSE's work buffer of %I bytes", (LUAI_UACINT)bytes);
    }
    matrix->plan_count++;
    return plan;
}

/* spmv(target, A, x, y, alpha, beta, transpose): y = alpha op(A) x + beta y. */
static int core_spmv(lua_State *L)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    struct gpurun_buffer *parts[3];
    lua_settop(L, 7);
    struct csr_matrix *matrix = push_matrix(L, 2, parts, capture);
    int transpose = lua_toboolean(L, 7);
    struct gpurun_buffer *x = check_dense(L, 3, matrix, transpose ? matrix->rows : matrix->cols,
                                          capture);
    struct gpurun_buffer *y = check_dense(L, 4, matrix, transpose ? matrix->cols : matrix->rows,
                                          capture);
    if (stream->device != matrix->device)
        gpurun_arg_error(L, 1, "a stream of device %d expected (the matrix's)", matrix->device);
    union scalar alpha_value, beta_value;
    const void *alpha = host_scalar(&alpha_value, matrix->dtype, gpurun_check_number(L, 5));
    const void *beta = host_scalar(&beta_value, matrix->dtype, gpurun_check_number(L, 6));
    cusparse_handle handle = device_handle(L, matrix->device, matrix->context);
    struct csr_plan *plan = plan_for(L, handle, matrix, parts, SPMV, transpose, 0, 0, 0, alpha,
                                     beta, x->pointer, y->pointer);
    keep_operands(L, capture, stream, lua_gettop(L), 3, 2);
    int type = gpurun_dtypes[matrix->dtype].library_type;
    CUcontext previous = gpurun_enter_context(matrix->context);
    const char *call = "cusparseDnVecSetValues";
    cusparse_status status = cusparse.cusparseDnVecSetValues(plan->x, (void *)x->pointer);
    if (status == CUSPARSE_SUCCESS)
        status = cusparse.cusparseDnVecSetValues(plan->y, (void *)y->pointer);
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSetStream";
        status = cusparse.cusparseSetStream(handle, (cusparse_stream)stream->handle);
    }
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSpMV";
        status = cusparse.cusparseSpMV(handle, transpose ? CUSPARSE_OP_TRANSPOSE
                                                         : CUSPARSE_OP_NON_TRANSPOSE,
                                       alpha, matrix->descriptor, plan->x, beta, plan->y, type,
                                       CUSPARSE_SPMV_DEFAULT, (void *)plan->buffer);
    }
    gpurun_leave_context(previous);
    if (status != CUSPARSE_SUCCESS)
        raise_cusparse(L, call, status, "multiplying a sparse matrix by a vector");
    return 0;
}

/* spmm(target, A, b, ldb, c, ldc, n, alpha, beta, transpose): C (m x n) =
 * alpha op(A) B + beta C, B (k x n) and C row-major. */
static int core_spmm(lua_State *L)
{
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = check_target(L, &capture);
    struct gpurun_buffer *parts[3];
    lua_settop(L, 10);
    struct csr_matrix *matrix = push_matrix(L, 2, parts, capture);
    int transpose = lua_toboolean(L, 10);
    int n = check_size(L, 7, 1);
    long long ldb = check_size(L, 4, n), ldc = check_size(L, 6, n);
    long long k = transpose ? matrix->rows : matrix->cols;
    long long m = transpose ? matrix->cols : matrix->rows;
    struct gpurun_buffer *b = check_dense(L, 3, matrix, (k - 1) * ldb + n, capture);
    struct gpurun_buffer *c = check_dense(L, 5, matrix, (m - 1) * ldc + n, capture);
    if (stream->device != matrix->device)
        gpurun_arg_error(L, 1, "a stream of device %d expected (the matrix's)", matrix->device);
    union scalar alpha_value, beta_value;
    const void *alpha = host_scalar(&alpha_value, matrix->dtype, gpurun_check_number(L, 8));
    const void *beta = host_scalar(&beta_value, matrix->dtype, gpurun_check_number(L, 9));
    cusparse_handle handle = device_handle(L, matrix->device, matrix->context);
    struct csr_plan *plan = plan_for(L, handle, matrix, parts, SPMM, transpose, n, ldb, ldc,
                                     alpha, beta, b->pointer, c->pointer);
    lua_pushvalue(L, 3);
    lua_pushvalue(L, 5);
    keep_operands(L, capture, stream, lua_gettop(L) - 2, lua_gettop(L) - 1, 2);
    int type = gpurun_dtypes[matrix->dtype].library_type;
    CUcontext previous = gpurun_enter_context(matrix->context);
    const char *call = "cusparseDnMatSetValues";
    cusparse_status status = cusparse.cusparseDnMatSetValues(plan->x, (void *)b->pointer);
    if (status == CUSPARSE_SUCCESS)
        status = cusparse.cusparseDnMatSetValues(plan->y, (void *)c->pointer);
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSetStream";
        status = cusparse.cusparseSetStream(handle, (cusparse_stream)stream->handle);
    }
    if (status == CUSPARSE_SUCCESS) {
        call = "cusparseSpMM";
        status = cusparse.cusparseSpMM(handle, transpose ? CUSPARSE_OP_TRANSPOSE
                                                         : CUSPARSE_OP_NON_TRANSPOSE,
                                       CUSPARSE_OP_NON_TRANSPOSE, alpha, matrix->descriptor,
                                       plan->x, beta, plan->y, type, CUSPARSE_SPMM_DEFAULT,
                                       (void *)plan->buffer);
    }
    gpurun_leave_context(previous);
    if (status != CUSPARSE_SUCCESS)
        raise_cusparse(L, call, status, "multiplying a sparse matrix by a dense one");
    return 0;
}

/* load() -> nil, or why cuSPARSE cannot be used. Never raises. */
static int core_load(lua_State *L)
{
    return gpurun_push_load_status(L, cusparse_loader_load, cusparse_loader_error);
}

/* plans(A) -> how many product shapes the matrix has planned (for specs:
 * a repeated call makes none). */
static int core_plans(lua_State *L)
{
    struct csr_matrix *matrix = gpurun_check_open(L, 1, &csr_matrix_tag);
    lua_pushinteger(L, matrix->plan_count);
    return 1;
}

static int csr_field(lua_State *L)
{
    struct csr_matrix *matrix = gpurun_check_open(L, 1, &csr_matrix_tag);
    const char *key = lua_tostring(L, 2);
    if (strcmp(key, "rows") == 0)
        lua_pushinteger(L, matrix->rows);
    else if (strcmp(key, "cols") == 0)
        lua_pushinteger(L, matrix->cols);
    else if (strcmp(key, "nnz") == 0)
        lua_pushinteger(L, matrix->nnz);
    else if (strcmp(key, "dtype") == 0)
        lua_pushstring(L, gpurun_dtypes[matrix->dtype].name);
    else if (strcmp(key, "device") == 0)
        lua_pushinteger(L, matrix->device);
    else if (strcmp(key, "row_offsets") == 0)
        lua_getiuservalue(L, 1, 1);
    else if (strcmp(key, "col_indices") == 0)
        lua_getiuservalue(L, 1, 2);
    else
        lua_getiuservalue(L, 1, 3);
    return 1;
}

static int csr_tostring(lua_State *L)
{
    struct csr_matrix *matrix = gpurun_check_tagged(L, 1, &csr_matrix_tag);
    if (matrix->header.closed)
        lua_pushliteral(L, "gpurun.CsrMatrix(closed)");
    else
        lua_pushfstring(L, "gpurun.CsrMatrix(%d x %d, %d nonzeros, %s)", matrix->rows,
                        matrix->cols, matrix->nnz, gpurun_dtypes[matrix->dtype].name);
    return 1;
}

/* The handles go at the state's close, before the contexts (made after
 * the runtime's state object, this is collected before it). */
static int handles_gc(lua_State *L)
{
    (void)L;
    for (int i = 0; i < GPURUN_MAX_DEVICES; i++) {
        if (handles[i].handle)
            (void)gpurun_release_after_device(destroy_handle, handles[i].handle,
                                              handles[i].context);
        handles[i].handle = NULL;
    }
    return 0;
}

static const luaL_Reg csr_methods[] = {
    {"close", csr_close},
    {NULL, NULL}
};

static const luaL_Reg csr_fields[] = {
    {"rows", csr_field},
    {"cols", csr_field},
    {"nnz", csr_field},
    {"dtype", csr_field},
    {"device", csr_field},
    {"row_offsets", csr_field},
    {"col_indices", csr_field},
    {"values", csr_field},
    {NULL, NULL}
};

static const luaL_Reg csr_metamethods[] = {
    {"__tostring", csr_tostring},
    {"__close", csr_close},
    {"__gc", csr_gc},
    {NULL, NULL}
};

static const struct gpurun_type csr_type = {
    &csr_matrix_tag, csr_methods, csr_metamethods, csr_fields, NULL,
};

static const luaL_Reg handles_metamethods[] = {
    {"__gc", handles_gc},
    {NULL, NULL}
};

static const struct gpurun_type handles_type = {
    &handles_tag, NULL, handles_metamethods, NULL, NULL,
};

/* Named as the public functions they serve, which their errors name. */
static const luaL_Reg core_functions[] = {
    {"load", core_load},
    {"csr", core_csr},
    {"spmv", core_spmv},
    {"spmm", core_spmm},
    {"plans", core_plans},
    {NULL, NULL}
};

void gpurun_open_csr_matrix(lua_State *L)
{
    gpurun_register_type(L, &csr_type);
    gpurun_register_type(L, &handles_type);
    struct gpurun_object *sentinel = gpurun_new_object(L, sizeof *sentinel, 0, &handles_tag);
    sentinel->closed = 0;
    lua_rawsetp(L, LUA_REGISTRYINDEX, &handles_tag);
    gpurun_set_core_functions(L, "gpurun.sparse_core", core_functions);
}
