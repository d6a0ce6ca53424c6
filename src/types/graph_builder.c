/* gpurun.GraphBuilder: a capture into a graph, as cuda.core names it: a
 * stream's builder, its forks (builder:split) and the body builders of
 * conditional nodes. The captures themselves, and the rule that an error
 * ends them, are the runtime's (runtime/capture.c). Graph (types/graph.c)
 * adds complete(). */
#include "types/graph_builder.h"

#include <string.h>

#include "types/condition.h"
#include "types/context.h"
#include "types/event.h"
#include "types/stream.h"

/* User values: 1 the Stream object it captures (a new one for forks and
 * bodies, which own theirs), 2 the builder it came from (forks, bodies),
 * 3 a body's closing function (GPURUN_BUILDER_GPURUN_BUILDER_CLOSING_VALUE). */
#define STREAM_VALUE 1
#define PARENT_VALUE 2

struct gpurun_graph_builder *gpurun_check_building(lua_State *L, int index, const char *method)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, index);
    if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
        gpurun_error(L, "GraphBuilder:%s: not building (it is %s)", method,
                     gpurun_capture_state_name(builder->capture.state));
    return builder;
}

static struct gpurun_graph_builder *push_builder(lua_State *L, int stream_index)
{
    stream_index = lua_absindex(L, stream_index);
    struct gpurun_stream *stream = gpurun_check_stream(L, stream_index);
    struct gpurun_graph_builder *builder =
        gpurun_new_object(L, sizeof *builder, 3, &gpurun_builder_tag);
    gpurun_capture_init(&builder->capture, stream);
    lua_pushvalue(L, stream_index);
    lua_setiuservalue(L, -2, STREAM_VALUE);
    builder->header.closed = 0;
    return builder;
}

/* stream:create_graph_builder() -> GraphBuilder */
static int stream_create_graph_builder(lua_State *L)
{
    push_builder(L, 1);
    return 1;
}

struct gpurun_graph_builder *gpurun_push_builder_child(lua_State *L, int parent_index,
                                                       const struct gpurun_graph_builder *parent)
{
    if (parent->capture.stream->device != gpurun_runtime.current_device)
        gpurun_error(L, "GraphBuilder: its stream belongs to device %d but device %d is current",
                     parent->capture.stream->device, gpurun_runtime.current_device);
    lua_getiuservalue(L, parent_index, STREAM_VALUE);
    gpurun_push_stream_beside(L, -1);
    lua_remove(L, -2);
    struct gpurun_graph_builder *child = push_builder(L, -1);
    lua_remove(L, -2);
    lua_pushvalue(L, parent_index);
    lua_setiuservalue(L, -2, PARENT_VALUE);
    return child;
}

/* The capture mode at arg: { mode = "thread_local" | "global" | "relaxed" },
 * or the name alone (cuda.core's begin_building(mode)); none: `fallback`. */
static CUstreamCaptureMode check_mode(lua_State *L, int arg, CUstreamCaptureMode fallback)
{
    static const char *const known[] = {"mode", NULL};
    static const char *const names[] = {"global", "thread_local", "relaxed", NULL};
    static const CUstreamCaptureMode modes[] = {CU_STREAM_CAPTURE_MODE_GLOBAL,
                                                CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
                                                CU_STREAM_CAPTURE_MODE_RELAXED};
    int given = arg;
    if (lua_type(L, arg) != LUA_TSTRING) {
        if (!gpurun_check_options(L, arg, known))
            return fallback;
        lua_pushliteral(L, "mode");
        if (lua_rawget(L, arg) == LUA_TNIL) {
            lua_pop(L, 1);
            return fallback;
        }
        if (lua_type(L, -1) != LUA_TSTRING) {
            const char *got = gpurun_type_name(L, -1);
            gpurun_arg_error(L, arg, "option 'mode' must be a string, got %s", got);
        }
        given = lua_gettop(L);
    }
    const char *name = lua_tostring(L, given);
    for (int i = 0; names[i]; i++)
        if (strcmp(names[i], name) == 0 && strlen(name) == lua_rawlen(L, given)) {
            lua_settop(L, arg);
            return modes[i];
        }
    gpurun_arg_error(L, arg, "unknown capture mode '%s' (thread_local, global or relaxed "
                             "expected)", name);
    return fallback;
}

/* begin_building([{ mode = "thread_local" }]) -> self: a body is captured
 * in its graph's mode unless told otherwise. */
