/* What a Buffer is to every operation on one: its tag and checks, the
 * streams it was used on (so that its free waits for their work), the
 * stream its work goes on, and its copies (copy_from, copy_to) with Lua
 * tables, strings of raw elements, other Buffers, PinnedBuffers (queued,
 * not waited for) and Lua files (streamed through page-locked staging in
 * chunks, so that a file of any size moves at PCIe speed without a Lua
 * string of it). The bottom of types/buffer/: its other files and the
 * types that take buffers (compare, generator, launch, graph) call it. */
#include "types/buffer/internal.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "types/buffer/pinned_buffer.h"
#include "types/memory_pool.h"

/* Bytes per staging chunk of a file copy; two chunks alternate, so one
 * is read or written by the host while the other is copied. */
#define FILE_CHUNK ((size_t)8 << 20)

const struct gpurun_tag gpurun_buffer_tag = {"gpurun.Buffer"};

/* The Buffer at index, open (a view whose base was closed says so); and
 * with its device current, for the operations that act on the current
 * device. */
struct gpurun_buffer *gpurun_check_buffer(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = gpurun_check_tagged(L, index, &gpurun_buffer_tag);
    if (buffer->header.closed) {
        if (buffer->base && buffer->base->header.closed)
            gpurun_error(L, "attempt to use a closed gpurun.Buffer (the buffer this is a view "
                            "of was closed)");
        gpurun_closed_error(L, gpurun_buffer_tag.type_name);
    }
    return buffer;
}

struct gpurun_buffer *gpurun_check_live_buffer(lua_State *L, int index)
{
    struct gpurun_buffer *buffer = gpurun_check_buffer(L, index);
    if (buffer->context != gpurun_runtime.current_context) {
        if (gpurun_runtime.current_device < 0)
            gpurun_error(L, "gpurun.Buffer lives on device %d but no device is current; call "
                            "gpurun.Device(%d):set_current() first", buffer->device, buffer->device);
        gpurun_error(L, "gpurun.Buffer lives on device %d but device %d is current; call "
                        "gpurun.Device(%d):set_current() first", buffer->device,
                     gpurun_runtime.current_device, buffer->device);
    }
    return buffer;
}

void gpurun_check_buffer_memory(lua_State *L, const struct gpurun_buffer *buffer,
                                const struct gpurun_capture *capture)
{
    const struct gpurun_buffer *owner = buffer->base ? buffer->base : buffer;
    if (!owner->unallocated)
        return;
    if (owner->header.allocated_in) {
        if (capture && owner->header.allocated_in == capture->root)
            return;
        gpurun_error(L, "gpurun.Buffer was made inside a graph capture: it has memory only for "
                        "that capture's work (pass one of its GraphBuilders as the stream) until "
                        "the graph completed from it is launched");
    }
    gpurun_error(L, "gpurun.Buffer belongs to a graph that has not been launched yet: its memory "
                    "is made by the graph's allocation node, so launch the graph "
                    "(graph:launch(stream)) and use the buffer on that stream after it");
}

void gpurun_record_buffer_use(lua_State *L, struct gpurun_buffer *owner, int index,
                              int stream_index)
{
    index = lua_absindex(L, index);
    stream_index = lua_absindex(L, stream_index);
    struct gpurun_stream *stream =
        &((struct gpurun_stream_object *)lua_touserdata(L, stream_index))->stream;
    if (!owner->ordered || owner->stream == stream)
        return;
    int slot = 0;
    for (; slot < GPURUN_BUFFER_USES && owner->used_on[slot] != NULL; slot++)
        if (owner->used_on[slot] == stream)
            return;
    if (slot == GPURUN_BUFFER_USES) {
        owner->uses_lost = 1;
        return;
    }
    if (lua_touserdata(L, index) == owner)
        lua_pushvalue(L, index);
    else
        lua_getiuservalue(L, index, 1); /* a view's base */
    lua_pushvalue(L, stream_index);
    lua_setiuservalue(L, -2, GPURUN_BUFFER_USES_VALUE + slot);
    lua_pop(L, 1);
    owner->used_on[slot] = stream;
}

void gpurun_note_buffer_use_on(lua_State *L, int index, int stream_index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    struct gpurun_buffer *owner = gpurun_buffer_owner(buffer);
    if (!owner->ordered)
        return;
    if (stream_index > 0 && !lua_isnoneornil(L, stream_index)) {
        if (gpurun_to_tagged(L, stream_index, &gpurun_stream_tag))
            gpurun_record_buffer_use(L, owner, index, stream_index);
        return;
    }
    if (gpurun_runtime.current_stream == NULL)
        return; /* no stream: the device was waited for after the work */
    index = lua_absindex(L, index);
    gpurun_push_current_stream(L);
    gpurun_record_buffer_use(L, owner, index, lua_gettop(L));
    lua_pop(L, 1);
}

