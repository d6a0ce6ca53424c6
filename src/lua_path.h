/* Where gpurun's own Lua modules live, and the preloaded `gpurun` module. */
#ifndef GPURUN_LUA_PATH_H
#define GPURUN_LUA_PATH_H

#include <lua.h>

/* Puts gpurun's Lua module folder in front of package.path and registers
 * `gpurun` in package.preload. The folder is, in order: $GPURUN_LUA_DIR
 * (unless ignore_env), <exe>/../share/gpurun/lua (an installed gpurun), the
 * source tree's lua/ (a build-tree gpurun). */
void gpurun_setup_paths(lua_State *L, const char *argv0, int ignore_env);

#endif
