/* The loaders' shared skeleton (see base/library_loader.h). */
#include "base/library_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

const char *library_loader_resolve(struct library_loader *loader, void *table,
                                   const struct library_symbol *symbols, size_t count)
{
    for (size_t i = 0; i < count; i++) {
        void *function = dlsym(loader->handle, symbols[i].name);
        if (!function)
            return symbols[i].name;
        memcpy((char *)table + symbols[i].offset, &function, sizeof function);
    }
    return NULL;
}

int library_loader_fail(struct library_loader *loader, void *table, size_t table_size,
                        const char *fmt, const char *detail)
{
    snprintf(loader->error, sizeof loader->error, fmt, detail);
    memset(table, 0, table_size);
    if (loader->handle)
        dlclose(loader->handle);
    loader->handle = NULL;
    loader->result = -1;
    return -1;
}
