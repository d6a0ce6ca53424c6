/* A Buffer's elements one by one and all at once: Buffer:fill, get, set,
 * buf[i], to_table and to_bytes, and the fill that a graph's memset node
 * or a few host writes make. Host memory is a Lua userdata
 * (gpurun_push_staging), never malloc: an error raised halfway leaves
 * nothing behind. */
#include "types/buffer/internal.h"

#include <limits.h>
#include <string.h>

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
        gpurun_buffer_part(gpurun_check_live_buffer(L, self_index), first, count);
    CUstream stream = gpurun_begin_transfer(L, stream_index, operation);
    gpurun_read_elements(L, &part, 0, count, out, stream);
    gpurun_end_transfer(L, stream, operation);
    luaL_pushresultsize(&b, bytes);
}

/* gpurun_fill_buffer(value [, first [, count]] [, stream]) -> self */
int gpurun_buffer_fill(lua_State *L)
{
    lua_settop(L, 5); /* staging pushed later must not pass for a stream argument */
    struct gpurun_buffer *buffer = gpurun_check_live_buffer(L, 1);
    unsigned char pattern[GPURUN_MAX_ELEMENT_SIZE];
    gpurun_check_element(L, 2, buffer->dtype, pattern);
    size_t first, count;
    int stream_index = gpurun_opt_range(L, 3, buffer->count, 0, &first, &count);
    struct gpurun_buffer part = gpurun_buffer_part(buffer, first, count);
    gpurun_fill_buffer(L, &part, 1, pattern, stream_index, "Buffer:fill");
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
    struct gpurun_buffer part = gpurun_buffer_part(gpurun_check_live_buffer(L, 1), first, count);
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
