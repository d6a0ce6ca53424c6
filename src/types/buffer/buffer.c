/* gpurun.Buffer: device memory holding elements of one dtype, made, filled
 * and read from the host (gpurun.empty, zeros, full, array, from_bytes),
 * and views of part of one (Buffer:view). Ordering and the copies
 * themselves are types/buffer/buffer_transfer.c; strings, pinned memory and files are
 * types/buffer/buffer_host_copies.c; comparing buffers is types/compare.c; generating them is
 * types/generator.c.
 *
 * Element indices count from 1, as Lua's do: get(i), set(i, v), buf[i],
 * and every range (first, count) that view, fill, copy_from, copy_to,
 * to_table and to_bytes take.
 *
 * Host memory is always a Lua userdata (gpurun_push_staging), never malloc:
 * an error raised halfway leaves nothing behind. Elements are converted in
 * C; the large paths (fill, compare, the generator) call no Lua per element. */
#include "types/buffer/buffer.h"
#include "types/buffer/buffer_transfer.h"
#include "types/buffer/buffer_host_copies.h"

#include <limits.h>
#include <string.h>

#include "types/graph_builder.h"
#include "types/memory_pool.h"
#include "types/buffer/pinned_buffer.h"


/* ---- views ---------------------------------------------------------------

 * The registry maps each buffer that has views (weakly) to the set of its
 * views (weakly), so that closing it closes them: a view's pointer must
 * never outlive the memory. A view keeps its base alive, so a base is only
 * collected with its views. */
#define VIEWS_KEY "gpurun.buffer_views"

/* Pushes the registry's table of weak-keyed tables, made on first use. */
static void push_weak_table(lua_State *L, const char *key)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, key) == LUA_TTABLE)
        return;
    lua_pop(L, 1);
    lua_newtable(L);
    lua_createtable(L, 0, 1);
    lua_pushliteral(L, "k");
    lua_setfield(L, -2, "__mode");
    lua_setmetatable(L, -2);
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, key);
}

/* Records the view at -1 as one of the base at base_index. */
static void register_view(lua_State *L, int base_index)
{
    base_index = lua_absindex(L, base_index);
    int view = lua_gettop(L);
    push_weak_table(L, VIEWS_KEY);
    lua_pushvalue(L, base_index);
    if (lua_rawget(L, -2) != LUA_TTABLE) {
        lua_pop(L, 1);
        lua_newtable(L);
        lua_getmetatable(L, -2); /* weak keys, as the outer table's */
        lua_setmetatable(L, -2);
        lua_pushvalue(L, base_index);
        lua_pushvalue(L, -2);
        lua_rawset(L, -4);
    }
    lua_pushvalue(L, view);
    lua_pushboolean(L, 1);
    lua_rawset(L, -3);
    lua_settop(L, view);
}

/* Closes every view of the base at index. */
static void close_views(lua_State *L, int index)
{
    push_weak_table(L, VIEWS_KEY);
    lua_pushvalue(L, index);
    if (lua_rawget(L, -2) == LUA_TTABLE) {
        for (lua_pushnil(L); lua_next(L, -2); lua_pop(L, 1)) {
            struct gpurun_buffer *view = lua_touserdata(L, -2);
            view->header.closed = 1;
            view->pointer = 0;
        }
    }
    lua_pop(L, 2);
}

/* ---- stream-ordered memory --------------------------------------------------

 * A pool's buffer is freed with cuMemFreeAsync on its own stream, after the
 * work every other stream it was used on has queued so far (an event of
 * each, waited for by the freeing stream): the host never waits. Where that
 * cannot be done (its stream was closed and no other stream of its device
 * is left, a stream is being captured, more streams used it than are
 * recorded) it is freed after the whole device's work instead. */

static void release_pool_counts(struct gpurun_buffer *buffer)
{
    struct gpurun_memory_pool *pool = buffer->pool;
    if (pool == NULL)
        return;
    pool->live_buffers--;
    pool->graph_bytes -= buffer->graph_bytes;
    buffer->graph_bytes = 0;
    buffer->pool = NULL;
}

