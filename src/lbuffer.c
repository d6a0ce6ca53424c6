/* gpurun.Buffer: device memory holding elements of one dtype, and the
 * host-side helpers that make, fill and read it (gpurun.empty, zeros, full,
 * array). Checking one against another, gpurun.compare and allclose, is
 * lcompare.c.
 *
 * Ordering: every operation goes on gpurun_operation_stream(). With a stream
 * it is queued there, and waited for only when host memory is involved. With
 * none, the whole device is waited for before (a kernel may still be using
 * the buffer) and after (so that what follows sees the result).
 *
 * Host memory is always a Lua userdata (gpurun_push_staging), never malloc:
 * an error raised halfway leaves nothing behind. Elements are converted in C;
 * the large paths (fill, compare, the generator) call no Lua per element. */
#include "lbuffer.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

struct buffer_object {
    struct gpurun_buffer buffer;  /* first: the launch path reads it via lua_touserdata */
    CUcontext context;            /* where the memory lives, and is freed */
    int device;
};

const struct gpurun_dtype_info gpurun_dtypes[GPURUN_DTYPE_COUNT] = {
    [GPURUN_FLOAT32] = {"float32", 4, GPURUN_KIND_FLOAT, 0, 0, 0, 0, NULL},
    [GPURUN_FLOAT64] = {"float64", 8, GPURUN_KIND_FLOAT, 0, 0, 0, 0, NULL},
    [GPURUN_INT32] = {"int32", 4, GPURUN_KIND_SIGNED, INT32_MIN, INT32_MAX, -0x1p31, 0x1p31,
                      "-2147483648..2147483647"},
    [GPURUN_UINT32] = {"uint32", 4, GPURUN_KIND_UNSIGNED, 0, UINT32_MAX, 0, 0x1p32,
                       "0..4294967295"},
    [GPURUN_INT64] = {"int64", 8, GPURUN_KIND_SIGNED, LUA_MININTEGER, LUA_MAXINTEGER, -0x1p63,
                      0x1p63, "-9223372036854775808..9223372036854775807"},
    [GPURUN_UINT64] = {"uint64", 8, GPURUN_KIND_UNSIGNED, 0, LUA_MAXINTEGER, 0, 0x1p64,
                       "0..18446744073709551615"},
    [GPURUN_INT8] = {"int8", 1, GPURUN_KIND_SIGNED, INT8_MIN, INT8_MAX, -0x1p7, 0x1p7,
                     "-128..127"},
    [GPURUN_UINT8] = {"uint8", 1, GPURUN_KIND_UNSIGNED, 0, UINT8_MAX, 0, 0x1p8, "0..255"},
};

/* The smallest magnitude that rounds to infinity as a float32: FLT_MAX plus
 * half an ulp. Anything below it rounds to a finite float32. */
#define FLOAT32_OVERFLOW 0x1.ffffffp127

/* ---- errors ------------------------------------------------------------- */

static int is_capture_error(CUresult result)
{
    return result == CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED
        || result == CUDA_ERROR_STREAM_CAPTURE_INVALIDATED
        || result == CUDA_ERROR_STREAM_CAPTURE_IMPLICIT
        || result == CUDA_ERROR_STREAM_CAPTURE_ISOLATION
        || result == CUDA_ERROR_STREAM_CAPTURE_MERGE
        || result == CUDA_ERROR_STREAM_CAPTURE_UNMATCHED
        || result == CUDA_ERROR_STREAM_CAPTURE_UNJOINED
        || result == CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD;
}

/* gpurun_cuda_error, except that a call refused because a graph is being
 * captured has already broken that capture: end it, so the stream stays
 * usable, and say what to do instead. */
static int raise_cuda_error(lua_State *L, const char *what_fmt, ...)
{
    char what[256];
    va_list args;
    va_start(args, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, args);
    va_end(args);
    if (is_capture_error(cuda_last_failed_result)) {
        gpurun_abort_captures(L);
        return gpurun_cuda_error(L, "%s during a graph capture; the capture was abandoned "
                                    "(make, fill and read buffers before begin_building or "
                                    "after end_building)", what);
    }
    return gpurun_cuda_error(L, "%s", what);
}

