/* gpurun.dtypes: the element types of base/dtype.c's one table, for the
 * module's Lua parts and library (elementwise kernels, .npy files) and for
 * scripts, so that no table of dtypes is written again in Lua. The tables
 * are read-only, so that what reads them can trust them. */
#include "types/dtypes.h"

#include <math.h>

static int refuse_write(lua_State *L)
{
    return gpurun_error(L, "gpurun.dtypes is read-only");
}

/* Upvalue 1 of these: the data a read-only table shows. */
static int data_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, lua_upvalueindex(1)));
    return 1;
}

static int data_next(lua_State *L)
{
    lua_settop(L, 2);
    if (lua_next(L, 1))
        return 2;
    lua_pushnil(L);
    return 1;
}

static int data_pairs(lua_State *L)
{
    lua_pushcfunction(L, data_next);
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_pushnil(L);
    return 3;
}

/* Replaces the table at the top with a read-only view of it: reads go to
 * it (plain table reads), writes are refused, # and pairs see it. */
static void make_read_only(lua_State *L)
{
    int data = lua_gettop(L);
    lua_newtable(L);
    lua_createtable(L, 0, 5);
    lua_pushvalue(L, data);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, refuse_write);
    lua_setfield(L, -2, "__newindex");
    lua_pushvalue(L, data);
    lua_pushcclosure(L, data_len, 1);
    lua_setfield(L, -2, "__len");
    lua_pushvalue(L, data);
    lua_pushcclosure(L, data_pairs, 1);
    lua_setfield(L, -2, "__pairs");
    lua_pushliteral(L, "gpurun.dtypes");
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
    lua_replace(L, data);
}

static void set_string(lua_State *L, const char *key, const char *value)
{
    if (value == NULL)
        return;
    lua_pushstring(L, value);
    lua_setfield(L, -2, key);
}

static void set_number(lua_State *L, const char *key, double value)
{
    lua_pushnumber(L, value);
    lua_setfield(L, -2, key);
}

static void set_integer(lua_State *L, const char *key, lua_Integer value)
{
    lua_pushinteger(L, value);
    lua_setfield(L, -2, key);
}

static void push_entry(lua_State *L, const struct gpurun_dtype_info *info)
{
    static const char *const kinds[] = {"float", "signed", "unsigned", "complex"};
    lua_createtable(L, 0, 15);
    set_string(L, "name", info->name);
    set_string(L, "c_type", info->c_type);
    set_string(L, "header", info->c_header);
    set_string(L, "compute_type", info->compute_type);
    set_string(L, "scalar", info->short_name);
    set_string(L, "numpy", info->numpy);
    set_integer(L, "size", (lua_Integer)info->size);
    set_integer(L, "align", (lua_Integer)info->align);
    set_string(L, "kind", kinds[info->kind]);
    lua_pushboolean(L, info->kind == GPURUN_KIND_FLOAT);
    lua_setfield(L, -2, "float");
    lua_pushboolean(L, info->tensor_map_type >= 0);
    lua_setfield(L, -2, "tensor_map");
    if (info->kind == GPURUN_KIND_COMPLEX) {
        set_string(L, "part", gpurun_dtypes[info->part].name);
        set_integer(L, "digits", info->digits);
    } else if (info->kind == GPURUN_KIND_FLOAT) {
        set_integer(L, "digits", info->digits);
        set_number(L, "min", -info->largest);
        set_number(L, "max", info->largest);
        set_number(L, "overflow", info->overflow);
    } else {
        set_integer(L, "min", (lua_Integer)info->min);
        /* uint64's 2^64 - 1 is no Lua integer: the float nearest it. */
        if (info->kind == GPURUN_KIND_UNSIGNED && info->size == 8)
            set_number(L, "max", 0x1p64);
        else
            set_integer(L, "max", (lua_Integer)info->max);
        set_string(L, "range", info->range);
    }
    make_read_only(L);
}

/* A sequence in the table's order whose entries are also keyed by name:
 *
 *   gpurun.dtypes[1].name, #gpurun.dtypes       --> "float32", 12
 *   gpurun.dtypes.float16                       --> { name = "float16", size = 2,
 *       align = 2, c_type = "__half", header = "cuda_fp16.h", compute_type = "float",
 *       scalar = "f16", numpy = "<f2", kind = "float", float = true, tensor_map = true,
 *       digits = 11,
 *       min = -65504.0, max = 65504.0, overflow = 65520.0 }
 *   gpurun.dtypes.complex64                     --> { name = "complex64", size = 8,
 *       align = 8, c_type = "float2", kind = "complex", part = "float32", float = false,
 *       digits = 24, numpy = "<c8", ... } */
void gpurun_open_dtypes(lua_State *L)
{
    lua_createtable(L, GPURUN_DTYPE_COUNT, GPURUN_DTYPE_COUNT);
    for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++) {
        push_entry(L, &gpurun_dtypes[dtype]);
        lua_pushvalue(L, -1);
        lua_rawseti(L, -3, dtype + 1);
        lua_setfield(L, -2, gpurun_dtypes[dtype].name);
    }
    make_read_only(L);
    lua_setfield(L, -2, "dtypes");
}
