#include "module/searcher.h"
#include "runtime/runtime.h"
#include "types/nvtx.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <lauxlib.h>

#define SEARCHER_KEY "gpurun.lua_dir"
#define PREFIX "gpurun."

int luaopen_gpurun(lua_State *L);

static int is_directory(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

/* dir/gpurun is a folder: dir holds the library. */
static int holds_library(const char *dir)
{
    char path[PATH_MAX];
    return snprintf(path, sizeof path, "%s/gpurun", dir) < (int)sizeof path && is_directory(path);
}

static int same_directory(const char *a, const char *b)
{
    char real_a[PATH_MAX], real_b[PATH_MAX];
    return realpath(a, real_a) && realpath(b, real_b) && strcmp(real_a, real_b) == 0;
}

/* Pushes the folder to load from, or returns 0 with nothing pushed. */
static int push_lua_dir(lua_State *L, const char *binary_path, const char *to_installed)
{
    int ignore_env = lua_getfield(L, LUA_REGISTRYINDEX, "LUA_NOENV") != LUA_TNIL
                     && lua_toboolean(L, -1);
    lua_pop(L, 1);
    const char *from_env = ignore_env ? NULL : getenv("GPURUN_LUA_DIR");
    if (from_env && *from_env) {
        lua_pushstring(L, from_env);
        return 1;
    }
    char binary_dir[PATH_MAX];
    if (binary_path && realpath(binary_path, binary_dir)) {
        char *slash = strrchr(binary_dir, '/');
        *slash = '\0';
        if (same_directory(binary_dir, GPURUN_BUILD_DIR) && holds_library(GPURUN_SOURCE_LUA_DIR)) {
            lua_pushliteral(L, GPURUN_SOURCE_LUA_DIR);
            return 1;
        }
        char installed[PATH_MAX], real_installed[PATH_MAX];
        if (snprintf(installed, sizeof installed, "%s/%s", binary_dir, to_installed)
                < (int)sizeof installed
            && holds_library(installed) && realpath(installed, real_installed)) {
            lua_pushstring(L, real_installed);
            return 1;
        }
    }
    if (holds_library(GPURUN_SOURCE_LUA_DIR)) {
        lua_pushliteral(L, GPURUN_SOURCE_LUA_DIR);
        return 1;
    }
    return 0;
}

/* A package.searchers entry: "gpurun.x.y" -> <dir>/gpurun/x/y.lua, with
 * the messages of Lua's own file searcher. Other names are not its
 * business: nil, so that require's "not found" message is lua's. */
static int search_library(lua_State *L)
{
    const char *name = lua_tostring(L, 1); /* require passes a string */
    if (name == NULL || strncmp(name, PREFIX, sizeof PREFIX - 1) != 0)
        return 0;
    const char *dir = lua_tostring(L, lua_upvalueindex(1));
    const char *relative = luaL_gsub(L, name, ".", "/");
    const char *path = lua_pushfstring(L, "%s/%s.lua", dir, relative);
    FILE *file = fopen(path, "r");
    if (file == NULL) {
        lua_pushfstring(L, "no file '%s'", path);
        return 1;
    }
    fclose(file);
    if (luaL_loadfile(L, path) != LUA_OK)
        return gpurun_error(L, "error loading module '%s' from file '%s':\n\t%s", name, path,
                            lua_tostring(L, -1));
    lua_pushstring(L, path);
    return 2;
}

int gpurun_has_lua_searcher(lua_State *L)
{
    int has = lua_getfield(L, LUA_REGISTRYINDEX, SEARCHER_KEY) != LUA_TNIL;
    lua_pop(L, 1);
    return has;
}

void gpurun_add_lua_searcher(lua_State *L, const char *binary_path, const char *to_installed)
{
    if (gpurun_has_lua_searcher(L))
        return;
    if (!push_lua_dir(L, binary_path, to_installed)) {
        lua_pushboolean(L, 0);
        lua_setfield(L, LUA_REGISTRYINDEX, SEARCHER_KEY);
        return;
    }
    lua_pushvalue(L, -1);
    lua_setfield(L, LUA_REGISTRYINDEX, SEARCHER_KEY);
    lua_pushcclosure(L, search_library, 1);
    lua_getglobal(L, "package");
    if (lua_getfield(L, -1, "searchers") != LUA_TTABLE)
        gpurun_error(L, "'package.searchers' must be a table");
    /* Second, after preload: the library that belongs to these bindings
     * wins over another copy somewhere on package.path. */
    for (lua_Integer i = (lua_Integer)lua_rawlen(L, -1); i >= 2; i--) {
        lua_rawgeti(L, -1, i);
        lua_rawseti(L, -2, i + 1);
    }
    lua_pushvalue(L, -3);
    lua_rawseti(L, -2, 2);
    lua_pop(L, 3);
}

void gpurun_setup_paths(lua_State *L)
{
    lua_getglobal(L, "package");
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, luaopen_gpurun);
    lua_setfield(L, -2, "gpurun");
    lua_pushcfunction(L, luaopen_gpurun_nvtx); /* gpurun.so exports it too, for Lua's own searcher */
    lua_setfield(L, -2, "gpurun.nvtx");
    lua_pop(L, 2);
    gpurun_add_lua_searcher(L, "/proc/self/exe", GPURUN_EXECUTABLE_TO_LUA_LIBRARY);
}