static CUresult free_ordered(struct gpurun_buffer *buffer, CUdeviceptr pointer)
{
    struct gpurun_stream *streams[1 + GPURUN_BUFFER_USES];
    int count = 0;
    if (buffer->stream)
        streams[count++] = buffer->stream;
    for (int i = 0; i < GPURUN_BUFFER_USES; i++)
        if (buffer->used_on[i])
            streams[count++] = buffer->used_on[i];
    struct gpurun_stream *free_on = NULL;
    for (int i = 0; i < count && free_on == NULL; i++)
        if (streams[i]->handle && !streams[i]->capture && streams[i]->context == buffer->context)
            free_on = streams[i];
    int after_device = buffer->uses_lost || free_on == NULL || gpurun_runtime.abandoned;
    /* None of this touches a stream being captured; relaxed all the same,
     * so that no call here can invalidate a capture in progress. */
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    for (int i = 0; i < count && !after_device; i++)
        if (streams[i] != free_on
            && (streams[i]->capture || gpurun_order_after(free_on, streams[i]) != CUDA_SUCCESS))
            after_device = 1;
    CUresult result;
    if (after_device) {
        result = gpurun_free_memory_after_device(pointer, buffer->context);
    } else {
        CUcontext previous = gpurun_enter_context(buffer->context);
        result = CUDA_CALL(cuMemFreeAsync, pointer, free_on->handle);
        gpurun_leave_context(previous);
    }
    gpurun_restore_captures(relaxed);
    return result;
}

/* A buffer made on a builder, closed while its capture builds: a free node,
 * on the builder it was made on while that one builds, else on the origin. */
static CUresult free_in_capture(lua_State *L, struct gpurun_capture *capture, CUdeviceptr pointer)
{
    CUstream stream = capture->stream->handle;
    lua_getiuservalue(L, 1, GPURUN_BUFFER_STREAM_VALUE);
    const struct gpurun_graph_builder *builder = gpurun_to_tagged(L, -1, &gpurun_builder_tag);
    if (builder && !builder->header.closed && builder->capture.root == capture
        && builder->capture.state == GPURUN_CAPTURE_BUILDING && builder->capture.stream->handle)
        stream = builder->capture.stream->handle;
    lua_pop(L, 1);
    CUresult result = CUDA_CALL(cuMemFreeAsync, pointer, stream);
    if (result == CUDA_SUCCESS)
        gpurun_capture_remove_allocation(L, capture, 1);
    return result;
}

/* Frees the stream-ordered memory of the open buffer at 1, already marked
 * closed. Memory a graph's node allocates is the graph's to free while the
 * graph has not run it (it frees what no open buffer holds after each
 * launch, types/graph.c). */
static CUresult release_ordered(lua_State *L, struct gpurun_buffer *buffer, CUdeviceptr pointer,
                                int explicit)
{
    struct gpurun_capture *capture = (struct gpurun_capture *)buffer->header.allocated_in;
    CUresult result = CUDA_SUCCESS;
    if (capture) {
        /* The collector frees none inside a capture: a buffer collected is
         * one whose builder is garbage too, and its capture goes with it. */
        if (explicit && capture->state == GPURUN_CAPTURE_BUILDING)
            result = free_in_capture(L, capture, pointer);
    } else if (!buffer->unallocated) {
        result = free_ordered(buffer, pointer);
    }
    release_pool_counts(buffer);
    return result;
}

/* ---- close ------------------------------------------------------------------- */

/* The one close. An explicit close (:close(), __close) is refused while a
 * graph uses the buffer (or a view of it); the collector frees regardless,
 * since a graph keeps its buffers alive: one being collected is used by
 * none. A view frees nothing. */