static const char *format_size(char *text, size_t size, size_t bytes)
{
    static const char *const units[] = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (bytes < 1024) {
        snprintf(text, size, "%zu bytes", bytes);
        return text;
    }
    double scaled = (double)bytes / 1024;
    size_t unit = 0;
    while (scaled >= 1024 && unit + 1 < sizeof units / sizeof units[0]) {
        scaled /= 1024;
        unit++;
    }
    snprintf(text, size, "%.2f %s", scaled, units[unit]);
    return text;
}

/* ---- arguments ---------------------------------------------------------- */

int gpurun_check_dtype(lua_State *L, int arg, int default_dtype)
{
    if (lua_isnoneornil(L, arg))
        return default_dtype;
    if (lua_type(L, arg) != LUA_TSTRING)
        luaL_typeerror(L, arg, "dtype name");
    const char *name = lua_tostring(L, arg);
    for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++)
        if (strcmp(name, gpurun_dtypes[dtype].name) == 0)
            return dtype;
    luaL_Buffer message;
    luaL_buffinit(L, &message);
    luaL_addstring(&message, "unknown dtype '");
    luaL_addstring(&message, name);
    luaL_addstring(&message, "' (expected one of: ");
    for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++) {
        luaL_addstring(&message, gpurun_dtypes[dtype].name);
        luaL_addstring(&message, dtype + 1 < GPURUN_DTYPE_COUNT ? ", " : ")");
    }
    luaL_pushresult(&message);
    return luaL_argerror(L, arg, lua_tostring(L, -1));
}

size_t gpurun_check_count(lua_State *L, int arg)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_typeerror(L, arg, "positive element count");
    int exact = 0;
    lua_Integer count = lua_tointegerx(L, arg, &exact);
    if (!exact) {
        double value = lua_tonumber(L, arg);
        if (value > 0 && value == floor(value))
            luaL_argerror(L, arg, lua_pushfstring(L, "element count %s too large",
                                                  luaL_tolstring(L, arg, NULL)));
    }
    if (!exact || count <= 0)
        luaL_argerror(L, arg, lua_pushfstring(L, "positive element count expected, got %s",
                                              luaL_tolstring(L, arg, NULL)));
    return (size_t)count;
}

/* Converts the number at idx to one element of dtype at out. Returns NULL,
 * or pushes and returns why the value does not fit. */
static const char *to_element(lua_State *L, int idx, int dtype, void *out)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (lua_type(L, idx) != LUA_TNUMBER)
        return lua_pushfstring(L, "number expected, got %s", luaL_typename(L, idx));
    if (info->kind == GPURUN_KIND_FLOAT) {
        double value = lua_tonumber(L, idx);
        if (dtype == GPURUN_FLOAT64) {
            memcpy(out, &value, sizeof value);
            return NULL;
        }
        if (isfinite(value) && fabs(value) >= FLOAT32_OVERFLOW)
            return lua_pushfstring(L, "%s out of range for float32",
                                   luaL_tolstring(L, idx, NULL));
        float single;
        if (isfinite(value) && fabs(value) > FLT_MAX)
            single = value > 0 ? FLT_MAX : -FLT_MAX; /* where it rounds; a cast is undefined */
        else
            single = (float)value;
        memcpy(out, &single, sizeof single);
        return NULL;
    }

    uint64_t bits; /* two's complement; the store keeps the low bytes */
    if (lua_isinteger(L, idx)) {
        lua_Integer value = lua_tointeger(L, idx);
        if (value < info->min || value > info->max)
            return lua_pushfstring(L, "%I out of range for %s (%s)", (LUAI_UACINT)value,
                                   info->name, info->range);
        bits = (uint64_t)value;
    } else {
        double value = lua_tonumber(L, idx);
        if (value != floor(value))
            return lua_pushfstring(L, "integer expected for %s, got %s", info->name,
                                   luaL_tolstring(L, idx, NULL));
        if (!(value >= info->float_low && value < info->float_high))
            return lua_pushfstring(L, "%s out of range for %s (%s)",
                                   luaL_tolstring(L, idx, NULL), info->name, info->range);
        bits = value < 0 ? (uint64_t)(int64_t)value : (uint64_t)value;
    }
    switch (info->size) {
    case 1: { uint8_t narrow = (uint8_t)bits; memcpy(out, &narrow, 1); break; }
    case 4: { uint32_t narrow = (uint32_t)bits; memcpy(out, &narrow, 4); break; }
    default: memcpy(out, &bits, 8); break;
    }
    return NULL;
}

