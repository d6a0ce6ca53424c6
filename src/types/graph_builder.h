/* gpurun.GraphBuilder: captures the work launched on it into a graph. */
#ifndef GPURUN_TYPES_GRAPH_BUILDER_H
#define GPURUN_TYPES_GRAPH_BUILDER_H

#include "runtime/runtime.h"

/* ---- the launch target: where work goes, a Stream or a building builder */

/* The stream a launch goes on: a Stream (refused while a builder captures
 * it), or a GraphBuilder that is building, which sets *capture. */
CUstream gpurun_launch_target(lua_State *L, int index, struct gpurun_capture **capture);

/* The context of the launch target at index (already checked by
 * gpurun_launch_target; capture is what it set): a device's primary
 * context, or a green context's (types/context.c). */
CUcontext gpurun_launch_context(lua_State *L, int index, const struct gpurun_capture *capture);

/* Pushes what keeps that context alive (the target at index, checked by
 * gpurun_launch_target): a green context's gpurun.Context, or nil for a
 * primary context, which lives until exit. Whatever keeps the context past
 * the call (a graph, a library's plan) keeps this in a user value, since
 * destroying a context frees what was made in it. */
void gpurun_push_context_keeper(lua_State *L, int index);

/* Pushes { body graph... } (light userdata) of a conditional node a
 * builder made and returns 1, or pushes nothing and returns 0. */
int gpurun_push_conditional_bodies(lua_State *L, CUgraphNode node);

/* The builder at index, which must be building, or an error naming method. */
struct gpurun_graph_builder *gpurun_check_building(lua_State *L, int index, const char *method);

/* A builder on a new stream of the parent's device, made from the builder
 * at parent_index (kept as its parent); pushed. */
struct gpurun_graph_builder *gpurun_push_builder_child(lua_State *L, int parent_index,
                                                       const struct gpurun_graph_builder *parent);

/* A body's user value: its closing function, what its node adds after the
 * user's work (the while loop's next decision or cancel check), run (once)
 * by end_building. */
#define GPURUN_BUILDER_CLOSING_VALUE 3

void gpurun_open_graph_builder(lua_State *L);
void gpurun_open_graph_conditionals(lua_State *L);

#endif
