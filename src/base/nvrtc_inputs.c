/* Watching what NVRTC reads (base/nvrtc_inputs.h).
 *
 * libnvrtc reaches the C library through its global offset table. Once per
 * process, the slots of the calls that look at the outside world (open,
 * fopen, stat, access, getcwd, getenv, dlopen, readlink, realpath) are
 * pointed here, in libnvrtc's table alone; the real functions come from the
 * loader by name and version, never from the slot (it may still hold a
 * lazy-binding stub). While a compile runs each call is passed on and
 * recorded as a question (what was asked) and an answer (what came back:
 * a file's type, size, time and identity, an opened file's content hash, a
 * variable's value...). Outside a compile the calls pass straight through.
 *
 * Calls whose effect is not recorded (listing a directory, writing or
 * removing a file, starting a process) mark the compile as one not to
 * store. A library that imports a file-system call this file does not
 * know is not watched at all: the kernel cache then stays off.
 *
 * The recorder is process-wide: NVRTC may run parts of a compile on its own
 * threads, so records are kept under a lock, and compiles take turns. */
#define _GNU_SOURCE /* dlinfo, memmem, RTLD_NOLOAD */
#include "base/nvrtc_inputs.h"

#include "base/content_hash.h"
#include "base/import_slots.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvrtc.h>

#define MAX_RECORDS 4096
#define MAX_TEXT 4096 /* a path, a name, a value */
#define MAX_ANSWER (MAX_TEXT + 64)

enum question {
    ASK_STAT = 1,
    ASK_LSTAT,
    ASK_ACCESS,
    ASK_OPEN,
    ASK_CWD,
    ASK_ENV,
    ASK_READLINK,
    ASK_REALPATH,
    ASK_DLOPEN,
    ASK_LAST = ASK_DLOPEN
};

/* getcwd's question: the size it was given, and this bit when its buffer
 * was NULL; dlopen's: the mode, and this bit for dlopen(NULL). */
#define NO_POINTER 0x80000000u

/* The C library's functions that libnvrtc's slots pointed to. */
static struct {
    int (*open)(const char *, int, ...);
    FILE *(*fopen)(const char *, const char *);
    FILE *(*fopen64)(const char *, const char *);
    int (*xstat)(int, const char *, struct stat *);
    int (*lxstat)(int, const char *, struct stat *);
    int (*access)(const char *, int);
    char *(*getcwd)(char *, size_t);
    char *(*getenv)(const char *);
    void *(*dlopen)(const char *, int);
    ssize_t (*readlink)(const char *, char *, size_t);
    char *(*realpath)(const char *, char *);
    DIR *(*opendir)(const char *);
    int (*statfs)(const char *, struct statfs *);
    int (*chdir)(const char *);
    int (*mkdir)(const char *, mode_t);
    int (*rmdir)(const char *);
    int (*unlink)(const char *);
    int (*remove)(const char *);
    int (*execv)(const char *, char *const[]);
    int (*execvp)(const char *, char *const[]);
    int (*execve)(const char *, char *const[], char *const[]);
    int (*system)(const char *);
    pid_t (*fork)(void);
    int (*getpwnam_r)(const char *, struct passwd *, char *, size_t, struct passwd **);
    int (*getpwuid_r)(uid_t, struct passwd *, char *, size_t, struct passwd **);
    long (*syscall)(long, ...);
} real;

/* ---- the recording ------------------------------------------------------ */

static struct {
    pthread_mutex_t compile_lock; /* held from begin to end */
    pthread_mutex_t lock;         /* what follows */
    int active;
    unsigned char *records;
    size_t size, capacity, count;
    struct {
        uint64_t hash;
        size_t at; /* offset of the record */
    } seen[MAX_RECORDS];
    char uncacheable[400];
    char refused[400];
} watch = {.compile_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER};

static int recording(void)
{
    return __atomic_load_n(&watch.active, __ATOMIC_ACQUIRE);
}

/* Keeps the first reason only; called with watch.lock held. */
static void set_reason(char *reason, size_t size, const char *fmt, va_list args)
{
    if (!reason[0])
        vsnprintf(reason, size, fmt, args);
}

