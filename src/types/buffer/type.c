/* gpurun.Buffer as Lua sees it: device memory holding elements of one
 * dtype, made and filled from the host (gpurun.empty, zeros, full, array,
 * from_bytes), with its fields and its tables of methods, registered.
 * Beside it: buffer.c (what a Buffer is, its copies), elements.c (fills,
 * element access), memory.c (allocation, views, the close), managed.c,
 * ipc.c and pinned_buffer.c (gpurun.PinnedBuffer). Element indices count
 * from 1, as Lua's do: get(i), set(i, v), buf[i], and every range (first,
 * count) that view, fill, copy_from, copy_to, to_table and to_bytes
 * take. */
#include "types/buffer/internal.h"

/* close([stream]); __close gets the error object there, not a stream. */
static int buffer_close(lua_State *L)
{
    return gpurun_close_buffer(L, 1, 2);
}

static int buffer_close_scope(lua_State *L)
{
    return gpurun_close_buffer(L, 1, 0);
}

static int buffer_gc(lua_State *L)
{
    return gpurun_close_buffer(L, 0, 0);
}

/* ---- fields ------------------------------------------------------------- */

static struct gpurun_buffer *self(lua_State *L)
{
    return lua_touserdata(L, 1);
}

/* dtype, size, nbytes: as every container of elements has them. */
static int buffer_elements_field(lua_State *L)
{
    return gpurun_push_elements_field(L, self(L)->dtype, self(L)->count);
}

static int buffer_ptr(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)self(L)->pointer);
    return 1;
}

static int buffer_device(lua_State *L)
{
    lua_pushinteger(L, self(L)->device);
    return 1;
}

/* Whether the memory is managed (gpurun.managed), which the host reaches too. */
static int buffer_is_managed(lua_State *L)
{
    lua_pushboolean(L, gpurun_buffer_owner(self(L))->managed);
    return 1;
}

/* The Buffer a view shares memory with, or nil. */
static int buffer_base(lua_State *L)
{
    if (self(L)->base)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushnil(L);
    return 1;
}

/* The MemoryPool the memory came from (a view's base's), or nil. */
static int buffer_pool(lua_State *L)
{
    struct gpurun_buffer *buffer = self(L);
    if (buffer->base)
        lua_getiuservalue(L, 1, 1);
    else
        lua_pushvalue(L, 1);
    if (gpurun_buffer_owner(buffer)->pool)
        lua_getiuservalue(L, -1, GPURUN_BUFFER_POOL_VALUE);
    else
        lua_pushnil(L);
    return 1;
}

static int buffer_len(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)gpurun_check_buffer(L, 1)->count);
    return 1;
}

static int buffer_tostring(lua_State *L)
{
    struct gpurun_buffer *buffer = gpurun_check_tagged(L, 1, &gpurun_buffer_tag);
    if (buffer->header.closed)
        lua_pushliteral(L, "gpurun.Buffer(closed)");
    else if (buffer->base)
        lua_pushfstring(L, "gpurun.Buffer(%s, %I, a view from element %I)",
                        gpurun_dtypes[buffer->dtype].name, (LUAI_UACINT)buffer->count,
                        (LUAI_UACINT)((buffer->pointer - buffer->base->pointer)
                                      / buffer->element_size + 1));
    else
        lua_pushfstring(L, "gpurun.Buffer(%s, %I)", gpurun_dtypes[buffer->dtype].name,
                        (LUAI_UACINT)buffer->count);
    return 1;
}

/* ---- constructors ------------------------------------------------------- */

/* empty(n [, dtype [, { pool =, stream = }]]): contents undefined. */
static int module_empty(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 3);
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    return 1;
}

/* Fills the new buffer at the top, on the placement's stream (or builder). */
static void fill_new(lua_State *L, const struct gpurun_placement *where,
                     const unsigned char *pattern, const char *operation)
{
    int index = lua_gettop(L);
    gpurun_fill_buffer(L, lua_touserdata(L, index), index, pattern, where->stream_index, operation);
    lua_settop(L, index);
}

/* zeros(n [, dtype [, options]]) */
static int module_zeros(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    static const unsigned char zero[GPURUN_MAX_ELEMENT_SIZE];
    lua_settop(L, 3);
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    fill_new(L, &where, zero, "gpurun.zeros");
    return 1;
}