static int close_buffer(lua_State *L, int explicit)
{
    struct gpurun_buffer *buffer = gpurun_check_tagged(L, 1, &gpurun_buffer_tag);
    if (buffer->header.closed)
        return 0;
    if (buffer->base) {
        buffer->header.closed = 1;
        buffer->pointer = 0;
        return 0;
    }
    if (explicit && buffer->header.graph_users > 0)
        return gpurun_error(L, "gpurun.Buffer is used by %d graph(s) or graph builder(s); close "
                               "them first", buffer->header.graph_users);
    if (explicit)
        close_views(L, 1);
    CUdeviceptr pointer = buffer->pointer;
    buffer->header.closed = 1;
    buffer->pointer = 0;
    CUresult result = buffer->ordered ? release_ordered(L, buffer, pointer, explicit)
                                      : gpurun_free_memory(pointer, buffer->context);
    /* After a kernel fault the memory went with the context; raising here
     * (often from __close, on the way out of that very fault) would only
     * replace the fault's message with a less useful one. */
    if (result != CUDA_SUCCESS && explicit && !cuda_error_is_sticky(cuda_last_failed_result))
        gpurun_transfer_error(L, "freeing a gpurun.Buffer");
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

/* A buffer made in a capture whose graph went without becoming a Graph:
 * its memory never comes to exist (runtime/capture.c calls this). */
static void drop_buffer(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    if (buffer->header.closed)
        return;
    close_views(L, index);
    buffer->header.closed = 1;
    buffer->pointer = 0;
    release_pool_counts(buffer);
}

void gpurun_buffer_graph_completed(lua_State *L, int index)
{
    ((struct gpurun_buffer *)lua_touserdata(L, index))->header.allocated_in = NULL;
}

void gpurun_buffer_graph_launched(lua_State *L, int index, int stream_index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    struct gpurun_stream *stream =
        &((struct gpurun_stream_object *)lua_touserdata(L, stream_index))->stream;
    buffer->unallocated = 0;
    if (buffer->stream != stream) {
        index = lua_absindex(L, index);
        lua_pushvalue(L, stream_index);
        lua_setiuservalue(L, index, GPURUN_BUFFER_STREAM_VALUE);
        buffer->stream = stream;
    }
}

void gpurun_buffer_graph_closed(lua_State *L, int index)
{
    if (((struct gpurun_buffer *)lua_touserdata(L, index))->unallocated)
        drop_buffer(L, index);
}

/* ---- allocation ---------------------------------------------------------- */

void gpurun_check_placement(lua_State *L, int arg, struct gpurun_placement *where, int host_data)
{
    static const char *const known[] = {"pool", "stream", NULL};
    where->ordered = where->pool_index = where->stream_index = 0;
    if (!gpurun_check_options(L, arg, known))
        return;
    arg = lua_absindex(L, arg);
    lua_pushliteral(L, "pool");
    if (lua_rawget(L, arg) == LUA_TNIL) {
        lua_pop(L, 1);
    } else {
        if (!gpurun_to_tagged(L, -1, &gpurun_memory_pool_tag)) {
            const char *got = gpurun_type_name(L, -1);
            gpurun_arg_error(L, arg, "option 'pool' must be a gpurun.MemoryPool, got %s", got);
        }
        gpurun_check_memory_pool(L, -1);
        where->pool_index = lua_gettop(L);
    }
    lua_pushliteral(L, "stream");
    if (lua_rawget(L, arg) == LUA_TNIL) {
        lua_pop(L, 1);
    } else {
        if (gpurun_to_tagged(L, -1, &gpurun_builder_tag)) {
            if (host_data)
                gpurun_arg_error(L, arg, "option 'stream' cannot be a GraphBuilder here: the host "
                                         "data is copied when the call is made, not at each "
                                         "replay (make the buffer before begin_building)");
            gpurun_check_builder(L, -1);
        } else if (gpurun_to_tagged(L, -1, &gpurun_stream_tag)) {
            gpurun_check_stream(L, -1);
        } else {
            const char *got = gpurun_type_name(L, -1);
            gpurun_arg_error(L, arg, "option 'stream' must be a gpurun.Stream or a "
                                     "gpurun.GraphBuilder, got %s", got);
        }
        where->stream_index = lua_gettop(L);
    }
    where->ordered = where->pool_index || where->stream_index;
}

static void check_byte_size(lua_State *L, size_t count, int dtype, int count_arg)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (count > SIZE_MAX / info->size)
        gpurun_arg_error(L, count_arg, "element count %I too large for %s (the byte size "
                                       "overflows size_t)", (LUAI_UACINT)count, info->name);
}

static struct gpurun_buffer *push_object(lua_State *L, size_t count, int dtype, int uservalues)
{
    struct gpurun_buffer *buffer =
        gpurun_new_object(L, sizeof *buffer, uservalues, &gpurun_buffer_tag);
    buffer->count = count;
    buffer->element_size = gpurun_dtypes[dtype].size;
    buffer->dtype = dtype;
    return buffer;
}

/* The stream or builder a pool allocation is ordered on; *capture set for
 * a building builder. */
static struct gpurun_stream *allocation_stream(lua_State *L, int stream_index,
                                               struct gpurun_capture **capture)
{
    *capture = NULL;
    if (gpurun_to_tagged(L, stream_index, &gpurun_builder_tag)) {
        struct gpurun_graph_builder *builder = gpurun_check_builder(L, stream_index);
        gpurun_builder_stream(L, builder);
        if (builder->capture.role == GPURUN_CAPTURE_BODY)
            gpurun_error(L, "a conditional body's graph cannot allocate memory (the driver takes "
                            "no memory nodes there): allocate on the builder it came from, "
                            "before the conditional node (capture abandoned)");
        *capture = &builder->capture;
        return builder->capture.stream;
    }
    struct gpurun_stream *stream = gpurun_check_stream(L, stream_index);
    if (stream->capture)
        gpurun_refuse_captured(L, 0, NULL, "pass the builder as the stream, so that the buffer "
                                           "becomes an allocation node of its graph");
    return stream;
}