/* The number argument at arg as one element of dtype at out, or a "bad
 * argument" error saying why it does not fit. */
static void check_element(lua_State *L, int arg, int dtype, void *out)
{
    const char *why = to_element(L, arg, dtype, out);
    if (why)
        luaL_argerror(L, arg, why);
}

static void push_element(lua_State *L, int dtype, const unsigned char *p)
{
    switch (dtype) {
    case GPURUN_FLOAT32: { float v; memcpy(&v, p, sizeof v); lua_pushnumber(L, v); break; }
    case GPURUN_FLOAT64: { double v; memcpy(&v, p, sizeof v); lua_pushnumber(L, v); break; }
    case GPURUN_INT32: { int32_t v; memcpy(&v, p, sizeof v); lua_pushinteger(L, v); break; }
    case GPURUN_UINT32: { uint32_t v; memcpy(&v, p, sizeof v); lua_pushinteger(L, v); break; }
    case GPURUN_INT64: { int64_t v; memcpy(&v, p, sizeof v); lua_pushinteger(L, v); break; }
    case GPURUN_UINT64: {
        /* Lua has no integer above LUA_MAXINTEGER: those come back as floats. */
        uint64_t v;
        memcpy(&v, p, sizeof v);
        if (v <= (uint64_t)LUA_MAXINTEGER)
            lua_pushinteger(L, (lua_Integer)v);
        else
            lua_pushnumber(L, (lua_Number)v);
        break;
    }
    case GPURUN_INT8: lua_pushinteger(L, (int8_t)p[0]); break;
    default: lua_pushinteger(L, p[0]); break;
    }
}

void *gpurun_push_staging(lua_State *L, size_t bytes)
{
    return lua_newuserdatauv(L, bytes, 0);
}

/* Index one past the arguments: "no stream argument" for
 * gpurun_operation_stream, which then gives the current stream. */
static int no_stream_argument(lua_State *L)
{
    luaL_checkstack(L, 1, NULL);
    return lua_gettop(L) + 1;
}

/* ---- the buffer object -------------------------------------------------- */

/* gpurun_test_buffer returns closed buffers too: callers check ->closed. */
struct gpurun_buffer *gpurun_test_buffer(lua_State *L, int index)
{
    return luaL_testudata(L, index, GPURUN_BUFFER);
}

struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = luaL_checkudata(L, index, GPURUN_BUFFER);
    if (buffer->closed)
        gpurun_closed_error(L, GPURUN_BUFFER);
    return buffer;
}

/* Open, and on the current device: a copy or a fill on another device's
 * memory would need its context. */
struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index)
{
    struct buffer_object *object = (struct buffer_object *)gpurun_check_buffer(L, index);
    if (object->context != gpurun_runtime.current_context) {
        if (gpurun_runtime.current_device < 0)
            luaL_error(L, "gpurun.Buffer lives on device %d but no device is current; call "
                          "gpurun.Device(%d):set_current() first", object->device, object->device);
        luaL_error(L, "gpurun.Buffer lives on device %d but device %d is current; call "
                      "gpurun.Device(%d):set_current() first", object->device,
                   gpurun_runtime.current_device, object->device);
    }
    return &object->buffer;
}

/* Memory freed while a graph is being captured would break the capture
 * (cuMemFree is not allowed then), so a buffer collected or closed during a
 * capture is freed after it. A full list frees at once rather than leak. */
#define MAX_PENDING_FREES 1024
static struct {
    CUdeviceptr pointer;
    CUcontext context;
} pending_frees[MAX_PENDING_FREES];
static size_t pending_free_count;

