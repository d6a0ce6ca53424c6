/* gpurun.PinnedBuffer: page-locked host memory (cuMemHostAlloc), made by
 * gpurun.pinned(n, dtype), with element access, tables and bytes in and
 * out. Copies between it and device buffers are Buffer's
 * (types/buffer/buffer.c): they are queued on a stream and return at once,
 * so this file keeps the event of the last queued copy, and everything that
 * touches the memory from the host (element access, tables, bytes,
 * freeing) waits for it first. */
#include "types/buffer/pinned_buffer.h"

#include <string.h>

const struct gpurun_tag gpurun_pinned_tag = {"gpurun.PinnedBuffer"};

struct gpurun_pinned *gpurun_check_pinned(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_pinned_tag);
}

void gpurun_wait_direct_access(lua_State *L, CUcontext context, const char *what)
{
    if (gpurun_wait_device(L, context, what) != CUDA_SUCCESS)
        gpurun_cuda_error(L, "waiting for the device's work before %s", what);
}

void gpurun_pinned_wait(lua_State *L, struct gpurun_pinned *pinned)
{
    if (pinned->kernel_context)
        gpurun_wait_direct_access(L, pinned->kernel_context,
                                  "touching a mapped gpurun.PinnedBuffer from the host");
    if (!pinned->copy_pending)
        return;
    gpurun_wait_event(L, pinned->last_copy,
                      "waiting for the copies queued on a gpurun.PinnedBuffer");
    pinned->copy_pending = 0;
}

void gpurun_pinned_prepare(lua_State *L, struct gpurun_pinned *pinned)
{
    CUcontext context = gpurun_runtime.current_context;
    if (pinned->last_copy && pinned->event_context != context) {
        gpurun_pinned_wait(L, pinned); /* another device's copies */
        (void)CUDA_CALL(cuEventDestroy, pinned->last_copy);
        pinned->last_copy = NULL;
    }
    if (pinned->last_copy == NULL) {
        CHECK_CUDA(L, "creating an event for a gpurun.PinnedBuffer", cuEventCreate,
                   &pinned->last_copy, CU_EVENT_DISABLE_TIMING);
        pinned->event_context = context;
    }
}

void gpurun_pinned_queued(lua_State *L, struct gpurun_pinned *pinned, CUstream stream)
{
    /* Copies already queued on another stream: the new record waits for
     * them too (without holding back the copy just queued); on the same
     * stream, its order does. (A stream closed with copies in flight whose
     * handle a new stream reuses would pass for the same one: the copies
     * of a closed stream are the script's to wait for.) */
    if (pinned->copy_pending && pinned->last_stream != stream)
        CHECK_CUDA(L, "ordering the copies of a gpurun.PinnedBuffer", cuStreamWaitEvent, stream,
                   pinned->last_copy, 0);
    CHECK_CUDA(L, "recording the copy of a gpurun.PinnedBuffer", cuEventRecord, pinned->last_copy,
               stream);
    pinned->last_stream = stream;
    pinned->copy_pending = 1;
}

struct gpurun_pinned *gpurun_push_new_pinned(lua_State *L, size_t count, int dtype, int count_arg,
                                             int mapped)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (count > SIZE_MAX / info->size)
        gpurun_arg_error(L, count_arg, "element count %I too large for %s (the byte size "
                                       "overflows size_t)", (LUAI_UACINT)count, info->name);
    gpurun_require_context(L);
    if (gpurun_capture_in_progress())
        gpurun_error(L, "cannot allocate a gpurun.PinnedBuffer while a graph is being built "
                        "(allocate before begin_building); capture abandoned");
    gpurun_flush_frees();
    struct gpurun_pinned *pinned = gpurun_new_object(L, sizeof *pinned, 0, &gpurun_pinned_tag);
    pinned->count = count;
    pinned->element_size = info->size;
    pinned->dtype = dtype;
    size_t bytes = count * info->size;
    void *host = NULL;
    /* Portable: pinned for every context, so any device copies at full
     * speed; mapped: and in every context's address space. */
    unsigned int flags = CU_MEMHOSTALLOC_PORTABLE | (mapped ? CU_MEMHOSTALLOC_DEVICEMAP : 0);
    if (CUDA_CALL(cuMemHostAlloc, &host, bytes, flags) != CUDA_SUCCESS) {
        char size_text[32];
        gpurun_cuda_error(L, "allocating %s of %spage-locked host memory for %I %s elements",
                          gpurun_format_size(size_text, sizeof size_text, bytes),
                          mapped ? "mapped " : "", (LUAI_UACINT)count, info->name);
    }
    pinned->host = host;
    if (mapped && CUDA_CALL(cuMemHostGetDevicePointer, &pinned->device_pointer, host, 0)
                      != CUDA_SUCCESS) {
        (void)gpurun_free_host_memory(host, NULL, NULL);
        pinned->host = NULL;
        gpurun_cuda_error(L, "mapping a gpurun.PinnedBuffer into the device's address space");
    }
    pinned->header.closed = 0;
    return pinned;
}