static struct gpurun_buffer *push_ordered_buffer(lua_State *L, size_t count, int dtype,
                                                 const struct gpurun_placement *where)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    size_t bytes = count * info->size;
    int stream_index = where->stream_index;
    if (stream_index == 0) {
        if (gpurun_runtime.current_stream == NULL)
            gpurun_error(L, "a buffer from a memory pool is allocated in order on a stream: pass "
                            "{ stream = s } (a Stream, or a GraphBuilder that is building), or "
                            "set a current stream with gpurun.set_current_stream(s)");
        gpurun_push_current_stream(L);
        stream_index = lua_gettop(L);
    }
    struct gpurun_capture *capture;
    struct gpurun_stream *stream = allocation_stream(L, stream_index, &capture);
    int pool_index = where->pool_index;
    if (pool_index == 0) {
        gpurun_push_default_pool(L, stream->device);
        pool_index = lua_gettop(L);
    }
    struct gpurun_memory_pool *pool = gpurun_check_memory_pool(L, pool_index);
    /* Messages only: no text is made on the way to a buffer. */
#define WHAT() lua_pushfstring(L, "for %I %s elements", (LUAI_UACINT)count, info->name)
#define SIZE_TEXT() gpurun_format_size(size_text, sizeof size_text, bytes)
    char size_text[32];
    if (pool->device != stream->device) {
        const char *name = gpurun_push_pool_name(L, pool);
        gpurun_error(L, "%s cannot allocate %s %s on a stream of device %d: its memory lives on "
                        "device %d (pass a stream of device %d)", name, SIZE_TEXT(), WHAT(),
                     stream->device, pool->device, pool->device);
    }
    if (capture && pool->max_size > 0) {
        /* A graph's memory is the graph's, not the pool's, so the driver
         * holds it to no pool limit: gpurun holds it to this one. */
        cuuint64_t used = 0;
        (void)gpurun_pool_attribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &used);
        if (bytes > pool->max_size || (size_t)used + pool->graph_bytes > pool->max_size - bytes)
            gpurun_pool_out_of_memory(L, pool, bytes, WHAT(), 1);
    }
    if (!gpurun_capture_in_progress())
        gpurun_flush_frees();
    struct gpurun_buffer *buffer = push_object(L, count, dtype, GPURUN_BUFFER_USER_VALUES);
    int index = lua_gettop(L);
    /* The object's allocation can run finalizers: still open? */
    pool = gpurun_check_memory_pool(L, pool_index);
    stream = allocation_stream(L, stream_index, &capture);
    buffer->context = pool->context;
    buffer->device = pool->device;
    struct gpurun_relaxed relaxed = gpurun_relax_captures();
    CUcontext previous = gpurun_enter_context(pool->context);
    CUresult result = CUDA_CALL(cuMemAllocFromPoolAsync, &buffer->pointer, bytes, pool->handle,
                                stream->handle);
    gpurun_leave_context(previous);
    gpurun_restore_captures(relaxed);
    if (result != CUDA_SUCCESS) {
        buffer->pointer = 0;
        if (result == CUDA_ERROR_OUT_OF_MEMORY)
            gpurun_pool_out_of_memory(L, pool, bytes, WHAT(), capture != NULL);
        gpurun_transfer_error(L, "allocating %s %s from a memory pool", SIZE_TEXT(), WHAT());
    }
#undef WHAT
#undef SIZE_TEXT
    buffer->ordered = 1;
    buffer->pool = pool;
    pool->live_buffers++;
    lua_pushvalue(L, pool_index);
    lua_setiuservalue(L, index, GPURUN_BUFFER_POOL_VALUE);
    lua_pushvalue(L, stream_index);
    lua_setiuservalue(L, index, GPURUN_BUFFER_STREAM_VALUE);
    if (capture) {
        buffer->unallocated = 1;
        buffer->graph_address = buffer->pointer;
        buffer->graph_bytes = bytes;
        pool->graph_bytes += bytes;
        gpurun_capture_add_allocation(L, capture, index);
    } else {
        buffer->stream = stream;
    }
    buffer->header.closed = 0;
    lua_settop(L, index);
    return buffer;
}

struct gpurun_buffer *gpurun_push_new_buffer(lua_State *L, size_t count, int dtype, int count_arg,
                                             const struct gpurun_placement *where)
{
    check_byte_size(L, count, dtype, count_arg);
    if (where && where->ordered)
        return push_ordered_buffer(L, count, dtype, where);
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    CUcontext context = gpurun_require_context(L);
    if (gpurun_capture_in_progress())
        gpurun_error(L, "cannot allocate a gpurun.Buffer while a graph is being built "
                        "(allocate before begin_building, or pass { stream = builder } to "
                        "allocate inside the graph); capture abandoned");
    gpurun_flush_frees();

    struct gpurun_buffer *buffer = push_object(L, count, dtype, 0);
    buffer->context = context;
    buffer->device = gpurun_runtime.current_device;
    size_t bytes = count * info->size;
    if (CUDA_CALL(cuMemAlloc, &buffer->pointer, bytes) != CUDA_SUCCESS) {
        char size_text[32];
        buffer->pointer = 0;
        gpurun_transfer_error(L, "allocating %s for %I %s elements",
                              gpurun_format_size(size_text, sizeof size_text, bytes),
                              (LUAI_UACINT)count, info->name);
    }
    buffer->header.closed = 0;
    return buffer;
}

