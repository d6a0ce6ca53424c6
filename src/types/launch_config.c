/* gpurun.LaunchConfig: grid, block, dynamic shared memory and the launch
 * attributes (cuda.core's cluster and cooperative launch, programmatic
 * stream serialization, and a priority), checked once against the limits
 * every CUDA device shares; the kernel's and the device's own limits are
 * checked at launch.
 * With a cluster, grid counts clusters, as in cuda.core. */
#include "types/launch_config.h"

#include <string.h>

const struct gpurun_tag gpurun_config_tag = {"gpurun.LaunchConfig"};

static const char *const axis_names[] = {"x", "y", "z"};

/* grid and block limits of every CUDA device since compute capability 3.0. */
static const lua_Integer grid_limits[] = {2147483647, 65535, 65535};
static const lua_Integer block_limits[] = {1024, 1024, 64};

static unsigned int config_dimension(lua_State *L, int index, const char *field, int axis,
                                     const lua_Integer *limits)
{
    lua_Integer value = 0;
    if (!gpurun_exact_integer(L, index, &value)) {
        const char *got = gpurun_value_text(L, index);
        gpurun_error(L, "LaunchConfig: %s.%s must be an integer, got %s", field, axis_names[axis],
                     got);
    }
    if (value < 1 || value > limits[axis])
        gpurun_error(L, "LaunchConfig: %s.%s must be between 1 and %I, got %I", field,
                     axis_names[axis], limits[axis], value);
    return (unsigned int)value;
}

/* Pushes table[field] without its metamethods (an option table is read as
 * it is, as gpurun_check_options reads its keys) and returns its type. */
static int raw_field(lua_State *L, int table, const char *field)
{
    table = lua_absindex(L, table);
    lua_pushstring(L, field);
    return lua_rawget(L, table);
}

/* grid/block: an integer (x) or a sequence {x [, y [, z]]} or {x=,y=,z=}. */
static void read_dimensions(lua_State *L, int table, const char *field, unsigned int out[3],
                            const lua_Integer *limits)
{
    out[0] = out[1] = out[2] = 1;
    int type = raw_field(L, table, field);
    if (type == LUA_TNUMBER) {
        out[0] = config_dimension(L, -1, field, 0, limits);
    } else if (type == LUA_TTABLE) {
        lua_Integer length = (lua_Integer)lua_rawlen(L, -1);
        if (length > 3)
            gpurun_error(L, "LaunchConfig: %s has %I entries, at most 3 (x, y, z) expected", field,
                         length);
        for (int axis = 0; axis < 3; axis++) {
            if (lua_rawgeti(L, -1, axis + 1) == LUA_TNIL) {
                lua_pop(L, 1);
                raw_field(L, -1, axis_names[axis]);
            }
            if (!lua_isnil(L, -1))
                out[axis] = config_dimension(L, -1, field, axis, limits);
            lua_pop(L, 1);
        }
    } else {
        gpurun_error(L, "LaunchConfig: %s must be an integer or a table {x, y, z}, got %s", field,
                     gpurun_type_name(L, -1));
    }
    lua_pop(L, 1);
}

static const char *const known_fields[] = {
    "grid", "block", "shmem_size", "cluster", "is_cooperative", "cooperative_launch",
    "programmatic_stream_serialization", "priority", NULL
};

static int read_flag(lua_State *L, const char *field)
{
    int type = raw_field(L, 1, field);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        gpurun_error(L, "LaunchConfig: %s must be a boolean, got %s", field,
                     gpurun_type_name(L, -1));
    int value = lua_toboolean(L, -1);
    lua_pop(L, 1);
    return value;
}