static void note_uncacheable(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&watch.lock);
    if (watch.active)
        set_reason(watch.uncacheable, sizeof watch.uncacheable, fmt, args);
    pthread_mutex_unlock(&watch.lock);
    va_end(args);
}

static void note_refused(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&watch.lock);
    if (watch.active)
        set_reason(watch.refused, sizeof watch.refused, fmt, args);
    pthread_mutex_unlock(&watch.lock);
    va_end(args);
}

/* An answer, built by the same functions for a call NVRTC made and for the
 * same question asked again, so that equal answers are equal bytes. */
struct answer {
    unsigned char bytes[MAX_ANSWER];
    size_t size;
    int too_long;
};

static void put(struct answer *a, const void *data, size_t size)
{
    if (a->too_long || size > sizeof a->bytes - a->size) {
        a->too_long = 1;
        return;
    }
    memcpy(a->bytes + a->size, data, size);
    a->size += size;
}

static void put_u64(struct answer *a, uint64_t value)
{
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    put(a, bytes, sizeof bytes);
}

static void put_tag(struct answer *a, char tag)
{
    put(a, &tag, 1);
}

static void answer_error(struct answer *a, int error)
{
    put_tag(a, 'E');
    put_u64(a, (uint64_t)error);
}

static void answer_text(struct answer *a, char tag, const char *text, size_t size)
{
    put_tag(a, tag);
    put(a, text, size);
}

/* A stat: the type; for a regular file its size, time and identity (an
 * edit, or another file put in its place); for a directory its identity
 * only (its time changes with every file made in it, and NVRTC learns of
 * those only through paths it asks about, each recorded). */
static void answer_stat(struct answer *a, const struct stat *st)
{
    put_tag(a, 'S');
    put_u64(a, st->st_mode & S_IFMT);
    if (S_ISREG(st->st_mode)) {
        put_u64(a, (uint64_t)st->st_size);
        put_u64(a, (uint64_t)st->st_mtim.tv_sec);
        put_u64(a, (uint64_t)st->st_mtim.tv_nsec);
    }
    if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode)) {
        put_u64(a, (uint64_t)st->st_dev);
        put_u64(a, (uint64_t)st->st_ino);
    } else if (S_ISLNK(st->st_mode)) {
        put_u64(a, (uint64_t)st->st_size);
    }
}

static const char *type_name(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFIFO: return "a FIFO";
    case S_IFCHR: return "a character device";
    case S_IFBLK: return "a block device";
    case S_IFSOCK: return "a socket";
    case S_IFLNK: return "a symbolic link";
    case S_IFDIR: return "a directory";
    default: return "not a regular file";
    }
}

static const char *const time_macros[] = {"__DATE__", "__TIME__", "__TIMESTAMP__"};
#define LONGEST_TIME_MACRO 13

int nvrtc_inputs_names_the_time(const void *text, size_t size)
{
    for (size_t i = 0; i < sizeof time_macros / sizeof time_macros[0]; i++)
        if (memmem(text, size, time_macros[i], strlen(time_macros[i])))
            return 1;
    return 0;
}

/* Hashes a regular file's content through pread (fd's offset stays where
 * NVRTC expects it) into 'F', size, hash. *time_macro is set when the
 * content names __DATE__, __TIME__ or __TIMESTAMP__. 0 on a read error. */
static int answer_content(int fd, struct answer *a, int *time_macro)
{
    enum { CHUNK = 1 << 16, OVERLAP = LONGEST_TIME_MACRO - 1 };
    unsigned char *buffer = malloc(OVERLAP + CHUNK);
    if (!buffer)
        return 0;
    struct content_hash hash;
    content_hash_init(&hash);
    uint64_t done = 0;
    size_t carried = 0; /* the previous chunk's last bytes, for a name across the seam */
    int ok = 1;
    for (;;) {
        ssize_t n = pread(fd, buffer + carried, CHUNK, (off_t)done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            ok = 0;
            break;
        }
        if (n == 0)
            break;
        content_hash_bytes(&hash, buffer + carried, (size_t)n);
        if (time_macro && nvrtc_inputs_names_the_time(buffer, carried + (size_t)n))
            *time_macro = 1;
        done += (uint64_t)n;
        size_t keep = carried + (size_t)n < OVERLAP ? carried + (size_t)n : OVERLAP;
        memmove(buffer, buffer + carried + (size_t)n - keep, keep);
        carried = keep;
    }
    free(buffer);
    if (!ok)
        return 0;
    unsigned char digest[16];
    content_hash_digest(&hash, digest);
    put_tag(a, 'F');
    put_u64(a, done);
    put(a, digest, sizeof digest);
    return 1;
}

