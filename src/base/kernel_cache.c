/* The on-disk kernel cache.
 *
 * An entry is one file named by the 128-bit key in hex:
 *
 *   header  "GPURUNKC" | u32 format | u32 target | u64 payload length |
 *           u64 payload checksum | 16-byte key          (48 bytes, little-endian)
 *   payload u64 n, code | u64 n, log | u64 count, then per name expression:
 *           u64 n, expression | u64 n, lowered name |
 *           u64 n, kernel signatures | u64 n, why there are none ("" when there are)
 *
 * Writers build the whole file under a temporary name in the same directory
 * and rename() it into place, so a reader sees a complete entry or none, and
 * concurrent writers of the same key just replace one good entry with
 * another. The checksum catches the rest (a truncated copy, a flipped bit).
 *
 * The key hashes everything that changes NVRTC's output, including every
 * header the source could include (base/include_scan.c finds them).
 *
 * Entries are code that gpurun loads and runs, trusted once an unkeyed
 * checksum matches, so the directory must be the user's alone, as ssh
 * treats ~/.ssh: one owned by someone else, or writable by its group or
 * others, is refused. One bad entry (a FIFO, a directory, a link at its
 * path) is skipped, never a reason to stop using the cache. */
#define _GNU_SOURCE /* mkostemp */
#include "base/kernel_cache.h"

#include "base/include_scan.h"
#include "base/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define ENTRY_MAGIC "GPURUNKC"
#define ENTRY_FORMAT 2u /* 2: the kernel signatures */
#define ENTRY_HEADER_SIZE 48
#define KEY_SIZE 16

static struct {
    int initialised;
    int enabled;
    int has_dir;
    int warned;  /* the one "continuing without the cache" warning was given */
    char dir[PATH_MAX];
    uint64_t hits, misses, stores, corrupt, errors;
} cache;

/* ---- bytes and hashes --------------------------------------------------- */

static void put_u32(unsigned char *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(v >> (8 * i));
}

static uint32_t get_u32(const unsigned char *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = v << 8 | p[i];
    return v;
}

/* FNV-1a, 64 bits: small, well known, and plenty for naming files and
 * catching damage; nothing here defends against a deliberate collision. */
static uint64_t fnv1a(uint64_t hash, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ULL;
    return hash;
}

#define FNV_OFFSET 0xcbf29ce484222325ULL

/* Two FNV-1a lanes from different starting states: a 128-bit key. */
struct key_hash {
    uint64_t lane[2];
};

static void key_hash_init(struct key_hash *hash)
{
    static const char second_seed[] = "gpurun kernel cache, second lane";
    hash->lane[0] = FNV_OFFSET;
    hash->lane[1] = fnv1a(FNV_OFFSET, second_seed, sizeof second_seed - 1);
}

/* Length-prefixed, so ("ab","c") and ("a","bc") hash apart. */
static void key_hash_field(struct key_hash *hash, const void *data, size_t size)
{
    unsigned char length[8];
    put_u64(length, size);
    for (int i = 0; i < 2; i++) {
        hash->lane[i] = fnv1a(hash->lane[i], length, sizeof length);
        hash->lane[i] = fnv1a(hash->lane[i], data, size);
    }
}

static void key_hash_string(struct key_hash *hash, const char *s)
{
    key_hash_field(hash, s, strlen(s));
}

static void key_hash_count(struct key_hash *hash, size_t count)
{
    unsigned char bytes[8];
    put_u64(bytes, count);
    key_hash_field(hash, bytes, sizeof bytes);
}

/* ---- files -------------------------------------------------------------- */

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

/* ---- the directory ------------------------------------------------------ */

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
 * the directory turns it off for the rest of the process, with one warning. */
static void switch_off(const char *why, int error)
{
    cache.enabled = 0;
    cache.errors++;
    if (!cache.warned)
        warn("kernel cache directory %s %s (%s); continuing without the cache",
             cache.has_dir ? cache.dir : "(none)", why, strerror(error));
    cache.warned = 1;
}