/* ---- the stream an operation goes on ------------------------------------ */

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

int gpurun_transfer_error(lua_State *L, const char *what_fmt, ...)
{
    va_list args;
    va_start(args, what_fmt);
    const char *what = lua_pushvfstring(L, what_fmt, args);
    va_end(args);
    if (is_capture_error(cuda_last_failed_result))
        return gpurun_cuda_error(L, "%s during a graph capture; the capture was abandoned "
                                    "(make, fill and read buffers before begin_building or "
                                    "after end_building)", what);
    return gpurun_cuda_error(L, "%s", what);
}

CUstream gpurun_begin_transfer(lua_State *L, int stream_index, const char *operation)
{
    if (stream_index > 0 && gpurun_to_tagged(L, stream_index, &gpurun_builder_tag))
        gpurun_error(L, "%s: a copy to or from Lua values cannot be a graph node: the host "
                        "data is read or written when the call is made, not at each replay; "
                        "call it before begin_building or after end_building (capture "
                        "abandoned)", operation);
    struct gpurun_stream *stream = gpurun_operation_stream(L, stream_index);
    if (stream == NULL) {
        if (gpurun_wait_device(L, NULL, operation) != CUDA_SUCCESS)
            gpurun_transfer_error(L, "waiting for the device before %s", operation);
        return NULL;
    }
    if (stream->device != gpurun_runtime.current_device)
        gpurun_error(L, "%s: the stream belongs to device %d but device %d is current (buffer "
                        "operations go on streams of the current device)", operation,
                     stream->device, gpurun_runtime.current_device);
    /* Work that may never end (a graph with a while loop) or that waits for
     * a host callback is waited for so that Ctrl-C can end the wait and the
     * callbacks run; the copies below then wait no longer. */
    if ((stream->unbounded || gpurun_host_calls_pending() > 0) && stream->capture == NULL)
        gpurun_wait_stream(L, stream, operation);
    CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
    if (stream->capture == NULL
        && CUDA_CALL(cuStreamIsCapturing, stream->handle, &status) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "asking whether the stream is being captured");
    if (stream->capture || status != CU_STREAM_CAPTURE_STATUS_NONE)
        gpurun_refuse_captured(L, 0, operation, "pass its GraphBuilder for a fill or a copy "
                               "between buffers to become a graph node (host data is read when "
                               "the call is made, so copies to or from Lua tables happen before "
                               "begin_building or after end_building)");
    return stream->handle;
}

void gpurun_end_transfer(lua_State *L, CUstream stream, const char *operation)
{
    if (stream == NULL && gpurun_wait_device(L, NULL, operation) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "waiting for %s to finish", operation);
}

CUstream gpurun_begin_device_transfer(lua_State *L, int stream_index, const char *operation,
                                      struct gpurun_capture **capture)
{
    *capture = gpurun_to_building(L, stream_index);
    if (*capture)
        return (*capture)->stream->handle;
    return gpurun_begin_transfer(L, stream_index, operation);
}

void gpurun_sync_other_device(lua_State *L, const struct gpurun_buffer *buffer,
                              const char *operation)
{
    if (gpurun_wait_device(L, buffer->context, operation) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "waiting for device %d around %s", buffer->device, operation);
}

CUstream gpurun_begin_host_transfer(lua_State *L, const char *operation)
{
    return gpurun_begin_transfer(L, 0, operation);
}

/* ---- element copies and fills ------------------------------------------ */

void gpurun_order_host_access(lua_State *L, const struct gpurun_buffer *buffer, CUstream stream,
                              const char *what)
{
    if (stream && (buffer->base ? buffer->base : buffer)->managed)
        gpurun_wait_direct_access(L, buffer->context, what);
}

void gpurun_write_elements(lua_State *L, struct gpurun_buffer *buffer, size_t first,
                           size_t count, const void *host, CUstream stream)
{
    size_t size = buffer->element_size;
    gpurun_check_buffer_memory(L, buffer, NULL);
    gpurun_order_host_access(L, buffer, stream, "writing a managed gpurun.Buffer from the host");
    if (CUDA_CALL(cuMemcpyHtoDAsync, buffer->pointer + first * size, host, count * size,
                  stream) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "copying to a gpurun.Buffer");
    if (CUDA_CALL(cuStreamSynchronize, stream) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "waiting for a copy to a gpurun.Buffer");
}