/* ---- host data ---------------------------------------------------------- */

/* The sequence at table_index as elements in new staging memory (pushed),
 * every element checked before any device work. */
static unsigned char *stage_table(lua_State *L, int table_index, int arg, size_t count, int dtype)
{
    unsigned char *host = gpurun_push_staging(L, count * gpurun_dtypes[dtype].size);
    gpurun_store_sequence(L, table_index, arg, count, dtype, host);
    return host;
}

/* buffer: the Buffer at 1, or a part of it. */
static void write_table(lua_State *L, struct gpurun_buffer *buffer, int table_index,
                        int stream_index, const char *operation)
{
    size_t count = lua_rawlen(L, table_index);
    if (count != buffer->count)
        gpurun_arg_error(L, table_index, "table of %I elements expected, got %I",
                         (LUAI_UACINT)buffer->count, (LUAI_UACINT)count);
    const unsigned char *host = stage_table(L, table_index, table_index, count, buffer->dtype);
    gpurun_check_live_buffer(L, 1); /* staging ran finalizers: still open? */
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_write_elements(L, buffer, 0, count, host, stream);
    gpurun_end_transfer(L, stream, operation);
}

/* Copies between self and the buffer at 2, in the direction given; they
 * must match in count and dtype. */
static void copy_buffer(lua_State *L, struct gpurun_buffer *self, struct gpurun_buffer *other,
                        int self_is_destination, int stream_index, const char *operation)
{
    struct gpurun_capture *capture;
    if (other->count != self->count || other->dtype != self->dtype)
        gpurun_arg_error(L, 2, "gpurun.Buffer of %I %s elements expected, got %I %s elements",
                         (LUAI_UACINT)self->count, gpurun_dtypes[self->dtype].name,
                         (LUAI_UACINT)other->count, gpurun_dtypes[other->dtype].name);
    const struct gpurun_buffer *source = self_is_destination ? other : self;
    const struct gpurun_buffer *destination = self_is_destination ? self : other;
    size_t bytes = source->count * source->element_size;
    CUstream stream = gpurun_begin_device_transfer(L, stream_index, operation, &capture);
    gpurun_check_buffer_memory(L, self, capture);
    gpurun_check_buffer_memory(L, other, capture);
    if (capture) {
        gpurun_capture_keep(L, capture, 1);
        gpurun_capture_keep(L, capture, 2);
    } else {
        gpurun_note_buffer_use_on(L, 1, stream_index);
        gpurun_note_buffer_use_on(L, 2, stream_index);
    }
    if (source->context == destination->context) {
        if (CUDA_CALL(cuMemcpyDtoDAsync, destination->pointer, source->pointer, bytes, stream)
            != CUDA_SUCCESS)
            gpurun_transfer_error(L, "copying between gpurun.Buffers");
    } else {
        /* Another device's buffer: direct over peer access or NVLink where
         * there is one, staged by the driver where not. */
        if (stream == NULL)
            gpurun_sync_other_device(L, other, operation);
        if (CUDA_CALL(cuMemcpyPeerAsync, destination->pointer, destination->context,
                      source->pointer, source->context, bytes, stream) != CUDA_SUCCESS)
            gpurun_transfer_error(L, "copying from device %d to device %d", source->device,
                                  destination->device);
        if (stream == NULL)
            gpurun_sync_other_device(L, other, operation);
    }
    gpurun_end_transfer(L, stream, operation);
}

static int read_one(lua_State *L, struct gpurun_buffer *buffer, size_t index, int stream_index,
                    const char *operation)
{
    unsigned char value[8];
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_read_elements(L, buffer, index, 1, value, stream);
    gpurun_end_transfer(L, stream, operation);
    gpurun_push_element(L, buffer->dtype, value);
    return 1;
}

/* buffer: the Buffer at buffer_index, or a part of it. */
static void fill(lua_State *L, struct gpurun_buffer *buffer, int buffer_index,
                 const unsigned char *pattern, int stream_index, const char *operation)
{
    struct gpurun_capture *capture;
    CUstream stream = gpurun_begin_device_transfer(L, stream_index, operation, &capture);
    gpurun_check_buffer_memory(L, buffer, capture);
    if (capture)
        gpurun_capture_keep(L, capture, buffer_index);
    else
        gpurun_note_buffer_use_on(L, buffer_index, stream_index);
    gpurun_fill_elements(L, buffer, pattern, stream, capture != NULL);
    gpurun_end_transfer(L, stream, operation);
}

