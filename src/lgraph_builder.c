/* gpurun.GraphBuilder: a stream's capture, from begin_building() to
 * end_building(), as cuda.core names it. The capture itself, and the rule
 * that an error ends it, are the runtime's (runtime_capture.c); this type
 * gives it a Lua face. Graph (lgraph.c) adds complete(). */
#include "lgraph_builder.h"

#include "lstream.h"

const struct gpurun_tag gpurun_builder_tag = {"gpurun.GraphBuilder"};

struct gpurun_graph_builder *gpurun_check_builder(lua_State *L, int index)
{
    struct gpurun_graph_builder *builder = gpurun_check_open(L, index, &gpurun_builder_tag);
    if (builder->capture.stream->handle == NULL)
        gpurun_closed_error(L, gpurun_stream_tag.type_name);
    return builder;
}

CUstream gpurun_builder_stream(lua_State *L, struct gpurun_graph_builder *builder)
{
    if (builder->capture.state != GPURUN_CAPTURE_BUILDING)
        gpurun_error(L, "GraphBuilder is not building (it is %s): call begin_building() first",
                     gpurun_capture_state_name(builder->capture.state));
    return builder->capture.stream->handle;
}

/* stream:create_graph_builder() -> GraphBuilder */
static int stream_create_graph_builder(lua_State *L)
{
    struct gpurun_stream *stream = gpurun_check_stream(L, 1);
    struct gpurun_graph_builder *builder =
        gpurun_new_object(L, sizeof *builder, 1, &gpurun_builder_tag);
    gpurun_capture_init(&builder->capture, stream);
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    builder->header.closed = 0;
    return 1;
}

static int builder_begin_building(lua_State *L)
{
    struct gpurun_graph_builder *builder = gpurun_check_builder(L, 1);
    struct gpurun_capture *capture = &builder->capture;
    if (capture->state == GPURUN_CAPTURE_BUILDING)
        return gpurun_error(L, "GraphBuilder:begin_building: already building");
    if (capture->stream->capture)
        return gpurun_error(L, "GraphBuilder:begin_building: another GraphBuilder is capturing "
                               "this stream");
    if (gpurun_capture_begin(L, capture, 1) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "beginning a graph capture");
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
    if (gpurun_capture_end(L, capture) != CUDA_SUCCESS)
        return gpurun_cuda_error(L, "ending a graph capture");
    lua_settop(L, 1);
    return 1;
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

static int builder_stream(lua_State *L)
{
    self(L);
    lua_getiuservalue(L, 1, 1);
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

static const luaL_Reg builder_methods[] = {
    {"begin_building", builder_begin_building},
    {"end_building", builder_end_building},
    {"close", builder_close},
    {NULL, NULL}
};

static const luaL_Reg builder_fields[] = {
    {"state", builder_state},
    {"is_building", builder_is_building},
    {"stream", builder_stream},
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

void gpurun_open_graph_builder(lua_State *L)
{
    gpurun_register_type(L, &builder_type);
    gpurun_add_methods(L, &gpurun_stream_tag, stream_methods);
}