static void add_attribute(struct gpurun_launch_config *config, CUlaunchAttributeID id)
{
    CUlaunchAttribute *attribute = &config->attributes[config->attribute_count++];
    memset(attribute, 0, sizeof *attribute);
    attribute->id = id;
    switch (id) {
    case CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
        attribute->value.clusterDim.x = config->cluster[0];
        attribute->value.clusterDim.y = config->cluster[1];
        attribute->value.clusterDim.z = config->cluster[2];
        break;
    case CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
        attribute->value.cooperative = 1;
        break;
    case CU_LAUNCH_ATTRIBUTE_PRIORITY:
        attribute->value.priority = config->priority;
        break;
    default: /* CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION */
        attribute->value.programmaticStreamSerializationAllowed = 1;
        break;
    }
}

/* The cluster, if any: grid counts clusters then, and the blocks launched
 * are grid x cluster on each axis. */
static void read_cluster(lua_State *L, struct gpurun_launch_config *config)
{
    if (raw_field(L, 1, "cluster") == LUA_TNIL) {
        lua_pop(L, 1);
        memcpy(config->blocks, config->grid, sizeof config->blocks);
        return;
    }
    lua_pop(L, 1);
    static const lua_Integer cluster_limits[] = {16, 16, 16};
    read_dimensions(L, 1, "cluster", config->cluster, cluster_limits);
    unsigned int size = config->cluster[0] * config->cluster[1] * config->cluster[2];
    if (size > 16)
        gpurun_error(L, "LaunchConfig: a cluster of %d x %d x %d = %d blocks; at most 16 (8 is "
                        "the portable size)", (int)config->cluster[0], (int)config->cluster[1],
                     (int)config->cluster[2], (int)size);
    for (int axis = 0; axis < 3; axis++) {
        unsigned long long blocks = (unsigned long long)config->grid[axis] * config->cluster[axis];
        if (blocks > (unsigned long long)grid_limits[axis])
            gpurun_error(L, "LaunchConfig: grid.%s of %d clusters of %d blocks is %I blocks, "
                            "more than %I", axis_names[axis], (int)config->grid[axis],
                         (int)config->cluster[axis], (LUAI_UACINT)blocks,
                         (LUAI_UACINT)grid_limits[axis]);
        config->blocks[axis] = (unsigned int)blocks;
    }
    add_attribute(config, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION);
}

/* The kernel's priority, as a stream's (lower runs first): a graph node's
 * too, which complete{ use_node_priority = true } honours. The device's
 * range is checked at launch; here only that it is an int. */
static void read_priority(lua_State *L, struct gpurun_launch_config *config)
{
    if (raw_field(L, 1, "priority") == LUA_TNIL) {
        lua_pop(L, 1);
        return;
    }
    lua_Integer priority = 0;
    if (!gpurun_exact_integer(L, -1, &priority) || priority < INT32_MIN || priority > INT32_MAX) {
        const char *got = gpurun_value_text(L, -1);
        gpurun_error(L, "LaunchConfig: priority must be an integer (a stream priority), got %s",
                     got);
    }
    lua_pop(L, 1);
    config->has_priority = 1;
    config->priority = (int)priority;
    add_attribute(config, CU_LAUNCH_ATTRIBUTE_PRIORITY);
}

