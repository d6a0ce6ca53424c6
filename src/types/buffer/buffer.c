/* What a Buffer is to every operation on one: its tag and checks, the
 * streams it was used on (so that its free waits for their work), and the
 * stream its work goes on, with the element copies and fills that work
 * ends in. The bottom of types/buffer/: its other files and the types
 * that take buffers (compare, generator, launch, graph) call it. */
#include "types/buffer/buffer.h"

#include <stdarg.h>
#include <string.h>

#include "types/buffer/pinned_buffer.h"
#include "types/graph_builder.h"
#include "types/memory_pool.h"

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
            gpurun_transfer_error(L, "filling a gpurun.Buffer");
        filled += n;
    }
}

void gpurun_fill_elements(lua_State *L, struct gpurun_buffer *buffer,
                          const unsigned char *pattern, CUstream stream, int capturing)
{
    size_t n = buffer->count;
    CUresult result = CUDA_SUCCESS;
    switch (buffer->element_size) {
    case 1:
        result = CUDA_CALL(cuMemsetD8Async, buffer->pointer, pattern[0], n, stream);
        break;
    case 2: {
        unsigned short half;
        memcpy(&half, pattern, sizeof half);
        result = CUDA_CALL(cuMemsetD16Async, buffer->pointer, half, n, stream);
        break;
    }
    case 4: {
        unsigned int word;
        memcpy(&word, pattern, sizeof word);
        result = CUDA_CALL(cuMemsetD32Async, buffer->pointer, word, n, stream);
        break;
    }
    default: { /* 8 or 16 bytes: one 4-byte word repeated, or no memset */
        size_t words = buffer->element_size / 4;
        unsigned int word[GPURUN_MAX_ELEMENT_SIZE / 4];
        memcpy(word, pattern, buffer->element_size);
        int uniform = 1;
        for (size_t i = 1; i < words; i++)
            uniform &= word[i] == word[0];
        if (!uniform && capturing)
            gpurun_error(L, "Buffer:fill: a graph's fill is a memset of 1, 2 or 4-byte words, and "
                            "the %s of this %d-byte value differ: fill before "
                            "begin_building, or launch a kernel that fills (capture abandoned)",
                         words == 2 ? "two halves" : "4-byte words", (int)buffer->element_size);
        if (!uniform)
            fill_by_doubling(L, buffer, pattern, stream);
        else
            result = CUDA_CALL(cuMemsetD32Async, buffer->pointer, word[0], words * n, stream);
        break;
    }
    }
    if (result != CUDA_SUCCESS)
        gpurun_transfer_error(L, "filling a gpurun.Buffer");
}

int gpurun_buffer_reached_from(const struct gpurun_buffer *buffer, int device)
{
    if (gpurun_peer_enabled(device, buffer->device))
        return 1;
    return buffer->pool && device >= 0 && device < GPURUN_MAX_DEVICES
           && ((buffer->pool->reached_by >> device) & 1);
}
