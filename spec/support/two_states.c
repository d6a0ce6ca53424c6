/* Opens gpurun.so from several Lua states of one process, as an embedding
 * host could, for spec/module_spec.lua:
 *
 *   two_states MODULE_DIR
 *
 * state A opens it and stays open; state B tries while A is open; A closes;
 * state C opens it. One line each: "A: ok", "B: <error message>", ... */
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>
#include <lualib.h>

static lua_State *open_module(const char *name, const char *module_dir)
{
    lua_State *L = luaL_newstate();
    if (L == NULL) {
        printf("%s: cannot create state\n", name);
        return NULL;
    }
    luaL_openlibs(L);
    lua_getglobal(L, "package");
    lua_pushfstring(L, "%s/?.so", module_dir);
    lua_setfield(L, -2, "cpath");
    lua_pop(L, 1);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "gpurun");
    if (lua_pcall(L, 1, 1, 0) == LUA_OK)
        printf("%s: ok, %s\n", name, lua_type(L, -1) == LUA_TTABLE ? "a table" : "not a table");
    else
        printf("%s: %s\n", name, lua_tostring(L, -1));
    lua_settop(L, 0);
    return L;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s MODULE_DIR\n", argv[0]);
        return 2;
    }
    lua_State *a = open_module("A", argv[1]);
    lua_State *b = open_module("B", argv[1]);
    if (a)
        lua_close(a);
    lua_State *c = open_module("C", argv[1]);
    if (b)
        lua_close(b);
    if (c)
        lua_close(c);
    fflush(stdout);
    return 0;
}