static int make_directories(char *path)
{
    for (char *p = path + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        int failed = mkdir(path, 0700) != 0 && errno != EEXIST;
        *p = '/';
        if (failed)
            return -1;
    }
    if (mkdir(path, 0700) != 0 && errno != EEXIST)
        return -1;
    struct stat st;
    if (stat(path, &st) != 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return 0;
}

/* Refuses a directory that another user could put entries in (the
 * entries are code gpurun runs): 0 when it is the user's alone, else -1
 * with the warning given and the cache off. */
static int check_directory_owner(void)
{
    struct stat st;
    if (stat(cache.dir, &st) != 0) {
        switch_off("cannot be examined", errno);
        return -1;
    }
    uid_t user = geteuid();
    const char *problem = NULL;
    char why[96];
    if (st.st_uid != user) {
        snprintf(why, sizeof why, "is owned by uid %u, not by you (uid %u)", (unsigned)st.st_uid,
                 (unsigned)user);
        problem = why;
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, sizeof why, "is writable by %s (mode %04o)",
                 (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "its group and others"
                 : (st.st_mode & S_IWGRP)                          ? "its group"
                                                                   : "others",
                 (unsigned)(st.st_mode & 07777));
        problem = why;
    }
    if (!problem)
        return 0;
    cache.enabled = 0;
    cache.errors++;
    if (!cache.warned)
        warn("kernel cache directory %s %s: its entries are code gpurun runs, so it must be yours "
             "alone (chmod go-w, or set GPURUN_CACHE_DIR); continuing without the cache",
             cache.dir, problem);
    cache.warned = 1;
    return -1;
}

/* Makes the directory (again, when it was deleted while gpurun runs) and
 * checks it; 0 when the cache can be used. */
static int prepare_directory(void)
{
    if (make_directories(cache.dir) != 0) {
        switch_off("cannot be created", errno);
        return -1;
    }
    if (check_directory_owner() != 0)
        return -1;
    if (access(cache.dir, W_OK | X_OK) != 0) {
        switch_off("is not writable", errno);
        return -1;
    }
    return 0;
}

static int choose_directory(char *dir, size_t size)
{
    const char *chosen = getenv("GPURUN_CACHE_DIR");
    if (chosen && *chosen)
        return snprintf(dir, size, "%s", chosen) < (int)size;
    /* The XDG spec says a relative XDG_CACHE_HOME is to be ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/')
        return snprintf(dir, size, "%s/gpurun", xdg) < (int)size;
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *user = getpwuid(getuid());
        home = user ? user->pw_dir : NULL;
    }
    if (!home || !*home)
        return 0;
    return snprintf(dir, size, "%s/.cache/gpurun", home) < (int)size;
}

static void cache_init(void)
{
    if (cache.initialised)
        return;
    cache.initialised = 1;
    const char *off = getenv("GPURUN_NO_CACHE");
    if (off && *off && strcmp(off, "0") != 0)
        return;
    if (!choose_directory(cache.dir, sizeof cache.dir)) {
        switch_off("cannot be chosen: no home directory and no GPURUN_CACHE_DIR, or the path is too long", ENOENT);
        return;
    }
    cache.has_dir = 1;
    if (prepare_directory() == 0)
        cache.enabled = 1;
}

/* ---- the key ------------------------------------------------------------ */

static void hash_header(void *context, const char *path, const void *text, size_t size)
{
    struct key_hash *hash = context;
    key_hash_string(hash, path);
    key_hash_field(hash, text, size);
}

/* Returns 0 when the request cannot be cached safely. */
static int compute_key(const struct nvrtc_request *request, const char *tool_version,
                       unsigned char key[KEY_SIZE])
{
    struct key_hash hash;
    key_hash_init(&hash);
    key_hash_string(&hash, "gpurun kernel cache");
    key_hash_count(&hash, ENTRY_FORMAT);
    key_hash_string(&hash, tool_version);
    key_hash_string(&hash, nvrtc_compile_identity());
    key_hash_string(&hash, nvrtc_target_name(request->target));
    key_hash_string(&hash, request->name);
    key_hash_string(&hash, request->source);
    key_hash_count(&hash, request->option_count);
    for (size_t i = 0; i < request->option_count; i++)
        key_hash_string(&hash, request->options[i]);
    key_hash_count(&hash, request->name_expression_count);
    for (size_t i = 0; i < request->name_expression_count; i++)
        key_hash_string(&hash, request->name_expressions[i]);
    if (!include_scan(request, hash_header, &hash))
        return 0;
    put_u64(key, hash.lane[0]);
    put_u64(key + 8, hash.lane[1]);
    return 1;
}

static int entry_path(char *path, size_t size, const unsigned char key[KEY_SIZE])
{
    char hex[2 * KEY_SIZE + 1];
    for (int i = 0; i < KEY_SIZE; i++)
        snprintf(hex + 2 * i, 3, "%02x", key[i]);
    return snprintf(path, size, "%s/%s.entry", cache.dir, hex) < (int)size;
}

/* ---- entries ------------------------------------------------------------ */

static size_t payload_size(const struct nvrtc_request *request, const struct nvrtc_output *output)
{
    size_t size = 8 + output->code_size + 8 + strlen(output->log) + 8;
    for (size_t i = 0; i < output->lowered_name_count; i++)
        size += 8 + strlen(request->name_expressions[i]) + 8 + strlen(output->lowered_names[i]);
    return size + 8 + output->signatures_size + 8 + strlen(output->signatures_error);
}

static unsigned char *put_field(unsigned char *p, const void *data, size_t size)
{
    put_u64(p, size);
    if (size > 0) /* data may be NULL then */
        memcpy(p + 8, data, size);
    return p + 8 + size;
}

static unsigned char *encode_entry(const unsigned char key[KEY_SIZE],
                                   const struct nvrtc_request *request,
                                   const struct nvrtc_output *output, size_t *size)
{
    size_t payload = payload_size(request, output);
    unsigned char *entry = malloc(ENTRY_HEADER_SIZE + payload);
    if (!entry)
        return NULL;
    unsigned char *p = entry + ENTRY_HEADER_SIZE;
    p = put_field(p, output->code, output->code_size);
    p = put_field(p, output->log, strlen(output->log));
    put_u64(p, output->lowered_name_count);
    p += 8;
    for (size_t i = 0; i < output->lowered_name_count; i++) {
        p = put_field(p, request->name_expressions[i], strlen(request->name_expressions[i]));
        p = put_field(p, output->lowered_names[i], strlen(output->lowered_names[i]));
    }
    p = put_field(p, output->signatures, output->signatures_size);
    put_field(p, output->signatures_error, strlen(output->signatures_error));
    memcpy(entry, ENTRY_MAGIC, 8);
    put_u32(entry + 8, ENTRY_FORMAT);
    put_u32(entry + 12, (uint32_t)request->target);
    put_u64(entry + 16, payload);
    put_u64(entry + 24, fnv1a(FNV_OFFSET, entry + ENTRY_HEADER_SIZE, payload));
    memcpy(entry + 32, key, KEY_SIZE);
    *size = ENTRY_HEADER_SIZE + payload;
    return entry;
}

struct reader {
    const unsigned char *p;
    size_t left;
};

/* A NUL-terminated heap copy of the next length-prefixed field, or NULL. */
static char *take_field(struct reader *r, size_t *size)
{
    if (r->left < 8)
        return NULL;
    uint64_t n = get_u64(r->p);
    if (n > r->left - 8)
        return NULL;
    char *copy = malloc((size_t)n + 1);
    if (!copy)
        return NULL;
    memcpy(copy, r->p + 8, (size_t)n);
    copy[n] = '\0';
    r->p += 8 + n;
    r->left -= 8 + (size_t)n;
    if (size)
        *size = (size_t)n;
    return copy;
}

/* Checks and decodes an entry; returns NULL, or why it is corrupt. */
static const char *decode_entry(const unsigned char *entry, size_t size,
                                const unsigned char key[KEY_SIZE],
                                const struct nvrtc_request *request,
                                struct nvrtc_output *output, char *why, size_t why_size)
{
    if (size < ENTRY_HEADER_SIZE) {
        snprintf(why, why_size, "truncated: %zu bytes, shorter than the %d-byte header",
                 size, ENTRY_HEADER_SIZE);
        return why;
    }
    if (memcmp(entry, ENTRY_MAGIC, 8) != 0)
        return "bad magic";
    if (get_u32(entry + 8) != ENTRY_FORMAT) {
        snprintf(why, why_size, "format %u, expected %u", get_u32(entry + 8), ENTRY_FORMAT);
        return why;
    }
    uint64_t payload = get_u64(entry + 16);
    if (payload != size - ENTRY_HEADER_SIZE) {
        snprintf(why, why_size, "wrong length: payload is %zu bytes, header says %llu",
                 size - ENTRY_HEADER_SIZE, (unsigned long long)payload);
        return why;
    }
    if (fnv1a(FNV_OFFSET, entry + ENTRY_HEADER_SIZE, payload) != get_u64(entry + 24))
        return "bad checksum";
    if (memcmp(entry + 32, key, KEY_SIZE) != 0 || get_u32(entry + 12) != (uint32_t)request->target)
        return "key mismatch";

    struct reader r = {entry + ENTRY_HEADER_SIZE, (size_t)payload};
    memset(output, 0, sizeof *output);
    output->code = take_field(&r, &output->code_size);
    output->log = output->code ? take_field(&r, NULL) : NULL;
    if (!output->log || r.left < 8)
        return "malformed payload";
    uint64_t count = get_u64(r.p);
    r.p += 8;
    r.left -= 8;
    if (count != request->name_expression_count)
        return "name expressions differ";
    if (count > 0 && !(output->lowered_names = calloc((size_t)count, sizeof(char *))))
        return "malformed payload";
    for (size_t i = 0; i < count; i++) {
        char *expression = take_field(&r, NULL);
        int same = expression && strcmp(expression, request->name_expressions[i]) == 0;
        free(expression);
        if (!same)
            return "name expressions differ";
        if (!(output->lowered_names[i] = take_field(&r, NULL)))
            return "malformed payload";
        output->lowered_name_count = i + 1;
    }
    output->signatures = take_field(&r, &output->signatures_size);
    char *why_none = output->signatures ? take_field(&r, NULL) : NULL;
    if (!why_none)
        return "malformed payload";
    size_t why_length = strlen(why_none);
    int consistent = why_length < sizeof output->signatures_error
                     && (why_length == 0 || output->signatures_size == 0);
    if (consistent)
        memcpy(output->signatures_error, why_none, why_length + 1);
    free(why_none);
    if (!consistent)
        return "malformed payload";
    if (why_length > 0) {
        free(output->signatures);
        output->signatures = NULL;
    }
    return r.left == 0 ? NULL : "malformed payload";
}

enum lookup { ENTRY_HIT, ENTRY_MISS, ENTRY_IN_THE_WAY };

/* ENTRY_HIT with output filled; ENTRY_IN_THE_WAY when what is at the
 * entry's path is a directory, which no entry can replace. */
static enum lookup load_entry(const char *path, const unsigned char key[KEY_SIZE],
                              const struct nvrtc_request *request, struct nvrtc_output *output)
{
    unsigned char *entry = NULL;
    size_t size = 0;
    memset(output, 0, sizeof *output);
    int error = read_whole_file(path, O_NOFOLLOW, &entry, &size);
    if (error == ENOENT)
        return ENTRY_MISS;
    if (error == READ_FILE_NOT_REGULAR) {
        const char *kind = file_kind(path);
        cache.errors++;
        warn("kernel cache entry %s is %s, not an entry file; recompiling", path, kind);
        return strcmp(kind, "a directory") == 0 ? ENTRY_IN_THE_WAY : ENTRY_MISS;
    }
    if (error) {
        cache.errors++;
        warn("kernel cache entry %s cannot be read (%s); recompiling", path, strerror(error));
        return ENTRY_MISS;
    }
    char why[160];
    const char *corrupt = decode_entry(entry, size, key, request, output, why, sizeof why);
    free(entry);
    if (!corrupt)
        return ENTRY_HIT;
    nvrtc_output_free(output);
    cache.corrupt++;
    warn("kernel cache entry %s is corrupt (%s); recompiling", path, corrupt);
    /* The fresh entry would replace it anyway; removing it now means a
     * compile error cannot leave it behind. */
    unlink(path);
    return ENTRY_MISS;
}

static void store_entry(const char *path, const unsigned char key[KEY_SIZE],
                        const struct nvrtc_request *request, const struct nvrtc_output *output)
{
    size_t size = 0;
    unsigned char *entry = encode_entry(key, request, output, &size);
    if (!entry) {
        cache.errors++;
        return;
    }
    char temporary[PATH_MAX];
    if (snprintf(temporary, sizeof temporary, "%s.tmp-XXXXXX", path) >= (int)sizeof temporary) {
        free(entry);
        switch_off("is too deep for an entry path", ENAMETOOLONG);
        return;
    }
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
            switch_off("is not writable", errno);
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
        switch_off("is not writable", error);
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

int kernel_cache_compile(const struct nvrtc_request *request, const char *tool_version,
                         struct nvrtc_output *output, int *from_cache)
{
    *from_cache = 0;
    cache_init();
    unsigned char key[KEY_SIZE];
    char path[PATH_MAX];
    int cacheable = cache.enabled && compute_key(request, tool_version, key)
                    && entry_path(path, sizeof path, key);
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
        store_entry(path, key, request, output);
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
