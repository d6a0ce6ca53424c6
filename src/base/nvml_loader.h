/* NVML (the NVIDIA Management Library), opened on first use.
 *
 * gpurun never links NVML: the first gpurun.system call dlopen()s
 * libnvidia-ml.so.1 ($GPURUN_NVML_LIBRARY, else the one in the folder of
 * the libcuda gpurun loaded, else by soname on the loader's path), takes
 * its entry points by name into one table and calls nvmlInit_v2. NVML
 * comes with the driver, not the toolkit, so the types below are nvml.h's
 * documented ABI, declared here. Knows nothing about Lua. */
#ifndef GPURUN_BASE_NVML_LOADER_H
#define GPURUN_BASE_NVML_LOADER_H

#include <stddef.h>

typedef struct nvml_device_st *nvml_device; /* nvmlDevice_t */
typedef int nvml_return;                    /* nvmlReturn_t */

#define NVML_RETURN_SUCCESS 0
#define NVML_RETURN_NOT_SUPPORTED 3
#define NVML_RETURN_INSUFFICIENT_SIZE 7

/* Buffer sizes nvml.h names (the _V2 ones, the largest). */
#define NVML_NAME_SIZE 96     /* NVML_DEVICE_NAME_V2_BUFFER_SIZE */
#define NVML_UUID_SIZE 96     /* NVML_DEVICE_UUID_V2_BUFFER_SIZE */
#define NVML_VERSION_SIZE 80  /* NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE */

/* nvmlPciInfo_t (nvmlDeviceGetPciInfo_v3). */
struct nvml_pci_info {
    char bus_id_legacy[16];
    unsigned int domain, bus, device, pci_device_id, pci_sub_system_id;
    char bus_id[32];
};

/* nvmlMemory_t: bytes. */
struct nvml_memory {
    unsigned long long total, free, used;
};

/* nvmlSystemDriverBranchInfo_t, version 1. */
struct nvml_driver_branch {
    unsigned int version;
    char branch[80];
};

/* Every entry point gpurun needs, with its signature. */
#define NVML_ENTRY_POINTS(X)                                                                 \
    X(nvmlInit_v2, (void))                                                                   \
    X(nvmlSystemGetDriverVersion, (char *version, unsigned int length))                     \
    X(nvmlSystemGetNVMLVersion, (char *version, unsigned int length))                       \
    X(nvmlSystemGetCudaDriverVersion_v2, (int *version))                                    \
    X(nvmlSystemGetProcessName, (unsigned int pid, char *name, unsigned int length))        \
    X(nvmlDeviceGetCount_v2, (unsigned int *count))                                         \
    X(nvmlDeviceGetHandleByIndex_v2, (unsigned int index, nvml_device *device))             \
    X(nvmlDeviceGetName, (nvml_device device, char *name, unsigned int length))             \
    X(nvmlDeviceGetUUID, (nvml_device device, char *uuid, unsigned int length))             \
    X(nvmlDeviceGetPciInfo_v3, (nvml_device device, struct nvml_pci_info *pci))             \
    X(nvmlDeviceGetMemoryInfo, (nvml_device device, struct nvml_memory *memory))            \
    X(nvmlDeviceGetPowerUsage, (nvml_device device, unsigned int *milliwatts))              \
    X(nvmlDeviceGetPowerManagementLimit, (nvml_device device, unsigned int *milliwatts))    \
    X(nvmlDeviceGetClockInfo, (nvml_device device, int clock, unsigned int *mhz))           \
    X(nvmlDeviceGetPerformanceState, (nvml_device device, int *state))                      \
    X(nvmlDeviceGetCudaComputeCapability, (nvml_device device, int *major, int *minor))     \
    X(nvmlDeviceGetArchitecture, (nvml_device device, unsigned int *arch))                  \
    X(nvmlDeviceGetBrand, (nvml_device device, int *brand))                                 \
    X(nvmlDeviceGetTopologyCommonAncestor, (nvml_device first, nvml_device second,          \
                                            int *level))                                    \
    X(nvmlDeviceGetP2PStatus, (nvml_device first, nvml_device second, int caps_index,       \
                               int *status))

/* Entry points some NVML versions lack: NULL where the library has none. */
#define NVML_OPTIONAL_ENTRY_POINTS(X)                                                        \
    X(nvmlDeviceGetTemperature, (nvml_device device, int sensor, unsigned int *celsius))    \
    X(nvmlSystemGetDriverBranch, (struct nvml_driver_branch *branch, unsigned int length))

struct nvml_library {
#define NVML_MEMBER(name, params) nvml_return (*name) params;
    NVML_ENTRY_POINTS(NVML_MEMBER)
    NVML_OPTIONAL_ENTRY_POINTS(NVML_MEMBER)
#undef NVML_MEMBER
    const char *(*nvmlErrorString)(nvml_return result);
};

/* The table, valid once nvml_loader_load() has returned 0. */
extern struct nvml_library nvml;

/* Opens the library, fills the table and initialises NVML, once per
 * process: 0, or -1 with the reason in nvml_loader_error(). */
int nvml_loader_load(void);
const char *nvml_loader_error(void);

/* "nvmlDeviceGetUUID: NVML_ERROR_GPU_IS_LOST (GPU is lost)" */
char *nvml_format_error(char *buffer, size_t size, const char *call, nvml_return result);

#endif