static int config_new(lua_State *L)
{
    gpurun_check_table(L, 1);
    gpurun_check_options(L, 1, known_fields);
    struct gpurun_launch_config config;
    memset(&config, 0, sizeof config);
    if (raw_field(L, 1, "grid") == LUA_TNIL || (lua_pop(L, 1), raw_field(L, 1, "block")) == LUA_TNIL)
        return gpurun_error(L, "LaunchConfig: grid and block are required");
    lua_pop(L, 1);
    read_dimensions(L, 1, "grid", config.grid, grid_limits);
    read_dimensions(L, 1, "block", config.block, block_limits);
    unsigned long threads = (unsigned long)config.block[0] * config.block[1] * config.block[2];
    if (threads > 1024)
        return gpurun_error(L, "LaunchConfig: block of %d x %d x %d = %d threads, at most 1024 allowed",
                            (int)config.block[0], (int)config.block[1], (int)config.block[2],
                            (int)threads);
    config.shmem_size = 0;
    if (raw_field(L, 1, "shmem_size") != LUA_TNIL) {
        lua_Integer bytes = 0;
        if (!gpurun_exact_integer(L, -1, &bytes) || bytes < 0) {
            const char *got = gpurun_value_text(L, -1);
            return gpurun_error(L, "LaunchConfig: shmem_size must be an integer number of bytes "
                                   ">= 0, got %s", got);
        }
        if (bytes > INT32_MAX)
            return gpurun_error(L, "LaunchConfig: shmem_size of %I bytes is more than any device "
                                   "has (at most %d)", (LUAI_UACINT)bytes, (int)INT32_MAX);
        config.shmem_size = (unsigned int)bytes;
    }
    lua_pop(L, 1);
    read_cluster(L, &config);
    config.cooperative = read_flag(L, "is_cooperative") || read_flag(L, "cooperative_launch");
    if (config.cooperative)
        add_attribute(&config, CU_LAUNCH_ATTRIBUTE_COOPERATIVE);
    config.programmatic = read_flag(L, "programmatic_stream_serialization");
    if (config.programmatic)
        add_attribute(&config, CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION);
    read_priority(L, &config);
    struct gpurun_launch_config *result =
        gpurun_new_object(L, sizeof *result, 0, &gpurun_config_tag);
    config.header = result->header;
    config.header.closed = 0;
    *result = config;
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

static const struct gpurun_launch_config *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int config_grid(lua_State *L)
{
    push_dimensions(L, self(L)->grid);
    return 1;
}

static int config_block(lua_State *L)
{
    push_dimensions(L, self(L)->block);
    return 1;
}

static int config_shmem_size(lua_State *L)
{
    lua_pushinteger(L, self(L)->shmem_size);
    return 1;
}

static int config_cluster(lua_State *L)
{
    if (self(L)->cluster[0] == 0)
        lua_pushnil(L);
    else
        push_dimensions(L, self(L)->cluster);
    return 1;
}

static int config_is_cooperative(lua_State *L)
{
    lua_pushboolean(L, self(L)->cooperative);
    return 1;
}

static int config_programmatic(lua_State *L)
{
    lua_pushboolean(L, self(L)->programmatic);
    return 1;
}

static int config_priority(lua_State *L)
{
    if (self(L)->has_priority)
        lua_pushinteger(L, self(L)->priority);
    else
        lua_pushnil(L);
    return 1;
}

static int config_tostring(lua_State *L)
{
    const struct gpurun_launch_config *c = gpurun_check_tagged(L, 1, &gpurun_config_tag);
    lua_pushfstring(L, "gpurun.LaunchConfig(grid={%d,%d,%d}, block={%d,%d,%d}, shmem_size=%d)",
                    (int)c->grid[0], (int)c->grid[1], (int)c->grid[2], (int)c->block[0],
                    (int)c->block[1], (int)c->block[2], (int)c->shmem_size);
    return 1;
}

static const luaL_Reg config_fields[] = {
    {"grid", config_grid},
    {"block", config_block},
    {"shmem_size", config_shmem_size},
    {"cluster", config_cluster},
    {"is_cooperative", config_is_cooperative},
    {"cooperative_launch", config_is_cooperative},
    {"programmatic_stream_serialization", config_programmatic},
    {"priority", config_priority},
    {NULL, NULL}
};

static const luaL_Reg config_metamethods[] = {
    {"__tostring", config_tostring},
    {NULL, NULL}
};

static const struct gpurun_type config_type = {
    &gpurun_config_tag, NULL, config_metamethods, config_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"LaunchConfig", config_new},
    {NULL, NULL}
};

void gpurun_open_launch_config(lua_State *L)
{
    gpurun_register_type(L, &config_type);
    gpurun_set_functions(L, module_functions);
}
