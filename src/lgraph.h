/* gpurun.Graph: an executable graph, replayed on streams. */
#ifndef GPURUN_LGRAPH_H
#define GPURUN_LGRAPH_H

#include "runtime.h"

extern const struct gpurun_tag gpurun_graph_tag;

void gpurun_open_graph(lua_State *L);

#endif
