/* The NVML loader: dlopen beside the driver, one table filled by name,
 * nvmlInit_v2, one error formatter. */
#include "base/nvml_loader.h"
#include "base/cuda_driver.h"
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvml_library nvml;

static struct library_loader loader;

#define SONAME "libnvidia-ml.so.1"

static const struct library_symbol entry_points[] = {
#define NVML_ENTRY(name, params) {#name, offsetof(struct nvml_library, name)},
    NVML_ENTRY_POINTS(NVML_ENTRY)
#undef NVML_ENTRY
    {"nvmlErrorString", offsetof(struct nvml_library, nvmlErrorString)},
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &nvml, sizeof nvml, fmt, detail);
}

#define INSTALL_HINT                                                                         \
    "it comes with the NVIDIA driver; install the driver or set GPURUN_NVML_LIBRARY to the " \
    "library's path"

/* The NVML of the driver gpurun runs on (beside libcuda), even where the
 * loader's path would find another first, unless the user names one. */
static void *open_library(const char *name, char *why, size_t why_size)
{
    return library_loader_open(name, cuda_driver_folder(), SONAME, why, why_size);
}

int nvml_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_NVML_LIBRARY"), why, sizeof why);
    if (!loader.handle)
        return load_failed("NVML could not be loaded (%s): " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&loader, &nvml, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("NVML could not be loaded: the library has no %s (a driver older "
                           "than 450?)", missing);
#define NVML_OPTIONAL(name, params)                                                          \
    {                                                                                        \
        void *function = dlsym(loader.handle, #name);                                        \
        memcpy(&nvml.name, &function, sizeof function);                                      \
    }
    NVML_OPTIONAL_ENTRY_POINTS(NVML_OPTIONAL)
#undef NVML_OPTIONAL
    nvml_return result = nvml.nvmlInit_v2();
    if (result != NVML_RETURN_SUCCESS) {
        char message[256];
        nvml_format_error(message, sizeof message, "nvmlInit_v2", result);
        return load_failed("NVML could not be initialised: %s", message);
    }
    loader.result = 0;
    return 0;
}

const char *nvml_loader_error(void)
{
    return loader.error;
}

static const char *result_name(nvml_return result)
{
    static const char *const names[] = {
        "NVML_SUCCESS", "NVML_ERROR_UNINITIALIZED", "NVML_ERROR_INVALID_ARGUMENT",
        "NVML_ERROR_NOT_SUPPORTED", "NVML_ERROR_NO_PERMISSION", "NVML_ERROR_ALREADY_INITIALIZED",
        "NVML_ERROR_NOT_FOUND", "NVML_ERROR_INSUFFICIENT_SIZE", "NVML_ERROR_INSUFFICIENT_POWER",
        "NVML_ERROR_DRIVER_NOT_LOADED", "NVML_ERROR_TIMEOUT", "NVML_ERROR_IRQ_ISSUE",
        "NVML_ERROR_LIBRARY_NOT_FOUND", "NVML_ERROR_FUNCTION_NOT_FOUND",
        "NVML_ERROR_CORRUPTED_INFOROM", "NVML_ERROR_GPU_IS_LOST", "NVML_ERROR_RESET_REQUIRED",
        "NVML_ERROR_OPERATING_SYSTEM", "NVML_ERROR_LIB_RM_VERSION_MISMATCH", "NVML_ERROR_IN_USE",
        "NVML_ERROR_MEMORY", "NVML_ERROR_NO_DATA", "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
        "NVML_ERROR_INSUFFICIENT_RESOURCES", "NVML_ERROR_FREQ_NOT_SUPPORTED",
        "NVML_ERROR_ARGUMENT_VERSION_MISMATCH", "NVML_ERROR_DEPRECATED", "NVML_ERROR_NOT_READY",
        "NVML_ERROR_GPU_NOT_FOUND", "NVML_ERROR_INVALID_STATE",
    };
    if (result >= 0 && (size_t)result < sizeof names / sizeof names[0])
        return names[result];
    return result == 999 ? "NVML_ERROR_UNKNOWN" : NULL;
}

char *nvml_format_error(char *buffer, size_t size, const char *call, nvml_return result)
{
    return library_format_result(buffer, size, call, "NVML", (int)result, result_name(result),
                                 nvml.nvmlErrorString ? nvml.nvmlErrorString(result) : NULL);
}
