/* LD_PRELOADed by spec/cache_inputs_spec.lua: a dladdr1 that finds no
 * library, so that gpurun cannot watch what NVRTC reads and has to say so
 * and compile without the kernel cache. */
#define _GNU_SOURCE
#include <dlfcn.h>

int dladdr1(const void *address, Dl_info *info, void **extra, int flags)
{
    (void)address;
    (void)info;
    (void)extra;
    (void)flags;
    return 0;
}
