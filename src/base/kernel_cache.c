/* The on-disk kernel cache.
 *
 * An entry is one file named by the 128-bit key in hex:
 *
 *   header  "GPURUNKC" | u32 format | u32 target | u64 payload length |
 *           u64 payload checksum | 16-byte key          (48 bytes, little-endian)
 *   payload u64 n, code | u64 n, log | u64 count, then per name expression:
 *           u64 n, expression | u64 n, lowered name |
 *           u64 n, kernel signatures | u64 n, why there are none ("" when there are) |
 *           u64 n, what NVRTC read (base/nvrtc_inputs.h's records)
 *
 * The key covers what a compile is given (source, name, options, target,
 * name expressions, NVRTC and gpurun, the working directory); what NVRTC
 * read from outside while compiling is in the entry, and an entry is used
 * only when asking NVRTC's questions again gets the same answers.
 *
 * Writers build the whole file under a temporary name in the same directory
 * and rename() it into place, so a reader sees a complete entry or none, and
 * concurrent writers of the same key just replace one good entry with
 * another. The checksum catches the rest (a truncated copy, a flipped bit).
 * A reader checks the header and the file's size before reading further.
 *
 * Entries are code that gpurun loads and runs, trusted once an unkeyed
 * checksum matches, so the directory must be the user's alone, as ssh
 * treats ~/.ssh: one owned by someone else, or writable by its group or
 * others, is refused. One bad entry (a FIFO, a directory, a link at its
 * path) is skipped, never a reason to stop using the cache. */
#define _GNU_SOURCE /* mkostemp */
#include "base/kernel_cache.h"

#include "base/content_hash.h"
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
#define ENTRY_FORMAT 3u /* 3: what NVRTC read */
#define ENTRY_HEADER_SIZE 48
#define KEY_SIZE 16
/* No compile makes this much; a header saying more is not believed. */
#define MAX_PAYLOAD ((uint64_t)256 << 20)

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

static void key_string(struct content_hash *hash, const char *s)
{
    content_hash_field(hash, s, strlen(s));
}

