/* Typed scalars: one constructor per dtype of base/dtype.c's table, named by
 * its short name (u64, f32, f16, ...), each checking its value once, by the
 * same rules as a buffer element of that dtype. */
#include "types/scalar.h"

#include <string.h>

const struct gpurun_tag gpurun_scalar_tag = {"gpurun.Scalar"};

/* Upvalue 2: the dtype (upvalue 1 is the function's name). */
static int make_scalar(lua_State *L)
{
    int dtype = (int)lua_tointeger(L, lua_upvalueindex(2));
    unsigned char bytes[8] = {0};
    gpurun_check_element(L, 1, dtype, bytes);
    struct gpurun_scalar *scalar = gpurun_new_object(L, sizeof *scalar, 0, &gpurun_scalar_tag);
    scalar->dtype = dtype;
    memcpy(scalar->bytes, bytes, sizeof bytes);
    scalar->header.closed = 0;
    return 1;
}

static struct gpurun_scalar *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int scalar_value(lua_State *L)
{
    gpurun_push_element(L, self(L)->dtype, self(L)->bytes);
    return 1;
}

static int scalar_type(lua_State *L)
{
    lua_pushstring(L, gpurun_dtypes[self(L)->dtype].short_name);
    return 1;
}

static int scalar_dtype(lua_State *L)
{
    lua_pushstring(L, gpurun_dtypes[self(L)->dtype].name);
    return 1;
}

static int scalar_size(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gpurun_dtypes[self(L)->dtype].size);
    return 1;
}

/* The value as the kernel receives it: size bytes, little-endian. */
static int scalar_bytes(lua_State *L)
{
    lua_pushlstring(L, (const char *)self(L)->bytes, gpurun_dtypes[self(L)->dtype].size);
    return 1;
}

static int scalar_tostring(lua_State *L)
{
    struct gpurun_scalar *scalar = gpurun_check_tagged(L, 1, &gpurun_scalar_tag);
    gpurun_push_element(L, scalar->dtype, scalar->bytes);
    lua_pushfstring(L, "gpurun.%s(%s)", gpurun_dtypes[scalar->dtype].short_name,
                    luaL_tolstring(L, -1, NULL));
    return 1;
}

static const luaL_Reg scalar_fields[] = {
    {"value", scalar_value},
    {"type", scalar_type},
    {"dtype", scalar_dtype},
    {"size", scalar_size},
    {"bytes", scalar_bytes},
    {NULL, NULL}
};

static const luaL_Reg scalar_metamethods[] = {
    {"__tostring", scalar_tostring},
    {NULL, NULL}
};

static const struct gpurun_type scalar_type_info = {
    &gpurun_scalar_tag, NULL, scalar_metamethods, scalar_fields, NULL,
};

void gpurun_open_scalar(lua_State *L)
{
    gpurun_register_type(L, &scalar_type_info);
    for (int dtype = 0; dtype < GPURUN_DTYPE_COUNT; dtype++) {
        const char *name = gpurun_dtypes[dtype].short_name;
        if (name == NULL)
            continue;
        lua_pushfstring(L, "gpurun.%s", name);
        lua_pushinteger(L, dtype);
        lua_pushcclosure(L, make_scalar, 2);
        lua_setfield(L, -2, name);
    }
}