/* ---- methods ------------------------------------------------------------ */

/* Every method below takes an optional range (first, count) of elements of
 * self after its other arguments, then an optional stream:
 * gpurun_opt_range says where the stream argument is. */

/* fill(value [, first [, count]] [, stream]) -> self */
static int buffer_fill(lua_State *L)
{
    lua_settop(L, 5); /* staging pushed later must not pass for a stream argument */
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    unsigned char pattern[8];
    gpurun_check_element(L, 2, buffer->dtype, pattern);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 3, buffer->count, 0, &first, &count);
    struct gpurun_buffer part = gpurun_buffer_part(buffer, first, count);
    fill(L, &part, 1, pattern, stream_index, "Buffer:fill");
    lua_settop(L, 1);
    return 1;
}

/* The element count of a copy's other side at index; 0 when it has none
 * of its own (a file: the range decides). */
static size_t source_count(lua_State *L, int index, const struct gpurun_buffer *buffer)
{
    const struct gpurun_buffer *other = gpurun_to_tagged(L, index, &gpurun_buffer_tag);
    const struct gpurun_pinned *pinned = gpurun_to_tagged(L, index, &gpurun_pinned_tag);
    switch (lua_type(L, index)) {
    case LUA_TTABLE: return lua_rawlen(L, index);
    case LUA_TSTRING: return lua_rawlen(L, index) / buffer->element_size;
    default: return other ? other->count : pinned ? pinned->count : 0;
    }
}

/* The part of self (at 1) that a copy with the value at 2 covers; returns
 * where the stream argument is. */
static int copy_part(lua_State *L, struct gpurun_buffer *part)
{
    lua_settop(L, 5); /* staging pushed later must not pass for a stream argument */
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 3, buffer->count, source_count(L, 2, buffer), &first,
                                        &count);
    *part = gpurun_buffer_part(buffer, first, count);
    return stream_index;
}

/* copy_from(source [, first [, count]] [, stream]) -> self: source is a
 * sequence, a string of raw elements, a Buffer, a PinnedBuffer or a Lua
 * file (read from its position); the range is where in self it goes (by
 * default all of self, which the source must match; from first on, as many
 * elements as the source has). */
static int buffer_copy_from(lua_State *L)
{
    struct gpurun_buffer part;
    int stream_index = copy_part(L, &part);
    const char *operation = "Buffer:copy_from";
    if (gpurun_to_tagged(L, 2, &gpurun_buffer_tag))
        copy_buffer(L, &part, gpurun_check_buffer(L, 2), 1, stream_index, operation);
    else if (gpurun_to_tagged(L, 2, &gpurun_pinned_tag))
        gpurun_copy_pinned(L, &part, 1, 2, 1, stream_index, operation);
    else if (lua_type(L, 2) == LUA_TTABLE)
        write_table(L, &part, 2, stream_index, operation);
    else if (lua_type(L, 2) == LUA_TSTRING)
        gpurun_copy_from_string(L, &part, 2, stream_index, operation);
    else if (gpurun_is_file(L, 2))
        gpurun_copy_file(L, 1, &part, 2, 1, stream_index, operation);
    else
        gpurun_type_error(L, 2, "table, string, gpurun.Buffer, gpurun.PinnedBuffer or file");
    lua_settop(L, 1);
    return 1;
}

/* copy_to(destination [, first [, count]] [, stream]) -> self: destination
 * is a Buffer, a PinnedBuffer or a Lua file (written at its position); the
 * range is what of self is copied (by default all of it, which the
 * destination must match; from first on, as many as the destination has). */
static int buffer_copy_to(lua_State *L)
{
    struct gpurun_buffer part;
    int stream_index = copy_part(L, &part);
    const char *operation = "Buffer:copy_to";
    if (gpurun_to_tagged(L, 2, &gpurun_buffer_tag))
        copy_buffer(L, &part, gpurun_check_buffer(L, 2), 0, stream_index, operation);
    else if (gpurun_to_tagged(L, 2, &gpurun_pinned_tag))
        gpurun_copy_pinned(L, &part, 1, 2, 0, stream_index, operation);
    else if (gpurun_is_file(L, 2))
        gpurun_copy_file(L, 1, &part, 2, 0, stream_index, operation);
    else
        gpurun_type_error(L, 2, "gpurun.Buffer, gpurun.PinnedBuffer or file");
    lua_settop(L, 1);
    return 1;
}

/* to_table([first [, count]] [, stream]) -> sequence: integers for integer
 * dtypes, floats for float dtypes. */