static CUresult free_in_context(CUdeviceptr pointer, CUcontext context)
{
    CUcontext current = gpurun_runtime.current_context;
    /* No current context means the runtime has been closed at exit, and
     * releasing the primary contexts freed everything in them. */
    if (current == NULL)
        return CUDA_SUCCESS;
    if (context == current)
        return CUDA_CALL(cuMemFree, pointer);
    CUresult result = CUDA_CALL(cuCtxSetCurrent, context);
    if (result == CUDA_SUCCESS)
        result = CUDA_CALL(cuMemFree, pointer);
    CUresult restored = CUDA_CALL(cuCtxSetCurrent, current);
    return result != CUDA_SUCCESS ? result : restored;
}

static void flush_pending_frees(void)
{
    while (pending_free_count > 0) {
        pending_free_count--;
        /* Nobody is left to tell about a failure here. */
        (void)free_in_context(pending_frees[pending_free_count].pointer,
                              pending_frees[pending_free_count].context);
    }
}

static CUresult release_memory(CUdeviceptr pointer, CUcontext context)
{
    if (gpurun_capture_in_progress()) {
        if (pending_free_count < MAX_PENDING_FREES) {
            pending_frees[pending_free_count].pointer = pointer;
            pending_frees[pending_free_count].context = context;
            pending_free_count++;
            return CUDA_SUCCESS;
        }
        return free_in_context(pointer, context);
    }
    flush_pending_frees();
    return free_in_context(pointer, context);
}

/* The one close. An explicit close (:close(), __close) is refused while a
 * graph uses the buffer; the collector frees regardless, since a graph keeps
 * its buffers alive: one being collected is used by none. */
static int close_buffer(lua_State *L, int explicit)
{
    struct buffer_object *object = luaL_checkudata(L, 1, GPURUN_BUFFER);
    struct gpurun_buffer *buffer = &object->buffer;
    if (buffer->closed)
        return 0;
    if (explicit && buffer->graph_users > 0)
        return luaL_error(L, "gpurun.Buffer is used by %d graph(s) or graph builder(s); close "
                             "them first",
                          buffer->graph_users);
    CUdeviceptr pointer = buffer->pointer;
    buffer->closed = 1;
    buffer->pointer = 0;
    /* After a kernel fault the memory went with the context; raising here
     * (often from __close, on the way out of that very fault) would only
     * replace the fault's message with a less useful one. */
    if (release_memory(pointer, object->context) != CUDA_SUCCESS && explicit
        && !cuda_error_is_sticky(cuda_last_failed_result))
        raise_cuda_error(L, "freeing a gpurun.Buffer");
    return 0;
}

static int buffer_close(lua_State *L)
{
    return close_buffer(L, 1);
}

static int buffer_gc(lua_State *L)
{
    return close_buffer(L, 0);
}

struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype,
                                             int count_arg)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (count > SIZE_MAX / info->size)
        luaL_argerror(L, count_arg,
                      lua_pushfstring(L, "element count %I too large for %s (the byte size "
                                         "overflows size_t)", (LUAI_UACINT)count, info->name));
    CUcontext context = gpurun_require_context(L);
    if (gpurun_capture_in_progress()) {
        gpurun_abort_captures(L);
        luaL_error(L, "cannot allocate a gpurun.Buffer while a graph is being built "
                      "(allocate before begin_building); capture abandoned");
    }
    flush_pending_frees();

    struct buffer_object *object = lua_newuserdatauv(L, sizeof *object, 0);
    memset(object, 0, sizeof *object);
    object->buffer.tag = &gpurun_tag_buffer;
    object->buffer.count = count;
    object->buffer.element_size = info->size;
    object->buffer.dtype = dtype;
    object->buffer.closed = 1; /* until allocated: a failed allocation frees nothing */
    object->context = context;
    object->device = gpurun_runtime.current_device;
    luaL_setmetatable(L, GPURUN_BUFFER);

    size_t bytes = count * info->size;
    if (CUDA_CALL(cuMemAlloc, &object->buffer.pointer, bytes) != CUDA_SUCCESS) {
        char size_text[32];
        object->buffer.pointer = 0;
        raise_cuda_error(L, "allocating %s for %zu %s elements",
                         format_size(size_text, sizeof size_text, bytes), count, info->name);
    }
    object->buffer.closed = 0;
    return &object->buffer;
}