static int builder_begin_building(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    CUstreamCaptureMode mode = check_mode(L, 2, capture->role == GPURUN_CAPTURE_BODY
                                                    ? capture->root->mode
                                                    : CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (capture->state == GPURUN_CAPTURE_BUILDING)
        return gpurun_error(L, "GraphBuilder:begin_building: already building");
    if (capture->role == GPURUN_CAPTURE_FORK)
        return gpurun_error(L, "GraphBuilder:begin_building: a builder from split() builds "
                               "until it is joined (it is %s)",
                            gpurun_capture_state_name(capture->state));
    if (capture->role == GPURUN_CAPTURE_BODY) {
        if (capture->state != GPURUN_CAPTURE_IDLE)
            return gpurun_error(L, "GraphBuilder:begin_building: a conditional body is captured "
                                   "once (it is %s)", gpurun_capture_state_name(capture->state));
        if (capture->root->state != GPURUN_CAPTURE_BUILDING)
            return gpurun_error(L, "GraphBuilder:begin_building: the graph this body belongs to "
                                   "is no longer being built (it is %s): capture a body before "
                                   "ending its parent's building",
                                gpurun_capture_state_name(capture->root->state));
    }
    if (capture->stream->capture)
        return gpurun_error(L, "GraphBuilder:begin_building: another GraphBuilder is capturing "
                               "this stream");
    lua_settop(L, 1);
    if (gpurun_capture_begin(L, capture, 1, mode) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "beginning a graph capture");
    /* Beginning allocates: a finalizer that closed this builder meanwhile
     * left it capturing; raising ends that capture. */
    gpurun_check_builder(L, 1);
    lua_settop(L, 1);
    return 1;
}

/* Runs (once) the closing function of the body at 1, if it has one, on
 * the body while it still builds; returns 1 when it ran. */
static int run_closing(lua_State *L)
{
    lua_settop(L, 1);
    if (lua_getiuservalue(L, 1, GPURUN_BUILDER_CLOSING_VALUE) != LUA_TFUNCTION) {
        lua_settop(L, 1);
        return 0;
    }
    lua_pushnil(L);
    lua_setiuservalue(L, 1, GPURUN_BUILDER_CLOSING_VALUE);
    lua_pushvalue(L, 1);
    lua_call(L, 1, 0);
    lua_settop(L, 1);
    return 1;
}

static int builder_end_building(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->state != GPURUN_CAPTURE_BUILDING)
        return gpurun_error(L, "GraphBuilder:end_building: not building (it is %s)%s",
                            gpurun_capture_state_name(capture->state),
                            capture->state == GPURUN_CAPTURE_ABANDONED
                                ? "; the capture was abandoned after an error" : "");
    if (capture->role == GPURUN_CAPTURE_FORK)
        return gpurun_error(L, "GraphBuilder:end_building: a builder from split() ends by being "
                               "joined: gpurun.join(builder, ...) with the builder it came from");
    if (capture->role == GPURUN_CAPTURE_BODY && run_closing(L) != 0)
        return builder_end_building(L);
    if (capture->role == GPURUN_CAPTURE_ORIGIN && capture->open_forks > 0)
        return gpurun_error(L, "GraphBuilder:end_building: %d builder(s) split from this one "
                               "were not joined back: gpurun.join(builder, ...) them first "
                               "(capture abandoned)", capture->open_forks);
    if (capture->role == GPURUN_CAPTURE_ORIGIN && capture->open_bodies > 0)
        return gpurun_error(L, "GraphBuilder:end_building: %d conditional body builder(s) are "
                               "still building: end_building() each body first (capture "
                               "abandoned)", capture->open_bodies);
    if (gpurun_capture_end(L, capture) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "ending a graph capture");
    lua_settop(L, 1);
    return 1;
}

/* split(n) -> self, b2, ..., bn: n - 1 new builders on streams of their
 * own, each starting after the work captured so far, recording into the
 * same graph until joined back (cuda.core's GraphBuilder.split). */