static int buffer_to_table(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 2, buffer->count, 0, &first, &count);
    if (count > INT_MAX)
        return gpurun_error(L, "Buffer:to_table: %I elements are too many for a Lua table",
                            (LUAI_UACINT)count);
    /* Staging first: the allocation can run finalizers, which must not find
     * a stream already taken for this copy. */
    unsigned char *host = gpurun_push_staging(L, count * buffer->element_size);
    struct gpurun_buffer part = gpurun_buffer_part(gpurun_check_live_buffer(L, 1), first, count);
    CUstream stream = gpurun_begin_transfer(L, stream_index, "Buffer:to_table");
    gpurun_read_elements(L, &part, 0, count, host, stream);
    gpurun_end_transfer(L, stream, "Buffer:to_table");
    gpurun_push_sequence(L, part.dtype, host, count, "Buffer:to_table");
    return 1;
}

/* to_bytes([first [, count]] [, stream]) -> the elements' raw bytes as a
 * string (little-endian, as the GPU holds them). */
static int buffer_to_bytes(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 2, buffer->count, 0, &first, &count);
    gpurun_push_bytes(L, 1, first, count, stream_index, "Buffer:to_bytes");
    return 1;
}

/* view(first [, count]) -> a Buffer of count elements (default: to the
 * end) sharing self's memory from element first on: a kernel argument of
 * its own pointer. It keeps its base alive, is closed with it, and frees
 * nothing when closed itself. */
static int buffer_view(lua_State *L)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, 1);
    if (lua_type(L, 2) != LUA_TNUMBER)
        gpurun_check_integer(L, 2, "integer element index");
    size_t first, count;
    gpurun_opt_range(L, 2, buffer->count, 0, &first, &count);
    lua_settop(L, 1);
    /* A view of a view is a view of the base. */
    if (buffer->base)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushvalue(L, 1);
    struct gpurun_buffer *view = gpurun_new_object(L, sizeof *view, 1, &gpurun_buffer_tag);
    lua_pushvalue(L, 2);
    lua_setiuservalue(L, 3, 1);
    register_view(L, 2);
    /* Checked again after the allocations, which can run finalizers. */
    buffer = gpurun_check_buffer(L, 1);
    struct gpurun_buffer *base = gpurun_check_buffer(L, 2);
    view->pointer = buffer->pointer + first * buffer->element_size;
    view->count = count;
    view->element_size = buffer->element_size;
    view->dtype = buffer->dtype;
    view->context = buffer->context;
    view->device = buffer->device;
    view->base = base;
    view->header.counts_for = &base->header; /* a graph's use counts for the memory's owner */
    view->header.closed = 0;
    return 1;
}

/* get(i [, stream]) -> element i (1-based) */
static int buffer_get(lua_State *L)
{
    lua_settop(L, 3);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    return read_one(L, buffer, index, 3, "Buffer:get");
}

/* set(i, value [, stream]) -> self */
static int buffer_set(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    unsigned char value[8];
    gpurun_check_element(L, 3, buffer->dtype, value);
    CUstream stream = gpurun_begin_transfer(L, 4, "Buffer:set");
    gpurun_write_elements(L, buffer, index, 1, value, stream);
    gpurun_end_transfer(L, stream, "Buffer:set");
    lua_settop(L, 1);
    return 1;
}

/* ---- fields ------------------------------------------------------------- */

static struct gpurun_buffer *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

/* dtype, size, nbytes: as every container of elements has them. */
static int buffer_elements_field(lua_State *L)
{
    return gpurun_push_elements_field(L, self(L)->dtype, self(L)->count);
}

static int buffer_ptr(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->pointer);
    return 1;
}

static int buffer_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

/* The Buffer a view shares memory with, or nil. */
static int buffer_base(lua_State *L)
{
    if (self(L)->base)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushnil(L);
    return 1;
}

/* The MemoryPool the memory came from (a view's base's), or nil. */
static int buffer_pool(lua_State *L)
{
    struct gpurun_buffer *buffer = self(L);
    if (buffer->base)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushvalue(L, 1);
    if (gpurun_buffer_owner(buffer)->pool)
        lua_getiuservalue(L, -1, GPURUN_BUFFER_POOL_VALUE);
    else
        lua_pushnil(L);
    return 1;
}

/* buf[i]: element i, 1-based. */
static int buffer_element(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TNUMBER) {
        lua_pushnil(L);
        return 1;
    }
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    return read_one(L, buffer, index, 3, "gpurun.Buffer[i]");
}

static int buffer_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gpurun_check_buffer(L, 1)->count);
    return 1;
}

