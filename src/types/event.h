/* gpurun.Event: a point in a stream's work, for GPU-side time and for
 * ordering one stream after another. */
#ifndef GPURUN_TYPES_EVENT_H
#define GPURUN_TYPES_EVENT_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_event_tag;

struct gpurun_event {
    struct gpurun_object header;
    CUevent handle;
    unsigned int flags;  /* CU_EVENT_* it was created with */
    CUcontext context;   /* the device's context it was created in */
    int device;
    int recorded;
    /* The capture it was last recorded in (a wait on it then joins that
     * capture), or NULL. */
    struct gpurun_capture *capture;
};

/* Creates an event on the current device with CU_EVENT_* flags, pushes it. */
struct gpurun_event *gpurun_push_new_event(lua_State *L, unsigned int flags);

/* The same on the device whose context is given (for Stream:record on a
 * stream of a device that is not current). */
struct gpurun_event *gpurun_push_event_on(lua_State *L, unsigned int flags, CUcontext context,
                                          int device);

void gpurun_open_event(lua_State *L);

#endif
