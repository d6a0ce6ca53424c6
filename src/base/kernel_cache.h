/* The persistent kernel cache: compiled and linked code on disk, keyed by a
 * hash of everything that changes NVRTC's or nvJitLink's output. No Lua. See docs/kernel-cache.md. */
#ifndef GPURUN_BASE_KERNEL_CACHE_H
#define GPURUN_BASE_KERNEL_CACHE_H

#include <stdint.h>

#include "base/nvjitlink_link.h"
#include "base/nvrtc_compile.h"

/* Compiles `request` or fetches it from the cache. tool_version (gpurun's
 * version) is part of the key. Returns nvrtc_compile()'s result and sets
 * *from_cache; output is filled either way and must be freed.
 *
 * Directory: $GPURUN_CACHE_DIR, else $XDG_CACHE_HOME/gpurun, else
 * ~/.cache/gpurun (created 0700). GPURUN_NO_CACHE set to anything but "" or
 * "0" turns it off. The environment is read once, on first use.
 *
 * The cache never makes a compile fail: a directory that cannot be created
 * or written, or that is not the user's alone (owned by another, writable
 * by group or others), switches it off with one warning on stderr; a
 * deleted directory is made again; a corrupt entry is reported, removed and
 * compiled again; a non-file at an entry's path is skipped without blocking
 * and the cache stays on. */
int kernel_cache_compile(const struct nvrtc_request *request, const char *tool_version,
                         struct nvrtc_output *output, int *from_cache);

/* Links `request` through nvJitLink or fetches its result from the same
 * cache, by the same rules: its key covers every input's bytes, every
 * option, the target, gpurun and the nvJitLink in use. Returns
 * nvjitlink_link()'s result and sets *from_cache (a hit has an empty error
 * log); output must be freed with link_output_free either way. */
int kernel_cache_link(const struct link_request *request, const char *tool_version,
                      struct link_output *output, int *from_cache);

/* Process-wide counts since start (or the last reset). A corrupt entry
 * counts as corrupt and as a miss; errors are failed reads and writes. */
struct kernel_cache_stats {
    int enabled;
    const char *dir;    /* NULL when turned off by GPURUN_NO_CACHE */
    uint64_t hits, misses, stores, corrupt, errors;
};

void kernel_cache_get_stats(struct kernel_cache_stats *stats);
void kernel_cache_reset_counters(void);

#endif