/* The one close, as a Buffer's: refused while a graph uses the memory
 * (explicit closes only; one being collected is used by none). */
static int close_pinned(lua_State *L, int explicit)
{
    struct gpurun_pinned *pinned = gpurun_check_tagged(L, 1, &gpurun_pinned_tag);
    if (pinned->header.closed)
        return 0;
    if (explicit && pinned->header.graph_users > 0)
        return gpurun_error(L, "gpurun.PinnedBuffer is used by %d graph(s) or graph builder(s); "
                               "close them first", pinned->header.graph_users);
    void *host = pinned->host;
    CUevent last_copy = pinned->last_copy;
    CUcontext kernel_context = pinned->kernel_context; /* a kernel may still reach it */
    pinned->header.closed = 1;
    pinned->host = NULL;
    pinned->last_copy = NULL;
    pinned->copy_pending = 0;
    pinned->device_pointer = 0;
    pinned->kernel_context = NULL;
    if (gpurun_free_host_memory(host, last_copy, kernel_context) != CUDA_SUCCESS && explicit
        && !cuda_error_is_sticky(cuda_last_failed_result))
        gpurun_cuda_error(L, "freeing a gpurun.PinnedBuffer");
    return 0;
}

static int pinned_close(lua_State *L)
{
    return close_pinned(L, 1);
}

static int pinned_gc(lua_State *L)
{
    return close_pinned(L, 0);
}

/* ---- host access: each waits for the copies queued on the memory -------- */

/* The open PinnedBuffer at 1, its queued copies done. */
static struct gpurun_pinned *check_ready(lua_State *L)
{
    gpurun_pinned_wait(L, gpurun_check_pinned(L, 1));
    /* The wait runs the host callbacks the driver reached, which may have
     * closed it. */
    return gpurun_check_pinned(L, 1);
}

static unsigned char *element(const struct gpurun_pinned *pinned, size_t index)
{
    return pinned->host + index * pinned->element_size;
}

/* get(i) -> element i (1-based) */
static int pinned_get(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    size_t index = gpurun_check_index(L, 2, pinned->count, "element");
    gpurun_push_element(L, pinned->dtype, element(pinned, index));
    return 1;
}

/* set(i, value) -> self */
static int pinned_set(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    size_t index = gpurun_check_index(L, 2, pinned->count, "element");
    gpurun_check_element(L, 3, pinned->dtype, element(pinned, index));
    lua_settop(L, 1);
    return 1;
}

/* fill(value [, first [, count]]) -> self */
static int pinned_fill(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    unsigned char pattern[GPURUN_MAX_ELEMENT_SIZE];
    gpurun_check_element(L, 2, pinned->dtype, pattern);
    size_t first, count;
    gpurun_opt_range(L, 3, pinned->count, 0, &first, &count);
    for (size_t i = first; i < first + count; i++)
        memcpy(element(pinned, i), pattern, pinned->element_size);
    lua_settop(L, 1);
    return 1;
}

/* to_table([first [, count]]) -> sequence */
static int pinned_to_table(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    size_t first, count;
    gpurun_opt_range(L, 2, pinned->count, 0, &first, &count);
    gpurun_new_sequence(L, count, pinned->dtype, "PinnedBuffer:to_table");
    /* The table's allocation can run a finalizer that closes the buffer,
     * whose memory is then unmapped. */
    pinned = check_ready(L);
    gpurun_fill_sequence(L, pinned->dtype, element(pinned, first), count);
    return 1;
}

/* to_bytes([first [, count]]) -> the elements' bytes as a string */
static int pinned_to_bytes(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    size_t first, count;
    gpurun_opt_range(L, 2, pinned->count, 0, &first, &count);
    lua_pushlstring(L, (const char *)element(pinned, first), count * pinned->element_size);
    return 1;
}

/* copy_from(table | string [, first [, count]]) -> self: a sequence of
 * elements, or a string of their raw bytes, into the range (the whole
 * buffer by default; from first on, as many as the source holds). */
static int pinned_copy_from(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    int type = lua_type(L, 2);
    if (type != LUA_TTABLE && type != LUA_TSTRING)
        return gpurun_type_error(L, 2, "table or string");
    size_t length = lua_rawlen(L, 2);
    size_t source_count = type == LUA_TTABLE ? length : length / pinned->element_size;
    size_t first, count;
    gpurun_opt_range(L, 3, pinned->count, source_count ? source_count : 1, &first, &count);
    if (type == LUA_TTABLE) {
        if (length != count)
            return gpurun_arg_error(L, 2, "table of %I elements expected, got %I",
                                    (LUAI_UACINT)count, (LUAI_UACINT)length);
        /* Checked into staging first: a bad element leaves the memory as it was. */
        void *staging = gpurun_push_staging(L, count * pinned->element_size);
        gpurun_store_sequence(L, 2, 2, count, pinned->dtype, staging);
        pinned = check_ready(L); /* a metamethod-free read, but the allocation ran finalizers */
        memcpy(element(pinned, first), staging, count * pinned->element_size);
    } else {
        if (length != count * pinned->element_size)
            return gpurun_arg_error(L, 2, "string of %I bytes (%I %s elements) expected, got %I "
                                          "bytes", (LUAI_UACINT)(count * pinned->element_size),
                                    (LUAI_UACINT)count, gpurun_dtypes[pinned->dtype].name,
                                    (LUAI_UACINT)length);
        memcpy(element(pinned, first), lua_tostring(L, 2), length);
    }
    lua_settop(L, 1);
    return 1;
}

