/* The on-disk kernel cache (base/kernel_cache.h): looking entries up,
 * storing them, and the one rule that the cache never makes a compile
 * fail. The entry's bytes are kernel_cache_entry.c's, the folder's choice
 * and checks kernel_cache_dir.c's. An entry is used only when asking
 * NVRTC's questions again gets the answers it got (base/nvrtc_inputs.h). */
#define _GNU_SOURCE /* mkostemp */
#include "base/kernel_cache.h"

#include "base/kernel_cache_dir.h"
#include "base/kernel_cache_entry.h"
#include "base/nvjitlink_loader.h"
#include "base/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define KEY_SIZE KERNEL_CACHE_KEY_SIZE

static struct {
    int initialised;
    int enabled;
    int has_dir;
    int warned;  /* the one "continuing without the cache" warning was given */
    int warned_uncached; /* the one "compiled every time" warning was given */
    char dir[PATH_MAX];
    const char *source; /* the variable dir came from, for messages */
    uint64_t hits, misses, stores, corrupt, errors;
} cache;

static void warn(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    fputs("gpurun: warning: ", stderr);
    vfprintf(stderr, fmt, args);
    fputc('\n', stderr);
    va_end(args);
    fflush(stderr);
}

/* The cache is a speed-up, never a reason to fail: the first problem with
 * it turns it off for the rest of the process, with one warning. */
static void switch_off(const char *warning)
{
    cache.enabled = 0;
    cache.errors++;
    if (!cache.warned)
        warn("%s", warning);
    cache.warned = 1;
}

static void directory_failed(const char *what, int error)
{
    char warning[KERNEL_CACHE_WARNING_SIZE];
    kernel_cache_dir_failed(cache.dir, what, error, warning, sizeof warning);
    switch_off(warning);
}

/* Makes the directory (again, when it was deleted while gpurun runs) and
 * checks it; 0 when the cache can be used. */
static int prepare_directory(void)
{
    char warning[KERNEL_CACHE_WARNING_SIZE];
    if (kernel_cache_dir_prepare(cache.dir, cache.source, warning, sizeof warning) == 0)
        return 0;
    switch_off(warning);
    return -1;
}

static void cache_init(void)
{
    if (cache.initialised)
        return;
    cache.initialised = 1;
    char warning[KERNEL_CACHE_WARNING_SIZE];
    switch (kernel_cache_dir_choose(cache.dir, sizeof cache.dir, &cache.source, warning,
                                    sizeof warning)) {
    case KERNEL_CACHE_DIR_OFF:
        return;
    case KERNEL_CACHE_DIR_NONE:
        switch_off(warning);
        return;
    case KERNEL_CACHE_DIR_CHOSEN:
        break;
    }
    cache.has_dir = 1;
    if (prepare_directory() == 0)
        cache.enabled = 1;
}

/* What an entry is written under before it is renamed into place. */
#define TEMPORARY_SUFFIX ".tmp-XXXXXX"

/* The entry's path, with room left for its temporary name; 0 when the
 * folder is too deep for them. */
