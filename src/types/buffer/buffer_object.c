/* The Buffer's tag and the checks every operation on a Buffer starts with. */
#include "types/buffer/buffer_object.h"

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
    int slot = 0;
    while (slot < GPURUN_BUFFER_USES && owner->used_on[slot] != NULL)
        slot++;
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
    owner->used_on[slot] =
        &((struct gpurun_stream_object *)lua_touserdata(L, stream_index))->stream;
}

void gpurun_note_buffer_use_on(lua_State *L, int index, int stream_index)
{
    struct gpurun_buffer *buffer = lua_touserdata(L, index);
    if (!gpurun_buffer_owner(buffer)->ordered)
        return;
    if (stream_index > 0 && !lua_isnoneornil(L, stream_index)) {
        struct gpurun_stream_object *object = gpurun_to_tagged(L, stream_index, &gpurun_stream_tag);
        if (object)
            gpurun_note_buffer_use(L, buffer, index, &object->stream, stream_index);
        return;
    }
    if (gpurun_runtime.current_stream == NULL)
        return; /* no stream: the device was waited for after the work */
    index = lua_absindex(L, index);
    gpurun_push_current_stream(L);
    gpurun_note_buffer_use(L, buffer, index, gpurun_runtime.current_stream, lua_gettop(L));
    lua_pop(L, 1);
}
