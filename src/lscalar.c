/* Typed scalars (gpurun.u64(n), i64, u32, i32, f32, f64): a value with the
 * exact C type a kernel parameter expects, range-checked once when made. */
#include "lkernel.h"

#include <float.h>
#include <math.h>
#include <string.h>

const char *const gpurun_scalar_names[] = {"i32", "u32", "i64", "u64", "f32", "f64"};
const unsigned char gpurun_scalar_sizes[] = {4, 4, 8, 8, 4, 8};

static lua_Integer check_integral(lua_State *L, int index, const char *function)
{
    int is_integer = 0;
    lua_Integer value = lua_type(L, index) == LUA_TNUMBER ? lua_tointegerx(L, index, &is_integer) : 0;
    if (!is_integer) {
        if (lua_type(L, index) == LUA_TNUMBER)
            luaL_error(L, "bad argument #%d to '%s' (integer expected, got %s)", index, function,
                       lua_pushfstring(L, "%f", lua_tonumber(L, index)));
        luaL_typeerror(L, index, "integer");
    }
    return value;
}

static int make_scalar(lua_State *L, enum scalar_kind kind)
{
    const char *function = gpurun_scalar_names[kind];
    struct scalar value;
    value.tag = &gpurun_tag_scalar;
    value.kind = kind;
    switch (kind) {
    case SCALAR_I32: {
        lua_Integer v = check_integral(L, 1, function);
        if (v < INT32_MIN || v > INT32_MAX)
            return luaL_error(L, "bad argument #1 to 'i32' (%I does not fit in 32-bit signed)", v);
        value.value.i32 = (int32_t)v;
        break;
    }
    case SCALAR_U32: {
        lua_Integer v = check_integral(L, 1, function);
        if (v < 0 || v > (lua_Integer)UINT32_MAX)
            return luaL_error(L, "bad argument #1 to 'u32' (%I does not fit in 32-bit unsigned)", v);
        value.value.u32 = (uint32_t)v;
        break;
    }
    case SCALAR_I64:
        value.value.i64 = (int64_t)check_integral(L, 1, function);
        break;
    case SCALAR_U64: {
        lua_Integer v = check_integral(L, 1, function);
        if (v < 0)
            return luaL_error(L, "bad argument #1 to 'u64' (%I is negative)", v);
        value.value.u64 = (uint64_t)v;
        break;
    }
    case SCALAR_F32: {
        luaL_checktype(L, 1, LUA_TNUMBER);
        lua_Number v = lua_tonumber(L, 1);
        if (isfinite(v) && fabs(v) > FLT_MAX)
            return luaL_error(L, "bad argument #1 to 'f32' (%f is out of float range)", v);
        value.value.f32 = (float)v;
        break;
    }
    case SCALAR_F64:
        luaL_checktype(L, 1, LUA_TNUMBER);
        value.value.f64 = (double)lua_tonumber(L, 1);
        break;
    }
    struct scalar *scalar = lua_newuserdatauv(L, sizeof *scalar, 0);
    *scalar = value;
    luaL_setmetatable(L, GPURUN_SCALAR);
    return 1;
}

static int scalar_i32(lua_State *L) { return make_scalar(L, SCALAR_I32); }
static int scalar_u32(lua_State *L) { return make_scalar(L, SCALAR_U32); }
static int scalar_i64(lua_State *L) { return make_scalar(L, SCALAR_I64); }
static int scalar_u64(lua_State *L) { return make_scalar(L, SCALAR_U64); }
static int scalar_f32(lua_State *L) { return make_scalar(L, SCALAR_F32); }
static int scalar_f64(lua_State *L) { return make_scalar(L, SCALAR_F64); }

static void push_scalar_value(lua_State *L, const struct scalar *scalar)
{
    switch (scalar->kind) {
    case SCALAR_I32: lua_pushinteger(L, scalar->value.i32); break;
    case SCALAR_U32: lua_pushinteger(L, scalar->value.u32); break;
    case SCALAR_I64: lua_pushinteger(L, scalar->value.i64); break;
    case SCALAR_U64: lua_pushinteger(L, (lua_Integer)scalar->value.u64); break;
    case SCALAR_F32: lua_pushnumber(L, scalar->value.f32); break;
    case SCALAR_F64: lua_pushnumber(L, scalar->value.f64); break;
    }
}

static int scalar_index(lua_State *L)
{
    const struct scalar *scalar = luaL_checkudata(L, 1, GPURUN_SCALAR);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "value") == 0)
        push_scalar_value(L, scalar);
    else if (strcmp(key, "type") == 0)
        lua_pushstring(L, gpurun_scalar_names[scalar->kind]);
    else if (strcmp(key, "size") == 0)
        lua_pushinteger(L, gpurun_scalar_sizes[scalar->kind]);
    else
        lua_pushnil(L);
    return 1;
}

static int scalar_tostring(lua_State *L)
{
    const struct scalar *scalar = luaL_checkudata(L, 1, GPURUN_SCALAR);
    push_scalar_value(L, scalar);
    lua_pushfstring(L, "gpurun.%s(%s)", gpurun_scalar_names[scalar->kind], luaL_tolstring(L, -1, NULL));
    return 1;
}

static const luaL_Reg scalar_metameth[] = {
    {"__index", scalar_index},
    {"__tostring", scalar_tostring},
    {NULL, NULL}
};

static const luaL_Reg scalar_functions[] = {
    {"i32", scalar_i32},
    {"u32", scalar_u32},
    {"i64", scalar_i64},
    {"u64", scalar_u64},
    {"f32", scalar_f32},
    {"f64", scalar_f64},
    {NULL, NULL}
};

void gpurun_open_scalar(lua_State *L)
{
    gpurun_new_type(L, GPURUN_SCALAR, NULL, scalar_metameth);
    lua_pop(L, 1);
    luaL_setfuncs(L, scalar_functions, 0);
}
