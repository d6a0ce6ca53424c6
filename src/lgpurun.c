/* The `gpurun` module: runtime state, the shared error helpers, and the
 * functions that belong to no type (device_count, versions, perf_counter). */
#include "gpurun.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "module_open.h"
#include "nvrtc_compile.h"

#define MAX_DEVICES 64

struct gpurun_runtime gpurun_runtime = {NULL, -1, NULL};

/* Primary contexts retained by this process, released by the module state's
 * __gc, which runs after every other gpurun object's (it is created first). */
static CUcontext retained_contexts[MAX_DEVICES];
static CUdevice retained_devices[MAX_DEVICES];

const struct gpurun_tag gpurun_tag_stream = {GPURUN_STREAM}, gpurun_tag_buffer = {GPURUN_BUFFER},
    gpurun_tag_scalar = {GPURUN_SCALAR}, gpurun_tag_kernel = {GPURUN_KERNEL},
    gpurun_tag_config = {GPURUN_LAUNCH_CONFIG}, gpurun_tag_plan = {GPURUN_PLAN},
    gpurun_tag_graph = {GPURUN_GRAPH};

/* ---- errors ------------------------------------------------------------- */

int gpurun_cuda_error(lua_State *L, const char *what_fmt, ...)
{
    char message[512];
    char what[256];
    va_list args;
    va_start(args, what_fmt);
    vsnprintf(what, sizeof what, what_fmt, args);
    va_end(args);
    CUresult result = cuda_last_failed_result;
    cuda_format_error(message, sizeof message, cuda_last_failed_call, result);
    /* A failed call invalidates a capture in progress; ending it now keeps
     * the stream usable once the error is caught. */
    gpurun_abort_captures(L);
    if (cuda_error_is_sticky(result))
        return luaL_error(L, "%s while %s; the CUDA context is no longer usable "
                             "(a kernel faulted): restart the process", message, what);
    return luaL_error(L, "%s while %s", message, what);
}

void gpurun_require_driver(lua_State *L)
{
    if (cuda_driver_load() != CUDA_SUCCESS)
        luaL_error(L, "%s", cuda_driver_load_error());
}

int gpurun_closed_error(lua_State *L, const char *type_name)
{
    return luaL_error(L, "attempt to use a closed %s", type_name);
}

void gpurun_new_type(lua_State *L, const char *name, const luaL_Reg *meth,
                     const luaL_Reg *metameth)
{
    luaL_newmetatable(L, name);
    if (metameth)
        luaL_setfuncs(L, metameth, 0);
    lua_newtable(L);
    if (meth)
        luaL_setfuncs(L, meth, 0);
    if (lua_getfield(L, -2, "__index") == LUA_TNIL) {
        lua_pop(L, 1);
        lua_pushvalue(L, -1);
        lua_setfield(L, -3, "__index");
    } else {
        lua_pop(L, 1);
    }
    lua_setfield(L, -2, "methods");
}

int gpurun_push_method(lua_State *L, const char *type_name)
{
    luaL_checkudata(L, 1, type_name);
    lua_getmetatable(L, 1);
    lua_getfield(L, -1, "methods");
    if (lua_type(L, 2) == LUA_TSTRING && lua_getfield(L, -1, lua_tostring(L, 2)) != LUA_TNIL) {
        lua_replace(L, -3);
        lua_pop(L, 1);
        return 1;
    }
    lua_settop(L, 2);
    return 0;
}

/* ---- runtime ------------------------------------------------------------ */

CUcontext gpurun_require_context(lua_State *L)
{
    if (gpurun_runtime.current_context == NULL)
        luaL_error(L, "no current CUDA device: call gpurun.Device(id):set_current() first");
    return gpurun_runtime.current_context;
}

CUcontext gpurun_primary_context(lua_State *L, int ordinal)
{
    if (ordinal < 0 || ordinal >= MAX_DEVICES)
        luaL_error(L, "device ordinal %d out of range", ordinal);
    if (retained_contexts[ordinal] == NULL) {
        CUdevice device;
        CHECK_CUDA(L, "getting the device handle", cuDeviceGet, &device, ordinal);
        CUcontext context;
        CHECK_CUDA(L, "retaining the primary context", cuDevicePrimaryCtxRetain, &context, device);
        retained_contexts[ordinal] = context;
        retained_devices[ordinal] = device;
    }
    return retained_contexts[ordinal];
}

