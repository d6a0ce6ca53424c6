/* Redirecting a loaded library's calls into the C library: the slots of
 * its global offset table for chosen functions are pointed at hooks, in that
 * library alone, for the life of the process (put back if this code is
 * unloaded first). Each hook's real function comes from the loader by name
 * and by the version the library asks for, never from the slot, which may
 * still hold a lazy-binding stub. x86-64 with glibc only. No Lua. */
#ifndef GPURUN_BASE_IMPORT_SLOTS_H
#define GPURUN_BASE_IMPORT_SLOTS_H

#include <stddef.h>

struct import_hook {
    const char *symbol; /* "open", "__xstat" */
    void *hook;         /* what the library calls from now on */
    void **real;        /* set to the function it called before */
};

/* Redirects the imports of the library that holds `address` (its name for
 * messages: `library`). Refuses, changing nothing, when the library imports
 * one of the `refused` symbols or refers to a hooked one other than through
 * its offset table. Call once. Returns NULL, or why not (a static string). */
const char *import_slots_redirect(const void *address, const char *library,
                                  const struct import_hook *hooks, size_t hook_count,
                                  const char *const *refused, size_t refused_count);

#endif
