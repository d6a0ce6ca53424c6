/* Graph:profile's C side (types/graph_profile.c): the instrumented twin
 * of a Graph, replayed, in package.loaded["gpurun.graph_profile_core"]. */
#ifndef GPURUN_TYPES_GRAPH_PROFILE_H
#define GPURUN_TYPES_GRAPH_PROFILE_H

#include "runtime/runtime.h"

void gpurun_open_graph_profile(lua_State *L);

#endif