static int runtime_close(lua_State *L)
{
    (void)L;
    if (cuda.cuDevicePrimaryCtxRelease == NULL)
        return 0;
    for (int i = 0; i < MAX_DEVICES; i++) {
        if (retained_contexts[i] != NULL) {
            /* At exit a failed release (say after a sticky error) changes
             * nothing the user can act on. */
            (void)CUDA_CALL(cuDevicePrimaryCtxRelease, retained_devices[i]);
            retained_contexts[i] = NULL;
        }
    }
    gpurun_runtime.current_context = NULL;
    gpurun_runtime.current_device = -1;
    gpurun_runtime.current_stream = NULL;
    return 0;
}

/* ---- module functions --------------------------------------------------- */

double gpurun_now(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
}

static int module_perf_counter(lua_State *L)
{
    lua_pushnumber(L, gpurun_now());
    return 1;
}

static int module_device_count(lua_State *L)
{
    lua_pushinteger(L, cuda_driver_device_count());
    return 1;
}

/* driver_version() -> major, minor; raises when there is no driver. */
static int module_driver_version(lua_State *L)
{
    gpurun_require_driver(L);
    int version = 0;
    CHECK_CUDA(L, "reading the driver version", cuDriverGetVersion, &version);
    lua_pushinteger(L, version / 1000);
    lua_pushinteger(L, version % 1000 / 10);
    return 2;
}

static int module_nvrtc_version(lua_State *L)
{
    int major = 0, minor = 0;
    if (!nvrtc_compile_version(&major, &minor))
        return luaL_error(L, "nvrtcVersion failed");
    lua_pushinteger(L, major);
    lua_pushinteger(L, minor);
    return 2;
}

/* driver_error() -> nil when the driver loads, else the loader's reason. */
static int module_driver_error(lua_State *L)
{
    if (cuda_driver_load() == CUDA_SUCCESS)
        lua_pushnil(L);
    else
        lua_pushstring(L, cuda_driver_load_error());
    return 1;
}

/* mem_info() -> free, total bytes on the current device. */
static int module_mem_info(lua_State *L)
{
    gpurun_require_context(L);
    size_t free_bytes = 0, total_bytes = 0;
    CHECK_CUDA(L, "reading free device memory", cuMemGetInfo, &free_bytes, &total_bytes);
    lua_pushinteger(L, (lua_Integer)free_bytes);
    lua_pushinteger(L, (lua_Integer)total_bytes);
    return 2;
}

/* format_cuda_error(call, code) -> the one message shape, for tests and for
 * Lua code that wants to name a driver result. */
static int module_format_cuda_error(lua_State *L)
{
    const char *call = luaL_checkstring(L, 1);
    CUresult result = (CUresult)luaL_checkinteger(L, 2);
    char message[512];
    cuda_driver_load();
    lua_pushstring(L, cuda_format_error(message, sizeof message, call, result));
    return 1;
}

static const luaL_Reg module_functions[] = {
    {"perf_counter", module_perf_counter},
    {"device_count", module_device_count},
    {"driver_version", module_driver_version},
    {"driver_error", module_driver_error},
    {"nvrtc_version", module_nvrtc_version},
    {"mem_info", module_mem_info},
    {"format_cuda_error", module_format_cuda_error},
    {NULL, NULL}
};

int luaopen_gpurun(lua_State *L)
{
    gpurun_module_prologue(L);
    /* The state object first: as the oldest gpurun userdata, its __gc runs
     * last when the Lua state closes, after every buffer, stream and graph.
     * Only once: the module can be opened again (busted's insulation drops
     * package.loaded between files), and replacing the object would let the
     * collector release the contexts that live objects still use. */
    if (lua_getfield(L, LUA_REGISTRYINDEX, "gpurun.runtime") == LUA_TNIL) {
        lua_newuserdatauv(L, 1, 0);
        lua_newtable(L);
        lua_pushcfunction(L, runtime_close);
        lua_setfield(L, -2, "__gc");
        lua_setmetatable(L, -2);
        lua_setfield(L, LUA_REGISTRYINDEX, "gpurun.runtime");
    }
    lua_pop(L, 1);

    luaL_newlib(L, module_functions);
    lua_pushliteral(L, GPURUN_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushliteral(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua_version");

    gpurun_open_device(L);
    gpurun_open_stream(L);
    gpurun_open_buffer(L);
    gpurun_open_program(L);
    gpurun_open_kernel(L);
    gpurun_open_graph(L);
    return 1;
}
