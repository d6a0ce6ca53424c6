/* gpurun.Condition: the handle of a conditional node's condition. A kernel
 * that takes it as an `unsigned long long` (cudaGraphConditionalHandle)
 * parameter sets it with cudaGraphSetConditional(handle, value), declared in
 * <cuda_device_runtime_api.h>, which gpurun's compiles can include. It
 * belongs to one capture: launches of other captures, or outside one, refuse
 * it (types/launch.c). */
#include "types/condition.h"

const struct gpurun_tag gpurun_condition_tag = {"gpurun.Condition"};

struct gpurun_condition *gpurun_push_condition(lua_State *L, int builder_index,
                                               struct gpurun_capture *capture,
                                               unsigned int default_value)
{
    builder_index = lua_absindex(L, builder_index);
    struct gpurun_condition *condition =
        gpurun_new_object(L, sizeof *condition, 1, &gpurun_condition_tag);
    /* The builder lives as long as the condition, so that `root` names no
     * other capture made later at the same address. */
    lua_pushvalue(L, builder_index);
    lua_setiuservalue(L, -2, 1);
    /* The allocation can run a finalizer that ended the capture. */
    if (capture->state != GPURUN_CAPTURE_BUILDING)
        gpurun_error(L, "GraphBuilder:create_condition: the builder stopped building (it is %s)",
                     gpurun_capture_state_name(capture->state));
    if (gpurun_capture_create_condition(capture, default_value, &condition->handle,
                                        &condition->graph)
        != CUDA_SUCCESS)
        gpurun_cuda_error(L, "creating a graph condition");
    condition->root = capture->root;
    condition->default_value = default_value;
    condition->header.closed = 0;
    return condition;
}

static struct gpurun_condition *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

static int condition_handle(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->handle);
    return 1;
}

static int condition_default(lua_State *L)
{
    lua_pushinteger(L, self(L)->default_value);
    return 1;
}

static int condition_tostring(lua_State *L)
{
    struct gpurun_condition *condition = gpurun_check_tagged(L, 1, &gpurun_condition_tag);
    if (condition->header.closed)
        lua_pushliteral(L, "gpurun.Condition(closed)");
    else
        lua_pushfstring(L, "gpurun.Condition(default %d)", (int)condition->default_value);
    return 1;
}

/* The handle stays valid for the graph that uses it: closing only ends this
 * object's use. */
static int condition_close(lua_State *L)
{
    struct gpurun_condition *condition = gpurun_check_tagged(L, 1, &gpurun_condition_tag);
    condition->header.closed = 1;
    return 0;
}

static const luaL_Reg condition_methods[] = {
    {"close", condition_close},
    {NULL, NULL}
};

static const luaL_Reg condition_fields[] = {
    {"handle", condition_handle},
    {"default", condition_default},
    {NULL, NULL}
};

static const luaL_Reg condition_metamethods[] = {
    {"__tostring", condition_tostring},
    {"__close", condition_close},
    {NULL, NULL}
};

static const struct gpurun_type condition_type = {
    &gpurun_condition_tag, condition_methods, condition_metamethods, condition_fields, NULL,
};

void gpurun_open_condition(lua_State *L)
{
    gpurun_register_type(L, &condition_type);
}