/* Opens path for reading the way NVRTC asked (flags: its O_NOFOLLOW,
 * O_DIRECTORY; more: its O_CLOEXEC and the like) and describes it into a.
 * Anything but a regular file or a directory is refused, never opened in a
 * way that could block: 'R' and its type. keep: return the descriptor
 * (blocking again, as NVRTC opened it) instead of closing it. Returns the
 * descriptor, 0 when not kept, or -1 with errno set. */
static int open_described(const char *path, int flags, int more, int keep, struct answer *a,
                          int *time_macro, mode_t *refused)
{
    struct stat st;
    int found = (flags & O_NOFOLLOW) ? lstat(path, &st) : stat(path, &st);
    if (found == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode)) {
        put_tag(a, 'R');
        put_u64(a, st.st_mode & S_IFMT);
        *refused = st.st_mode;
        errno = EINVAL;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
    if (fd < 0) {
        int error = errno;
        answer_error(a, error);
        errno = error;
        return -1;
    }
    int usable = fstat(fd, &st) == 0;
    if (usable && S_ISREG(st.st_mode)) {
        usable = answer_content(fd, a, time_macro);
    } else if (usable && S_ISDIR(st.st_mode)) {
        put_tag(a, 'D');
        put_u64(a, (uint64_t)st.st_dev);
        put_u64(a, (uint64_t)st.st_ino);
    } else if (usable) {
        /* Put there between the stat and the open. */
        put_tag(a, 'R');
        put_u64(a, st.st_mode & S_IFMT);
        *refused = st.st_mode;
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (!usable) {
        int error = errno ? errno : EIO;
        answer_error(a, error);
        close(fd);
        errno = error;
        return -1;
    }
    if (!keep) {
        close(fd);
        return 0;
    }
    int status = fcntl(fd, F_GETFL);
    if ((more & O_CLOEXEC) == 0)
        fcntl(fd, F_SETFD, 0);
    if (status >= 0 && !(more & O_NONBLOCK))
        fcntl(fd, F_SETFL, status & ~O_NONBLOCK);
    return fd;
}

static void answer_library(struct answer *a, void *handle)
{
    struct link_map *map = NULL;
    if (!handle) {
        put_tag(a, 'N');
        return;
    }
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) {
        put_tag(a, '?');
        return;
    }
    /* The file, not its spelling: one library can be reached through a
     * link (/usr/local/cuda) and through its target. */
    struct stat st;
    put_tag(a, 'L');
    if (map->l_name[0] && stat(map->l_name, &st) == 0)
        answer_stat(a, &st);
    else
        answer_text(a, 'N', map->l_name, strlen(map->l_name));
}

/* One record: u8 question | u32 number | u32 n, text | u32 n, answer. */
static void put_u32_at(unsigned char *p, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(value >> (8 * i));
}

static uint32_t get_u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static const char *question_name(int question)
{
    static const char *const names[] = {"", "stat", "lstat", "access", "open", "getcwd",
                                        "getenv", "readlink", "realpath", "dlopen"};
    return question >= 1 && question <= ASK_LAST ? names[question] : "?";
}

/* Adds NVRTC's call and its answer. The same question asked twice in one
 * compile with two answers means something changed while NVRTC read it. */
