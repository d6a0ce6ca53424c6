/* gpurun.IPCAllocationHandle: a file descriptor held by a Lua object, so
 * that an error between receiving and importing it cannot leak it. */
#include "types/allocation_handle.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

const struct gpurun_tag gpurun_allocation_handle_tag = {"gpurun.IPCAllocationHandle"};

/* Closes the descriptor if the object could not be made. */
static int push_object(lua_State *L)
{
    gpurun_new_object(L, sizeof(struct gpurun_allocation_handle), 1,
                      &gpurun_allocation_handle_tag);
    return 1;
}

struct gpurun_allocation_handle *gpurun_push_allocation_handle(lua_State *L, int fd,
                                                               int descriptor_index)
{
    descriptor_index = descriptor_index ? lua_absindex(L, descriptor_index) : 0;
    lua_pushcfunction(L, push_object);
    if (lua_pcall(L, 0, 1, 0) != LUA_OK) {
        close(fd);
        gpurun_error_at(L, 0, "not enough memory for a gpurun.IPCAllocationHandle");
    }
    struct gpurun_allocation_handle *handle = lua_touserdata(L, -1);
    handle->fd = fd;
    if (descriptor_index) {
        lua_pushvalue(L, descriptor_index);
        lua_setiuservalue(L, -2, 1);
    }
    handle->header.closed = 0;
    return handle;
}

struct gpurun_allocation_handle *gpurun_check_allocation_handle(lua_State *L, int index)
{
    return gpurun_check_open(L, index, &gpurun_allocation_handle_tag);
}

static int handle_close(lua_State *L)
{
    struct gpurun_allocation_handle *handle =
        gpurun_check_tagged(L, 1, &gpurun_allocation_handle_tag);
    if (handle->header.closed)
        return 0;
    handle->header.closed = 1;
    close(handle->fd);
    handle->fd = -1;
    return 0;
}

static int handle_fd(lua_State *L)
{
    lua_pushinteger(L, ((struct gpurun_allocation_handle *)lua_touserdata(L, 1))->fd);
    return 1;
}

static int handle_descriptor(lua_State *L)
{
    lua_getiuservalue(L, 1, 1);
    return 1;
}

static int handle_tostring(lua_State *L)
{
    struct gpurun_allocation_handle *handle =
        gpurun_check_tagged(L, 1, &gpurun_allocation_handle_tag);
    if (handle->header.closed)
        lua_pushliteral(L, "gpurun.IPCAllocationHandle(closed)");
    else
        lua_pushfstring(L, "gpurun.IPCAllocationHandle(fd %d)", handle->fd);
    return 1;
}

/* IPCAllocationHandle(fd [, descriptor]) -> a handle of its own: the file
 * descriptor (one received some other way) is duplicated, and stays the
 * caller's. */
static int module_allocation_handle(lua_State *L)
{
    lua_Integer fd = gpurun_check_integer(L, 1, "a file descriptor (an integer)");
    if (!lua_isnoneornil(L, 2) && lua_type(L, 2) != LUA_TSTRING)
        gpurun_type_error(L, 2, "string (a pool's descriptor) or nil");
    lua_settop(L, 2);
    if (fd < 0 || fd > 0x7fffffff || fcntl((int)fd, F_GETFD) < 0)
        return gpurun_arg_error(L, 1, "%I is not an open file descriptor",
                                (LUAI_UACINT)fd);
    int copy = fcntl((int)fd, F_DUPFD_CLOEXEC, 0);
    if (copy < 0)
        return gpurun_error(L, "gpurun.IPCAllocationHandle: duplicating file descriptor %I: %s",
                            (LUAI_UACINT)fd, strerror(errno));
    gpurun_push_allocation_handle(L, copy, lua_isnil(L, 2) ? 0 : 2);
    return 1;
}

static const luaL_Reg handle_methods[] = {
    {"close", handle_close},
    {NULL, NULL}
};

static const luaL_Reg handle_fields[] = {
    {"fd", handle_fd},
    {"descriptor", handle_descriptor},
    {NULL, NULL}
};

static const luaL_Reg handle_metamethods[] = {
    {"__tostring", handle_tostring},
    {"__close", handle_close},
    {"__gc", handle_close},
    {NULL, NULL}
};

static const struct gpurun_type handle_type = {
    &gpurun_allocation_handle_tag, handle_methods, handle_metamethods, handle_fields, NULL,
};

static const luaL_Reg module_functions[] = {
    {"IPCAllocationHandle", module_allocation_handle},
    {NULL, NULL}
};

void gpurun_open_allocation_handle(lua_State *L)
{
    gpurun_register_type(L, &handle_type);
    gpurun_set_functions(L, module_functions);
}
