/* Where the kernel cache lives: the folder the environment names, and
 * whether it can hold entries, which are code gpurun runs (made 0700, not
 * the root folder, the user's alone, writable). Each refusal comes as the
 * one warning to give; turning the cache off is kernel_cache.c's. No Lua. */
#ifndef GPURUN_BASE_KERNEL_CACHE_DIR_H
#define GPURUN_BASE_KERNEL_CACHE_DIR_H

#include <limits.h>
#include <stddef.h>

/* Room for any warning below: a folder's path and the words around it. */
#define KERNEL_CACHE_WARNING_SIZE (PATH_MAX + 512)

enum kernel_cache_dir_choice {
    KERNEL_CACHE_DIR_OFF,     /* GPURUN_NO_CACHE turned the cache off */
    KERNEL_CACHE_DIR_NONE,    /* no folder can be named: warning says so */
    KERNEL_CACHE_DIR_CHOSEN,  /* dir holds it, *source the variable it came from */
};

/* Reads GPURUN_NO_CACHE, GPURUN_CACHE_DIR, XDG_CACHE_HOME, HOME and the
 * password database, in that order. */
enum kernel_cache_dir_choice kernel_cache_dir_choose(char *dir, size_t size, const char **source,
                                                     char *warning, size_t warning_size);

/* Makes dir (again, when it was deleted) and checks it; 0 when entries can
 * go in it, else -1 with the warning. source: as kernel_cache_dir_choose
 * gave it, for messages. */
int kernel_cache_dir_prepare(char *dir, const char *source, char *warning, size_t warning_size);

/* The warning for a directory found unusable while the cache ran: "is not
 * writable" and errno's text. */
void kernel_cache_dir_failed(const char *dir, const char *what, int error, char *warning,
                             size_t warning_size);

#endif