static void key_count(struct content_hash *hash, size_t count)
{
    unsigned char bytes[8];
    put_u64(bytes, count);
    content_hash_field(hash, bytes, sizeof bytes);
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

/* Refuses the root folder however it is spelled ("/", "//", "/tmp/.."):
 * entries would be written into it. */
static int is_root(const char *dir)
{
    struct stat st, root;
    return stat(dir, &st) == 0 && stat("/", &root) == 0 && st.st_dev == root.st_dev
           && st.st_ino == root.st_ino;
}

static void refuse_directory(const char *problem)
{
    cache.enabled = 0;
    cache.errors++;
    if (!cache.warned)
        warn("kernel cache directory %s, from %s, is %s; continuing without the cache",
             cache.dir, cache.source, problem);
    cache.warned = 1;
}

/* Makes the directory (again, when it was deleted while gpurun runs) and
 * checks it; 0 when the cache can be used. */
static int prepare_directory(void)
{
    if (make_directories(cache.dir) != 0) {
        switch_off("cannot be created", errno);
        return -1;
    }
    if (is_root(cache.dir)) {
        refuse_directory("the root folder: the cache needs a folder of its own");
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

/* Fills cache.dir and cache.source (the variable it came from). */
static int choose_directory(void)
{
    char *dir = cache.dir;
    size_t size = sizeof cache.dir;
    const char *chosen = getenv("GPURUN_CACHE_DIR");
    if (chosen && *chosen) {
        cache.source = "GPURUN_CACHE_DIR";
        return snprintf(dir, size, "%s", chosen) < (int)size;
    }
    /* The XDG spec says a relative XDG_CACHE_HOME is to be ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        cache.source = "XDG_CACHE_HOME";
        return snprintf(dir, size, "%s/gpurun", xdg) < (int)size;
    }
    const char *home = getenv("HOME");
    cache.source = "HOME";
    if (!home || !*home) {
        struct passwd *user = getpwuid(getuid());
        home = user ? user->pw_dir : NULL;
        cache.source = "the password database";
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
    if (!choose_directory()) {
        switch_off("cannot be chosen: no home directory and no GPURUN_CACHE_DIR, or the path is too long", ENOENT);
        return;
    }
    cache.has_dir = 1;
    /* A relative one would move with the working directory. */
    if (cache.dir[0] != '/') {
        refuse_directory("not an absolute path");
        return;
    }
    if (prepare_directory() == 0)
        cache.enabled = 1;
}

/* ---- the key ------------------------------------------------------------ */

/* The key: everything a compile is given. The working directory is in it
 * because NVRTC reads it on every compile (and so each entry would hold
 * it): each folder compiled from has entries of its own. Returns 0 when
 * the request cannot be cached. */
static int compute_key(const struct nvrtc_request *request, const char *tool_version,
                       unsigned char key[KEY_SIZE])
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return 0;
    struct content_hash hash;
    content_hash_init(&hash);
    key_string(&hash, "gpurun kernel cache");
    key_count(&hash, ENTRY_FORMAT);
    key_string(&hash, tool_version);
    key_string(&hash, nvrtc_compile_identity());
    key_string(&hash, cwd);
    key_string(&hash, nvrtc_target_name(request->target));
    key_string(&hash, request->name);
    key_string(&hash, request->source);
    key_count(&hash, request->option_count);
    for (size_t i = 0; i < request->option_count; i++)
        key_string(&hash, request->options[i]);
    key_count(&hash, request->name_expression_count);
    for (size_t i = 0; i < request->name_expression_count; i++)
        key_string(&hash, request->name_expressions[i]);
    content_hash_digest(&hash, key);
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
    return size + 8 + output->signatures_size + 8 + strlen(output->signatures_error)
           + 8 + output->inputs.records_size;
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
    if (payload > MAX_PAYLOAD)
        return NULL;
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
    p = put_field(p, output->signatures_error, strlen(output->signatures_error));
    put_field(p, output->inputs.records, output->inputs.records_size);
    memcpy(entry, ENTRY_MAGIC, 8);
    put_u32(entry + 8, ENTRY_FORMAT);
    put_u32(entry + 12, (uint32_t)request->target);
    put_u64(entry + 16, payload);
    put_u64(entry + 24, fnv1a(FNV1A_OFFSET, entry + ENTRY_HEADER_SIZE, payload));
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

/* Checks the header against the file's size (file_size bytes); returns
 * NULL, or why the entry is corrupt, with *payload its length. */
static const char *check_header(const unsigned char *header, uint64_t file_size,
                                const unsigned char key[KEY_SIZE],
                                const struct nvrtc_request *request, uint64_t *payload,
                                char *why, size_t why_size)
{
    if (file_size < ENTRY_HEADER_SIZE) {
        snprintf(why, why_size, "truncated: %llu bytes, shorter than the %d-byte header",
                 (unsigned long long)file_size, ENTRY_HEADER_SIZE);
        return why;
    }
    if (memcmp(header, ENTRY_MAGIC, 8) != 0)
        return "bad magic";
    if (get_u32(header + 8) != ENTRY_FORMAT) {
        snprintf(why, why_size, "format %u, expected %u", get_u32(header + 8), ENTRY_FORMAT);
        return why;
    }
    *payload = get_u64(header + 16);
    if (*payload != file_size - ENTRY_HEADER_SIZE) {
        snprintf(why, why_size, "wrong length: payload is %llu bytes, header says %llu",
                 (unsigned long long)(file_size - ENTRY_HEADER_SIZE),
                 (unsigned long long)*payload);
        return why;
    }
    if (*payload > MAX_PAYLOAD) {
        snprintf(why, why_size, "too large: %llu bytes of payload, more than the %llu MiB any "
                 "compile makes", (unsigned long long)*payload,
                 (unsigned long long)(MAX_PAYLOAD >> 20));
        return why;
    }
    if (memcmp(header + 32, key, KEY_SIZE) != 0 || get_u32(header + 12) != (uint32_t)request->target)
        return "key mismatch";
    return NULL;
}

/* Decodes a payload whose header was checked; returns NULL, or why it is
 * corrupt. output->inputs.records gets what NVRTC read. */
static const char *decode_payload(const unsigned char *payload, size_t size, uint64_t checksum,
                                  const struct nvrtc_request *request, struct nvrtc_output *output)
{
    if (fnv1a(FNV1A_OFFSET, payload, size) != checksum)
        return "bad checksum";
    struct reader r = {payload, size};
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
    output->inputs.records = (unsigned char *)take_field(&r, &output->inputs.records_size);
    if (!output->inputs.records)
        return "malformed payload";
    return r.left == 0 ? NULL : "malformed payload";
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
 * header and the file's size agree. */
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
    unsigned char header[ENTRY_HEADER_SIZE];
    char why[200];
    uint64_t payload_length = 0;
    int error = st.st_size >= ENTRY_HEADER_SIZE ? read_exactly(fd, header, sizeof header) : 0;
    const char *corrupt = error ? NULL
                                : check_header(header, (uint64_t)st.st_size, key, request,
                                               &payload_length, why, sizeof why);
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
        corrupt = decode_payload(payload, (size_t)payload_length, get_u64(header + 24), request,
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
        cache.enabled = 0;
        cache.errors++;
        if (!cache.warned)
            warn("kernel cache: gpurun cannot watch what NVRTC reads (%s); continuing without "
                 "the cache", unwatchable);
        cache.warned = 1;
    }
    unsigned char key[KEY_SIZE];
    char path[PATH_MAX];
    int cacheable = cache.enabled && compute_key(request, tool_version, key)
                    && entry_path(path, sizeof path, key);
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
