/* The facts a race check reads of a graph's nodes, in
 * package.loaded["gpurun.graph_core"] (types/graph_facts.c). */
#ifndef GPURUN_TYPES_GRAPH_FACTS_H
#define GPURUN_TYPES_GRAPH_FACTS_H

#include "runtime/runtime.h"

void gpurun_open_graph_facts(lua_State *L);

#endif