/* ---- ordering and transfers --------------------------------------------- */

/* The stream an operation goes on, after checking that it is not being
 * captured (the capture would keep neither host memory nor the buffer) and,
 * with no stream, waiting for the whole device. */
static CUstream begin_operation(lua_State *L, int stream_index, const char *operation)
{
    CUstream stream = gpurun_operation_stream(L, stream_index);
    if (stream != NULL) {
        CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
        if (CUDA_CALL(cuStreamIsCapturing, stream, &status) != CUDA_SUCCESS)
            raise_cuda_error(L, "asking whether the stream is being captured");
        if (status != CU_STREAM_CAPTURE_STATUS_NONE) {
            /* As everywhere in gpurun, an error raised mid-capture ends the
             * capture, so the script's streams stay usable. */
            gpurun_abort_captures(L);
            luaL_error(L, "%s: the stream is being captured into a graph, and buffer "
                          "operations are not captured (do them before begin_building or "
                          "after end_building); capture abandoned", operation);
        }
    } else if (CUDA_CALL(cuCtxSynchronize) != CUDA_SUCCESS) {
        raise_cuda_error(L, "waiting for the device before %s", operation);
    }
    return stream;
}

static void end_operation(lua_State *L, CUstream stream, const char *operation)
{
    if (stream == NULL && CUDA_CALL(cuCtxSynchronize) != CUDA_SUCCESS)
        raise_cuda_error(L, "waiting for %s to finish", operation);
}

/* Both return once the copy is complete, so the host memory can be reused
 * or dropped. */
void gpurun_write_elements(lua_State *L, struct gpurun_buffer *buffer, size_t first,
                           size_t count, const void *host, CUstream stream)
{
    size_t size = buffer->element_size;
    if (CUDA_CALL(cuMemcpyHtoDAsync, buffer->pointer + first * size, host, count * size,
                  stream) != CUDA_SUCCESS)
        raise_cuda_error(L, "copying to a gpurun.Buffer");
    if (CUDA_CALL(cuStreamSynchronize, stream) != CUDA_SUCCESS)
        raise_cuda_error(L, "waiting for a copy to a gpurun.Buffer");
}

void gpurun_read_elements(lua_State *L, const struct gpurun_buffer *buffer, size_t first,
                          size_t count, void *host, CUstream stream)
{
    size_t size = buffer->element_size;
    if (CUDA_CALL(cuMemcpyDtoHAsync, host, buffer->pointer + first * size, count * size,
                  stream) != CUDA_SUCCESS)
        raise_cuda_error(L, "copying from a gpurun.Buffer");
    if (CUDA_CALL(cuStreamSynchronize, stream) != CUDA_SUCCESS)
        raise_cuda_error(L, "waiting for a copy from a gpurun.Buffer");
}

CUstream gpurun_begin_host_transfer(lua_State *L, const char *operation)
{
    return begin_operation(L, no_stream_argument(L), operation);
}

void gpurun_end_host_transfer(lua_State *L, CUstream stream, const char *operation)
{
    end_operation(L, stream, operation);
}

/* cuMemsetD32 cannot repeat an 8-byte pattern: write a few copies from the
 * host, then double the filled prefix with device-to-device copies. */
static void fill_by_doubling(lua_State *L, struct gpurun_buffer *buffer,
                             const unsigned char *pattern, CUstream stream)
{
    unsigned char seed[4096];
    size_t size = buffer->element_size;
    size_t filled = sizeof seed / size < buffer->count ? sizeof seed / size : buffer->count;
    for (size_t i = 0; i < filled; i++)
        memcpy(seed + i * size, pattern, size);
    gpurun_write_elements(L, buffer, 0, filled, seed, stream);
    while (filled < buffer->count) {
        size_t n = buffer->count - filled < filled ? buffer->count - filled : filled;
        if (CUDA_CALL(cuMemcpyDtoDAsync, buffer->pointer + filled * size, buffer->pointer,
                      n * size, stream) != CUDA_SUCCESS)
            raise_cuda_error(L, "filling a gpurun.Buffer");
        filled += n;
    }
}