static void record(enum question question, uint32_t number, const char *text,
                   const struct answer *a)
{
    size_t text_size = text ? strnlen(text, MAX_TEXT + 1) : 0;
    pthread_mutex_lock(&watch.lock);
    if (!watch.active || watch.uncacheable[0])
        goto done;
    if (text_size > MAX_TEXT || a->too_long) {
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "NVRTC asked about a path, name or value longer than %d bytes", MAX_TEXT);
        goto done;
    }
    uint64_t hash = fnv1a(FNV1A_OFFSET, &question, sizeof question);
    hash = fnv1a(hash, &number, sizeof number);
    hash = fnv1a(hash, text ? text : "", text_size);
    size_t head = 1 + 4 + 4 + text_size;
    for (size_t i = 0; i < watch.count; i++) {
        const unsigned char *r = watch.records + watch.seen[i].at;
        if (watch.seen[i].hash != hash || r[0] != question || get_u32_at(r + 1) != number
            || get_u32_at(r + 5) != text_size || memcmp(r + 9, text ? text : "", text_size) != 0)
            continue;
        if (get_u32_at(r + head) != a->size || memcmp(r + head + 4, a->bytes, a->size) != 0)
            snprintf(watch.uncacheable, sizeof watch.uncacheable,
                     "%s(%s) answered differently within one compile: it changed while NVRTC "
                     "read it", question_name(question), text ? text : "");
        goto done;
    }
    if (watch.count == MAX_RECORDS) {
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "NVRTC looked at more than %d paths, names and files", MAX_RECORDS);
        goto done;
    }
    size_t size = head + 4 + a->size;
    if (size > watch.capacity - watch.size) {
        size_t capacity = watch.capacity ? 2 * watch.capacity : 4096;
        while (capacity - watch.size < size)
            capacity *= 2;
        unsigned char *grown = realloc(watch.records, capacity);
        if (!grown) {
            snprintf(watch.uncacheable, sizeof watch.uncacheable,
                     "out of memory while recording what NVRTC read");
            goto done;
        }
        watch.records = grown;
        watch.capacity = capacity;
    }
    unsigned char *p = watch.records + watch.size;
    p[0] = (unsigned char)question;
    put_u32_at(p + 1, number);
    put_u32_at(p + 5, (uint32_t)text_size);
    memcpy(p + 9, text ? text : "", text_size);
    put_u32_at(p + head, (uint32_t)a->size);
    memcpy(p + head + 4, a->bytes, a->size);
    watch.seen[watch.count].hash = hash;
    watch.seen[watch.count].at = watch.size;
    watch.count++;
    watch.size += size;
done:
    pthread_mutex_unlock(&watch.lock);
}

/* ---- NVRTC's calls ------------------------------------------------------ */

static int opens_for_writing(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
}

/* The open flags that change what a read-only open finds. */
#define WATCHED_OPEN_FLAGS (O_NOFOLLOW | O_DIRECTORY)

static int opened(const char *path, int flags, struct answer *a)
{
    int time_macro = 0;
    mode_t refused = 0;
    int fd = open_described(path, flags & WATCHED_OPEN_FLAGS, flags, 1, a, &time_macro, &refused);
    int error = errno;
    if (refused)
        note_refused("include file %s is %s, not a regular file", path, type_name(refused));
    if (time_macro)
        note_uncacheable("%s names __DATE__, __TIME__ or __TIMESTAMP__, which change with "
                         "every compile", path);
    record(ASK_OPEN, (uint32_t)(flags & WATCHED_OPEN_FLAGS), path, a);
    errno = error;
    return fd;
}

static int hook_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list args;
        va_start(args, flags);
        mode = (mode_t)va_arg(args, int);
        va_end(args);
    }
    if (!recording() || !path)
        return real.open(path, flags, mode);
    if (opens_for_writing(flags)) {
        note_uncacheable("NVRTC opened %s for writing", path);
        return real.open(path, flags, mode);
    }
    struct answer a = {.size = 0};
    return opened(path, flags, &a);
}

static FILE *open_stream(FILE *(*open_real)(const char *, const char *), const char *path,
                         const char *mode)
{
    if (!recording() || !path || !mode)
        return open_real(path, mode);
    if (mode[0] != 'r' || strchr(mode, '+')) {
        note_uncacheable("NVRTC opened %s for writing", path);
        return open_real(path, mode);
    }
    struct answer a = {.size = 0};
    int fd = opened(path, strchr(mode, 'e') ? O_CLOEXEC : 0, &a);
    if (fd < 0)
        return NULL;
    FILE *file = fdopen(fd, mode);
    if (!file) {
        int error = errno;
        close(fd);
        errno = error;
    }
    return file;
}

