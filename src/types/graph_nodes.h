/* Graph's methods on its nodes: nodes, set_args, set_arg, set_config,
 * set_enabled (types/graph_nodes.c). */
#ifndef GPURUN_TYPES_GRAPH_NODES_H
#define GPURUN_TYPES_GRAPH_NODES_H

#include "runtime/runtime.h"

void gpurun_open_graph_nodes(lua_State *L);

#endif