static void fill_elements(lua_State *L, struct gpurun_buffer *buffer,
                          const unsigned char *pattern, int stream_index, const char *operation)
{
    CUstream stream = begin_operation(L, stream_index, operation);
    size_t n = buffer->count;
    switch (buffer->element_size) {
    case 1:
        if (CUDA_CALL(cuMemsetD8Async, buffer->pointer, pattern[0], n, stream) != CUDA_SUCCESS)
            raise_cuda_error(L, "filling a gpurun.Buffer");
        break;
    case 4: {
        unsigned int word;
        memcpy(&word, pattern, sizeof word);
        if (CUDA_CALL(cuMemsetD32Async, buffer->pointer, word, n, stream) != CUDA_SUCCESS)
            raise_cuda_error(L, "filling a gpurun.Buffer");
        break;
    }
    default: {
        unsigned int halves[2];
        memcpy(halves, pattern, sizeof halves);
        if (halves[0] != halves[1])
            fill_by_doubling(L, buffer, pattern, stream);
        else if (CUDA_CALL(cuMemsetD32Async, buffer->pointer, halves[0], 2 * n, stream)
                 != CUDA_SUCCESS)
            raise_cuda_error(L, "filling a gpurun.Buffer");
        break;
    }
    }
    end_operation(L, stream, operation);
}

/* The sequence at table_index as elements in new staging memory (pushed),
 * every element checked before any device work. */
static unsigned char *stage_table(lua_State *L, int table_index, int arg, size_t count,
                                  int dtype)
{
    table_index = lua_absindex(L, table_index);
    size_t size = gpurun_dtypes[dtype].size;
    unsigned char *host = gpurun_push_staging(L, count * size);
    for (size_t i = 0; i < count; i++) {
        lua_rawgeti(L, table_index, (lua_Integer)i + 1);
        const char *why = to_element(L, -1, dtype, host + i * size);
        if (why)
            luaL_argerror(L, arg, lua_pushfstring(L, "element %I: %s", (LUAI_UACINT)(i + 1), why));
        lua_pop(L, 1);
    }
    return host;
}

static void write_table(lua_State *L, struct gpurun_buffer *buffer, int table_index,
                        int stream_index, const char *operation)
{
    size_t count = lua_rawlen(L, table_index);
    if (count != buffer->count)
        luaL_argerror(L, table_index,
                      lua_pushfstring(L, "table of %I elements expected, got %I",
                                      (LUAI_UACINT)buffer->count, (LUAI_UACINT)count));
    const unsigned char *host = stage_table(L, table_index, table_index, count, buffer->dtype);
    CUstream stream = begin_operation(L, stream_index, operation);
    gpurun_write_elements(L, buffer, 0, count, host, stream);
    end_operation(L, stream, operation);
}

/* Copies between the buffer at 1 (self) and the one at 2, in the direction
 * given; they must match in count and dtype. */
static void copy_buffer(lua_State *L, struct gpurun_buffer *self, struct gpurun_buffer *other,
                        int self_is_destination, int stream_index, const char *operation)
{
    if (other->count != self->count || other->dtype != self->dtype)
        luaL_argerror(L, 2, lua_pushfstring(L, "gpurun.Buffer of %I %s elements expected, "
                                               "got %I %s elements",
                                            (LUAI_UACINT)self->count,
                                            gpurun_dtypes[self->dtype].name,
                                            (LUAI_UACINT)other->count,
                                            gpurun_dtypes[other->dtype].name));
    const struct gpurun_buffer *source = self_is_destination ? other : self;
    const struct gpurun_buffer *destination = self_is_destination ? self : other;
    CUstream stream = begin_operation(L, stream_index, operation);
    if (CUDA_CALL(cuMemcpyDtoDAsync, destination->pointer, source->pointer,
                  source->count * source->element_size, stream) != CUDA_SUCCESS)
        raise_cuda_error(L, "copying between gpurun.Buffers");
    end_operation(L, stream, operation);
}