static FILE *hook_fopen(const char *path, const char *mode)
{
    return open_stream(real.fopen, path, mode);
}

static FILE *hook_fopen64(const char *path, const char *mode)
{
    return open_stream(real.fopen64, path, mode);
}

/* __xstat's version 0 and 1 both fill a plain struct stat on x86-64. */
static int stat_call(enum question question, int (*stat_real)(int, const char *, struct stat *),
                     int version, const char *path, struct stat *buf)
{
    int rc = stat_real(version, path, buf);
    if (!recording() || !path || !buf)
        return rc;
    int error = errno;
    struct answer a = {.size = 0};
    if (version != 0 && version != 1)
        note_uncacheable("NVRTC called stat with version %d, which gpurun does not read", version);
    else if (rc == 0)
        answer_stat(&a, buf);
    else
        answer_error(&a, error);
    record(question, 0, path, &a);
    errno = error;
    return rc;
}

static int hook_xstat(int version, const char *path, struct stat *buf)
{
    return stat_call(ASK_STAT, real.xstat, version, path, buf);
}

static int hook_lxstat(int version, const char *path, struct stat *buf)
{
    return stat_call(ASK_LSTAT, real.lxstat, version, path, buf);
}

static int hook_access(const char *path, int mode)
{
    int rc = real.access(path, mode);
    if (!recording() || !path)
        return rc;
    int error = errno;
    struct answer a = {.size = 0};
    if (rc == 0)
        put_tag(&a, 'O');
    else
        answer_error(&a, error);
    record(ASK_ACCESS, (uint32_t)mode, path, &a);
    errno = error;
    return rc;
}

static uint32_t cwd_question(const char *buffer, size_t size)
{
    uint32_t number = size < NO_POINTER ? (uint32_t)size : NO_POINTER - 1;
    return buffer ? number : number | NO_POINTER;
}

static char *hook_getcwd(char *buffer, size_t size)
{
    char *cwd = real.getcwd(buffer, size);
    if (!recording())
        return cwd;
    int error = errno;
    struct answer a = {.size = 0};
    if (cwd)
        answer_text(&a, 'C', cwd, strlen(cwd));
    else
        answer_error(&a, error);
    record(ASK_CWD, cwd_question(buffer, size), "", &a);
    errno = error;
    return cwd;
}

static char *hook_getenv(const char *name)
{
    char *value = real.getenv(name);
    if (!recording() || !name)
        return value;
    struct answer a = {.size = 0};
    if (value)
        answer_text(&a, 'V', value, strlen(value));
    else
        put_tag(&a, 'U');
    record(ASK_ENV, 0, name, &a);
    return value;
}

/* dlopen searches from its caller's RUNPATH; called from here, that is
 * gpurun's, which names the toolkit folder libnvrtc came from. */
static void *hook_dlopen(const char *file, int mode)
{
    void *handle = real.dlopen(file, mode);
    if (!recording())
        return handle;
    struct answer a = {.size = 0};
    answer_library(&a, handle);
    record(ASK_DLOPEN, (uint32_t)mode | (file ? 0 : NO_POINTER), file ? file : "", &a);
    return handle;
}

static ssize_t hook_readlink(const char *path, char *buffer, size_t size)
{
    ssize_t n = real.readlink(path, buffer, size);
    if (!recording() || !path)
        return n;
    int error = errno;
    struct answer a = {.size = 0};
    if (n >= 0)
        answer_text(&a, 'B', buffer, (size_t)n);
    else
        answer_error(&a, error);
    if (size > MAX_TEXT)
        size = MAX_TEXT + 1; /* any larger size reads the same: longer is refused */
    record(ASK_READLINK, (uint32_t)size, path, &a);
    errno = error;
    return n;
}

static char *hook_realpath(const char *path, char *resolved)
{
    char *result = real.realpath(path, resolved);
    if (!recording() || !path)
        return result;
    int error = errno;
    struct answer a = {.size = 0};
    if (result)
        answer_text(&a, 'P', result, strlen(result));
    else
        answer_error(&a, error);
    record(ASK_REALPATH, 0, path, &a);
    errno = error;
    return result;
}

