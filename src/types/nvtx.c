/* gpurun.nvtx: NVTX ranges and marks, so that a script's phases show as
 * named spans in Nsight Systems (`nsys profile gpurun script.lua`) and can
 * filter an Nsight Compute run.
 *
 * NVTX3 is header-only: the first call looks for a tool injected by the
 * profiler (NVTX_INJECTION64_PATH); without one every later call returns at
 * once through a null function pointer, so ranges cost next to nothing when
 * no tool is attached. Nothing to link (the loader uses dlopen, already on
 * gpurun's link line). */
#include "types/nvtx.h"

#include <nvtx3/nvToolsExt.h>

#include "runtime/runtime.h"

/* range_push(name): opens a nested range on the calling thread. */
static int nvtx_range_push(lua_State *L)
{
    nvtxRangePushA(gpurun_check_string(L, 1, NULL));
    return 0;
}

/* range_pop(): closes the innermost open range. */
static int nvtx_range_pop(lua_State *L)
{
    (void)L;
    nvtxRangePop();
    return 0;
}

/* mark(name): an instant event. */
static int nvtx_mark(lua_State *L)
{
    nvtxMarkA(gpurun_check_string(L, 1, NULL));
    return 0;
}

/* __close of the closer object: the range ends however the call ends. */
static int closer_close(lua_State *L)
{
    (void)L;
    nvtxRangePop();
    return 0;
}

/* with_range(name, fn, ...) -> fn(...)'s results, inside range `name`.
 * The range is closed by a to-be-closed slot rather than a pcall: on an
 * error the range still ends, and the error travels on untouched (same
 * value, traceback from where it was raised). */
static int nvtx_with_range(lua_State *L)
{
    const char *name = gpurun_check_string(L, 1, NULL);
    if (lua_type(L, 2) != LUA_TFUNCTION)
        gpurun_type_error(L, 2, "function");
    nvtxRangePushA(name);
    lua_pushvalue(L, lua_upvalueindex(2));
    lua_replace(L, 1); /* the name was only needed for the push */
    lua_toclose(L, 1);
    lua_call(L, lua_gettop(L) - 2, LUA_MULTRET);
    return lua_gettop(L) - 1;
}

static const luaL_Reg nvtx_functions[] = {
    {"range_push", nvtx_range_push},
    {"range_pop", nvtx_range_pop},
    {"mark", nvtx_mark},
    {NULL, NULL}
};

/* Functions are closures over their names, as all of gpurun's are (errors
 * name them); with_range also holds the closer, in its second upvalue. */
int luaopen_gpurun_nvtx(lua_State *L)
{
    luaL_checkversion(L);
    lua_newtable(L);
    for (const luaL_Reg *f = nvtx_functions; f->name; f++) {
        lua_pushfstring(L, "gpurun.nvtx.%s", f->name);
        lua_pushcclosure(L, f->func, 1);
        lua_setfield(L, -2, f->name);
    }
    lua_pushliteral(L, "gpurun.nvtx.with_range");
    lua_newtable(L); /* the closer: an empty table whose __close pops */
    lua_newtable(L);
    lua_pushcfunction(L, closer_close);
    lua_setfield(L, -2, "__close");
    lua_setmetatable(L, -2);
    lua_pushcclosure(L, nvtx_with_range, 2);
    lua_setfield(L, -2, "with_range");
    return 1;
}
