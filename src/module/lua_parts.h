/* The parts of the gpurun module written in Lua (lua/gpurun/builtin/). */
#ifndef GPURUN_MODULE_LUA_PARTS_H
#define GPURUN_MODULE_LUA_PARTS_H

#include "runtime/runtime.h"

/* Adds what the Lua part `name` exports to the module table at index
 * `module`, made once per Lua state. */
void gpurun_open_lua_part(lua_State *L, int module, const char *name);

#endif
