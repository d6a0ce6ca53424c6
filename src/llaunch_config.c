/* gpurun.LaunchConfig: grid, block and dynamic shared memory, checked once
 * against the limits every CUDA device shares; the kernel's own limits are
 * checked at launch. */
#include "lkernel.h"

#include <string.h>

static const char *const axis_names[] = {"x", "y", "z"};

/* grid and block limits of every CUDA device since compute capability 3.0. */
static const lua_Integer grid_limits[] = {2147483647, 65535, 65535};
static const lua_Integer block_limits[] = {1024, 1024, 64};

static unsigned int config_dimension(lua_State *L, int index, const char *field, int axis,
                                     const lua_Integer *limits)
{
    int is_integer = 0;
    lua_Integer value =
        lua_type(L, index) == LUA_TNUMBER ? lua_tointegerx(L, index, &is_integer) : 0;
    if (!is_integer)
        luaL_error(L, "LaunchConfig: %s.%s must be an integer, got %s", field, axis_names[axis],
                   lua_type(L, index) == LUA_TNUMBER
                       ? lua_pushfstring(L, "%f", lua_tonumber(L, index))
                       : luaL_typename(L, index));
    if (value < 1 || value > limits[axis])
        luaL_error(L, "LaunchConfig: %s.%s must be between 1 and %I, got %I", field,
                   axis_names[axis], limits[axis], value);
    return (unsigned int)value;
}

/* grid/block: an integer (x) or a sequence {x [, y [, z]]} or {x=,y=,z=}. */
static void read_dimensions(lua_State *L, int table, const char *field, unsigned int out[3],
                            const lua_Integer *limits)
{
    out[0] = out[1] = out[2] = 1;
    int type = lua_getfield(L, table, field);
    if (type == LUA_TNUMBER) {
        out[0] = config_dimension(L, -1, field, 0, limits);
    } else if (type == LUA_TTABLE) {
        lua_Integer length = luaL_len(L, -1);
        if (length > 3)
            luaL_error(L, "LaunchConfig: %s has %I entries, at most 3 (x, y, z) expected", field,
                       length);
        for (int axis = 0; axis < 3; axis++) {
            if (lua_rawgeti(L, -1, axis + 1) == LUA_TNIL) {
                lua_pop(L, 1);
                lua_getfield(L, -1, axis_names[axis]);
            }
            if (!lua_isnil(L, -1))
                out[axis] = config_dimension(L, -1, field, axis, limits);
            lua_pop(L, 1);
        }
    } else {
        luaL_error(L, "LaunchConfig: %s must be an integer or a table {x, y, z}, got %s", field,
                   luaL_typename(L, -1));
    }
    lua_pop(L, 1);
}

static int config_new(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        const char *key = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(key, "grid") && strcmp(key, "block") && strcmp(key, "shmem_size"))
            return luaL_error(L, "LaunchConfig: unknown field %s (grid, block, shmem_size expected)",
                              lua_type(L, -2) == LUA_TSTRING
                                  ? lua_pushfstring(L, "'%s'", key)
                                  : lua_pushfstring(L, "[%s]", luaL_tolstring(L, -2, NULL)));
        lua_pop(L, 1);
    }
    struct launch_config config;
    config.tag = &gpurun_tag_config;
    if (lua_getfield(L, 1, "grid") == LUA_TNIL || (lua_pop(L, 1), lua_getfield(L, 1, "block")) == LUA_TNIL)
        return luaL_error(L, "LaunchConfig: grid and block are required");
    lua_pop(L, 1);
    read_dimensions(L, 1, "grid", config.grid, grid_limits);
    read_dimensions(L, 1, "block", config.block, block_limits);
    unsigned long threads = (unsigned long)config.block[0] * config.block[1] * config.block[2];
    if (threads > 1024)
        return luaL_error(L, "LaunchConfig: block of %d x %d x %d = %d threads, at most 1024 allowed",
                          (int)config.block[0], (int)config.block[1], (int)config.block[2],
                          (int)threads);
    config.shmem_size = 0;
    if (lua_getfield(L, 1, "shmem_size") != LUA_TNIL) {
        int is_integer = 0;
        lua_Integer bytes = lua_type(L, -1) == LUA_TNUMBER ? lua_tointegerx(L, -1, &is_integer) : 0;
        if (!is_integer || bytes < 0 || bytes > INT32_MAX)
            return luaL_error(L, "LaunchConfig: shmem_size must be an integer number of bytes >= 0");
        config.shmem_size = (unsigned int)bytes;
    }
    struct launch_config *result = lua_newuserdatauv(L, sizeof *result, 0);
    *result = config;
    luaL_setmetatable(L, GPURUN_LAUNCH_CONFIG);
    return 1;
}

static void push_dimensions(lua_State *L, const unsigned int dims[3])
{
    lua_createtable(L, 3, 0);
    for (int axis = 0; axis < 3; axis++) {
        lua_pushinteger(L, dims[axis]);
        lua_rawseti(L, -2, axis + 1);
    }
}

static int config_index(lua_State *L)
{
    const struct launch_config *config = luaL_checkudata(L, 1, GPURUN_LAUNCH_CONFIG);
    const char *key = luaL_checkstring(L, 2);
    if (strcmp(key, "grid") == 0)
        push_dimensions(L, config->grid);
    else if (strcmp(key, "block") == 0)
        push_dimensions(L, config->block);
    else if (strcmp(key, "shmem_size") == 0)
        lua_pushinteger(L, config->shmem_size);
    else
        lua_pushnil(L);
    return 1;
}

static int config_tostring(lua_State *L)
{
    const struct launch_config *c = luaL_checkudata(L, 1, GPURUN_LAUNCH_CONFIG);
    lua_pushfstring(L, "gpurun.LaunchConfig(grid={%d,%d,%d}, block={%d,%d,%d}, shmem_size=%d)",
                    (int)c->grid[0], (int)c->grid[1], (int)c->grid[2], (int)c->block[0],
                    (int)c->block[1], (int)c->block[2], (int)c->shmem_size);
    return 1;
}

static const luaL_Reg config_metameth[] = {
    {"__index", config_index},
    {"__tostring", config_tostring},
    {NULL, NULL}
};

void gpurun_open_launch_config(lua_State *L)
{
    gpurun_new_type(L, GPURUN_LAUNCH_CONFIG, NULL, config_metameth);
    lua_pop(L, 1);
    lua_pushcfunction(L, config_new);
    lua_setfield(L, -2, "LaunchConfig");
}