/* ---- fields and metamethods --------------------------------------------- */

static struct gpurun_pinned *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

/* dtype, size, nbytes: as every container of elements has them. */
static int pinned_elements_field(lua_State *L)
{
    return gpurun_push_elements_field(L, self(L)->dtype, self(L)->count);
}

static int pinned_ptr(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)(uintptr_t)self(L)->host);
    return 1;
}

/* Where kernels reach a mapped buffer (the same number as ptr where the
 * driver maps host memory at its host address). */
static int pinned_device_ptr(lua_State *L)
{
    if (self(L)->device_pointer == 0)
        return gpurun_error(L, "gpurun.PinnedBuffer is not mapped into the device's address "
                               "space: allocate it with gpurun.pinned(n, dtype, { mapped = true })");
    lua_pushinteger(L, (lua_Integer)self(L)->device_pointer);
    return 1;
}

static int pinned_mapped(lua_State *L)
{
    lua_pushboolean(L, self(L)->device_pointer != 0);
    return 1;
}

/* p[i]: element i, 1-based. */
static int pinned_element(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TNUMBER) {
        lua_pushnil(L);
        return 1;
    }
    return pinned_get(L);
}

/* p[i] = value */
static int pinned_newindex(lua_State *L)
{
    struct gpurun_pinned *pinned = check_ready(L);
    if (lua_type(L, 2) != LUA_TNUMBER)
        return gpurun_error(L, "gpurun.PinnedBuffer: only elements can be set (p[i] = value), "
                               "not %s", gpurun_value_text(L, 2));
    size_t index = gpurun_check_index(L, 2, pinned->count, "element");
    gpurun_check_element(L, 3, pinned->dtype, element(pinned, index));
    return 0;
}

static int pinned_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gpurun_check_pinned(L, 1)->count);
    return 1;
}

static int pinned_tostring(lua_State *L)
{
    struct gpurun_pinned *pinned = gpurun_check_tagged(L, 1, &gpurun_pinned_tag);
    if (pinned->header.closed)
        lua_pushliteral(L, "gpurun.PinnedBuffer(closed)");
    else
        lua_pushfstring(L, "gpurun.PinnedBuffer(%s, %I)", gpurun_dtypes[pinned->dtype].name,
                        (LUAI_UACINT)pinned->count);
    return 1;
}

/* pinned(n [, dtype [, { mapped = }]]): contents undefined, as for
 * gpurun.empty. */
static int module_pinned(lua_State *L)
{
    static const char *const known[] = {"mapped", NULL};
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    int mapped = 0;
    if (gpurun_check_options(L, 3, known))
        mapped = gpurun_opt_boolean_field(L, 3, "mapped", 0);
    gpurun_push_new_pinned(L, count, dtype, 1, mapped);
    return 1;
}

static const luaL_Reg pinned_methods[] = {
    {"get", pinned_get},
    {"set", pinned_set},
    {"fill", pinned_fill},
    {"to_table", pinned_to_table},
    {"to_bytes", pinned_to_bytes},
    {"copy_from", pinned_copy_from},
    {"close", pinned_close},
    {NULL, NULL}
};

static const luaL_Reg pinned_fields[] = {
    {"dtype", pinned_elements_field},
    {"size", pinned_elements_field},
    {"nbytes", pinned_elements_field},
    {"ptr", pinned_ptr},
    {"device_ptr", pinned_device_ptr},
    {"mapped", pinned_mapped},
    {NULL, NULL}
};

static const luaL_Reg pinned_metamethods[] = {
    {"__newindex", pinned_newindex},
    {"__len", pinned_len},
    {"__tostring", pinned_tostring},
    {"__close", pinned_close},
    {"__gc", pinned_gc},
    {NULL, NULL}
};

static const struct gpurun_type pinned_type = {
    &gpurun_pinned_tag, pinned_methods, pinned_metamethods, pinned_fields, pinned_element,
};

static const luaL_Reg module_functions[] = {
    {"pinned", module_pinned},
    {NULL, NULL}
};

void gpurun_open_pinned(lua_State *L)
{
    gpurun_register_type(L, &pinned_type);
    gpurun_set_functions(L, module_functions);
}
