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

/* Where work given a GraphBuilder in place of a stream is recorded: the
 * capture of the GraphBuilder at index, open and building (else an error),
 * or NULL when the value there is no GraphBuilder (index 0: none). Its
 * stream is what the work is queued on. */
struct gpurun_capture *gpurun_to_building(lua_State *L, int index);

/* Pushes { body graph... } (light userdata) of a conditional node a
 * builder made and returns 1, or pushes nothing and returns 0. */
int gpurun_push_conditional_bodies(lua_State *L, CUgraphNode node);

void gpurun_open_graph_builder(lua_State *L);

#endif