/* full(n, value [, dtype [, options]]) */
static int module_full(lua_State *L)
{
    size_t count = gpurun_check_count(L, 1);
    int dtype = gpurun_check_dtype(L, 3, GPURUN_FLOAT32);
    unsigned char pattern[GPURUN_MAX_ELEMENT_SIZE];
    gpurun_check_element(L, 2, dtype, pattern);
    lua_settop(L, 4);
    struct gpurun_placement where;
    gpurun_check_placement(L, 4, &where, 0);
    gpurun_push_new_buffer(L, count, dtype, 1, &where);
    fill_new(L, &where, pattern, "gpurun.full");
    return 1;
}

/* array(sequence [, dtype [, options]]): every element is checked before
 * allocating. */
static int module_array(lua_State *L)
{
    gpurun_check_table(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 3);
    size_t count = lua_rawlen(L, 1);
    if (count == 0)
        gpurun_arg_error(L, 1, "non-empty sequence expected, got an empty table");
    struct gpurun_placement where;
    gpurun_check_placement(L, 3, &where, 1);
    const unsigned char *host = gpurun_stage_table(L, 1, 1, count, dtype);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, count, dtype, 1, &where);
    CUstream stream = gpurun_begin_transfer(L, where.stream_index, "gpurun.array");
    gpurun_write_elements(L, buffer, 0, count, host, stream);
    gpurun_end_transfer(L, stream, "gpurun.array");
    return 1;
}

/* from_bytes(string, dtype) -> a Buffer holding the string's raw elements. */
static int module_from_bytes(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TSTRING)
        gpurun_type_error(L, 1, "string");
    size_t length = lua_rawlen(L, 1);
    int dtype = gpurun_check_dtype(L, 2, GPURUN_FLOAT32);
    lua_settop(L, 2);
    size_t size = gpurun_dtypes[dtype].size;
    if (length == 0 || length % size != 0)
        gpurun_arg_error(L, 1, "%I bytes are not a whole, positive number of %s elements (%d "
                               "bytes each)", (LUAI_UACINT)length, gpurun_dtypes[dtype].name,
                         (int)size);
    struct gpurun_buffer *buffer = gpurun_push_new_buffer(L, length / size, dtype, 1, NULL);
    lua_replace(L, 2);
    gpurun_copy_from_string(L, buffer, 1, 0, "gpurun.from_bytes");
    lua_settop(L, 2);
    return 1;
}

/* ---- registration ------------------------------------------------------- */

static const luaL_Reg buffer_methods[] = {
    {"fill", gpurun_buffer_fill},
    {"copy_from", gpurun_buffer_copy_from},
    {"copy_to", gpurun_buffer_copy_to},
    {"to_table", gpurun_buffer_to_table},
    {"to_bytes", gpurun_buffer_to_bytes},
    {"view", gpurun_buffer_view},
    {"get", gpurun_buffer_get},
    {"set", gpurun_buffer_set},
    {"close", buffer_close},
    {NULL, NULL}
};

static const luaL_Reg buffer_fields[] = {
    {"dtype", buffer_elements_field},
    {"size", buffer_elements_field},
    {"nbytes", buffer_elements_field},
    {"ptr", buffer_ptr},
    {"device", buffer_device},
    {"base", buffer_base},
    {"pool", buffer_pool},
    {"is_managed", buffer_is_managed},
    {NULL, NULL}
};

static const luaL_Reg buffer_metamethods[] = {
    {"__len", buffer_len},
    {"__tostring", buffer_tostring},
    {"__close", buffer_close_scope},
    {"__gc", buffer_gc},
    {NULL, NULL}
};

static const struct gpurun_type buffer_type = {
    &gpurun_buffer_tag, buffer_methods, buffer_metamethods, buffer_fields, gpurun_buffer_element,
};

static const luaL_Reg module_functions[] = {
    {"empty", module_empty},
    {"zeros", module_zeros},
    {"full", module_full},
    {"array", module_array},
    {"from_bytes", module_from_bytes},
    {NULL, NULL}
};

void gpurun_open_buffer(lua_State *L)
{
    gpurun_register_type(L, &buffer_type);
    gpurun_set_functions(L, module_functions);
    gpurun_capture_set_drop(gpurun_drop_buffer);
    gpurun_open_managed(L);
    gpurun_open_buffer_ipc(L);
}
