#include "lua_path.h"
#include "lnvtx.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <lauxlib.h>

int luaopen_gpurun(lua_State *L);

static int is_directory(const char *path)
{
    struct stat info;
    return stat(path, &info) == 0 && S_ISDIR(info.st_mode);
}

/* Writes the folder holding the running executable into dir. */
static int executable_dir(char *dir, size_t size, const char *argv0)
{
    char path[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) {
        if (argv0 == NULL || realpath(argv0, path) == NULL)
            return 0;
    } else {
        path[n] = '\0';
    }
    char *slash = strrchr(path, '/');
    if (slash == NULL || (size_t)(slash - path) >= size)
        return 0;
    *slash = '\0';
    strcpy(dir, path);
    return 1;
}

static const char *find_lua_dir(char *buffer, size_t size, const char *argv0, int ignore_env)
{
    const char *from_env = ignore_env ? NULL : getenv("GPURUN_LUA_DIR");
    if (from_env && *from_env)
        return from_env;
    char exe_dir[PATH_MAX];
    if (executable_dir(exe_dir, sizeof exe_dir, argv0)) {
        if (snprintf(buffer, size, "%s/../share/gpurun/lua", exe_dir) < (int)size
            && is_directory(buffer))
            return buffer;
    }
    if (is_directory(GPURUN_SOURCE_LUA_DIR))
        return GPURUN_SOURCE_LUA_DIR;
    return NULL;
}

void gpurun_setup_paths(lua_State *L, const char *argv0, int ignore_env)
{
    char buffer[PATH_MAX];
    const char *dir = find_lua_dir(buffer, sizeof buffer, argv0, ignore_env);

    lua_getglobal(L, "package");
    if (dir) {
        lua_getfield(L, -1, "path");
        lua_pushfstring(L, "%s/?.lua;%s/?/init.lua;%s", dir, dir, lua_tostring(L, -1));
        lua_setfield(L, -3, "path");
        lua_pop(L, 1);
    }
    lua_getfield(L, -1, "preload");
    lua_pushcfunction(L, luaopen_gpurun);
    lua_setfield(L, -2, "gpurun");
    lua_pushcfunction(L, luaopen_gpurun_nvtx); /* gpurun.so exports it too, for Lua's own searcher */
    lua_setfield(L, -2, "gpurun.nvtx");
    lua_pop(L, 2);
}