static int builder_split(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, "split");
    lua_Integer count = gpurun_check_integer(L, 2, "integer count");
    if (count < 2 || count > 64)
        return gpurun_arg_error(L, 2, "a count from 2 to 64 expected, got %I", (LUAI_UACINT)count);
    if (builder->capture.role == GPURUN_CAPTURE_BODY)
        return gpurun_error(L, "GraphBuilder:split: a conditional body's builder cannot be split");
    lua_settop(L, 1);
    if (!lua_checkstack(L, (int)count))
        return gpurun_error(L, "GraphBuilder:split: too many builders");
    for (lua_Integer i = 1; i < count; i++) {
        struct gpurun_graph_builder *fork = gpurun_push_builder_child(L, 1, builder);
        /* Its stream and builder were allocated: a finalizer may have
         * closed this builder (or its stream) meanwhile. */
        builder = gpurun_check_building(L, 1, "split");
        if (gpurun_capture_fork(L, &fork->capture, &builder->capture, -1) != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "forking a graph capture onto a new stream");
    }
    return (int)count;
}

/* gpurun.join(builder, builder, ...) -> the builder the others joined:
 * the first that was not split from another, else the first. The others'
 * work is ordered before what it captures next, and they are done
 * ("joined"). */
static int module_join(lua_State *L)
{
    int count = lua_gettop(L);
    if (count < 2)
        return gpurun_error(L, "gpurun.join: at least two GraphBuilders expected, got %d", count);
    int into = 0;
    for (int i = 1; i <= count; i++) {
        struct gpurun_graph_builder *builder = gpurun_check_builder(L, i);
        if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
            return gpurun_error(L, "gpurun.join: builder #%d is not building (it is %s)", i,
                                gpurun_capture_state_name(builder->capture.state));
        if (into == 0 && builder->capture.role != GPURUN_CAPTURE_FORK)
            into = i;
    }
    if (into == 0)
        into = 1;
    struct gpurun_graph_builder *target = lua_touserdata(L, into);
    for (int i = 1; i <= count; i++) {
        struct gpurun_graph_builder *builder = lua_touserdata(L, i);
        if (builder->capture.root != target->capture.root)
            return gpurun_arg_error(L, i, "a builder of the same capture expected: this one "
                                          "builds another graph");
        for (int j = 1; j < i; j++)
            if (lua_rawequal(L, i, j))
                return gpurun_arg_error(L, i, "each builder once: this one is also argument #%d",
                                        j);
    }
    for (int i = 1; i <= count; i++)
        if (i != into
            && gpurun_capture_join(&target->capture,
                                   &((struct gpurun_graph_builder *)lua_touserdata(L, i))->capture)
                   != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "joining a graph builder");
    lua_pushvalue(L, into);
    return 1;
}

/* record([event]) -> event: an event of the work captured so far, for
 * another builder of the same capture to wait on. */
static int builder_record(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, "record");
    struct gpurun_event *event;
    if (lua_isnoneornil(L, 2)) {
        event = gpurun_push_new_event(L, CU_EVENT_DISABLE_TIMING);
        builder = gpurun_check_building(L, 1, "record"); /* the allocation ran finalizers */
    } else {
        event = gpurun_check_open(L, 2, &gpurun_event_tag);
        lua_settop(L, 2);
    }
    CHECK_CUDA(L, "recording an event in a graph capture", cuEventRecord, event->handle,
               builder->capture.stream->handle);
    event->recorded = 1;
    event->capture = builder->capture.root;
    return 1;
}

/* wait(event | builder) -> self: what is captured next starts after the
 * event's (or the other builder's) work, of the same capture. */
static int builder_wait(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_building(L, 1, "wait");
    struct gpurun_event *event = gpurun_to_tagged(L, 2, &gpurun_event_tag);
    if (event) {
        event = gpurun_check_open(L, 2, &gpurun_event_tag);
        if (!event->recorded)
            return gpurun_arg_error(L, 2, "an event recorded in this capture expected: this one "
                                          "was never recorded");
        if (event->capture != builder->capture.root)
            return gpurun_arg_error(L, 2, "an event recorded in this capture expected: this one "
                                          "was recorded %s (a capture cannot wait for work "
                                          "outside it)",
                                    event->capture ? "in another capture" : "outside a capture");
        CHECK_CUDA(L, "waiting for an event in a graph capture", cuStreamWaitEvent,
                   builder->capture.stream->handle, event->handle, 0);
    } else if (gpurun_to_tagged(L, 2, &gpurun_builder_tag)) {
        struct gpurun_graph_builder *other = gpurun_check_building(L, 2, "wait");
        if (other->capture.root != builder->capture.root)
            return gpurun_arg_error(L, 2, "a builder of the same capture expected: this one "
                                          "builds another graph");
        /* An order, not a join: the other builder goes on building and is
         * joined (or not) as before. */
        if (gpurun_order_after(builder->capture.stream, other->capture.stream) != CUDA_SUCCESS)
            return gpurun_cuda_error(L, "ordering a graph builder after another");
    } else {
        return gpurun_type_error(L, 2, "gpurun.Event or gpurun.GraphBuilder");
    }
    lua_settop(L, 1);
    return 1;
}