static int entry_path(char *path, size_t size, const unsigned char key[KEY_SIZE])
{
    char hex[2 * KEY_SIZE + 1];
    for (int i = 0; i < KEY_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    int length = snprintf(path, size, "%s/%s.entry", cache.dir, hex);
    return length >= 0 && (size_t)length + sizeof TEMPORARY_SUFFIX <= size;
}

/* ---- entry files -------------------------------------------------------- */

static int write_all(int fd, const unsigned char *data, size_t size)
{
    while (size > 0) {
        ssize_t n = write(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            errno = EIO;
        if (n <= 0)
            return -1;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

static int read_exactly(int fd, unsigned char *data, size_t size)
{
    while (size > 0) {
        ssize_t n = read(fd, data, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return n == 0 ? EIO : errno;
        data += n;
        size -= (size_t)n;
    }
    return 0;
}

enum lookup { ENTRY_HIT, ENTRY_MISS, ENTRY_IN_THE_WAY };

static enum lookup corrupt_entry(const char *path, const char *why)
{
    cache.corrupt++;
    warn("kernel cache entry %s is corrupt (%s); recompiling", path, why);
    /* The fresh entry would replace it anyway; removing it now means a
     * compile error cannot leave it behind. */
    unlink(path);
    return ENTRY_MISS;
}

static enum lookup unreadable_entry(const char *path, int error)
{
    cache.errors++;
    warn("kernel cache entry %s cannot be read (%s); recompiling", path, strerror(error));
    return ENTRY_MISS;
}

/* ENTRY_HIT with output filled, when the entry is whole and what NVRTC
 * read is unchanged; ENTRY_IN_THE_WAY when what is at the entry's path is
 * a directory, which no entry can replace. Nothing big is read before the
 * header and the file's size agree. One bad entry (a FIFO, a directory, a
 * link at its path) is skipped, never a reason to stop using the cache. */
static enum lookup load_entry(const char *path, const unsigned char key[KEY_SIZE],
                              const struct nvrtc_request *request, struct nvrtc_output *output)
{
    memset(output, 0, sizeof *output);
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
    struct stat st;
    if (fd < 0 && errno == ENOENT)
        return ENTRY_MISS;
    if ((fd < 0 && errno == ELOOP) || (fd >= 0 && fstat(fd, &st) == 0 && !S_ISREG(st.st_mode))) {
        if (fd >= 0)
            close(fd);
        const char *kind = file_kind(path);
        cache.errors++;
        warn("kernel cache entry %s is %s, not an entry file; recompiling", path, kind);
        return strcmp(kind, "a directory") == 0 ? ENTRY_IN_THE_WAY : ENTRY_MISS;
    }
    if (fd < 0 || fstat(fd, &st) != 0) {
        int error = errno;
        if (fd >= 0)
            close(fd);
        return unreadable_entry(path, error);
    }
    unsigned char header[KERNEL_CACHE_HEADER_SIZE];
    char why[200];
    uint64_t payload_length = 0;
    int error = st.st_size >= KERNEL_CACHE_HEADER_SIZE ? read_exactly(fd, header, sizeof header)
                                                       : 0;
    const char *corrupt = error ? NULL
                                : kernel_cache_entry_check_header(header, (uint64_t)st.st_size, key,
                                                                  request, &payload_length, why,
                                                                  sizeof why);
    unsigned char *payload = NULL;
    if (!error && !corrupt) {
        payload = malloc(payload_length ? (size_t)payload_length : 1);
        error = payload ? read_exactly(fd, payload, (size_t)payload_length) : ENOMEM;
        if (error == EIO) { /* shrank under us */
            error = 0;
            corrupt = "truncated while being read";
        }
    }
    close(fd);
    if (error) {
        free(payload);
        return unreadable_entry(path, error);
    }
    if (!corrupt)
        corrupt = kernel_cache_entry_decode(header, payload, (size_t)payload_length, request,
                                            output);
    free(payload);
    if (corrupt) {
        nvrtc_output_free(output);
        return corrupt_entry(path, corrupt);
    }
    enum nvrtc_inputs_verdict verdict = nvrtc_inputs_check(
        output->inputs.records, output->inputs.records_size, why, sizeof why);
    if (verdict == NVRTC_INPUTS_SAME)
        return ENTRY_HIT;
    nvrtc_output_free(output);
    if (verdict == NVRTC_INPUTS_MALFORMED)
        return corrupt_entry(path, why);
    return ENTRY_MISS; /* a header or the environment changed: compiled again */
}

/* Builds the whole file under a temporary name in the same directory and
 * rename()s it into place, so a reader sees a complete entry or none, and
 * concurrent writers of the same key just replace one good entry with
 * another. */
static void store_entry(const char *path, const unsigned char key[KEY_SIZE],
                        const struct nvrtc_request *request, const struct nvrtc_output *output)
{
    size_t size = 0;
    unsigned char *entry = kernel_cache_entry_encode(key, request, output, &size);
    if (!entry) {
        cache.errors++;
        return;
    }
    char temporary[PATH_MAX];
    size_t length = strlen(path); /* entry_path left room for the suffix */
    memcpy(temporary, path, length);
    memcpy(temporary + length, TEMPORARY_SUFFIX, sizeof TEMPORARY_SUFFIX);
    /* mkostemp makes the file 0600. */
    int fd = mkostemp(temporary, O_CLOEXEC);
    if (fd < 0 && errno == ENOENT && prepare_directory() == 0) {
        /* The directory was deleted (the documented way to empty the
         * cache) while gpurun ran: made again, checked again. */
        memcpy(temporary + strlen(temporary) - 6, "XXXXXX", 6);
        fd = mkostemp(temporary, O_CLOEXEC);
    }
    if (fd < 0) {
        free(entry);
        if (cache.enabled)
            directory_failed("is not writable", errno);
        return;
    }
    int error = 0;
    if (write_all(fd, entry, size) != 0)
        error = errno;
    if (close(fd) != 0 && !error)
        error = errno;
    free(entry);
    if (error) {
        unlink(temporary);
        directory_failed("is not writable", error);
        return;
    }
    if (rename(temporary, path) != 0) {
        /* Something this entry alone cannot replace: the rest of the cache
         * is as good as before. */
        error = errno;
        unlink(temporary);
        cache.errors++;
        warn("kernel cache entry %s cannot be stored (%s); the cache goes on without it", path,
             strerror(error));
        return;
    }
    cache.stores++;
}

/* ---- the interface ------------------------------------------------------ */

/* A compile that cannot be cached is said once per process. */
static void say_uncached(const struct nvrtc_request *request, const char *why)
{
    if (cache.warned_uncached)
        return;
    cache.warned_uncached = 1;
    warn("kernel cache: %s is compiled every time: %s", request->name, why);
}

/* Stores a fresh compile when what NVRTC read is still as it was when it
 * read it (a header edited during the compile is not stored). */
static void store_compiled(const char *path, const unsigned char key[KEY_SIZE],
                           const struct nvrtc_request *request, const struct nvrtc_output *output)
{
    char why[200];
    if (output->inputs.uncacheable[0]) {
        say_uncached(request, output->inputs.uncacheable);
        return;
    }
    if (nvrtc_inputs_check(output->inputs.records, output->inputs.records_size, why, sizeof why)
        != NVRTC_INPUTS_SAME)
        return;
    store_entry(path, key, request, output);
}

int kernel_cache_compile(const struct nvrtc_request *request, const char *tool_version,
                         struct nvrtc_output *output, int *from_cache)
{
    *from_cache = 0;
    cache_init();
    const char *unwatchable = NULL;
    if (cache.enabled && !nvrtc_inputs_watchable(&unwatchable)) {
        char warning[512];
        snprintf(warning, sizeof warning, "kernel cache: gpurun cannot watch what NVRTC reads "
                 "(%s); continuing without the cache", unwatchable);
        switch_off(warning);
    }
    unsigned char key[KEY_SIZE];
    char path[PATH_MAX];
    int cacheable = cache.enabled && kernel_cache_entry_key(request, tool_version, key);
    if (cacheable && !entry_path(path, sizeof path, key)) {
        directory_failed("is too deep for an entry path", ENAMETOOLONG);
        cacheable = 0;
    }
    if (cacheable)
        nvrtc_compile_prepare();
    enum lookup found = cacheable ? load_entry(path, key, request, output) : ENTRY_MISS;
    if (found == ENTRY_HIT) {
        cache.hits++;
        *from_cache = 1;
        return 1;
    }
    if (cache.enabled)
        cache.misses++;
    int ok = nvrtc_compile(request, output);
    if (ok && cacheable && cache.enabled && found != ENTRY_IN_THE_WAY)
        store_compiled(path, key, request, output);
    return ok;
}

/* A link's entry is read and written as a compile's: this is the request
 * its header and payload are checked against. */
static struct nvrtc_request link_as_compile(const struct link_request *request)
{
    return (struct nvrtc_request){.target = request->ptx ? NVRTC_TARGET_PTX : NVRTC_TARGET_CUBIN,
                                  .name = "", .source = ""};
}

int kernel_cache_link(const struct link_request *request, const char *tool_version,
                      struct link_output *output, int *from_cache)
{
    *from_cache = 0;
    cache_init();
    unsigned char key[KEY_SIZE];
    char path[PATH_MAX];
    /* The key names the nvJitLink in use: a link that cannot load it fails
     * below, saying why. */
    int cacheable = cache.enabled && nvjitlink_loader_load() == 0;
    if (cacheable) {
        kernel_cache_entry_link_key(request, tool_version, nvjitlink_loader_identity(), key);
        if (!entry_path(path, sizeof path, key)) {
            directory_failed("is too deep for an entry path", ENAMETOOLONG);
            cacheable = 0;
        }
    }
    struct nvrtc_request as_compile = link_as_compile(request);
    struct nvrtc_output entry;
    enum lookup found = cacheable ? load_entry(path, key, &as_compile, &entry) : ENTRY_MISS;
    if (found == ENTRY_HIT) {
        memset(output, 0, sizeof *output);
        output->code = entry.code;
        output->code_size = entry.code_size;
        output->info_log = entry.log;
        output->error_log = calloc(1, 1);
        entry.code = entry.log = NULL;
        nvrtc_output_free(&entry);
        cache.hits++;
        *from_cache = 1;
        return 1;
    }
    if (cache.enabled)
        cache.misses++;
    int ok = nvjitlink_link(request, output);
    if (ok && cacheable && cache.enabled && found != ENTRY_IN_THE_WAY) {
        /* Borrowed for the encoding: nothing of it is freed here. */
        struct nvrtc_output linked = {.code = output->code, .code_size = output->code_size,
                                      .log = output->info_log ? output->info_log : ""};
        store_entry(path, key, &as_compile, &linked);
    }
    return ok;
}

void kernel_cache_get_stats(struct kernel_cache_stats *stats)
{
    cache_init();
    stats->enabled = cache.enabled;
    stats->dir = cache.has_dir ? cache.dir : NULL;
    stats->hits = cache.hits;
    stats->misses = cache.misses;
    stats->stores = cache.stores;
    stats->corrupt = cache.corrupt;
    stats->errors = cache.errors;
}

void kernel_cache_reset_counters(void)
{
    cache.hits = cache.misses = cache.stores = cache.corrupt = cache.errors = 0;
}