void gpurun_read_elements(lua_State *L, const struct gpurun_buffer *buffer, size_t first,
                          size_t count, void *host, CUstream stream)
{
    size_t size = buffer->element_size;
    gpurun_check_buffer_memory(L, buffer, NULL);
    gpurun_order_host_access(L, buffer, stream, "reading a managed gpurun.Buffer on the host");
    if (CUDA_CALL(cuMemcpyDtoHAsync, host, buffer->pointer + first * size, count * size,
                  stream) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "copying from a gpurun.Buffer");
    if (CUDA_CALL(cuStreamSynchronize, stream) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "waiting for a copy from a gpurun.Buffer");
}

/* ---- copies ------------------------------------------------------------- */

/* Each copy below is between a `part` (gpurun_buffer_part) and the value
 * at `index`; stream_index is the stream argument. */
struct gpurun_buffer gpurun_buffer_part(const struct gpurun_buffer *buffer, size_t first,
                                        size_t count)
{
    struct gpurun_buffer part = *buffer;
    part.pointer += first * buffer->element_size;
    part.count = count;
    return part;
}

static size_t part_bytes(const struct gpurun_buffer *part)
{
    return part->count * part->element_size;
}

/* ---- tables, and other Buffers ------------------------------------------ */

/* The sequence at table_index as elements in new staging memory (pushed),
 * every element checked before any device work. */
unsigned char *gpurun_stage_table(lua_State *L, int table_index, int arg, size_t count, int dtype)
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
    const unsigned char *host =
        gpurun_stage_table(L, table_index, table_index, count, buffer->dtype);
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

/* ---- strings ------------------------------------------------------------- */

void gpurun_copy_from_string(lua_State *L, struct gpurun_buffer *part, int index, int stream_index,
                             const char *operation)
{
    size_t length = 0;
    const char *bytes = lua_tolstring(L, index, &length);
    if (length != part_bytes(part))
        gpurun_arg_error(L, index, "string of %I bytes (%I %s elements) expected, got %I bytes",
                         (LUAI_UACINT)part_bytes(part), (LUAI_UACINT)part->count,
                         gpurun_dtypes[part->dtype].name, (LUAI_UACINT)length);
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_write_elements(L, part, 0, part->count, bytes, stream);
    gpurun_end_transfer(L, stream, operation);
}

/* ---- pinned memory -------------------------------------------------------- */

static CUresult queue_copy(const struct gpurun_buffer *part, unsigned char *host, int to_device,
                           CUstream stream)
{
    if (to_device)
        return CUDA_CALL(cuMemcpyHtoDAsync, part->pointer, host, part_bytes(part), stream);
    return CUDA_CALL(cuMemcpyDtoHAsync, host, part->pointer, part_bytes(part), stream);
}

static const char *direction(int to_device)
{
    return to_device ? "copying a gpurun.PinnedBuffer to a gpurun.Buffer"
                     : "copying a gpurun.Buffer to a gpurun.PinnedBuffer";
}

/* Between the part and the PinnedBuffer at index (as many elements, the same
 * dtype), queued: on a stream it returns at once (the PinnedBuffer waits for
 * the copy before the host touches it); on a GraphBuilder that is building
 * it becomes a node of the graph, which keeps both alive; with no stream
 * at all it waits for the device before and after. self_index is the
 * Buffer's argument (the capture keeps it). */
static void copy_pinned(lua_State *L, struct gpurun_buffer *part, int self_index, int index,
                        int to_device, int stream_index, const char *operation)
{
    struct gpurun_pinned *pinned = gpurun_check_pinned(L, index);
    if (pinned->count != part->count || pinned->dtype != part->dtype)
        gpurun_arg_error(L, index, "gpurun.PinnedBuffer of %I %s elements expected, got %I %s "
                                   "elements", (LUAI_UACINT)part->count,
                         gpurun_dtypes[part->dtype].name, (LUAI_UACINT)pinned->count,
                         gpurun_dtypes[pinned->dtype].name);
    struct gpurun_capture *capture = gpurun_to_building(L, stream_index);
    if (capture) {
        CUstream stream = capture->stream->handle;
        gpurun_check_buffer_memory(L, part, capture);
        /* The graph replays the copy: it keeps both ends, and counts as
         * their user so that closing either is refused. */
        gpurun_capture_keep(L, capture, self_index);
        gpurun_capture_keep(L, capture, index);
        /* Keeping allocates, and a finalizer could have closed either. */
        gpurun_check_live_buffer(L, self_index);
        gpurun_check_pinned(L, index);
        if (queue_copy(part, pinned->host, to_device, stream) != CUDA_SUCCESS)
            gpurun_transfer_error(L, "%s in a graph capture", direction(to_device));
        return;
    }
    gpurun_check_buffer_memory(L, part, NULL);
    struct gpurun_stream *target = gpurun_operation_stream(L, stream_index);
    if (target)
        gpurun_pinned_prepare(L, pinned);
    /* On a stream: queued, and the PinnedBuffer records it; with none,
     * waited for like every other buffer operation without a stream. */
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    if (queue_copy(part, pinned->host, to_device, stream) != CUDA_SUCCESS)
        gpurun_transfer_error(L, "%s", direction(to_device));
    if (target) {
        gpurun_pinned_queued(L, pinned, stream);
        gpurun_note_buffer_use_on(L, self_index, stream_index);
    } else
        gpurun_end_transfer(L, stream, operation);
}

