/* The cuFFT loader: dlopen beside libnvrtc, one table filled by name, one
 * error formatter with cufft.h's names of its results. */
#include "base/cufft_loader.h"
#include "base/library_loader.h"
#include "base/nvrtc_compile.h"

#include <stdio.h>
#include <stdlib.h>

struct cufft_library cufft;

static struct library_loader loader;

static const struct library_symbol entry_points[] = {
#define CUFFT_ENTRY(name, params) {#name, offsetof(struct cufft_library, name)},
    CUFFT_ENTRY_POINTS(CUFFT_ENTRY)
#undef CUFFT_ENTRY
};

static int load_failed(const char *fmt, const char *detail)
{
    return library_loader_fail(&loader, &cufft, sizeof cufft, fmt, detail);
}

#define INSTALL_HINT                                                                         \
    "install the CUDA toolkit's cuFFT (libcufft.so beside libnvrtc, NVIDIA's libcufft "      \
    "package) or set GPURUN_CUFFT_LIBRARY to the library's path"

/* cuFFT's soname runs one behind the toolkit: CUDA 12 ships libcufft.so.11,
 * CUDA 13 libcufft.so.12. */
static void *open_library(const char *name, char *why, size_t why_size)
{
    int major = 0, minor = 0;
    char soname[64] = "libcufft.so";
    if (nvrtc_compile_version(&major, &minor) && major > 1)
        snprintf(soname, sizeof soname, "libcufft.so.%d", major - 1);
    return library_loader_open(name, nvrtc_compile_folder(), soname, why, why_size);
}

int cufft_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    char why[512] = "";
    loader.handle = open_library(getenv("GPURUN_CUFFT_LIBRARY"), why, sizeof why);
    if (!loader.handle)
        return load_failed("cuFFT could not be loaded (%s); " INSTALL_HINT, why);
    const char *missing = library_loader_resolve(&loader, &cufft, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return load_failed("cuFFT could not be loaded: the library has no %s (cuFFT older "
                           "than 11?)", missing);
    loader.result = 0;
    return 0;
}

const char *cufft_loader_error(void)
{
    return loader.error;
}

/* cufft.h's cufftResult by value: its name and what cuFFT's guide says
 * of it. */
static const char *const results[][2] = {
    {"CUFFT_SUCCESS", "success"},
    {"CUFFT_INVALID_PLAN", "an invalid plan handle"},
    {"CUFFT_ALLOC_FAILED", "cuFFT failed to allocate GPU or CPU memory"},
    {"CUFFT_INVALID_TYPE", "an invalid transform type"},
    {"CUFFT_INVALID_VALUE", "a bad pointer or parameter"},
    {"CUFFT_INTERNAL_ERROR", "a driver or internal cuFFT library error"},
    {"CUFFT_EXEC_FAILED", "the transform failed to run on the GPU"},
    {"CUFFT_SETUP_FAILED", "the cuFFT library failed to initialize"},
    {"CUFFT_INVALID_SIZE", "an invalid transform size"},
    {"CUFFT_UNALIGNED_DATA", "unaligned data"},
    {"CUFFT_INCOMPLETE_PARAMETER_LIST", "missing parameters in the call"},
    {"CUFFT_INVALID_DEVICE", "the plan was made on another device"},
    {"CUFFT_PARSE_ERROR", "internal plan database error"},
    {"CUFFT_NO_WORKSPACE", "no work area was given before the transform"},
    {"CUFFT_NOT_IMPLEMENTED", "not implemented for these parameters"},
    {"CUFFT_LICENSE_ERROR", "a license error"},
    {"CUFFT_NOT_SUPPORTED", "not supported for these parameters"},
    {"CUFFT_MISSING_DEPENDENCY", "a library cuFFT needs is missing"},
    {"CUFFT_NVRTC_FAILURE", "NVRTC failed inside cuFFT"},
    {"CUFFT_NVJITLINK_FAILURE", "nvJitLink failed inside cuFFT"},
    {"CUFFT_NVSHMEM_FAILURE", "NVSHMEM failed inside cuFFT"},
};

char *cufft_format_error(char *buffer, size_t size, const char *call, cufft_result result)
{
    int known = result >= 0 && (size_t)result < sizeof results / sizeof results[0];
    return library_format_result(buffer, size, call, "cuFFT", (int)result,
                                 known ? results[result][0] : NULL,
                                 known ? results[result][1] : NULL);
}
