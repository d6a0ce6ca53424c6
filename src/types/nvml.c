/* The C side of gpurun.system (lua/gpurun/builtin/system.lua): one NVML
 * call per answer, NVML's numbers as they are. A query NVML does not
 * support on a device is a nil, never an error; every other failed call
 * raises with its NVML result. Arguments arrive checked by the Lua side. */
#include "types/nvml.h"

#include "base/nvml_loader.h"

#include <stdio.h>

/* Raises the loader's reason unless NVML is open. */
static void require_nvml(lua_State *L)
{
    if (nvml_loader_load() != 0)
        gpurun_error(L, "%s", nvml_loader_error());
}

static int raise_nvml(lua_State *L, const char *call, nvml_return result, const char *what)
{
    char message[512];
    nvml_format_error(message, sizeof message, call, result);
    return gpurun_error(L, "%s while %s", message, what);
}

/* NVML's answer to call: 1 where it answered, 0 where the query is not
 * supported; raises on anything else. */
static int answered(lua_State *L, nvml_return result, const char *call, const char *what)
{
    if (result == NVML_RETURN_SUCCESS)
        return 1;
    if (result == NVML_RETURN_NOT_SUPPORTED)
        return 0;
    return raise_nvml(L, call, result, what);
}

#define NVML_ASK(L, what, name, ...) answered(L, nvml.name(__VA_ARGS__), #name, what)

static nvml_device check_device(lua_State *L, int arg)
{
    nvml_device device = NULL;
    unsigned int index = (unsigned int)gpurun_check_integer(L, arg, NULL);
    char what[64];
    snprintf(what, sizeof what, "finding device %u", index);
    if (!NVML_ASK(L, what, nvmlDeviceGetHandleByIndex_v2, index, &device))
        gpurun_error(L, "NVML does not support device %u", index);
    return device;
}

/* load() -> nil, or why NVML cannot be used. Never raises. */
static int core_load(lua_State *L)
{
    return gpurun_push_load_status(L, nvml_loader_load, nvml_loader_error);
}

/* versions() -> driver version ("580.65.06"), NVML version, CUDA version
 * (13000) */
static int core_versions(lua_State *L)
{
    require_nvml(L);
    char driver[NVML_VERSION_SIZE] = "", library[NVML_VERSION_SIZE] = "";
    int cuda_version = 0;
    const char *what = "reading the versions";
    if (!NVML_ASK(L, what, nvmlSystemGetDriverVersion, driver, sizeof driver))
        lua_pushnil(L);
    else
        lua_pushstring(L, driver);
    if (!NVML_ASK(L, what, nvmlSystemGetNVMLVersion, library, sizeof library))
        lua_pushnil(L);
    else
        lua_pushstring(L, library);
    if (!NVML_ASK(L, what, nvmlSystemGetCudaDriverVersion_v2, &cuda_version))
        lua_pushnil(L);
    else
        lua_pushinteger(L, cuda_version);
    return 3;
}

/* driver_branch() -> "r580_00", or nil where this NVML cannot say. */
static int core_driver_branch(lua_State *L)
{
    require_nvml(L);
    struct nvml_driver_branch branch = {0};
    branch.version = (unsigned int)sizeof branch | 1u << 24;
    if (!nvml.nvmlSystemGetDriverBranch
        || !NVML_ASK(L, "reading the driver branch", nvmlSystemGetDriverBranch, &branch,
                     (unsigned int)sizeof branch.branch))
        lua_pushnil(L);
    else
        lua_pushstring(L, branch.branch);
    return 1;
}

/* process_name(pid) -> the name NVML gives it, or nil where it knows none. */
static int core_process_name(lua_State *L)
{
    require_nvml(L);
    lua_Integer pid = gpurun_check_integer(L, 1, NULL);
    char name[1024] = "";
    nvml_return result = nvml.nvmlSystemGetProcessName((unsigned int)pid, name, sizeof name);
    if (result == NVML_RETURN_SUCCESS)
        lua_pushstring(L, name);
    else if (result == NVML_RETURN_NOT_SUPPORTED || result == 6 /* NOT_FOUND */)
        lua_pushnil(L);
    else
        raise_nvml(L, "nvmlSystemGetProcessName", result, "naming a process");
    return 1;
}

static int core_device_count(lua_State *L)
{
    require_nvml(L);
    unsigned int count = 0;
    if (!NVML_ASK(L, "counting devices", nvmlDeviceGetCount_v2, &count))
        count = 0;
    lua_pushinteger(L, (lua_Integer)count);
    return 1;
}

static void set_integer(lua_State *L, const char *key, lua_Integer value)
{
    lua_pushinteger(L, value);
    lua_setfield(L, -2, key);
}

static void set_string(lua_State *L, const char *key, const char *value)
{
    lua_pushstring(L, value);
    lua_setfield(L, -2, key);
}

/* device(index) -> { name, uuid, pci_*, memory_*, temperature, power_*_mw,
 * clock_sm, clock_memory, performance_state, cc_major, cc_minor, arch,
 * brand }, each absent where NVML does not support it on the device. */
