/* gpurun.SMResource: a set of a device's multiprocessors (a CUdevResource
 * of type SM): the whole device's (Device.resources.sm), a group or the
 * remainder of a split, or a green context's. Nothing of the driver's is
 * held: close only marks it closed. */
#include "types/sm_resource.h"

#include <string.h>

const struct gpurun_tag gpurun_sm_resource_tag = {"gpurun.SMResource"};

#define MAX_GROUPS 64

/* Splits made so far: the groups and remainder of one split share its
 * number, which Device:create_context checks before the driver does. */
static unsigned int splits_made;

struct gpurun_sm_resource *gpurun_push_sm_resource(lua_State *L, const CUdevResource *resource,
                                                   int device, enum gpurun_sm_origin origin,
                                                   unsigned int split)
{
    struct gpurun_sm_resource *object =
        gpurun_new_object(L, sizeof *object, 0, &gpurun_sm_resource_tag);
    object->resource = *resource;
    object->device = device;
    object->origin = origin;
    object->split = split;
    object->header.closed = 0;
    return object;
}

void gpurun_push_sm_resources(lua_State *L, const CUdevResource *resource, int device,
                              enum gpurun_sm_origin origin)
{
    lua_createtable(L, 0, 1);
    gpurun_push_sm_resource(L, resource, device, origin, 0);
    lua_setfield(L, -2, "sm");
}

struct gpurun_sm_resource *gpurun_check_sm_resource(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_sm_resource_tag);
}

static const char *const split_options[] = {"count", "groups", NULL};

/* split{ count = N[, groups = G] } -> { group, ... }, remainder or nil:
 * G groups (1 by default) of at least N multiprocessors each, as the
 * driver rounds N (cuDevSmResourceSplitByCount). */
static int sm_split(lua_State *L)
{
    struct gpurun_sm_resource *sm = gpurun_check_sm_resource(L, 1);
    gpurun_check_table(L, 2);
    gpurun_check_options(L, 2, split_options);
    lua_Integer count = gpurun_opt_integer_field(L, 2, "count", LUA_MININTEGER,
                                                 "a whole number of SMs");
    if (count == LUA_MININTEGER)
        return gpurun_arg_error(L, 2, "option 'count' (SMs per group) is required");
    lua_Integer groups = gpurun_opt_integer_field(L, 2, "groups", 1, "a whole number of groups");
    const CUdevSmResource *have = &sm->resource.sm;
    if (count < 1)
        return gpurun_arg_error(L, 2, "option 'count' (SMs per group) must be 1 or more, got %I",
                                (LUAI_UACINT)count);
    if (groups < 1 || groups > MAX_GROUPS)
        return gpurun_arg_error(L, 2, "option 'groups' must be 1 to %d, got %I", MAX_GROUPS,
                                (LUAI_UACINT)groups);
    if (sm->origin != GPURUN_SM_DEVICE)
        return gpurun_error(L, "SMResource:split: only a device's whole SM resource "
                               "(Device.resources.sm) splits; this one is %s",
                            sm->origin == GPURUN_SM_CONTEXT ? "a green context's"
                                                            : "already a split's");
    if (count > (lua_Integer)have->smCount || count * groups > (lua_Integer)have->smCount)
        return gpurun_error(L, "SMResource:split: %I group(s) of %I SMs asked for, but the "
                               "device has %d SMs (groups take at least %d, in multiples of %d)",
                            (LUAI_UACINT)groups, (LUAI_UACINT)count, (int)have->smCount,
                            (int)have->minSmPartitionSize, (int)have->smCoscheduledAlignment);
    GPURUN_REQUIRE_ENTRY(L, "green contexts", cuDevSmResourceSplitByCount, 12040);
    CUdevResource *result = gpurun_push_staging(L, (size_t)groups * sizeof *result);
    CUdevResource remaining;
    memset(&remaining, 0, sizeof remaining);
    unsigned int made = (unsigned int)groups;
    CUdevResource input = sm->resource;
    CHECK_CUDA(L, "splitting the device's SMs", cuDevSmResourceSplitByCount, result, &made,
               &input, &remaining, 0, (unsigned int)count);
    if (made < (unsigned int)groups)
        return gpurun_error(L, "SMResource:split: the driver made %d group(s) of %I SMs out of %d, "
                               "not the %I asked for (groups take at least %d, in multiples of %d)",
                            (int)made, (LUAI_UACINT)count, (int)have->smCount, (LUAI_UACINT)groups,
                            (int)have->minSmPartitionSize, (int)have->smCoscheduledAlignment);
    int device = sm->device;
    unsigned int split = ++splits_made;
    lua_createtable(L, (int)made, 0);
    for (unsigned int i = 0; i < made; i++) {
        gpurun_push_sm_resource(L, &result[i], device, GPURUN_SM_GROUP, split);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    if (remaining.type == CU_DEV_RESOURCE_TYPE_SM && remaining.sm.smCount > 0)
        gpurun_push_sm_resource(L, &remaining, device, GPURUN_SM_GROUP, split);
    else
        lua_pushnil(L);
    return 2;
}

static int sm_close(lua_State *L)
{
    struct gpurun_sm_resource *sm = gpurun_check_tagged(L, 1, &gpurun_sm_resource_tag);
    sm->header.closed = 1;
    return 0;
}

static int sm_count(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_sm_resource *)lua_touserdata(L, 1))->resource.sm.smCount);
    return 1;
}

static int sm_min_partition_size(lua_State *L)
{
    const struct gpurun_sm_resource *sm = lua_touserdata(L, 1);
    lua_pushinteger(L, sm->resource.sm.minSmPartitionSize);
    return 1;
}

static int sm_coscheduled_alignment(lua_State *L)
{
    const struct gpurun_sm_resource *sm = lua_touserdata(L, 1);
    lua_pushinteger(L, sm->resource.sm.smCoscheduledAlignment);
    return 1;
}

static int sm_device(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_sm_resource *)lua_touserdata(L, 1))->device);
    return 1;
}

static int sm_tostring(lua_State *L)
{
    struct gpurun_sm_resource *sm = gpurun_check_tagged(L, 1, &gpurun_sm_resource_tag);
    if (sm->header.closed)
        lua_pushliteral(L, "gpurun.SMResource(closed)");
    else
        lua_pushfstring(L, "gpurun.SMResource(%d SMs of device %d)", (int)sm->resource.sm.smCount,
                        sm->device);
    return 1;
}

static const luaL_Reg sm_methods[] = {
    {"split", sm_split},
    {"close", sm_close},
    {NULL, NULL}
};

static const luaL_Reg sm_fields[] = {
    {"sm_count", sm_count},
    {"min_partition_size", sm_min_partition_size},
    {"coscheduled_alignment", sm_coscheduled_alignment},
    {"device", sm_device},
    {NULL, NULL}
};

static const luaL_Reg sm_metamethods[] = {
    {"__tostring", sm_tostring},
    {"__close", sm_close},
    {"__gc", sm_close},
    {NULL, NULL}
};

static const struct gpurun_type sm_type = {
    &gpurun_sm_resource_tag, sm_methods, sm_metamethods, sm_fields, NULL,
};

void gpurun_open_sm_resource(lua_State *L)
{
    gpurun_register_type(L, &sm_type);
}
