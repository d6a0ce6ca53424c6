/* gpurun.SMResource: multiprocessors of a device, which a split divides
 * into groups that green contexts (types/context.c) are made of. */
#ifndef GPURUN_TYPES_SM_RESOURCE_H
#define GPURUN_TYPES_SM_RESOURCE_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_sm_resource_tag;

/* Where an SMResource came from: the driver splits only a device's whole
 * resource, and combines in one context only results of one split. */
enum gpurun_sm_origin { GPURUN_SM_DEVICE, GPURUN_SM_GROUP, GPURUN_SM_CONTEXT };

struct gpurun_sm_resource {
    struct gpurun_object header;
    CUdevResource resource;
    int device;
    enum gpurun_sm_origin origin;
    unsigned int split; /* GROUP: the split that made it (its groups and remainder share it) */
};

/* Pushes a new SMResource holding a copy of `resource`. */
struct gpurun_sm_resource *gpurun_push_sm_resource(lua_State *L, const CUdevResource *resource,
                                                   int device, enum gpurun_sm_origin origin,
                                                   unsigned int split);

/* Pushes { sm = SMResource }: what Device.resources and Context.resources hold. */
void gpurun_push_sm_resources(lua_State *L, const CUdevResource *resource, int device,
                              enum gpurun_sm_origin origin);

/* The open SMResource at index, or an error. */
struct gpurun_sm_resource *gpurun_check_sm_resource(lua_State *L, int index);

void gpurun_open_sm_resource(lua_State *L);

#endif
