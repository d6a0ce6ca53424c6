/* The libzstd loader: dlopen, one table filled by name. */
#include "base/zstd_loader.h"
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>

struct zstd_library zstd;

static struct library_loader loader;

static const struct library_symbol entry_points[] = {
#define ZSTD_ENTRY(result, name, params) {#name, offsetof(struct zstd_library, name)},
    ZSTD_ENTRY_POINTS(ZSTD_ENTRY)
#undef ZSTD_ENTRY
};

int zstd_loader_load(void)
{
    if (loader.attempted)
        return loader.result;
    loader.attempted = 1;
    loader.handle = dlopen("libzstd.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!loader.handle)
        return library_loader_fail(&loader, &zstd, sizeof zstd,
                                   "libzstd could not be loaded (%s)", dlerror());
    const char *missing = library_loader_resolve(&loader, &zstd, entry_points,
                                                 sizeof entry_points / sizeof entry_points[0]);
    if (missing)
        return library_loader_fail(&loader, &zstd, sizeof zstd,
                                   "libzstd could not be loaded: the library has no %s", missing);
    loader.result = 0;
    return 0;
}

const char *zstd_loader_error(void)
{
    return loader.error;
}