/* ---- drawing ------------------------------------------------------------ */

static const struct {
    const char *name;
    unsigned int flag;
} dot_flags[] = {
    {"verbose", CU_GRAPH_DEBUG_DOT_FLAGS_VERBOSE},
    {"kernel_node_params", CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_PARAMS},
    {"memcpy_node_params", CU_GRAPH_DEBUG_DOT_FLAGS_MEMCPY_NODE_PARAMS},
    {"memset_node_params", CU_GRAPH_DEBUG_DOT_FLAGS_MEMSET_NODE_PARAMS},
    {"event_node_params", CU_GRAPH_DEBUG_DOT_FLAGS_EVENT_NODE_PARAMS},
    {"kernel_node_attributes", CU_GRAPH_DEBUG_DOT_FLAGS_KERNEL_NODE_ATTRIBUTES},
    {"handles", CU_GRAPH_DEBUG_DOT_FLAGS_HANDLES},
    {"conditional_node_params", CU_GRAPH_DEBUG_DOT_FLAGS_CONDITIONAL_NODE_PARAMS},
};

static const char *const dot_flag_names[] = {
    "verbose", "kernel_node_params", "memcpy_node_params", "memset_node_params",
    "event_node_params", "kernel_node_attributes", "handles", "conditional_node_params", NULL
};

/* debug_dot_print(path [, options]): the driver's own Graphviz picture of
 * the built graph, in a file (cuda.core's name); options: { verbose = true,
 * kernel_node_params = true, ... }. graph:to_dot() draws gpurun's. */
static int builder_debug_dot_print(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    const char *path = gpurun_check_string(L, 2, NULL);
    unsigned int flags = 0;
    if (gpurun_check_options(L, 3, dot_flag_names)) {
        for (size_t i = 0; i < sizeof dot_flags / sizeof dot_flags[0]; i++) {
            lua_pushstring(L, dot_flags[i].name); /* raw, as its keys were checked */
            lua_rawget(L, 3);
            if (lua_toboolean(L, -1))
                flags |= dot_flags[i].flag;
            lua_pop(L, 1);
        }
    }
    if (builder->capture.role != GPURUN_CAPTURE_ORIGIN
        || builder->capture.state != GPURUN_CAPTURE_BUILT)
        return gpurun_error(L, "GraphBuilder:debug_dot_print: nothing built (it is %s): "
                               "end_building() first",
                            gpurun_capture_state_name(builder->capture.state));
    CHECK_CUDA(L, "writing the graph's DOT file", cuGraphDebugDotPrint, builder->capture.graph,
               path, flags);
    return 0;
}

static int builder_close(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_tagged(L, 1, &gpurun_builder_tag);
    if (builder->header.closed)
        return 0;
    gpurun_capture_release(L, &builder->capture);
    builder->header.closed = 1;
    return 0;
}

/* Fields: the generic __index checked the builder; its stream is checked here. */
static struct gpurun_graph_builder *self(lua_State *L)
{
    return gpurun_check_builder(L, 1);
}

static int builder_state(lua_State *L)
{
    lua_pushstring(L, gpurun_capture_state_name(self(L)->capture.state));
    return 1;
}

static int builder_is_building(lua_State *L)
{
    lua_pushboolean(L, self(L)->capture.state == GPURUN_CAPTURE_BUILDING);
    return 1;
}

static int builder_is_join_required(lua_State *L)
{
    const struct gpurun_capture *capture = &self(L)->capture;
    lua_pushboolean(L, capture->role == GPURUN_CAPTURE_FORK
                       && capture->state == GPURUN_CAPTURE_BUILDING);
    return 1;
}

static int builder_kind(lua_State *L)
{
    static const char *const roles[] = {"origin", "fork", "body"};
    lua_pushstring(L, roles[self(L)->capture.role]);
    return 1;
}

/* The nodes of the graph being built so far (at this builder's level: the
 * origin's graph for it and its forks, a body's own), or 0 when it is not
 * building. Taken before and after a launch, it says which nodes the launch
 * made (gpurun.pipeline finds its scalars' nodes so). */
