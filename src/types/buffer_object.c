/* The Buffer's tag and the checks every operation on a Buffer starts with. */
#include "types/buffer_object.h"

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