static int core_device(lua_State *L)
{
    require_nvml(L);
    nvml_device device = check_device(L, 1);
    char what[64];
    snprintf(what, sizeof what, "reading device %d", (int)lua_tointeger(L, 1));
    lua_createtable(L, 0, 24);
    char text[NVML_NAME_SIZE > NVML_UUID_SIZE ? NVML_NAME_SIZE : NVML_UUID_SIZE];
    if (NVML_ASK(L, what, nvmlDeviceGetName, device, text, sizeof text))
        set_string(L, "name", text);
    if (NVML_ASK(L, what, nvmlDeviceGetUUID, device, text, sizeof text))
        set_string(L, "uuid", text);
    struct nvml_pci_info pci = {0};
    if (NVML_ASK(L, what, nvmlDeviceGetPciInfo_v3, device, &pci)) {
        pci.bus_id[sizeof pci.bus_id - 1] = '\0';
        set_string(L, "pci_bus_id", pci.bus_id);
        set_integer(L, "pci_domain", pci.domain);
        set_integer(L, "pci_bus", pci.bus);
        set_integer(L, "pci_device", pci.device);
        set_integer(L, "pci_device_id", pci.pci_device_id);
    }
    struct nvml_memory memory = {0};
    if (NVML_ASK(L, what, nvmlDeviceGetMemoryInfo, device, &memory)) {
        set_integer(L, "memory_total", (lua_Integer)memory.total);
        set_integer(L, "memory_used", (lua_Integer)memory.used);
        set_integer(L, "memory_free", (lua_Integer)memory.free);
    }
    unsigned int value = 0;
    if (nvml.nvmlDeviceGetTemperature
        && NVML_ASK(L, what, nvmlDeviceGetTemperature, device, 0 /* NVML_TEMPERATURE_GPU */,
                    &value))
        set_integer(L, "temperature", value);
    if (NVML_ASK(L, what, nvmlDeviceGetPowerUsage, device, &value))
        set_integer(L, "power_usage_mw", value);
    if (NVML_ASK(L, what, nvmlDeviceGetPowerManagementLimit, device, &value))
        set_integer(L, "power_limit_mw", value);
    if (NVML_ASK(L, what, nvmlDeviceGetClockInfo, device, 1 /* NVML_CLOCK_SM */, &value))
        set_integer(L, "clock_sm", value);
    if (NVML_ASK(L, what, nvmlDeviceGetClockInfo, device, 2 /* NVML_CLOCK_MEM */, &value))
        set_integer(L, "clock_memory", value);
    int state = 0, minor = 0;
    if (NVML_ASK(L, what, nvmlDeviceGetPerformanceState, device, &state))
        set_integer(L, "performance_state", state);
    if (NVML_ASK(L, what, nvmlDeviceGetCudaComputeCapability, device, &state, &minor)) {
        set_integer(L, "cc_major", state);
        set_integer(L, "cc_minor", minor);
    }
    if (NVML_ASK(L, what, nvmlDeviceGetArchitecture, device, &value))
        set_integer(L, "arch", value);
    if (NVML_ASK(L, what, nvmlDeviceGetBrand, device, &state))
        set_integer(L, "brand", state);
    return 1;
}

/* topology(a, b) -> NVML's nvmlGpuTopologyLevel_t, or nil. */
static int core_topology(lua_State *L)
{
    require_nvml(L);
    nvml_device first = check_device(L, 1), second = check_device(L, 2);
    int level = 0;
    if (NVML_ASK(L, "reading the topology", nvmlDeviceGetTopologyCommonAncestor, first, second,
                 &level))
        lua_pushinteger(L, level);
    else
        lua_pushnil(L);
    return 1;
}

/* p2p_status(a, b, caps_index) -> NVML's nvmlGpuP2PStatus_t, or nil. */
static int core_p2p_status(lua_State *L)
{
    require_nvml(L);
    nvml_device first = check_device(L, 1), second = check_device(L, 2);
    int caps_index = (int)gpurun_check_integer(L, 3, NULL), status = 0;
    if (NVML_ASK(L, "reading the peer-to-peer status", nvmlDeviceGetP2PStatus, first, second,
                 caps_index, &status))
        lua_pushinteger(L, status);
    else
        lua_pushnil(L);
    return 1;
}

static const luaL_Reg core_functions[] = {
    {"load", core_load},
    {"versions", core_versions},
    {"driver_branch", core_driver_branch},
    {"process_name", core_process_name},
    {"device_count", core_device_count},
    {"device", core_device},
    {"topology", core_topology},
    {"p2p_status", core_p2p_status},
    {NULL, NULL}
};

/* In package.loaded, set while the module opens, so that the Lua side
 * finds them with require wherever gpurun itself was loaded from. */
void gpurun_open_nvml(lua_State *L)
{
    luaL_getsubtable(L, LUA_REGISTRYINDEX, LUA_LOADED_TABLE);
    luaL_newlib(L, core_functions);
    lua_setfield(L, -2, "gpurun.nvml_core");
    lua_pop(L, 1);
}
