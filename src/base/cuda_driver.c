/* The driver loader: dlopen, one table filled through cuGetProcAddress, one
 * error formatter, one cleanup path. */
#include "base/cuda_driver.h"
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct cuda_driver cuda;
const char *cuda_last_failed_call = "";
CUresult cuda_last_failed_result = CUDA_SUCCESS;

static struct {
    void *library;
    int attempted;
    CUresult result;
    char error[512];
} loader;

static const struct {
    const char *name;
    int version;
    size_t offset;
    int optional;
} entry_points[] = {
#define CUDA_DRIVER_ENTRY(name, version) {#name, version, offsetof(struct cuda_driver, name), 0},
#define CUDA_DRIVER_OPTIONAL(name, version) {#name, version, offsetof(struct cuda_driver, name), 1},
    CUDA_DRIVER_ENTRY_POINTS(CUDA_DRIVER_ENTRY)
    CUDA_DRIVER_OPTIONAL_ENTRY_POINTS(CUDA_DRIVER_OPTIONAL)
#undef CUDA_DRIVER_OPTIONAL
#undef CUDA_DRIVER_ENTRY
};

typedef CUresult (*get_proc_address_fn)(const char *, void **, int, cuuint64_t,
                                        CUdriverProcAddressQueryResult *);

static CUresult load_failed(CUresult result, const char *fmt, const char *detail)
{
    snprintf(loader.error, sizeof loader.error, fmt, detail);
    cuda_driver_unload();
    loader.attempted = 1;
    loader.result = result;
    return result;
}

/* dlopen and the table, without cuInit: what cuda_driver_version needs. */
static CUresult open_library(void)
{
    if (loader.library)
        return CUDA_SUCCESS;
    if (loader.attempted)
        return loader.result;

    /* GPURUN_CUDA_DRIVER names another library: tests use it to see the
     * no-driver behaviour on a machine that has one. */
    const char *library = getenv("GPURUN_CUDA_DRIVER");
    if (library == NULL || *library == '\0')
        library = "libcuda.so.1";
    loader.library = dlopen(library, RTLD_NOW | RTLD_LOCAL);
    if (!loader.library)
        return load_failed(CUDA_ERROR_NOT_INITIALIZED,
                           "the CUDA driver could not be loaded: %s", dlerror());

    /* cuGetProcAddress_v2 is the one symbol taken by name; everything else
     * comes through it, at the version of the header gpurun was built with. */
    get_proc_address_fn get_proc_address =
        (get_proc_address_fn)dlsym(loader.library, "cuGetProcAddress_v2");
    if (!get_proc_address)
        return load_failed(CUDA_ERROR_NOT_INITIALIZED,
                           "the CUDA driver could not be loaded: %s",
                           "the library has no cuGetProcAddress_v2 (driver older than CUDA 12)");

    for (size_t i = 0; i < sizeof entry_points / sizeof entry_points[0]; i++) {
        void *function = NULL;
        CUdriverProcAddressQueryResult status = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        CUresult rc = get_proc_address(entry_points[i].name, &function, entry_points[i].version,
                                       CU_GET_PROC_ADDRESS_DEFAULT, &status);
        if (rc != CUDA_SUCCESS || status != CU_GET_PROC_ADDRESS_SUCCESS || !function) {
            if (entry_points[i].optional)
                continue; /* stays NULL: cuda_driver_require_entry says so */
            char detail[160];
            snprintf(detail, sizeof detail,
                     "the driver has no %s of CUDA %d.%d (driver too old?)",
                     entry_points[i].name, entry_points[i].version / 1000,
                     entry_points[i].version % 1000 / 10);
            return load_failed(CUDA_ERROR_NOT_INITIALIZED,
                               "the CUDA driver could not be loaded: %s", detail);
        }
        memcpy((char *)&cuda + entry_points[i].offset, &function, sizeof function);
    }
    return CUDA_SUCCESS;
}

CUresult cuda_driver_load(void)
{
    if (loader.attempted)
        return loader.result;
    CUresult rc = open_library();
    loader.attempted = 1;
    if (rc != CUDA_SUCCESS)
        return rc;

    rc = CUDA_CALL(cuInit, 0);
    if (rc != CUDA_SUCCESS) {
        char message[256];
        cuda_format_error(message, sizeof message, cuda_last_failed_call, rc);
        /* Keep the error-name entry points usable for formatting: only the
         * library handle and the table go, after the message is made. */
        return load_failed(rc, "the CUDA driver could not be initialised: %s", message);
    }
    loader.result = CUDA_SUCCESS;
    loader.error[0] = '\0';
    return CUDA_SUCCESS;
}

