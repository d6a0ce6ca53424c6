/* The NCCL loader: dlopen, one table filled by name, one error formatter. */
#include "base/nccl_loader.h"
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nccl_library nccl;
const char *nccl_last_failed_call = "";
nccl_result nccl_last_failed_result = NCCL_SUCCESS;

/* NCCL 2.10: the first with ncclAvg, and NCCL_VERSION's current scheme. */
#define OLDEST_VERSION 21000

static struct library_loader loader;
static int version;

static const struct library_symbol entry_points[] = {
#define NCCL_ENTRY(name, result, params) {#name, offsetof(struct nccl_library, name)},
    NCCL_ENTRY_POINTS(NCCL_ENTRY)
#undef NCCL_ENTRY
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &nccl, sizeof nccl, fmt, detail);
}

#define INSTALL_HINT                                                                     \
    "install NCCL (NVIDIA's libnccl2 package, or the CUDA toolkit's libnccl.so.2 on the " \
    "library path) or set GPURUN_NCCL_LIBRARY to the library's path"

int nccl_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    const char *name = getenv("GPURUN_NCCL_LIBRARY");
    if (name == NULL || *name == '\0')
        name = "libnccl.so.2";
    loader.handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!loader.handle)
        return load_failed("NCCL could not be loaded (%s); " INSTALL_HINT, dlerror());
    const char *missing = library_loader_resolve(&loader, &nccl, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("NCCL could not be loaded: the library has no %s (NCCL older than "
                           "2.10?)", missing);
    if (nccl.ncclGetVersion(&version) != NCCL_SUCCESS || version < OLDEST_VERSION) {
        char detail[64];
        snprintf(detail, sizeof detail, "%d", version);
        return load_failed("NCCL could not be used: version code %s is older than 2.10; "
                           INSTALL_HINT, detail);
    }
    loader.result = 0;
    return 0;
}

const char *nccl_loader_error(void)
{
    return loader.error;
}

int nccl_loader_version(void)
{
    return loader.result == 0 ? version : 0;
}

static const char *result_name(nccl_result result)
{
    switch (result) {
    case NCCL_SUCCESS: return "ncclSuccess";
    case NCCL_UNHANDLED_CUDA_ERROR: return "ncclUnhandledCudaError";
    case NCCL_SYSTEM_ERROR: return "ncclSystemError";
    case NCCL_INTERNAL_ERROR: return "ncclInternalError";
    case NCCL_INVALID_ARGUMENT: return "ncclInvalidArgument";
    case NCCL_INVALID_USAGE: return "ncclInvalidUsage";
    case NCCL_REMOTE_ERROR: return "ncclRemoteError";
    case NCCL_IN_PROGRESS: return "ncclInProgress";
    default: return NULL;
    }
}

char *nccl_format_error(char *buffer, size_t size)
{
    nccl_result result = nccl_last_failed_result;
    return library_format_result(buffer, size, nccl_last_failed_call, "NCCL", (int)result,
                                 result_name(result),
                                 nccl.ncclGetErrorString ? nccl.ncclGetErrorString(result) : NULL);
}