/* A 1-based element index at arg, returned 0-based. */
static size_t check_index(lua_State *L, const struct gpurun_buffer *buffer, int arg,
                          const char *operation)
{
    int exact = 0;
    lua_Integer index = lua_tointegerx(L, arg, &exact);
    if (lua_type(L, arg) != LUA_TNUMBER || !exact)
        luaL_error(L, "%s: integer index expected, got %s", operation,
                   lua_type(L, arg) == LUA_TNUMBER ? luaL_tolstring(L, arg, NULL)
                                                  : luaL_typename(L, arg));
    if (index < 1 || (lua_Unsigned)index > buffer->count)
        luaL_error(L, "%s: index %I out of range (1..%I)", operation, (LUAI_UACINT)index,
                   (LUAI_UACINT)buffer->count);
    return (size_t)index - 1;
}

static int read_one(lua_State *L, struct gpurun_buffer *buffer, size_t index, int stream_index,
                    const char *operation)
{
    unsigned char value[8];
    CUstream stream = begin_operation(L, stream_index, operation);
    gpurun_read_elements(L, buffer, index, 1, value, stream);
    end_operation(L, stream, operation);
    push_element(L, buffer->dtype, value);
    return 1;
}

/* ---- methods ------------------------------------------------------------ */

/* fill(value [, stream]) -> self */
static int buffer_fill(lua_State *L)
{
    lua_settop(L, 3); /* staging pushed later must not pass for a stream argument */
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    unsigned char pattern[8];
    check_element(L, 2, buffer->dtype, pattern);
    fill_elements(L, buffer, pattern, 3, "Buffer:fill");
    lua_settop(L, 1);
    return 1;
}

/* copy_from(table | Buffer [, stream]) -> self */
static int buffer_copy_from(lua_State *L)
{
    lua_settop(L, 3);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    if (gpurun_test_buffer(L, 2))
        copy_buffer(L, buffer, gpurun_check_live_buffer(L, 2), 1, 3, "Buffer:copy_from");
    else if (lua_type(L, 2) == LUA_TTABLE)
        write_table(L, buffer, 2, 3, "Buffer:copy_from");
    else
        luaL_typeerror(L, 2, "table or gpurun.Buffer");
    lua_settop(L, 1);
    return 1;
}

/* copy_to(Buffer [, stream]) -> self */
static int buffer_copy_to(lua_State *L)
{
    lua_settop(L, 3);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    luaL_checkudata(L, 2, GPURUN_BUFFER);
    copy_buffer(L, buffer, gpurun_check_live_buffer(L, 2), 0, 3, "Buffer:copy_to");
    lua_settop(L, 1);
    return 1;
}

/* to_table([stream]) -> sequence: integers for integer dtypes, floats for
 * float dtypes. */
static int buffer_to_table(lua_State *L)
{
    lua_settop(L, 2);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    if (buffer->count > INT_MAX)
        return luaL_error(L, "Buffer:to_table: %I elements are too many for a Lua table",
                          (LUAI_UACINT)buffer->count);
    /* Staging first: the allocation can run finalizers, which must not find
     * a stream already taken for this copy. */
    unsigned char *host = gpurun_push_staging(L, buffer->count * buffer->element_size);
    buffer = gpurun_check_live_buffer(L, 1);
    CUstream stream = begin_operation(L, 2, "Buffer:to_table");
    gpurun_read_elements(L, buffer, 0, buffer->count, host, stream);
    end_operation(L, stream, "Buffer:to_table");
    lua_createtable(L, (int)buffer->count, 0);
    for (size_t i = 0; i < buffer->count; i++) {
        push_element(L, buffer->dtype, host + i * buffer->element_size);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* get(i [, stream]) -> element i (1-based) */
static int buffer_get(lua_State *L)
{
    lua_settop(L, 3);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = check_index(L, buffer, 2, "Buffer:get");
    return read_one(L, buffer, index, 3, "Buffer:get");
}

/* set(i, value [, stream]) -> self */
static int buffer_set(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = check_index(L, buffer, 2, "Buffer:set");
    unsigned char value[8];
    check_element(L, 3, buffer->dtype, value);
    CUstream stream = begin_operation(L, 4, "Buffer:set");
    gpurun_write_elements(L, buffer, index, 1, value, stream);
    end_operation(L, stream, "Buffer:set");
    lua_settop(L, 1);
    return 1;
}

/* Methods first (so close() works on a closed buffer), then buf[i] and the
 * fields dtype, size, nbytes, ptr, device. */
static int buffer_index(lua_State *L)
{
    if (gpurun_push_method(L, GPURUN_BUFFER))
        return 1;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        lua_settop(L, 2);
        struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
        size_t index = check_index(L, buffer, 2, "gpurun.Buffer[i]");
        return read_one(L, buffer, index, 3, "gpurun.Buffer[i]");
    }
    struct buffer_object *object = (struct buffer_object *)gpurun_check_buffer(L, 1);
    const struct gpurun_buffer *buffer = &object->buffer;
    const char *key = lua_type(L, 2) == LUA_TSTRING ? lua_tostring(L, 2) : "";
    if (strcmp(key, "dtype") == 0)
        lua_pushstring(L, gpurun_dtypes[buffer->dtype].name);
    else if (strcmp(key, "size") == 0)
        lua_pushinteger(L, (lua_Integer)buffer->count);
    else if (strcmp(key, "nbytes") == 0)
        lua_pushinteger(L, (lua_Integer)(buffer->count * buffer->element_size));
    else if (strcmp(key, "ptr") == 0)
        lua_pushinteger(L, (lua_Integer)buffer->pointer);
    else if (strcmp(key, "device") == 0)
        lua_pushinteger(L, object->device);
    else
        lua_pushnil(L);
    return 1;
}

static int buffer_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gpurun_check_buffer(L, 1)->count);
    return 1;
}