CUresult cuda_driver_version(int *version)
{
    *version = 0;
    if (loader.attempted && loader.result != CUDA_SUCCESS)
        return loader.result;
    CUresult rc = open_library();
    if (rc != CUDA_SUCCESS)
        return rc;
    /* cuDriverGetVersion is documented to work before cuInit. */
    rc = CUDA_CALL(cuDriverGetVersion, version);
    if (rc != CUDA_SUCCESS) {
        char message[256];
        snprintf(loader.error, sizeof loader.error, "%s",
                 cuda_format_error(message, sizeof message, cuda_last_failed_call, rc));
    }
    return rc;
}

const char *cuda_driver_folder(void)
{
    static char folder[4096];
    if (!folder[0] && open_library() == CUDA_SUCCESS)
        library_folder(dlsym(loader.library, "cuGetProcAddress_v2"), folder, sizeof folder);
    return folder;
}

const char *cuda_driver_load_error(void)
{
    return loader.error;
}

int cuda_driver_device_count(void)
{
    int count = 0;
    if (cuda_driver_load() != CUDA_SUCCESS)
        return 0;
    if (CUDA_CALL(cuDeviceGetCount, &count) != CUDA_SUCCESS)
        return 0;
    return count;
}

char *cuda_format_error(char *buffer, size_t size, const char *call, CUresult result)
{
    const char *name = NULL;
    const char *description = NULL;
    if (cuda.cuGetErrorName)
        cuda.cuGetErrorName(result, &name);
    if (cuda.cuGetErrorString)
        cuda.cuGetErrorString(result, &description);
    if (name)
        snprintf(buffer, size, "%s: %s (%s)", call, name,
                 description ? description : "no description");
    else
        snprintf(buffer, size, "%s: CUDA error %d (unknown to this driver)", call, (int)result);
    return buffer;
}

int cuda_error_is_sticky(CUresult result)
{
    switch (result) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:
    case CUDA_ERROR_LAUNCH_FAILED:
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:
    case CUDA_ERROR_MISALIGNED_ADDRESS:
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:
    case CUDA_ERROR_INVALID_PC:
    case CUDA_ERROR_HARDWARE_STACK_ERROR:
    case CUDA_ERROR_ASSERT:
    case CUDA_ERROR_ECC_UNCORRECTABLE:
    case CUDA_ERROR_CONTEXT_IS_DESTROYED:
        return 1;
    default:
        return 0;
    }
}

void cuda_driver_unload(void)
{
    memset(&cuda, 0, sizeof cuda);
    if (loader.library)
        dlclose(loader.library);
    loader.library = NULL;
}

/* One stub per signature: each leaves the handle to the driver's exit. */
static CUresult CUDAAPI keep_device(CUdevice device) { (void)device; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_memory(CUdeviceptr pointer) { (void)pointer; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_host(void *pointer) { (void)pointer; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_stream(CUstream stream) { (void)stream; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_event(CUevent event) { (void)event; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_exec(CUgraphExec exec) { (void)exec; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_graph(CUgraph graph) { (void)graph; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_library(CUlibrary library) { (void)library; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_ordered_memory(CUdeviceptr pointer, CUstream stream)
{
    (void)pointer;
    (void)stream;
    return CUDA_SUCCESS;
}
static CUresult CUDAAPI keep_pool(CUmemoryPool pool) { (void)pool; return CUDA_SUCCESS; }
static CUresult CUDAAPI keep_green(CUgreenCtx context) { (void)context; return CUDA_SUCCESS; }

void cuda_driver_skip_teardown(void)
{
    cuda.cuDevicePrimaryCtxRelease = keep_device;
    cuda.cuMemFree = keep_memory;
    cuda.cuMemFreeHost = keep_host;
    cuda.cuStreamDestroy = keep_stream;
    cuda.cuEventDestroy = keep_event;
    cuda.cuGraphExecDestroy = keep_exec;
    cuda.cuGraphDestroy = keep_graph;
    cuda.cuLibraryUnload = keep_library;
    cuda.cuMemFreeAsync = keep_ordered_memory;
    cuda.cuMemPoolDestroy = keep_pool;
    cuda.cuGreenCtxDestroy = keep_green;
}
