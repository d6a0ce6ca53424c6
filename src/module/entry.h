/* What luaopen_gpurun does before anything else, in the executable and in
 * gpurun.so alike. */
#ifndef GPURUN_MODULE_ENTRY_H
#define GPURUN_MODULE_ENTRY_H

#include <lua.h>

/* Checks that the Lua core matches the headers the bindings were built
 * with (luaL_checkversion), claims this process's bindings for the state
 * (one Lua state per process; a second one gets an error saying so, until
 * the first is closed), and, in a host other than gpurun's executable,
 * adds the searcher for gpurun's Lua library, found from where gpurun.so
 * was loaded. Raises on failure; call it first. */
void gpurun_module_prologue(lua_State *L);

#endif
