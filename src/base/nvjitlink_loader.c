/* The nvJitLink loader: dlopen, one table filled by name. */
#include "base/nvjitlink_loader.h"
#include "base/library_loader.h"
#include "base/nvrtc_compile.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nvjitlink_library nvjitlink;

static struct library_loader loader;

static const struct library_symbol entry_points[] = {
#define NVJITLINK_ENTRY(name, params) {#name, offsetof(struct nvjitlink_library, name)},
    NVJITLINK_ENTRY_POINTS(NVJITLINK_ENTRY)
#undef NVJITLINK_ENTRY
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &nvjitlink, sizeof nvjitlink, fmt, detail);
}

#define INSTALL_HINT                                                                         \
    "install the CUDA toolkit's nvJitLink (libnvJitLink.so beside libnvrtc, NVIDIA's "      \
    "libnvjitlink package) or set GPURUN_NVJITLINK_LIBRARY to the library's path"

/* The library beside libnvrtc, else the one of that soname on the
 * loader's path, unless the user names one. */
static void *open_library(const char *name, char *why, size_t why_size)
{
    int major = 0, minor = 0;
    char soname[64] = "libnvJitLink.so";
    if (nvrtc_compile_version(&major, &minor))
        snprintf(soname, sizeof soname, "libnvJitLink.so.%d", major);
    return library_loader_open(name, nvrtc_compile_folder(), soname, why, why_size);
}

int nvjitlink_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_NVJITLINK_LIBRARY"), why, sizeof why);
    if (!loader.handle)
        return load_failed("nvJitLink could not be loaded (%s); " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&loader, &nvjitlink, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("nvJitLink could not be loaded: the library has no %s (nvJitLink "
                           "older than 12.3?)", missing);
    loader.result = 0;
    return 0;
}

const char *nvjitlink_loader_identity(void)
{
    static char identity[PATH_MAX + 128];
    if (identity[0] || loader.result != 0)
        return identity;
    unsigned int major = 0, minor = 0;
    nvjitlink.nvJitLinkVersion(&major, &minor);
    char file[PATH_MAX + 64];
    library_file_identity((void *)nvjitlink.nvJitLinkCreate, file, sizeof file);
    snprintf(identity, sizeof identity, "nvjitlink %u.%u %s", major, minor, file);
    return identity;
}

const char *nvjitlink_loader_error(void)
{
    return loader.error;
}

const char *nvjitlink_result_name(nvJitLinkResult result)
{
    switch (result) {
    case NVJITLINK_SUCCESS: return "NVJITLINK_SUCCESS";
    case NVJITLINK_ERROR_UNRECOGNIZED_OPTION: return "NVJITLINK_ERROR_UNRECOGNIZED_OPTION";
    case NVJITLINK_ERROR_MISSING_ARCH: return "NVJITLINK_ERROR_MISSING_ARCH";
    case NVJITLINK_ERROR_INVALID_INPUT: return "NVJITLINK_ERROR_INVALID_INPUT";
    case NVJITLINK_ERROR_PTX_COMPILE: return "NVJITLINK_ERROR_PTX_COMPILE";
    case NVJITLINK_ERROR_NVVM_COMPILE: return "NVJITLINK_ERROR_NVVM_COMPILE";
    case NVJITLINK_ERROR_INTERNAL: return "NVJITLINK_ERROR_INTERNAL";
    case NVJITLINK_ERROR_THREADPOOL: return "NVJITLINK_ERROR_THREADPOOL";
    case NVJITLINK_ERROR_UNRECOGNIZED_INPUT: return "NVJITLINK_ERROR_UNRECOGNIZED_INPUT";
    case NVJITLINK_ERROR_FINALIZE: return "NVJITLINK_ERROR_FINALIZE";
    case NVJITLINK_ERROR_NULL_INPUT: return "NVJITLINK_ERROR_NULL_INPUT";
    case NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS: return "NVJITLINK_ERROR_INCOMPATIBLE_OPTIONS";
    case NVJITLINK_ERROR_INCORRECT_INPUT_TYPE: return "NVJITLINK_ERROR_INCORRECT_INPUT_TYPE";
    case NVJITLINK_ERROR_ARCH_MISMATCH: return "NVJITLINK_ERROR_ARCH_MISMATCH";
    case NVJITLINK_ERROR_OUTDATED_LIBRARY: return "NVJITLINK_ERROR_OUTDATED_LIBRARY";
    case NVJITLINK_ERROR_MISSING_FATBIN: return "NVJITLINK_ERROR_MISSING_FATBIN";
    case NVJITLINK_ERROR_UNRECOGNIZED_ARCH: return "NVJITLINK_ERROR_UNRECOGNIZED_ARCH";
    case NVJITLINK_ERROR_UNSUPPORTED_ARCH: return "NVJITLINK_ERROR_UNSUPPORTED_ARCH";
    case NVJITLINK_ERROR_LTO_NOT_ENABLED: return "NVJITLINK_ERROR_LTO_NOT_ENABLED";
    }
    return "an nvJitLink result unknown to gpurun";
}
