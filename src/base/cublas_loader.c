/* The cuBLAS and cuBLASLt loader: dlopen beside libnvrtc, one table each
 * filled by name, one error formatter each. */
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

/* The library (base "libcublas" or "libcublasLt") of NVRTC's toolkit
 * (beside libnvrtc), else the one of that soname on the loader's path,
 * unless the user names one. */
static void *open_library(const char *name, const char *base, char *why, size_t why_size)
{
    int major = 0, minor = 0;
    char soname[64];
    snprintf(soname, sizeof soname, "%s.so", base);
    if (nvrtc_compile_version(&major, &minor))
        snprintf(soname, sizeof soname, "%s.so.%d", base, major);
    return library_loader_open(name, nvrtc_compile_folder(), soname, why, why_size);
}

int cublas_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_CUBLAS_LIBRARY"), "libcublas", why, sizeof why);
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

struct cublaslt_library cublaslt;

static struct library_loader lt_loader;

static const struct library_symbol lt_entry_points[] = {
#define CUBLASLT_ENTRY(name, params) {#name, offsetof(struct cublaslt_library, name)},
    CUBLASLT_ENTRY_POINTS(CUBLASLT_ENTRY)
#undef CUBLASLT_ENTRY
    {"cublasLtGetStatusName", offsetof(struct cublaslt_library, cublasLtGetStatusName)},
    {"cublasLtGetStatusString", offsetof(struct cublaslt_library, cublasLtGetStatusString)},
};

static int lt_load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&lt_loader, &cublaslt, sizeof cublaslt, fmt, detail);
}

int cublaslt_loader_load(void)
{
    if (lt_loader.attempted)
        return lt_loader.result;
    lt_loader.attempted = 1;
    char why[512] = "";
    lt_loader.handle = open_library(getenv("GPURUN_CUBLASLT_LIBRARY"), "libcublasLt", why,
                                    sizeof why);
    if (!lt_loader.handle)
        return lt_load_failed("cuBLASLt could not be loaded (%s); install the CUDA toolkit's "
                              "cuBLAS (libcublasLt.so beside libnvrtc, NVIDIA's libcublas "
                              "package) or set GPURUN_CUBLASLT_LIBRARY to the library's path",
                              why);
    const char *missing = library_loader_resolve(
        &lt_loader, &cublaslt, lt_entry_points, sizeof lt_entry_points / sizeof lt_entry_points[0]);
    if (missing)
        return lt_load_failed("cuBLASLt could not be loaded: the library has no %s (cuBLASLt "
                              "older than 12.0?)", missing);
    lt_loader.result = 0;
    return 0;
}

const char *cublaslt_loader_error(void)
{
    return lt_loader.error;
}

char *cublaslt_format_error(char *buffer, size_t size, const char *call, cublas_status status)
{
    return library_format_result(
        buffer, size, call, "cuBLASLt", (int)status,
        cublaslt.cublasLtGetStatusName ? cublaslt.cublasLtGetStatusName(status) : NULL,
        cublaslt.cublasLtGetStatusString ? cublaslt.cublasLtGetStatusString(status) : NULL);
}
