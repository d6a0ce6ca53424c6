/* The loaders' shared skeleton (see base/library_loader.h). */
#define _GNU_SOURCE /* dladdr */
#include "base/library_loader.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

void *library_loader_open(const char *name, const char *folder, const char *soname, char *why,
                          size_t why_size)
{
    if (name && *name) {
        void *handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
        if (!handle)
            snprintf(why, why_size, "%s", dlerror());
        return handle;
    }
    if (folder[0]) {
        char beside[PATH_MAX + 64];
        snprintf(beside, sizeof beside, "%s/%s", folder, soname);
        void *handle = dlopen(beside, RTLD_NOW | RTLD_LOCAL);
        if (handle)
            return handle;
    }
    void *handle = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
    if (!handle)
        snprintf(why, why_size, "%s", dlerror());
    return handle;
}

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

char *library_format_result(char *buffer, size_t size, const char *call, const char *library,
                            int result, const char *name, const char *description)
{
    if (name)
        snprintf(buffer, size, "%s: %s (%s)", call, name,
                 description ? description : "no description");
    else
        snprintf(buffer, size, "%s: %s result %d (%s)", call, library, result,
                 description ? description : "unknown to this library");
    return buffer;
}

void library_file_identity(void *symbol, char *out, size_t out_size)
{
    char library[PATH_MAX] = "unknown";
    long long size = -1, mtime = -1;
    Dl_info info;
    if (dladdr(symbol, &info) && info.dli_fname) {
        if (!realpath(info.dli_fname, library))
            snprintf(library, sizeof library, "%s", info.dli_fname);
        struct stat st;
        if (stat(library, &st) == 0) {
            size = (long long)st.st_size;
            mtime = (long long)st.st_mtime;
        }
    }
    snprintf(out, out_size, "%s %lld %lld", library, size, mtime);
}

void library_folder(void *symbol, char *out, size_t out_size)
{
    char library[PATH_MAX];
    Dl_info info;
    out[0] = '\0';
    if (!symbol || !dladdr(symbol, &info) || !info.dli_fname || !realpath(info.dli_fname, library))
        return;
    char *slash = strrchr(library, '/');
    if (slash && slash != library && (size_t)(slash - library) < out_size)
        snprintf(out, out_size, "%.*s", (int)(slash - library), library);
}