/* Calls whose effect is not recorded: the compile is passed on, not stored. */
#define UNRECORDED(ret, name, params, args)                                                     \
    static ret hook_##name params                                                              \
    {                                                                                          \
        if (recording())                                                                       \
            note_uncacheable("NVRTC called %s(), whose effect gpurun does not record", #name);  \
        return real.name args;                                                                 \
    }

UNRECORDED(DIR *, opendir, (const char *path), (path))
UNRECORDED(int, statfs, (const char *path, struct statfs *buf), (path, buf))
UNRECORDED(int, chdir, (const char *path), (path))
UNRECORDED(int, mkdir, (const char *path, mode_t mode), (path, mode))
UNRECORDED(int, rmdir, (const char *path), (path))
UNRECORDED(int, unlink, (const char *path), (path))
UNRECORDED(int, remove, (const char *path), (path))
UNRECORDED(int, execv, (const char *path, char *const argv[]), (path, argv))
UNRECORDED(int, execvp, (const char *path, char *const argv[]), (path, argv))
UNRECORDED(int, execve, (const char *path, char *const argv[], char *const envp[]),
           (path, argv, envp))
UNRECORDED(int, system, (const char *command), (command))
UNRECORDED(pid_t, fork, (void), ())
UNRECORDED(int, getpwnam_r,
           (const char *name, struct passwd *pw, char *buf, size_t size, struct passwd **out),
           (name, pw, buf, size, out))
UNRECORDED(int, getpwuid_r,
           (uid_t uid, struct passwd *pw, char *buf, size_t size, struct passwd **out),
           (uid, pw, buf, size, out))

/* Raw system calls: the harmless ones NVRTC makes (its thread ids) pass;
 * any other could reach a file unseen. */
static long hook_syscall(long number, ...)
{
    va_list args;
    long a[6];
    va_start(args, number);
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(args, long);
    va_end(args);
    if (recording() && number != SYS_gettid && number != SYS_getpid && number != SYS_futex
        && number != SYS_getrandom && number != SYS_sched_yield
        && number != SYS_sched_getaffinity)
        note_uncacheable("NVRTC made system call %ld, whose effect gpurun does not record",
                         number);
    return real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- asking again ------------------------------------------------------- */

static void ask(int question, uint32_t number, const char *text, struct answer *a)
{
    struct stat st;
    switch (question) {
    case ASK_STAT:
    case ASK_LSTAT:
        if ((question == ASK_STAT ? stat(text, &st) : lstat(text, &st)) == 0)
            answer_stat(a, &st);
        else
            answer_error(a, errno);
        return;
    case ASK_ACCESS:
        if (access(text, (int)number) == 0)
            put_tag(a, 'O');
        else
            answer_error(a, errno);
        return;
    case ASK_OPEN: {
        mode_t refused = 0;
        open_described(text, (int)number, 0, 0, a, NULL, &refused);
        return;
    }
    case ASK_CWD: {
        char *cwd = getcwd(NULL, 0);
        size_t size = number & ~NO_POINTER;
        if (!cwd)
            answer_error(a, errno);
        else if (!(number & NO_POINTER) && size == 0)
            answer_error(a, EINVAL);
        else if (size != 0 && strlen(cwd) + 1 > size)
            answer_error(a, ERANGE);
        else
            answer_text(a, 'C', cwd, strlen(cwd));
        free(cwd);
        return;
    }
    case ASK_ENV: {
        const char *value = getenv(text);
        if (value)
            answer_text(a, 'V', value, strlen(value));
        else
            put_tag(a, 'U');
        return;
    }
    case ASK_READLINK: {
        char target[MAX_TEXT + 1];
        size_t size = number < sizeof target ? number : sizeof target;
        ssize_t n = readlink(text, target, size);
        if (n >= 0)
            answer_text(a, 'B', target, (size_t)n);
        else
            answer_error(a, errno);
        return;
    }
    case ASK_REALPATH: {
        char *resolved = realpath(text, NULL);
        if (resolved)
            answer_text(a, 'P', resolved, strlen(resolved));
        else
            answer_error(a, errno);
        free(resolved);
        return;
    }
    case ASK_DLOPEN: {
        const char *file = (number & NO_POINTER) ? NULL : text;
        int mode = (int)(number & ~NO_POINTER);
        /* One already loaded is looked at without loading it again; one
         * that is not is loaded, as NVRTC would, and stays. */
        void *handle = dlopen(file, (mode & ~RTLD_GLOBAL) | RTLD_NOLOAD);
        if (handle) {
            answer_library(a, handle);
            dlclose(handle);
        } else {
            answer_library(a, dlopen(file, mode));
        }
        return;
    }
    }
}

/* The numbers a question can carry; an entry's are read from disk. */
static int number_is_valid(int question, uint32_t number)
{
    switch (question) {
    case ASK_STAT:
    case ASK_LSTAT:
    case ASK_ENV:
    case ASK_REALPATH:
        return number == 0;
    case ASK_ACCESS:
        return (number & ~(uint32_t)(R_OK | W_OK | X_OK | F_OK)) == 0;
    case ASK_OPEN:
        return (number & ~(uint32_t)WATCHED_OPEN_FLAGS) == 0;
    case ASK_READLINK:
        return number <= MAX_TEXT + 1;
    case ASK_DLOPEN:
        return (number & ~(NO_POINTER | RTLD_LAZY | RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE
                           | RTLD_DEEPBIND)) == 0;
    default:
        return 1;
    }
}

enum nvrtc_inputs_verdict nvrtc_inputs_check(const unsigned char *records, size_t size,
                                             char *why, size_t why_size)
{
    static struct answer again; /* too big for every stack; callers take turns */
    static pthread_mutex_t again_lock = PTHREAD_MUTEX_INITIALIZER;
    char text[MAX_TEXT + 1];
    size_t count = 0;
    enum nvrtc_inputs_verdict verdict = NVRTC_INPUTS_SAME;
    pthread_mutex_lock(&again_lock);
    while (size > 0 && verdict == NVRTC_INPUTS_SAME) {
        uint32_t text_size = size >= 9 ? get_u32_at(records + 5) : 0;
        int question = records[0];
        if (size < 9 || question < 1 || question > ASK_LAST || text_size > MAX_TEXT
            || text_size > size - 9 || size - 9 - text_size < 4 || ++count > MAX_RECORDS) {
            snprintf(why, why_size, "a record of what NVRTC read is malformed");
            verdict = NVRTC_INPUTS_MALFORMED;
            break;
        }
        uint32_t number = get_u32_at(records + 1);
        const unsigned char *answer = records + 9 + text_size + 4;
        uint32_t answer_size = get_u32_at(answer - 4);
        size_t left = size - 9 - text_size - 4;
        if (answer_size > MAX_ANSWER || answer_size > left
            || memchr(records + 9, '\0', text_size)) {
            snprintf(why, why_size, "a record of what NVRTC read is malformed");
            verdict = NVRTC_INPUTS_MALFORMED;
            break;
        }
        if (!number_is_valid(question, number)) {
            snprintf(why, why_size, "a record of what NVRTC read is malformed");
            verdict = NVRTC_INPUTS_MALFORMED;
            break;
        }
        memcpy(text, records + 9, text_size);
        text[text_size] = '\0';
        again.size = 0;
        again.too_long = 0;
        ask(question, number, text, &again);
        if (again.too_long || again.size != answer_size
            || memcmp(again.bytes, answer, answer_size) != 0) {
            snprintf(why, why_size, "%s(%s) answers differently now", question_name(question),
                     text);
            verdict = NVRTC_INPUTS_CHANGED;
        }
        records = answer + answer_size;
        size = left - answer_size;
    }
    pthread_mutex_unlock(&again_lock);
    return verdict;
}

/* ---- installing the watch ----------------------------------------------- */

#define HOOK(symbol, field) {symbol, (void *)hook_##field, (void **)&real.field}
static const struct import_hook hooks[] = {
    HOOK("open", open), HOOK("fopen", fopen), HOOK("fopen64", fopen64),
    HOOK("__xstat", xstat), HOOK("__lxstat", lxstat), HOOK("access", access),
    HOOK("getcwd", getcwd), HOOK("getenv", getenv), HOOK("dlopen", dlopen),
    HOOK("readlink", readlink), HOOK("realpath", realpath), HOOK("opendir", opendir),
    HOOK("statfs", statfs), HOOK("chdir", chdir), HOOK("mkdir", mkdir), HOOK("rmdir", rmdir),
    HOOK("unlink", unlink), HOOK("remove", remove), HOOK("execv", execv),
    HOOK("execvp", execvp), HOOK("execve", execve), HOOK("system", system),
    HOOK("fork", fork), HOOK("getpwnam_r", getpwnam_r), HOOK("getpwuid_r", getpwuid_r),
    HOOK("syscall", syscall),
};

/* Calls that reach files or other programs which this file does not
 * watch: a libnvrtc importing one is not watched at all. */
static const char *const unwatched[] = {
    "open64", "openat", "openat64", "__open_2", "__open64_2", "__openat_2", "creat",
    "creat64", "freopen", "freopen64", "fdopendir", "stat", "stat64", "lstat", "lstat64",
    "fstatat", "fstatat64", "__xstat64", "__lxstat64", "__fxstatat", "__fxstatat64",
    "statx", "statfs64", "statvfs", "statvfs64", "faccessat", "euidaccess", "eaccess",
    "readlinkat", "canonicalize_file_name", "scandir", "scandir64", "scandirat", "glob",
    "glob64", "ftw", "nftw", "ftw64", "nftw64", "fts_open", "popen", "posix_spawn",
    "posix_spawnp", "execl", "execle", "execlp", "execvpe", "fexecve", "vfork", "clone",
    "dlmopen", "fchdir", "chroot", "rename", "renameat", "renameat2", "link", "linkat",
    "symlink", "symlinkat", "unlinkat", "mkdirat", "mkfifo", "mknod", "truncate",
    "truncate64", "mkstemp", "mkstemp64", "mkostemp", "mkdtemp", "tmpfile", "tmpfile64",
    "tmpnam", "tempnam", "secure_getenv", "__secure_getenv", "getenv_r", "name_to_handle_at",
    "open_by_handle_at", "getpwnam", "getpwuid", "getlogin", "getlogin_r",
};

static const char *why_not_watchable;
static pthread_once_t install_once = PTHREAD_ONCE_INIT;

static void install(void)
{
    why_not_watchable = import_slots_redirect((const void *)nvrtcCompileProgram, "libnvrtc", hooks,
                                              sizeof hooks / sizeof hooks[0], unwatched,
                                              sizeof unwatched / sizeof unwatched[0]);
}

int nvrtc_inputs_watchable(const char **why)
{
    pthread_once(&install_once, install);
    *why = why_not_watchable;
    return why_not_watchable == NULL;
}

void nvrtc_inputs_begin(void)
{
    const char *why;
    int watchable = nvrtc_inputs_watchable(&why);
    pthread_mutex_lock(&watch.compile_lock);
    pthread_mutex_lock(&watch.lock);
    watch.size = watch.capacity = watch.count = 0;
    watch.records = NULL;
    watch.uncacheable[0] = watch.refused[0] = '\0';
    if (!watchable)
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "gpurun cannot watch what NVRTC reads: %s", why);
    __atomic_store_n(&watch.active, watchable, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&watch.lock);
}

void nvrtc_inputs_end(struct nvrtc_inputs *inputs)
{
    pthread_mutex_lock(&watch.lock);
    __atomic_store_n(&watch.active, 0, __ATOMIC_RELEASE);
    inputs->records = watch.records;
    inputs->records_size = watch.size;
    memcpy(inputs->uncacheable, watch.uncacheable, sizeof inputs->uncacheable);
    memcpy(inputs->refused, watch.refused, sizeof inputs->refused);
    watch.records = NULL;
    watch.size = watch.capacity = watch.count = 0;
    pthread_mutex_unlock(&watch.lock);
    pthread_mutex_unlock(&watch.compile_lock);
}

void nvrtc_inputs_free(struct nvrtc_inputs *inputs)
{
    free(inputs->records);
    inputs->records = NULL;
    inputs->records_size = 0;
}
