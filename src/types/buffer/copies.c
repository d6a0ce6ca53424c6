/* The Buffer's methods that move elements: between it and Lua tables,
 * strings of raw elements, other Buffers, PinnedBuffers (queued, not
 * waited for) and Lua files (streamed through page-locked staging in
 * chunks, so that a file of any size moves at PCIe speed without a Lua
 * string of it).
 *
 * Host memory is always a Lua userdata (gpurun_push_staging), never malloc:
 * an error raised halfway leaves nothing behind. Elements are converted in
 * C; the large paths call no Lua per element. */
#include "types/buffer/internal.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <string.h>

#include "types/buffer/pinned_buffer.h"
#include "types/graph_builder.h"

/* Bytes per staging chunk of a file copy; two chunks alternate, so one
 * is read or written by the host while the other is copied. */
#define FILE_CHUNK ((size_t)8 << 20)

/* A range of a buffer, as a buffer of its own for the functions here (a C
 * value, never a Lua object). Each copies between such a `part` and the
 * value at `index`; stream_index is the stream argument. */
static struct gpurun_buffer buffer_part(const struct gpurun_buffer *buffer, size_t first,
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

static int read_one(lua_State *L, struct gpurun_buffer *buffer, size_t index, int stream_index,
                    const char *operation)
{
    unsigned char value[GPURUN_MAX_ELEMENT_SIZE];
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_read_elements(L, buffer, index, 1, value, stream);
    gpurun_end_transfer(L, stream, operation);
    gpurun_push_element(L, buffer->dtype, value);
    return 1;
}

/* buffer: the Buffer at buffer_index, or a part of it. */
void gpurun_fill_buffer(lua_State *L, struct gpurun_buffer *buffer, int buffer_index,
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

/* Pushes the bytes of count elements from first (0-based) of the Buffer at
 * self_index as a string. */
static void push_bytes(lua_State *L, int self_index, size_t first, size_t count, int stream_index,
                       const char *operation)
{
    luaL_Buffer b;
    size_t bytes = count * gpurun_check_live_buffer(L, self_index)->element_size;
    /* The box first: its allocation can run finalizers, which must not
     * find a stream already taken for this copy (or the buffer closed). */
    char *out = luaL_buffinitsize(L, &b, bytes);
    struct gpurun_buffer part =
        buffer_part(gpurun_check_live_buffer(L, self_index), first, count);
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_read_elements(L, &part, 0, count, out, stream);
    gpurun_end_transfer(L, stream, operation);
    luaL_pushresultsize(&b, bytes);
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

/* gpurun_fill_buffer(value [, first [, count]] [, stream]) -> self */
int gpurun_buffer_fill(lua_State *L)
{
    lua_settop(L, 5); /* staging pushed later must not pass for a stream argument */
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    unsigned char pattern[GPURUN_MAX_ELEMENT_SIZE];
    gpurun_check_element(L, 2, buffer->dtype, pattern);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 3, buffer->count, 0, &first, &count);
    struct gpurun_buffer part = buffer_part(buffer, first, count);
    gpurun_fill_buffer(L, &part, 1, pattern, stream_index, "Buffer:fill");
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
    *part = buffer_part(buffer, first, count);
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

/* to_table([first [, count]] [, stream]) -> sequence: integers for integer
 * dtypes, floats for float dtypes. */
int gpurun_buffer_to_table(lua_State *L)
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
    struct gpurun_buffer part = buffer_part(gpurun_check_live_buffer(L, 1), first, count);
    CUstream stream = gpurun_begin_transfer(L, stream_index, "Buffer:to_table");
    gpurun_read_elements(L, &part, 0, count, host, stream);
    gpurun_end_transfer(L, stream, "Buffer:to_table");
    gpurun_push_sequence(L, part.dtype, host, count, "Buffer:to_table");
    return 1;
}

/* to_bytes([first [, count]] [, stream]) -> the elements' raw bytes as a
 * string (little-endian, as the GPU holds them). */
int gpurun_buffer_to_bytes(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 2, buffer->count, 0, &first, &count);
    push_bytes(L, 1, first, count, stream_index, "Buffer:to_bytes");
    return 1;
}

/* get(i [, stream]) -> element i (1-based) */
int gpurun_buffer_get(lua_State *L)
{
    lua_settop(L, 3);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    return read_one(L, buffer, index, 3, "Buffer:get");
}

/* set(i, value [, stream]) -> self */
int gpurun_buffer_set(lua_State *L)
{
    lua_settop(L, 4);
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    unsigned char value[GPURUN_MAX_ELEMENT_SIZE];
    gpurun_check_element(L, 3, buffer->dtype, value);
    CUstream stream = gpurun_begin_transfer(L, 4, "Buffer:set");
    gpurun_write_elements(L, buffer, index, 1, value, stream);
    gpurun_end_transfer(L, stream, "Buffer:set");
    lua_settop(L, 1);
    return 1;
}

/* buf[i]: element i, 1-based. */
int gpurun_buffer_element(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TNUMBER) {
        lua_pushnil(L);
        return 1;
    }
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    size_t index = gpurun_check_index(L, 2, buffer->count, "element");
    return read_one(L, buffer, index, 3, "gpurun.Buffer[i]");
}