static int builder_node_count(lua_State *L)
{
    const struct gpurun_capture *capture = &self(L)->capture;
    size_t count = 0;
    CUgraph graph = NULL;
    if (capture->state == GPURUN_CAPTURE_BUILDING) {
        if (gpurun_capture_current_graph(capture, &graph) != CUDA_SUCCESS)
            gpurun_cuda_error(L, "finding the graph a capture builds");
        CHECK_CUDA(L, "counting the nodes of a graph being built", cuGraphGetNodes, graph, NULL,
                   &count);
    }
    lua_pushinteger(L, (lua_Integer)count);
    return 1;
}

static void push_builder_stream(lua_State *L, int index)
{
    lua_getiuservalue(L, index, STREAM_VALUE);
}

/* ---- the launch target ------------------------------------------------- */

CUstream gpurun_launch_target(lua_State *L, int index, struct gpurun_capture **capture)
{
    *capture = NULL;
    const struct gpurun_stream_object *stream = gpurun_to_tagged(L, index, &gpurun_stream_tag);
    if (stream) {
        if (stream->header.closed)
            gpurun_closed_error(L, gpurun_stream_tag.type_name);
        if (stream->stream.capture)
            gpurun_refuse_captured(L, 0, NULL, "launch on the builder, so that the graph "
                                               "keeps what it uses");
        return stream->stream.handle;
    }
    *capture = gpurun_to_building(L, index);
    if (*capture == NULL)
        gpurun_type_error(L, index, "gpurun.Stream or gpurun.GraphBuilder");
    return (*capture)->stream->handle;
}

CUcontext gpurun_launch_context(lua_State *L, int index, const struct gpurun_capture *capture)
{
    if (capture)
        return capture->stream->context;
    return ((const struct gpurun_stream_object *)lua_touserdata(L, index))->stream.context;
}

void gpurun_push_context_keeper(lua_State *L, int index)
{
    index = lua_absindex(L, index);
    if (gpurun_to_tagged(L, index, &gpurun_stream_tag)) {
        lua_getiuservalue(L, index, 1);
        return;
    }
    push_builder_stream(L, index);
    if (gpurun_to_tagged(L, -1, &gpurun_stream_tag))
        lua_getiuservalue(L, -1, 1);
    else
        lua_pushnil(L);
    lua_remove(L, -2);
}

static int builder_stream(lua_State *L)
{
    self(L);
    push_builder_stream(L, 1);
    return 1;
}

static int builder_tostring(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_tagged(L, 1, &gpurun_builder_tag);
    lua_pushfstring(L, "gpurun.GraphBuilder(%s)",
                    builder->header.closed ? "closed"
                                           : gpurun_capture_state_name(builder->capture.state));
    return 1;
}

/*   stream:create_graph_builder()      a builder of the stream (an origin)
 *   builder:begin_building()/end_building()
 *   builder:split(n) -> builder, b2, ... bn: forks of the capture on streams
 *                      of their own, joined back with gpurun.join(...)
 *   builder:record([event]), builder:wait(event | builder)
 *   builder:debug_dot_print(path [, options])
 * (the conditional nodes: graph_conditionals.c) */
static const luaL_Reg builder_methods[] = {
    {"begin_building", builder_begin_building},
    {"end_building", builder_end_building},
    {"split", builder_split},
    {"record", builder_record},
    {"wait", builder_wait},
    {"debug_dot_print", builder_debug_dot_print},
    {"close", builder_close},
    {NULL, NULL}
};

static const luaL_Reg builder_fields[] = {
    {"state", builder_state},
    {"is_building", builder_is_building},
    {"is_join_required", builder_is_join_required},
    {"kind", builder_kind},
    {"stream", builder_stream},
    {"node_count", builder_node_count},
    {NULL, NULL}
};

static const luaL_Reg builder_metamethods[] = {
    {"__tostring", builder_tostring},
    {"__close", builder_close},
    {"__gc", builder_close},
    {NULL, NULL}
};

static const struct gpurun_type builder_type = {
    &gpurun_builder_tag, builder_methods, builder_metamethods, builder_fields, NULL,
};

static const luaL_Reg stream_methods[] = {
    {"create_graph_builder", stream_create_graph_builder},
    {NULL, NULL}
};

static const luaL_Reg module_functions[] = {
    {"join", module_join},
    {NULL, NULL}
};

void gpurun_open_graph_builder(lua_State *L)
{
    gpurun_register_type(L, &builder_type);
    gpurun_add_methods(L, &gpurun_stream_tag, stream_methods);
    gpurun_set_functions(L, module_functions);
}
