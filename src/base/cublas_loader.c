/* The cuBLAS loader: dlopen beside libnvrtc, one table filled by name, one
 * error formatter. */
#include "base/cublas_loader.h"
#include "base/library_loader.h"
#include "base/nvrtc_compile.h"

#include <stdio.h>
#include <stdlib.h>

struct cublas_library cublas;

static struct library_loader loader;

static const struct library_symbol entry_points[] = {
#define CUBLAS_ENTRY(name, params) {#name, offsetof(struct cublas_library, name)},
    CUBLAS_ENTRY_POINTS(CUBLAS_ENTRY)
#undef CUBLAS_ENTRY
    {"cublasGetStatusName", offsetof(struct cublas_library, cublasGetStatusName)},
    {"cublasGetStatusString", offsetof(struct cublas_library, cublasGetStatusString)},
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &cublas, sizeof cublas, fmt, detail);
}

#define INSTALL_HINT                                                                         \
    "install the CUDA toolkit's cuBLAS (libcublas.so beside libnvrtc, NVIDIA's libcublas "  \
    "package) or set GPURUN_CUBLAS_LIBRARY to the library's path"

/* The cuBLAS of NVRTC's toolkit (beside libnvrtc), else the one of that
 * soname on the loader's path, unless the user names one. */
static void *open_library(const char *name, char *why, size_t why_size)
{
    int major = 0, minor = 0;
    char soname[64] = "libcublas.so";
    if (nvrtc_compile_version(&major, &minor))
        snprintf(soname, sizeof soname, "libcublas.so.%d", major);
    return library_loader_open(name, nvrtc_compile_folder(), soname, why, why_size);
}

int cublas_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_CUBLAS_LIBRARY"), why, sizeof why);
    if (!loader.handle)
        return load_failed("cuBLAS could not be loaded (%s); " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&loader, &cublas, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("cuBLAS could not be loaded: the library has no %s (cuBLAS older "
                           "than 12.0?)", missing);
    loader.result = 0;
    return 0;
}

const char *cublas_loader_error(void)
{
    return loader.error;
}

char *cublas_format_error(char *buffer, size_t size, const char *call, cublas_status status)
{
    return library_format_result(
        buffer, size, call, "cuBLAS", (int)status,
        cublas.cublasGetStatusName ? cublas.cublasGetStatusName(status) : NULL,
        cublas.cublasGetStatusString ? cublas.cublasGetStatusString(status) : NULL);
}
