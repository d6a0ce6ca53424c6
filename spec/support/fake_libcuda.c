/* A stand-in for libcuda.so.1 for spec/cli_spec.lua, loaded through
 * GPURUN_CUDA_DRIVER: every entry point exists, cuDriverGetVersion says
 * 13.0, cuInit appends "cuInit" to the file named by $GPURUN_FAKE_CUDA_RECORD
 * and reports no device, and everything else fails. It shows, with no GPU,
 * which commands start the driver. With $GPURUN_FAKE_CUDA_INIT set cuInit
 * succeeds, and the entry points named in $GPURUN_FAKE_CUDA_MISSING (a
 * comma-separated list) are missing: what a driver refusing a feature, or an
 * older one, looks like. Built by the spec with the C compiler. */
#include <cuda.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static CUresult fake_init(unsigned int flags)
{
    (void)flags;
    const char *path = getenv("GPURUN_FAKE_CUDA_RECORD");
    FILE *record = path ? fopen(path, "a") : NULL;
    if (record) {
        fputs("cuInit\n", record);
        fclose(record);
    }
    return getenv("GPURUN_FAKE_CUDA_INIT") ? CUDA_SUCCESS : CUDA_ERROR_NO_DEVICE;
}

static int is_missing(const char *symbol)
{
    const char *list = getenv("GPURUN_FAKE_CUDA_MISSING");
    size_t length = strlen(symbol);
    while (list && *list) {
        const char *end = strchr(list, ',');
        size_t item = end ? (size_t)(end - list) : strlen(list);
        if (item == length && strncmp(list, symbol, length) == 0)
            return 1;
        list = end ? end + 1 : NULL;
    }
    return 0;
}

static CUresult fake_driver_version(int *version)
{
    *version = 13000;
    return CUDA_SUCCESS;
}

static CUresult fake_error_name(CUresult result, const char **name)
{
    *name = result == CUDA_ERROR_NO_DEVICE ? "CUDA_ERROR_NO_DEVICE" : "CUDA_ERROR_NOT_SUPPORTED";
    return CUDA_SUCCESS;
}

static CUresult fake_error_string(CUresult result, const char **text)
{
    (void)result;
    *text = "the fake driver of spec/support/fake_libcuda.c";
    return CUDA_SUCCESS;
}

/* Called with the real arguments, which it ignores (the x86-64 calling
 * convention leaves them to the caller). */
static CUresult fake_unsupported(void)
{
    return CUDA_ERROR_NOT_SUPPORTED;
}

CUresult cuGetProcAddress_v2(const char *symbol, void **pfn, int version, cuuint64_t flags,
                             CUdriverProcAddressQueryResult *status)
{
    (void)version;
    (void)flags;
    if (is_missing(symbol)) {
        *pfn = NULL;
        if (status)
            *status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    if (strcmp(symbol, "cuInit") == 0)
        *pfn = (void *)fake_init;
    else if (strcmp(symbol, "cuDriverGetVersion") == 0)
        *pfn = (void *)fake_driver_version;
    else if (strcmp(symbol, "cuGetErrorName") == 0)
        *pfn = (void *)fake_error_name;
    else if (strcmp(symbol, "cuGetErrorString") == 0)
        *pfn = (void *)fake_error_string;
    else
        *pfn = (void *)fake_unsupported;
    if (status)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}