static int buffer_tostring(lua_State *L)
{
    struct gpurun_buffer *buffer = luaL_checkudata(L, 1, GPURUN_BUFFER);
    if (buffer->closed)
        lua_pushliteral(L, "gpurun.Buffer(closed)");
    else
        lua_pushfstring(L, "gpurun.Buffer(%s, %I)", gpurun_dtypes[buffer->dtype].name,
                        (LUAI_UACINT)buffer->count);
    return 1;
}

/* ---- constructors ------------------------------------------------------- */

/* empty(n [, dtype]): contents undefined. */
static int module_empty(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    gpurun_push_new_buffer(L, count, dtype, 1);
    return 1;
}

static int module_zeros(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    static const unsigned char zero[8];
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, dtype, 1);
    fill_elements(L, buffer, zero, no_stream_argument(L), "gpurun.zeros");
    return 1;
}

/* full(n, value [, dtype]) */
static int module_full(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 3, GPURUN_FLOAT32);
    unsigned char pattern[8];
    check_element(L, 2, dtype, pattern);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, dtype, 1);
    fill_elements(L, buffer, pattern, no_stream_argument(L), "gpurun.full");
    return 1;
}

/* array(sequence [, dtype]): every element is checked before allocating. */
static int module_array(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 2);
    size_t count = lua_rawlen(L, 1);
    if (count == 0)
        luaL_argerror(L, 1, "non-empty sequence expected, got an empty table");
    const unsigned char *host = stage_table(L, 1, 1, count, dtype);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, dtype, 1);
    CUstream stream = begin_operation(L, no_stream_argument(L), "gpurun.array");
    gpurun_write_elements(L, buffer, 0, count, host, stream);
    end_operation(L, stream, "gpurun.array");
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg buffer_meth[] = {
    {"fill", buffer_fill},
    {"copy_from", buffer_copy_from},
    {"copy_to", buffer_copy_to},
    {"to_table", buffer_to_table},
    {"get", buffer_get},
    {"set", buffer_set},
    {"close", buffer_close},
    {NULL, NULL}
};

static const luaL_Reg buffer_metameth[] = {
    {"__index", buffer_index},
    {"__len", buffer_len},
    {"__tostring", buffer_tostring},
    {"__close", buffer_close},
    {"__gc", buffer_gc},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"empty", module_empty},
    {"zeros", module_zeros},
    {"full", module_full},
    {"array", module_array},
    {NULL, NULL}
};

void gpurun_open_buffer(lua_State *L)
{
    gpurun_new_type(L, GPURUN_BUFFER, buffer_meth, buffer_metameth);
    lua_pop(L, 1);
    luaL_setfuncs(L, module_functions, 0);
    gpurun_open_compare(L);
    gpurun_open_rng(L);
}
