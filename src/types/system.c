/* The module functions that belong to no type: the driver and NVRTC as the
 * process sees them, device memory, and the clock. */
#include "types/system.h"

#include "base/nvrtc_compile.h"

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
        return gpurun_error(L, "nvrtcVersion failed");
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
    const char *call = gpurun_check_string(L, 1, NULL);
    CUresult result = (CUresult)gpurun_check_integer(L, 2, NULL);
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

void gpurun_open_system(lua_State *L)
{
    gpurun_set_functions(L, module_functions);
    lua_pushliteral(L, GPURUN_VERSION);
    lua_setfield(L, -2, "version");
    lua_pushliteral(L, LUA_RELEASE);
    lua_setfield(L, -2, "lua_version");
}
