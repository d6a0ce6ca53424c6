/* gpurun.Condition: a conditional graph node's handle, made on a builder
 * (builder:create_condition) and set by kernels on the device. */
#ifndef GPURUN_TYPES_CONDITION_H
#define GPURUN_TYPES_CONDITION_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_condition_tag;

struct gpurun_condition {
    struct gpurun_object header;
    CUgraphConditionalHandle handle;  /* what a kernel parameter receives */
    struct gpurun_capture *root;      /* the capture whose graph it belongs to */
    CUgraph graph;                    /* the level its nodes must be added to */
    unsigned int default_value;
};

/* Makes a Condition of the graph `capture` (of the builder at
 * builder_index, which it keeps alive) records into, pushes it. */
struct gpurun_condition *gpurun_push_condition(lua_State *L, int builder_index,
                                               struct gpurun_capture *capture,
                                               unsigned int default_value);

void gpurun_open_condition(lua_State *L);

#endif
