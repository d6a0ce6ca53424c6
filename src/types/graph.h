/* gpurun.Graph: an executable graph, replayed on streams. */
#ifndef GPURUN_TYPES_GRAPH_H
#define GPURUN_TYPES_GRAPH_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_graph_tag;

void gpurun_open_graph(lua_State *L);

#endif
