/* dladdr */
#define _GNU_SOURCE

#include "module/entry.h"

#include <dlfcn.h>
#include <stdatomic.h>

#include <lauxlib.h>

#include "module/searcher.h"

#define GUARD_KEY "gpurun.state_guard"

/* The main thread of the state that has these bindings open. The runtime
 * they drive (contexts, the current stream, captures) is per process. */
static _Atomic(lua_State *) owner;

/* Kept in the registry of the state that has the bindings open. */
struct state_guard {
    _Atomic(lua_State *) *owner;  /* which copy of the bindings made it */
    int claimed;
};

/* The guard's __gc, which runs after the runtime's (it is created before
 * it): the state is closing, another may open the module now. */
static int release_owner(lua_State *L)
{
    struct state_guard *guard = lua_touserdata(L, 1);
    if (guard->claimed)
        atomic_store(guard->owner, NULL);
    return 0;
}

static void claim_state(lua_State *L)
{
    if (lua_getfield(L, LUA_REGISTRYINDEX, GUARD_KEY) != LUA_TNIL) {
        /* Opened before in this state (busted reloads modules): by these
         * bindings, or by another copy of them. */
        const struct state_guard *guard = lua_touserdata(L, -1);
        int ours = guard != NULL && guard->owner == &owner;
        lua_pop(L, 1);
        if (!ours)
            luaL_error(L, "gpurun is already open in this Lua state from another copy of its "
                          "bindings (the gpurun executable has them built in: do not load "
                          "gpurun.so into it)");
        return;
    }
    lua_pop(L, 1);
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    lua_State *main_thread = lua_tothread(L, -1);
    lua_pop(L, 1);

    /* Everything that can raise a memory error comes before the claim or
     * leaves the guard to the collector, whose __gc then gives it back. */
    struct state_guard *guard = lua_newuserdatauv(L, sizeof *guard, 0);
    guard->owner = &owner;
    guard->claimed = 0;
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, release_owner);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_State *expected = NULL;
    if (!atomic_compare_exchange_strong(&owner, &expected, main_thread))
        luaL_error(L, "gpurun supports one Lua state per process, and another Lua state of "
                      "this process has it open: close that state first");
    guard->claimed = 1;
    lua_setfield(L, LUA_REGISTRYINDEX, GUARD_KEY);
}

/* Where the Lua library is when these bindings are gpurun.so: found from
 * the file the dynamic loader opened. */
static void add_module_searcher(lua_State *L)
{
    Dl_info info;
    const char *module_path = NULL;
    if (dladdr((void *)gpurun_module_prologue, &info) != 0)
        module_path = info.dli_fname;
    gpurun_add_lua_searcher(L, module_path, GPURUN_MODULE_TO_LUA_LIBRARY);
}

void gpurun_module_prologue(lua_State *L)
{
    luaL_checkversion(L);
    claim_state(L);
    /* The executable added its searcher at start-up. */
    if (!gpurun_has_lua_searcher(L))
        add_module_searcher(L);
}
