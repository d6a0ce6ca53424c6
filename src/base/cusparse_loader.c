/* The cuSPARSE loader: dlopen beside libnvrtc, one table filled by name,
 * one error formatter. */
#include "base/cusparse_loader.h"
#include "base/library_loader.h"
#include "base/nvrtc_compile.h"

#include <stdio.h>
#include <stdlib.h>

struct cusparse_library cusparse;

static struct library_loader loader;

static const struct library_symbol entry_points[] = {
#define CUSPARSE_ENTRY(name, params) {#name, offsetof(struct cusparse_library, name)},
    CUSPARSE_ENTRY_POINTS(CUSPARSE_ENTRY)
#undef CUSPARSE_ENTRY
    {"cusparseGetErrorName", offsetof(struct cusparse_library, cusparseGetErrorName)},
    {"cusparseGetErrorString", offsetof(struct cusparse_library, cusparseGetErrorString)},
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &cusparse, sizeof cusparse, fmt, detail);
}

#define INSTALL_HINT                                                                          \
    "install the CUDA toolkit's cuSPARSE (libcusparse.so beside libnvrtc, NVIDIA's "         \
    "libcusparse package) or set GPURUN_CUSPARSE_LIBRARY to the library's path"

/* cuSPARSE's soname for NVRTC's toolkit: 12 from CUDA 12 on (CUDA 13 kept
 * it), the toolkit's major before. */
static void *open_library(const char *name, char *why, size_t why_size)
{
    int major = 0, minor = 0;
    char soname[64] = "libcusparse.so.12";
    if (nvrtc_compile_version(&major, &minor) && major < 12)
        snprintf(soname, sizeof soname, "libcusparse.so.%d", major);
    return library_loader_open(name, nvrtc_compile_folder(), soname, why, why_size);
}

int cusparse_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_CUSPARSE_LIBRARY"), why, sizeof why);
    if (!loader.handle)
        return load_failed("cuSPARSE could not be loaded (%s); " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&loader, &cusparse, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("cuSPARSE could not be loaded: the library has no %s (cuSPARSE "
                           "older than 12?)", missing);
    loader.result = 0;
    return 0;
}

const char *cusparse_loader_error(void)
{
    return loader.error;
}

char *cusparse_format_error(char *buffer, size_t size, const char *call, cusparse_status status)
{
    return library_format_result(
        buffer, size, call, "cuSPARSE", (int)status,
        cusparse.cusparseGetErrorName ? cusparse.cusparseGetErrorName(status) : NULL,
        cusparse.cusparseGetErrorString ? cusparse.cusparseGetErrorString(status) : NULL);
}
