/* gpurun.LaunchPlan: kernel:bind(config, args...) checks and packs the
 * arguments once; plan:launch(target) then only launches. The plan keeps
 * its kernel and every buffer it passes alive (user value 1: the kernel,
 * 2: the buffers), and refuses to launch once one of them was closed. */
#include "types/launch_plan.h"

#include "types/buffer/pinned_buffer.h"
#include "types/launch.h"
#include "types/tensor_map.h"

#include <string.h>

static const struct gpurun_tag plan_tag = {"gpurun.LaunchPlan"};

struct plan {
    struct gpurun_object header;
    CUfunction function;
    const struct gpurun_kernel *kernel;
    struct gpurun_launch_config config;
    int buffer_count;
    struct gpurun_buffer **buffers;  /* checked for closure at each launch */
    void **param_pointers;
    unsigned char *storage;
};

static size_t align_up(size_t size, size_t alignment)
{
    return (size + alignment - 1) / alignment * alignment;
}

/* kernel:bind(config, args...) -> LaunchPlan */
static int kernel_bind(lua_State *L)
{
    struct gpurun_kernel *kernel = gpurun_check_kernel(L, 1);
    const struct gpurun_launch_config *config = gpurun_check_config(L, 2);
    int given = lua_gettop(L) - 2;
    gpurun_check_launch(L, kernel, config, given);
    int count = kernel->param_count;
    size_t pointers_at = align_up(sizeof(struct plan), 16);
    size_t storage_at = align_up(pointers_at + (size_t)count * 2 * sizeof(void *), 16);
    unsigned char *block =
        gpurun_new_object(L, storage_at + kernel->storage_size, 2, &plan_tag);
    struct plan *plan = (struct plan *)block;
    plan->function = kernel->function;
    plan->kernel = kernel;
    plan->config = *config;
    plan->param_pointers = (void **)(block + pointers_at);
    plan->buffers = (struct gpurun_buffer **)(plan->param_pointers + count);
    plan->storage = block + storage_at;
    int plan_index = lua_gettop(L);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, plan_index, 1);
    lua_newtable(L);
    for (int i = 0; i < given; i++) {
        unsigned char *slot = plan->storage + kernel->param_offsets[i];
        plan->param_pointers[i] = slot;
        if (gpurun_to_tagged(L, 3 + i, &gpurun_pinned_tag))
            return gpurun_arg_error(L, 3 + i, "a gpurun.PinnedBuffer passes to gpurun.launch or "
                                              "into a graph, not into a LaunchPlan (which checks "
                                              "only Buffers for closing)");
        struct gpurun_buffer *buffer = gpurun_pack_argument(L, kernel, i, 3 + i, slot, NULL);
        if (buffer && gpurun_push_argument_memory(L, 3 + i)) {
            plan->buffers[plan->buffer_count++] = buffer;
            lua_rawseti(L, -2, plan->buffer_count);
        }
    }
    lua_setiuservalue(L, plan_index, 2);
    plan->header.closed = 0;
    return 1;
}

/* The builder keeps the plan's kernel and buffers; they go on the stack
 * first, since keeping allocates and a finalizer could close the plan and
 * drop its user values. */
static void keep_plan(lua_State *L, struct gpurun_capture *capture)
{
    lua_getiuservalue(L, 1, 1);
    int kept = lua_gettop(L);
    lua_getiuservalue(L, 1, 2);
    lua_Integer count = (lua_Integer)lua_rawlen(L, kept + 1);
    if (!lua_checkstack(L, (int)count))
        gpurun_error(L, "too many buffers in a LaunchPlan");
    for (lua_Integer i = 1; i <= count; i++)
        lua_rawgeti(L, kept + 1, i);
    lua_remove(L, kept + 1);
    for (int index = kept; index <= lua_gettop(L); index++)
        gpurun_capture_keep(L, capture, index);
    lua_settop(L, kept - 1);
}

/* Buffer i of the plan, of stream-ordered memory: it has memory for this
 * launch, whose stream its free must wait for. */
static void note_use(lua_State *L, const struct plan *plan, int i,
                     const struct gpurun_capture *capture)
{
    struct gpurun_buffer *buffer = plan->buffers[i];
    gpurun_check_buffer_memory(L, buffer, capture);
    if (capture)
        return;
    lua_getiuservalue(L, 1, 2);
    lua_rawgeti(L, -1, i + 1);
    gpurun_note_buffer_use(L, buffer, -1,
                           &((struct gpurun_stream_object *)lua_touserdata(L, 2))->stream, 2);
    lua_pop(L, 2);
}

/* plan:launch(stream | builder) */
static int plan_launch(lua_State *L)
{
    struct plan *plan = gpurun_check_open(L, 1, &plan_tag);
    gpurun_check_kernel_open(L, plan->kernel);
    struct gpurun_capture *capture;
    CUstream stream = gpurun_launch_target(L, 2, &capture);
    gpurun_check_launch_device(L, plan->kernel, 2, capture);
    if (capture)
        keep_plan(L, capture);
    /* Checked after keeping, which allocates and can run finalizers. */
    if (plan->header.closed)
        gpurun_closed_error(L, plan_tag.type_name);
    for (int i = 0; i < plan->buffer_count; i++) {
        struct gpurun_buffer *buffer = plan->buffers[i];
        if (buffer->header.closed)
            return gpurun_error(L, "LaunchPlan of kernel '%s': a gpurun.Buffer it passes was "
                                   "closed after bind", plan->kernel->name);
        if (gpurun_buffer_owner(buffer)->ordered)
            note_use(L, plan, i, capture);
    }
    gpurun_launch_kernel(L, plan->kernel, plan->function, &plan->config, stream,
                         gpurun_launch_context(L, 2, capture), plan->param_pointers);
    return 0;
}

static int plan_close(lua_State *L)
{
    struct plan *plan = gpurun_check_tagged(L, 1, &plan_tag);
    if (plan->header.closed)
        return 0;
    plan->header.closed = 1;
    plan->buffer_count = 0;
    /* Let the kernel and buffers go. */
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 1);
    lua_pushnil(L);
    lua_setiuservalue(L, 1, 2);
    return 0;
}

static int plan_kernel(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int plan_tostring(lua_State *L)
{
    struct plan *plan = gpurun_check_tagged(L, 1, &plan_tag);
    if (plan->header.closed)
        lua_pushliteral(L, "gpurun.LaunchPlan(closed)");
    else
        lua_pushfstring(L, "gpurun.LaunchPlan(%s)", plan->kernel->name);
    return 1;
}

static const luaL_Reg plan_methods[] = {
    {"launch", plan_launch},
    {"close", plan_close},
    {NULL, NULL}
};

static const luaL_Reg plan_fields[] = {
    {"kernel", plan_kernel},
    {NULL, NULL}
};

static const luaL_Reg plan_metamethods[] = {
    {"__tostring", plan_tostring},
    {"__close", plan_close},
    {NULL, NULL}
};

static const struct gpurun_type plan_type = {
    &plan_tag, plan_methods, plan_metamethods, plan_fields, NULL,
};

static const luaL_Reg kernel_methods[] = {
    {"bind", kernel_bind},
    {NULL, NULL}
};

void gpurun_open_launch_plan(lua_State *L)
{
    gpurun_register_type(L, &plan_type);
    gpurun_add_methods(L, &gpurun_kernel_tag, kernel_methods);
}
