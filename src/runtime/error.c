/* Raising errors. Every error gpurun raises comes through gpurun_error,
 * which first ends every capture in progress: a capture the script can no
 * longer finish would otherwise leave its streams refusing work. */
#include "runtime/runtime.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Pushes where the running C function was called from, as luaL_where(L, 1)
 * does, but past gpurun's builtin Lua parts (gpurun.load calling
 * gpurun.empty): the position is the script's. */
static void push_where(lua_State *L)
{
    lua_Debug ar;
    int level = 1;
    while (lua_getstack(L, level, &ar) && lua_getinfo(L, "S", &ar) && ar.what[0] != 'C'
           && strstr(ar.source, "/gpurun/builtin/") != NULL)
        level++;
    luaL_where(L, level);
}

/* Raises the message on top, prefixed as luaL_error does with where the
 * running C function was called from. */
static int raise_pushed(lua_State *L)
{
    gpurun_capture_abort_all(L);
    push_where(L);
    lua_insert(L, -2);
    lua_concat(L, 2);
    return lua_error(L);
}

int gpurun_error(lua_State *L, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    lua_pushvfstring(L, fmt, args);
    va_end(args);
    return raise_pushed(L);
}

int gpurun_error_at(lua_State *L, int level, const char *message)
{
    gpurun_capture_abort_all(L);
    if (level > 0)
        luaL_where(L, level);
    else
        lua_pushliteral(L, "");
    lua_pushstring(L, message);
    lua_concat(L, 2);
    return lua_error(L);
}

int gpurun_error_outside(lua_State *L, const char *inside, const char *message)
{
    lua_Debug ar;
    int level = 1;
    for (; lua_getstack(L, level, &ar); level++) {
        lua_getinfo(L, "S", &ar);
        if (ar.what[0] != 'C' && !strstr(ar.source, inside))
            break;
    }
    if (!lua_getstack(L, level, &ar))
        level = 0;
    return gpurun_error_at(L, level, message);
}

/* ---- the guard around gpurun's Lua code -------------------------------- */

static int guarded_finish(lua_State *L, int status, lua_KContext base)
{
    if (status != LUA_OK && status != LUA_YIELD) {
        gpurun_capture_abort_all(L);
        return lua_error(L);
    }
    return lua_gettop(L) - (int)base;
}

static int guarded_call(lua_State *L)
{
    int count = lua_gettop(L);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    return guarded_finish(L, lua_pcallk(L, count, LUA_MULTRET, 0, 0, guarded_finish), 0);
}

void gpurun_push_guarded(lua_State *L, int index)
{
    lua_pushvalue(L, index);
    lua_pushcclosure(L, guarded_call, 1);
}

void gpurun_guard_table(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    for (lua_pushnil(L); lua_next(L, index); lua_pop(L, 1)) {
        /* C functions raise through gpurun_error already; a guarded one is
         * not guarded twice. */
        if (lua_type(L, -1) != LUA_TFUNCTION || lua_iscfunction(L, -1))
            continue;
        lua_pushvalue(L, -2);
        gpurun_push_guarded(L, -2);
        lua_rawset(L, index);
    }
}

/* The running function's name when gpurun registered it ("Buffer:fill",
 * "gpurun.empty"), else NULL. */
static const char *function_name(lua_State *L)
{
    if (lua_type(L, lua_upvalueindex(1)) == LUA_TSTRING)
        return lua_tostring(L, lua_upvalueindex(1));
    return NULL;
}

static int raise_arg_error(lua_State *L, int arg, const char *why)
{
    const char *name = function_name(L);
    if (name == NULL) {
        gpurun_capture_abort_all(L);
        return luaL_argerror(L, arg, why);
    }
    if (strchr(name, ':') != NULL) {
        if (arg == 1)
            return gpurun_error(L, "calling '%s' on bad self (%s)", name, why);
        arg--;
    }
    return gpurun_error(L, "bad argument #%d to '%s' (%s)", arg, name, why);
}

int gpurun_arg_error(lua_State *L, int arg, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    const char *why = lua_pushvfstring(L, fmt, args);
    va_end(args);
    return raise_arg_error(L, arg, why);
}

int gpurun_closed_error(lua_State *L, const char *type_name)
{
    return gpurun_error(L, "attempt to use a closed %s", type_name);
}

int gpurun_cuda_error(lua_State *L, const char *what_fmt, ...)
{
    /* The message first: ending the captures makes driver calls of its own,
     * which may fail and overwrite the record of the call that did. */
    CUresult result = cuda_last_failed_result;
    char message[512];
    cuda_format_error(message, sizeof message, cuda_last_failed_call, result);
    va_list args;
    va_start(args, what_fmt);
    const char *what = lua_pushvfstring(L, what_fmt, args);
    va_end(args);
    if (cuda_error_is_sticky(result))
        lua_pushfstring(L, "%s while %s; the CUDA context is no longer usable "
                           "(a kernel faulted): restart the process", message, what);
    else
        lua_pushfstring(L, "%s while %s", message, what);
    return raise_pushed(L);
}

void gpurun_require_driver(lua_State *L)
{
    if (cuda_driver_load() != CUDA_SUCCESS)
        gpurun_error(L, "%s", cuda_driver_load_error());
}

int gpurun_missing_entry_error(lua_State *L, const char *feature, const char *name, int version)
{
    return gpurun_error(L, "%s need a CUDA driver of version %d.%d or newer: this one has no %s",
                        feature, version / 1000, version % 1000 / 10, name);
}

int gpurun_push_ready(lua_State *L, CUresult result, const char *what)
{
    if (result != CUDA_SUCCESS && result != CUDA_ERROR_NOT_READY)
        gpurun_cuda_error(L, "%s", what);
    lua_pushboolean(L, result == CUDA_SUCCESS);
    return 1;
}