static int buffer_tostring(lua_State *L)
{
    struct gpurun_buffer *buffer = gpurun_check_tagged(L, 1, &gpurun_buffer_tag);
    if (buffer->header.closed)
        lua_pushliteral(L, "gpurun.Buffer(closed)");
    else if (buffer->base)
        lua_pushfstring(L, "gpurun.Buffer(%s, %I, a view from element %I)",
                        gpurun_dtypes[buffer->dtype].name, (LUAI_UACINT)buffer->count,
                        (LUAI_UACINT)((buffer->pointer - buffer->base->pointer)
                                      / buffer->element_size + 1));
    else
        lua_pushfstring(L, "gpurun.Buffer(%s, %I)", gpurun_dtypes[buffer->dtype].name,
                        (LUAI_UACINT)buffer->count);
    return 1;
}

/* ---- constructors ------------------------------------------------------- */

/* empty(n [, dtype [, { pool =, stream = }]]): contents undefined. */
static int module_empty(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 3);
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    return 1;
}

/* Fills the new buffer at the top, on the placement's stream (or builder). */
static void fill_new(lua_State *L, const struct gpurun_placement *where,
                     const unsigned char *pattern, const char *operation)
{
    int index = lua_gettop(L);
    fill(L, lua_touserdata(L, index), index, pattern, where->stream_index, operation);
    lua_settop(L, index);
}

/* zeros(n [, dtype [, options]]) */
static int module_zeros(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    static const unsigned char zero[8];
    lua_settop(L, 3);
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    fill_new(L, &where, zero, "gpurun.zeros");
    return 1;
}

/* full(n, value [, dtype [, options]]) */
static int module_full(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 3, GPURUN_FLOAT32);
    unsigned char pattern[8];
    gpurun_check_element(L, 2, dtype, pattern);
    lua_settop(L, 4);
    struct gpurun_placement where;
    gpurun_check_placement(L, 4, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    fill_new(L, &where, pattern, "gpurun.full");
    return 1;
}

/* array(sequence [, dtype [, options]]): every element is checked before
 * allocating. */
static int module_array(lua_State *L)
{
    gpurun_check_table(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 3);
    size_t count = lua_rawlen(L, 1);
    if (count == 0)
        gpurun_arg_error(L, 1, "non-empty sequence expected, got an empty table");
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 1);
    const unsigned char *host = stage_table(L, 1, 1, count, dtype);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, dtype, 1, &where);
    CUstream stream = gpurun_begin_transfer(L, where.stream_index, "gpurun.array");
    gpurun_write_elements(L, buffer, 0, count, host, stream);
    gpurun_end_transfer(L, stream, "gpurun.array");
    return 1;
}

/* from_bytes(string, dtype) -> a Buffer holding the string's raw elements. */
static int module_from_bytes(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        gpurun_type_error(L, 1, "string");
    size_t length = lua_rawlen(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 2);
    size_t size = gpurun_dtypes[dtype].size;
    if (length == 0 || length % size != 0)
        gpurun_arg_error(L, 1, "%I bytes are not a whole, positive number of %s elements (%d "
                               "bytes each)", (LUAI_UACINT)length, gpurun_dtypes[dtype].name,
                         (int)size);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, length / size, dtype, 1, NULL);
    lua_replace(L, 2);
    gpurun_copy_from_string(L, buffer, 1, 0, "gpurun.from_bytes");
    lua_settop(L, 2);
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg buffer_methods[] = {
    {"fill", buffer_fill},
    {"copy_from", buffer_copy_from},
    {"copy_to", buffer_copy_to},
    {"to_table", buffer_to_table},
    {"to_bytes", buffer_to_bytes},
    {"view", buffer_view},
    {"get", buffer_get},
    {"set", buffer_set},
    {"close", buffer_close},
    {NULL, NULL}
};

static const luaL_Reg buffer_fields[] = {
    {"dtype", buffer_elements_field},
    {"size", buffer_elements_field},
    {"nbytes", buffer_elements_field},
    {"ptr", buffer_ptr},
    {"device", buffer_device},
    {"base", buffer_base},
    {"pool", buffer_pool},
    {NULL, NULL}
};

static const luaL_Reg buffer_metamethods[] = {
    {"__len", buffer_len},
    {"__tostring", buffer_tostring},
    {"__close", buffer_close},
    {"__gc", buffer_gc},
    {NULL, NULL}
};

static const struct gpurun_type buffer_type = {
    &gpurun_buffer_tag, buffer_methods, buffer_metamethods, buffer_fields, buffer_element,
};

static const luaL_Reg module_functions[] = {
    {"empty", module_empty},
    {"zeros", module_zeros},
    {"full", module_full},
    {"array", module_array},
    {"from_bytes", module_from_bytes},
    {NULL, NULL}
};

void gpurun_open_buffer(lua_State *L)
{
    gpurun_register_type(L, &buffer_type);
    gpurun_set_functions(L, module_functions);
    gpurun_capture_set_drop(drop_buffer);
}
