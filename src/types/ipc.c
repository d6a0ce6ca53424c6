/* The C side of gpurun.ipc: send and receive one message whose bytes the
 * Lua side composed and whose file descriptors are those of
 * gpurun.IPCAllocationHandle objects. Arguments arrive checked by the Lua
 * side; the socket's failures raise with the socket layer's reason. */
#include "types/ipc.h"

#include <stdlib.h>
#include <unistd.h>

#include "base/ipc_socket.h"
#include "types/allocation_handle.h"

/* The handle of the descriptor at 1 (closed if it cannot be made). */
static int push_handle(lua_State *L)
{
    gpurun_push_allocation_handle(L, (int)lua_tointeger(L, 1), 0);
    return 1;
}

/* send(path, bytes, timeout, { handles... }) */
static int core_send(lua_State *L)
{
    const char *path = gpurun_check_string(L, 1, NULL);
    size_t length = 0;
    const char *bytes = gpurun_check_string(L, 2, &length);
    double timeout = gpurun_check_number(L, 3);
    gpurun_check_table(L, 4);
    int fds[IPC_SOCKET_MAX_FDS];
    int count = (int)lua_rawlen(L, 4);
    if (count > IPC_SOCKET_MAX_FDS)
        return gpurun_error(L, "gpurun.ipc.send: at most %d pools a message, got %d",
                            IPC_SOCKET_MAX_FDS, count);
    for (int i = 0; i < count; i++) {
        lua_rawgeti(L, 4, i + 1);
        fds[i] = gpurun_check_allocation_handle(L, -1)->fd;
        lua_pop(L, 1);
    }
    char why[512];
    if (ipc_socket_send(path, (const unsigned char *)bytes, length, fds, count, timeout, why,
                        sizeof why) != 0)
        return gpurun_error(L, "gpurun.ipc.send: %s", why);
    return 0;
}

struct received {
    unsigned char *bytes;
    size_t length;
    int fds[IPC_SOCKET_MAX_FDS];
    int count;
    int wrapped; /* descriptors held by objects so far */
};

/* Pushes the message's string and its table of handles, under protection. */
static int push_received(lua_State *L)
{
    struct received *message = lua_touserdata(L, 1);
    lua_pushlstring(L, (const char *)message->bytes, message->length);
    lua_createtable(L, message->count, 0);
    while (message->wrapped < message->count) {
        int fd = message->fds[message->wrapped];
        lua_pushcfunction(L, push_handle);
        lua_pushinteger(L, fd);
        lua_call(L, 1, 1);
        message->wrapped++;
        lua_rawseti(L, -2, message->wrapped);
    }
    return 2;
}

/* receive(path, timeout, max_bytes) -> bytes, { handles... } */
static int core_receive(lua_State *L)
{
    const char *path = gpurun_check_string(L, 1, NULL);
    double timeout = gpurun_check_number(L, 2);
    lua_Integer max_bytes = gpurun_check_integer(L, 3, NULL);
    struct received message = {0};
    char why[512];
    if (ipc_socket_receive(path, timeout, (size_t)max_bytes, &message.bytes, &message.length,
                           message.fds, &message.count, why, sizeof why) != 0)
        return gpurun_error(L, "gpurun.ipc.receive: %s", why);
    lua_pushcfunction(L, push_received);
    lua_pushlightuserdata(L, &message);
    int status = lua_pcall(L, 1, 2, 0);
    free(message.bytes);
    if (status != LUA_OK) {
        /* The one being wrapped was closed by its push. */
        for (int i = message.wrapped + 1; i < message.count; i++)
            close(message.fds[i]);
        return gpurun_error_at(L, 0, "gpurun.ipc.receive: not enough memory for the message");
    }
    return 2;
}

static const luaL_Reg core_functions[] = {
    {"send", core_send},
    {"receive", core_receive},
    {NULL, NULL}
};

/* In package.loaded, set while the module opens, as types/nvml.c's. */
void gpurun_open_ipc(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    luaL_newlib(L, core_functions);
    lua_setfield(L, -2, "gpurun.ipc_core");
    lua_pop(L, 1);
}
