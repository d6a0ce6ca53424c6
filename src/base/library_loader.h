/* The skeleton the loaders of libraries opened on first use share (MPI,
 * NCCL, nvJitLink, NVML, cuBLAS, cuBLASLt, cuSPARSE and libzstd): one
 * attempt per process, the handle, a table of entry points filled by name,
 * and on failure one reason kept and nothing half-loaded left. The CUDA
 * driver's loader (base/cuda_driver.c) is of the same shape but not of
 * this skeleton: its entry points come through cuGetProcAddress at pinned
 * versions, and its outcome is a CUresult. No Lua. */
#ifndef GPURUN_BASE_LIBRARY_LOADER_H
#define GPURUN_BASE_LIBRARY_LOADER_H

#include <stddef.h>

struct library_loader {
    void *handle;
    int attempted;
    int result; /* 0 once loaded, -1 once failed */
    char error[1024];
};

/* An entry point: its name in the library and its offset in the table. */
struct library_symbol {
    const char *name;
    size_t offset;
};

/* Opens `name` where one is given (a user's choice, taken as it is);
 * otherwise `soname` in `folder` (where folder is not ""), then `soname` on
 * the loader's path. NULL with dlerror()'s reason in why on failure. */
void *library_loader_open(const char *name, const char *folder, const char *soname, char *why,
                          size_t why_size);

/* Stores the address of each symbol in `table` at its offset: NULL, or the
 * name of the first the library lacks. */
const char *library_loader_resolve(struct library_loader *loader, void *table,
                                   const struct library_symbol *symbols, size_t count);

/* A failed load: the reason (fmt with one %s, for detail), the table of
 * table_size bytes zeroed, the library closed. Returns -1. */
int library_loader_fail(struct library_loader *loader, void *table, size_t table_size,
                        const char *fmt, const char *detail);

/* Writes "call: NAME (description)" into buffer, or "call: LIBRARY result N
 * (description)" where the result has no name: how a failed call of a
 * library is told. A NULL description says the library gave none. */
char *library_format_result(char *buffer, size_t size, const char *call, const char *library,
                            int result, const char *name, const char *description);

/* Writes "<real path> <size> <mtime>" of the shared library file that
 * holds `symbol` into out ("unknown -1 -1" where it cannot be found): what
 * names a library in cache keys, as its version call says only
 * major.minor; the file's real name usually carries the patch level, and
 * its size and time catch a reinstall under the same name. */
void library_file_identity(void *symbol, char *out, size_t out_size);

/* Writes the folder of the shared library file that holds `symbol` into
 * out ("" where it cannot be found): where a library that comes beside
 * another (NVML beside libcuda) is looked for first. */
void library_folder(void *symbol, char *out, size_t out_size);

#endif
