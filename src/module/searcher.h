/* Finding gpurun's Lua library (gpurun.args, gpurun.bench, ...) without
 * touching package.path or package.cpath, which stay as lua sets them. */
#ifndef GPURUN_MODULE_SEARCHER_H
#define GPURUN_MODULE_SEARCHER_H

#include <lua.h>

/* Adds a searcher for the modules "gpurun.*" to package.searchers, right
 * after package.preload's, once per state. It loads them from one folder:
 * $GPURUN_LUA_DIR (unless the registry has LUA_NOENV, as after lua -E); the
 * source tree's lua/ when binary_path (the executable or gpurun.so holding
 * the bindings) is in the build folder; else
 * <binary's folder>/<to_installed>, the installed library; else the source
 * tree's lua/. No folder found: no searcher, package.path alone serves. */
void gpurun_add_lua_searcher(lua_State *L, const char *binary_path, const char *to_installed);

/* Whether the state has the searcher (or decided it needs none). */
int gpurun_has_lua_searcher(lua_State *L);

/* The executable's setup: `gpurun` in package.preload and the searcher. */
void gpurun_setup_paths(lua_State *L);

#endif
