/* A Buffer's memory: made (cuMemAlloc, a pool's in stream order, a graph's
 * allocation node), shared (views, Buffer:view), and let go (the one close,
 * frees in stream order, a capture's drop, what a Graph tells the buffers
 * its allocation nodes made). */
#include "types/buffer/internal.h"

#include "types/graph_builder.h"
#include "types/memory_pool.h"

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

/* view(first [, count]) -> a Buffer of count elements (default: to the
 * end) sharing self's memory from element first on: a kernel argument of
 * its own pointer. It keeps its base alive, is closed with it, and frees
 * nothing when closed itself. */
int gpurun_buffer_view(lua_State *L)
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

static CUresult free_ordered(struct gpurun_buffer *buffer, CUdeviceptr pointer,
                             struct gpurun_stream *chosen)
{
    struct gpurun_stream *streams[2 + GPURUN_BUFFER_USES];
    int count = 0;
    if (chosen)
        streams[count++] = chosen;
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
 * on the builder's stream `on` that close was given, else on the builder it
 * was made on while that one builds, else on the origin. */
static CUresult free_in_capture(lua_State *L, struct gpurun_capture *capture, CUdeviceptr pointer,
                                CUstream on)
{
    CUstream stream = on ? on : capture->stream->handle;
    lua_getiuservalue(L, 1, GPURUN_BUFFER_STREAM_VALUE);
    const struct gpurun_graph_builder *builder = gpurun_to_tagged(L, -1, &gpurun_builder_tag);
    if (!on && builder && !builder->header.closed && builder->capture.root == capture
        && builder->capture.state == GPURUN_CAPTURE_BUILDING && builder->capture.stream->handle)
        stream = builder->capture.stream->handle;
    lua_pop(L, 1);
    CUresult result = CUDA_CALL(cuMemFreeAsync, pointer, stream);
    if (result == CUDA_SUCCESS)
        gpurun_capture_remove_allocation(L, capture, 1);
    return result;
}

/* Frees the stream-ordered memory of the open buffer at 1, already marked
 * closed, on the Stream `chosen` (NULL: its own) after its other uses.
 * Memory a graph's node allocates is the graph's to free while the graph
 * has not run it (it frees what no open buffer holds after each launch,
 * types/graph.c). */
static CUresult release_ordered(lua_State *L, struct gpurun_buffer *buffer, CUdeviceptr pointer,
                                int explicit, struct gpurun_stream *chosen)
{
    struct gpurun_capture *capture = (struct gpurun_capture *)buffer->header.allocated_in;
    CUresult result = CUDA_SUCCESS;
    if (capture) {
        /* The collector frees none inside a capture: a buffer collected is
         * one whose builder is garbage too, and its capture goes with it. */
        if (explicit && capture->state == GPURUN_CAPTURE_BUILDING)
            result = free_in_capture(L, capture, pointer, NULL);
    } else if (!buffer->unallocated) {
        result = free_ordered(buffer, pointer, chosen);
    }
    release_pool_counts(buffer);
    return result;
}

/* ---- a free node of another graph's allocation ------------------------------

 * Buffer:close(builder) on a graph's allocation, while another capture
 * builds: a free node of that capture frees it, so the allocating graph
 * and the freeing one must be launched in turns (types/graph.c checks it),
 * and `unallocated` says whose turn it is. */

/* Which memory a close on the building capture `into` may free with a free
 * node: the capture's own allocations, or a completed graph's (not one
 * that frees at each launch itself), of the capture's context. */
static void check_freed_in(lua_State *L, const struct gpurun_buffer *buffer,
                           const struct gpurun_capture *into)
{
    const struct gpurun_capture *made_in = buffer->header.allocated_in;
    if (into->role == GPURUN_CAPTURE_BODY)
        gpurun_error(L, "Buffer:close: a conditional body's graph cannot free memory (the driver "
                        "takes no memory nodes there): close it on the builder the body came "
                        "from (capture abandoned)");
    if (made_in && made_in != into->root)
        gpurun_error(L, "Buffer:close: the buffer is an allocation of another capture in "
                        "progress: close it on a builder of that capture");
    if (made_in)
        return;
    if (!buffer->graph_address)
        gpurun_error(L, "Buffer:close: a graph frees only memory that a graph allocated, and "
                        "this buffer's memory is %s: close it with a Stream, or with none",
                     buffer->pool ? "a pool's" : buffer->managed ? "managed" : "cuMemAlloc's");
    if (buffer->graph_auto_free)
        gpurun_error(L, "Buffer:close: its graph was completed with auto_free_on_launch and frees "
                        "it at its next launch itself: close it with a Stream, or with none");
    if (into->stream->context != buffer->context)
        gpurun_error(L, "Buffer:close: the builder captures on device %d, in another context than "
                        "the buffer's memory (device %d)", into->stream->device, buffer->device);
}

/* A free node, on the builder at builder_index, of the buffer at 1 (marked
 * closed): one of this capture's allocations, or another graph's. */
static CUresult free_in_graph(lua_State *L, struct gpurun_buffer *buffer,
                              struct gpurun_capture *into, int builder_index)
{
    CUstream on = ((const struct gpurun_graph_builder *)lua_touserdata(L, builder_index))
                      ->capture.stream->handle;
    CUresult result;
    if (buffer->header.allocated_in) {
        result = free_in_capture(L, into, buffer->graph_address, on);
    } else {
        result = CUDA_CALL(cuMemFreeAsync, buffer->graph_address, on);
        if (result == CUDA_SUCCESS) {
            buffer->freed_in_graph = 1;
            gpurun_capture_add_free(L, into, 1);
        } else if (!buffer->unallocated) {
            /* The capture is over (errors end it): what the graph made goes now. */
            (void)gpurun_free_memory_after_device(buffer->graph_address, buffer->context);
            buffer->unallocated = 1;
        }
    }
    release_pool_counts(buffer);
    return result;
}

void gpurun_buffer_free_graph_closed(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    if (!buffer->freed_in_graph)
        return;
    buffer->freed_in_graph = 0;
    if (!buffer->unallocated)
        (void)gpurun_free_memory_after_device(buffer->graph_address, buffer->context);
    buffer->unallocated = 1;
}

/* close(stream)'s stream at index, checked against the buffer before
 * anything is let go: the Stream (NULL for a GraphBuilder, *into set). */
static struct gpurun_stream *check_close_stream(lua_State *L, const struct gpurun_buffer *buffer,
                                                int index, struct gpurun_capture **into)
{
    *into = NULL;
    int nothing_to_free = buffer->header.closed || buffer->base;
    if (gpurun_to_tagged(L, index, &gpurun_builder_tag)) {
        *into = gpurun_to_building(L, index);
        if (!nothing_to_free)
            check_freed_in(L, buffer, *into);
        return NULL;
    }
    if (!gpurun_to_tagged(L, index, &gpurun_stream_tag))
        gpurun_arg_error(L, index, "expected a gpurun.Stream or a building gpurun.GraphBuilder, "
                                   "got %s", gpurun_type_name(L, index));
    struct gpurun_stream *stream = gpurun_check_stream(L, index);
    if (nothing_to_free || !buffer->ordered)
        return NULL; /* cuMemAlloc's and managed memory are freed at once */
    if (stream->capture)
        gpurun_refuse_captured(L, index, NULL, "pass its GraphBuilder instead");
    if (buffer->header.allocated_in)
        gpurun_error(L, "Buffer:close: the buffer is an allocation of a capture in progress: "
                        "close it on a builder of that capture, or with none");
    if (stream->context != buffer->context)
        gpurun_error(L, "Buffer:close: the stream belongs to device %d or another context than "
                        "the buffer's memory (device %d)", stream->device, buffer->device);
    return stream;
}

/* ---- close ------------------------------------------------------------------- */

/* The one close. An explicit close (:close(), __close) is refused while a
 * graph uses the buffer (or a view of it); the collector frees regardless,
 * since a graph keeps its buffers alive: one being collected is used by
 * none. A view frees nothing. close(stream) (stream_index, 0: none) frees
 * on that Stream, or with a free node on that building GraphBuilder. */
int gpurun_close_buffer(lua_State *L, int explicit, int stream_index)
{
    struct gpurun_buffer *buffer = gpurun_check_tagged(L, 1, &gpurun_buffer_tag);
    struct gpurun_stream *chosen = NULL;
    struct gpurun_capture *into = NULL;
    if (stream_index && !lua_isnoneornil(L, stream_index))
        chosen = check_close_stream(L, buffer, stream_index, &into);
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
    CUresult result = into                ? free_in_graph(L, buffer, into, stream_index)
                      : buffer->ordered ? release_ordered(L, buffer, pointer, explicit, chosen)
                                        : gpurun_free_memory(pointer, buffer->context);
    /* After a kernel fault the memory went with the context; raising here
     * (often from __close, on the way out of that very fault) would only
     * replace the fault's message with a less useful one. */
    if (result != CUDA_SUCCESS && explicit && !cuda_error_is_sticky(cuda_last_failed_result))
        gpurun_transfer_error(L, "freeing a gpurun.Buffer");
    return 0;
}

/* A buffer made in a capture whose graph went without becoming a Graph:
 * its memory never comes to exist (runtime/capture.c calls this). */
void gpurun_drop_buffer(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    if (buffer->freed_in_graph) /* a free node of a capture dropped */
        gpurun_buffer_free_graph_closed(L, index);
    if (buffer->header.closed)
        return;
    close_views(L, index);
    buffer->header.closed = 1;
    buffer->pointer = 0;
    release_pool_counts(buffer);
}

void gpurun_buffer_graph_completed(lua_State *L, int index, int auto_free)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    buffer->header.allocated_in = NULL;
    buffer->graph_auto_free = (unsigned char)auto_free;
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
        gpurun_drop_buffer(L, index);
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

void gpurun_check_byte_size(lua_State *L, size_t count, int dtype, int count_arg)
{
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    if (count > SIZE_MAX / info->size)
        gpurun_arg_error(L, count_arg, "element count %I too large for %s (the byte size "
                                       "overflows size_t)", (LUAI_UACINT)count, info->name);
}

struct gpurun_buffer *gpurun_push_buffer_object(lua_State *L, size_t count, int dtype,
                                                int uservalues)
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
    *capture = gpurun_to_building(L, stream_index);
    if (*capture) {
        if ((*capture)->role == GPURUN_CAPTURE_BODY)
            gpurun_error(L, "a conditional body's graph cannot allocate memory (the driver takes "
                            "no memory nodes there): allocate on the builder it came from, "
                            "before the conditional node (capture abandoned)");
        return (*capture)->stream;
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
    if (pool->imported) {
        const char *name = gpurun_push_pool_name(L, pool);
        gpurun_error(L, "%s allocates nothing: its memory is another process's (map that "
                        "process's buffers with gpurun.Buffer.from_ipc)", name);
    }
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
    struct gpurun_buffer *buffer =
        gpurun_push_buffer_object(L, count, dtype, GPURUN_BUFFER_USER_VALUES);
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
    gpurun_check_byte_size(L, count, dtype, count_arg);
    if (where && where->ordered)
        return push_ordered_buffer(L, count, dtype, where);
    const struct gpurun_dtype_info *info = &gpurun_dtypes[dtype];
    CUcontext context = gpurun_require_context(L);
    /* A relaxed capture lets its thread allocate (outside the graph). */
    if (!gpurun_capture_allows_unsafe())
        gpurun_error(L, "cannot allocate a gpurun.Buffer while a graph is being built "
                        "(allocate before begin_building, or pass { stream = builder } to "
                        "allocate inside the graph); capture abandoned");
    gpurun_flush_frees();

    struct gpurun_buffer *buffer = gpurun_push_buffer_object(L, count, dtype, 0);
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