/* ---- files ------------------------------------------------------------------ */

/* Whether the value at index is a Lua file handle (open or closed). */
static int is_file(lua_State *L, int index)
{
    return luaL_testudata(L, index, LUA_FILEHANDLE) != NULL;
}

static FILE *check_file(lua_State *L, int index)
{
    luaL_Stream *file = luaL_testudata(L, index, LUA_FILEHANDLE);
    if (file == NULL)
        gpurun_type_error(L, index, "file");
    if (file->closef == NULL)
        gpurun_arg_error(L, index, "attempt to use a closed file");
    return file->f;
}

/* Two page-locked chunks, left on the stack (freed by the collector on any
 * error, after their queued copies). */
static void push_staging(lua_State *L, size_t total, struct gpurun_pinned *staging[2])
{
    size_t chunk = total < FILE_CHUNK ? total : FILE_CHUNK;
    for (int i = 0; i < 2; i++) {
        staging[i] = gpurun_push_new_pinned(L, chunk, GPURUN_UINT8, 0, 0);
        gpurun_pinned_prepare(L, staging[i]);
    }
}

/* Queues the copy of `bytes` at `offset` of the part to or from staging. */
static void queue_chunk(lua_State *L, const struct gpurun_buffer *part, size_t offset, size_t bytes,
                        struct gpurun_pinned *staging, int to_device, CUstream stream)
{
    CUresult result = to_device
        ? CUDA_CALL(cuMemcpyHtoDAsync, part->pointer + offset, staging->host, bytes, stream)
        : CUDA_CALL(cuMemcpyDtoHAsync, staging->host, part->pointer + offset, bytes, stream);
    if (result != CUDA_SUCCESS)
        gpurun_transfer_error(L, "copying a file chunk %s a gpurun.Buffer",
                              to_device ? "to" : "from");
    gpurun_pinned_queued(L, staging, stream);
}

static void file_failed(lua_State *L, FILE *file, const char *operation, const char *doing,
                        size_t done, size_t total)
{
    if (ferror(file))
        gpurun_error(L, "%s: %s the file failed after %I of %I bytes: %s", operation, doing,
                     (LUAI_UACINT)done, (LUAI_UACINT)total, strerror(errno));
    gpurun_error(L, "%s: %s the file: it ended after %I of %I bytes", operation, doing,
                 (LUAI_UACINT)done, (LUAI_UACINT)total);
}

/* File -> device: chunk k is read while chunk k - 1 is copied. */
static void read_file(lua_State *L, const struct gpurun_buffer *part, FILE *file,
                      struct gpurun_pinned *staging[2], CUstream stream, const char *operation)
{
    size_t total = part_bytes(part), chunk = staging[0]->count;
    for (size_t offset = 0, k = 0; offset < total; offset += chunk, k++) {
        size_t bytes = total - offset < chunk ? total - offset : chunk;
        struct gpurun_pinned *buffer = staging[k % 2];
        gpurun_pinned_wait(L, buffer); /* its copy two chunks ago */
        size_t got = fread(buffer->host, 1, bytes, file);
        if (got != bytes)
            file_failed(L, file, operation, "reading", offset + got, total);
        queue_chunk(L, part, offset, bytes, buffer, 1, stream);
    }
}

