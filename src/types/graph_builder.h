/* gpurun.GraphBuilder: captures the work launched on it into a graph. */
#ifndef GPURUN_TYPES_GRAPH_BUILDER_H
#define GPURUN_TYPES_GRAPH_BUILDER_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_builder_tag;

/* User value 1: the Stream object it captures. */
struct gpurun_graph_builder {
    struct gpurun_object header;
    struct gpurun_capture capture;
};

/* The open GraphBuilder at index (on an open stream), or an error. */
struct gpurun_graph_builder *gpurun_check_builder(lua_State *L, int index);

/* The stream to launch on for a builder that is building, or an error. */
CUstream gpurun_builder_stream(lua_State *L, struct gpurun_graph_builder *builder);

void gpurun_open_graph_builder(lua_State *L);

#endif
