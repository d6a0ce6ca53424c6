/* nvJitLink, opened on first use.
 *
 * gpurun never links nvJitLink: the first link dlopen()s it
 * ($GPURUN_NVJITLINK_LIBRARY, else libnvJitLink.so.<NVRTC's major> from
 * libnvrtc's own folder, else by that name on the loader's path, as NVRTC's
 * builtins are found) and takes its entry points by name into one table.
 * Types and results are nvJitLink.h's, from the toolkit gpurun builds
 * against; its inline wrappers (bound to versioned symbols) are not used.
 * Knows nothing about Lua. */
#ifndef GPURUN_BASE_NVJITLINK_LOADER_H
#define GPURUN_BASE_NVJITLINK_LOADER_H

#include <stddef.h>
#include <stdint.h>

#include <nvJitLink.h>

/* Every entry point gpurun uses, with its signature. nvJitLinkVersion came
 * with nvJitLink 12.3, the oldest cuda.core links with. */
#define NVJITLINK_ENTRY_POINTS(X)                                                            \
    X(nvJitLinkCreate, (nvJitLinkHandle * handle, uint32_t count, const char **options))     \
    X(nvJitLinkDestroy, (nvJitLinkHandle * handle))                                          \
    X(nvJitLinkAddData, (nvJitLinkHandle handle, nvJitLinkInputType type, const void *data,  \
                         size_t size, const char *name))                                     \
    X(nvJitLinkComplete, (nvJitLinkHandle handle))                                           \
    X(nvJitLinkGetLinkedCubinSize, (nvJitLinkHandle handle, size_t *size))                   \
    X(nvJitLinkGetLinkedCubin, (nvJitLinkHandle handle, void *cubin))                        \
    X(nvJitLinkGetLinkedPtxSize, (nvJitLinkHandle handle, size_t *size))                     \
    X(nvJitLinkGetLinkedPtx, (nvJitLinkHandle handle, char *ptx))                            \
    X(nvJitLinkGetErrorLogSize, (nvJitLinkHandle handle, size_t *size))                      \
    X(nvJitLinkGetErrorLog, (nvJitLinkHandle handle, char *log))                             \
    X(nvJitLinkGetInfoLogSize, (nvJitLinkHandle handle, size_t *size))                       \
    X(nvJitLinkGetInfoLog, (nvJitLinkHandle handle, char *log))                              \
    X(nvJitLinkVersion, (unsigned int *major, unsigned int *minor))

struct nvjitlink_library {
#define NVJITLINK_MEMBER(name, params) nvJitLinkResult (*name) params;
    NVJITLINK_ENTRY_POINTS(NVJITLINK_MEMBER)
#undef NVJITLINK_MEMBER
};

/* The table, valid once nvjitlink_loader_load() has returned 0. */
extern struct nvjitlink_library nvjitlink;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in nvjitlink_loader_error(). */
int nvjitlink_loader_load(void);
const char *nvjitlink_loader_error(void);

/* A string that changes whenever the nvJitLink in use changes: its
 * version, the file it was loaded from, that file's size and time (the
 * kernel cache keys linked code on it). Valid once loaded. */
const char *nvjitlink_loader_identity(void);

/* "NVJITLINK_ERROR_MISSING_ARCH" for a result (nvJitLink has no function
 * that says). */
const char *nvjitlink_result_name(nvJitLinkResult result);

#endif