/* Device -> file: chunk k + 1 is copied while chunk k is written. */
static void write_file(lua_State *L, const struct gpurun_buffer *part, FILE *file,
                       struct gpurun_pinned *staging[2], CUstream stream, const char *operation)
{
    size_t total = part_bytes(part), chunk = staging[0]->count;
    queue_chunk(L, part, 0, total < chunk ? total : chunk, staging[0], 0, stream);
    for (size_t offset = 0, k = 0; offset < total; offset += chunk, k++) {
        size_t bytes = total - offset < chunk ? total - offset : chunk;
        size_t next = offset + chunk;
        if (next < total)
            queue_chunk(L, part, next, total - next < chunk ? total - next : chunk,
                        staging[(k + 1) % 2], 0, stream);
        struct gpurun_pinned *buffer = staging[k % 2];
        gpurun_pinned_wait(L, buffer);
        if (fwrite(buffer->host, 1, bytes, file) != bytes)
            file_failed(L, file, operation, "writing", offset, total);
    }
}

/* Between the part of the Buffer at self_index and the Lua file at index,
 * from or at its position, through page-locked staging in chunks; returns
 * when done. */
static void copy_file(lua_State *L, int self_index, const struct gpurun_buffer *part, int index,
                      int to_device, int stream_index, const char *operation)
{
    check_file(L, index);
    gpurun_check_buffer_memory(L, part, NULL);
    struct gpurun_pinned *staging[2];
    push_staging(L, part_bytes(part), staging);
    /* The staging ran finalizers: either may have been closed. */
    gpurun_check_live_buffer(L, self_index);
    FILE *file = check_file(L, index);
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_order_host_access(L, part, stream, operation);
    if (to_device)
        read_file(L, part, file, staging, stream, operation);
    else
        write_file(L, part, file, staging, stream, operation);
    for (int i = 0; i < 2; i++)
        gpurun_pinned_wait(L, staging[i]);
    gpurun_end_transfer(L, stream, operation);
    if (!to_device && fflush(file) != 0)
        gpurun_error(L, "%s: writing the file failed: %s", operation, strerror(errno));
}

/* ---- methods ------------------------------------------------------------ */

/* Every method below takes an optional range (first, count) of elements of
 * self after its other arguments, then an optional stream:
 * gpurun_opt_range says where the stream argument is. */

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
int gpurun_buffer_copy_from(lua_State *L)
{
    struct gpurun_buffer part;
    int stream_index = copy_part(L, &part);
    const char *operation = "Buffer:copy_from";
    if (gpurun_to_tagged(L, 2, &gpurun_buffer_tag))
        copy_buffer(L, &part, gpurun_check_buffer(L, 2), 1, stream_index, operation);
    else if (gpurun_to_tagged(L, 2, &gpurun_pinned_tag))
        copy_pinned(L, &part, 1, 2, 1, stream_index, operation);
    else if (lua_type(L, 2) == LUA_TTABLE)
        write_table(L, &part, 2, stream_index, operation);
    else if (lua_type(L, 2) == LUA_TSTRING)
        gpurun_copy_from_string(L, &part, 2, stream_index, operation);
    else if (is_file(L, 2))
        copy_file(L, 1, &part, 2, 1, stream_index, operation);
    else
        gpurun_type_error(L, 2, "table, string, gpurun.Buffer, gpurun.PinnedBuffer or file");
    lua_settop(L, 1);
    return 1;
}

/* copy_to(destination [, first [, count]] [, stream]) -> self: destination
 * is a Buffer, a PinnedBuffer or a Lua file (written at its position); the
 * range is what of self is copied (by default all of it, which the
 * destination must match; from first on, as many as the destination has). */
int gpurun_buffer_copy_to(lua_State *L)
{
    struct gpurun_buffer part;
    int stream_index = copy_part(L, &part);
    const char *operation = "Buffer:copy_to";
    if (gpurun_to_tagged(L, 2, &gpurun_buffer_tag))
        copy_buffer(L, &part, gpurun_check_buffer(L, 2), 0, stream_index, operation);
    else if (gpurun_to_tagged(L, 2, &gpurun_pinned_tag))
        copy_pinned(L, &part, 1, 2, 0, stream_index, operation);
    else if (is_file(L, 2))
        copy_file(L, 1, &part, 2, 0, stream_index, operation);
    else
        gpurun_type_error(L, 2, "gpurun.Buffer, gpurun.PinnedBuffer or file");
    lua_settop(L, 1);
    return 1;
}

int gpurun_buffer_reached_from(const struct gpurun_buffer *buffer, int device)
{
    if (gpurun_peer_enabled(device, buffer->device))
        return 1;
    return buffer->pool && device >= 0 && device < GPURUN_MAX_DEVICES
           && ((buffer->pool->reached_by >> device) & 1);
}
