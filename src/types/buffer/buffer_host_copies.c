/* Buffer copies to and from host memory other than Lua tables: strings of
 * raw elements, page-locked PinnedBuffers (queued, not waited for), and
 * Lua files streamed through page-locked staging in chunks, so that a file
 * of any size moves at PCIe speed without a Lua string of it. */
#include "types/buffer/buffer_object.h"
#include "types/buffer/buffer_transfer.h"
#include "types/buffer/buffer_host_copies.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "types/graph_builder.h"
#include "types/buffer/pinned_buffer.h"

/* Bytes per staging chunk of a file copy; two chunks alternate, so one
 * is read or written by the host while the other is copied. */
#define FILE_CHUNK ((size_t)8 << 20)

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

void gpurun_push_bytes(lua_State *L, int self_index, size_t first, size_t count, int stream_index,
                       const char *operation)
{
    luaL_Buffer b;
    size_t bytes = count * gpurun_check_live_buffer(L, self_index)->element_size;
    /* The box first: its allocation can run finalizers, which must not
     * find a stream already taken for this copy (or the buffer closed). */
    char *out = luaL_buffinitsize(L, &b, bytes);
    struct gpurun_buffer part =
        gpurun_buffer_part(gpurun_check_live_buffer(L, self_index), first, count);
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

void gpurun_copy_pinned(lua_State *L, struct gpurun_buffer *part, int self_index, int index,
                        int to_device, int stream_index, const char *operation)
{
    struct gpurun_pinned *pinned = gpurun_check_pinned(L, index);
    if (pinned->count != part->count || pinned->dtype != part->dtype)
        gpurun_arg_error(L, index, "gpurun.PinnedBuffer of %I %s elements expected, got %I %s "
                                   "elements", (LUAI_UACINT)part->count,
                         gpurun_dtypes[part->dtype].name, (LUAI_UACINT)pinned->count,
                         gpurun_dtypes[pinned->dtype].name);
    if (gpurun_to_tagged(L, stream_index, &gpurun_builder_tag)) {
        struct gpurun_graph_builder *builder = gpurun_check_builder(L, stream_index);
        CUstream stream = gpurun_builder_stream(L, builder);
        gpurun_check_buffer_memory(L, part, &builder->capture);
        /* The graph replays the copy: it keeps both ends, and counts as
         * their user so that closing either is refused. */
        gpurun_capture_keep(L, &builder->capture, self_index);
        gpurun_capture_keep(L, &builder->capture, index);
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

int gpurun_is_file(lua_State *L, int index)
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
        staging[i] = gpurun_push_new_pinned(L, chunk, GPURUN_UINT8, 0);
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

void gpurun_copy_file(lua_State *L, int self_index, const struct gpurun_buffer *part, int index,
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
