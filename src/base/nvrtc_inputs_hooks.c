/* NVRTC's calls into the C library (base/nvrtc_inputs.h), pointed here
 * once per process in libnvrtc's table alone (base/import_slots.h). While
 * a compile is recorded each call is passed on and recorded as a question
 * and its answer; outside one the calls pass straight through. */
#define _GNU_SOURCE
#include "base/nvrtc_inputs.h"

#include "base/import_slots.h"
#include "base/nvrtc_inputs_recording.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <nvrtc.h>

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

/* ---- the calls ---------------------------------------------------------- */

static int opens_for_writing(int flags)
{
    return (flags & O_ACCMODE) != O_RDONLY || (flags & (O_CREAT | O_TRUNC | O_APPEND));
}

static int opened(const char *path, int flags, struct nvrtc_answer *a)
{
    int time_macro = 0;
    mode_t refused = 0;
    int fd = nvrtc_answer_open(path, flags & NVRTC_WATCHED_OPEN_FLAGS, flags, 1, a, &time_macro,
                               &refused);
    int error = errno;
    if (refused)
        nvrtc_note_refused("include file %s is %s, not a regular file", path,
                           nvrtc_file_type(refused));
    if (time_macro)
        nvrtc_note_uncacheable("%s names __DATE__, __TIME__ or __TIMESTAMP__, which change with "
                               "every compile", path);
    nvrtc_record(ASK_OPEN, (uint32_t)(flags & NVRTC_WATCHED_OPEN_FLAGS), path, a);
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
    if (!nvrtc_recording() || !path)
        return real.open(path, flags, mode);
    if (opens_for_writing(flags)) {
        nvrtc_note_uncacheable("NVRTC opened %s for writing", path);
        return real.open(path, flags, mode);
    }
    struct nvrtc_answer a = {.size = 0};
    return opened(path, flags, &a);
}

static FILE *open_stream(FILE *(*open_real)(const char *, const char *), const char *path,
                         const char *mode)
{
    if (!nvrtc_recording() || !path || !mode)
        return open_real(path, mode);
    if (mode[0] != 'r' || strchr(mode, '+')) {
        nvrtc_note_uncacheable("NVRTC opened %s for writing", path);
        return open_real(path, mode);
    }
    struct nvrtc_answer a = {.size = 0};
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
static int stat_call(enum nvrtc_question question,
                     int (*stat_real)(int, const char *, struct stat *), int version,
                     const char *path, struct stat *buf)
{
    int rc = stat_real(version, path, buf);
    if (!nvrtc_recording() || !path || !buf)
        return rc;
    int error = errno;
    struct nvrtc_answer a = {.size = 0};
    if (version != 0 && version != 1)
        nvrtc_note_uncacheable("NVRTC called stat with version %d, which gpurun does not read",
                               version);
    else if (rc == 0)
        nvrtc_answer_stat(&a, buf);
    else
        nvrtc_answer_error(&a, error);
    nvrtc_record(question, 0, path, &a);
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
    if (!nvrtc_recording() || !path)
        return rc;
    int error = errno;
    struct nvrtc_answer a = {.size = 0};
    if (rc == 0)
        nvrtc_answer_tag(&a, 'O');
    else
        nvrtc_answer_error(&a, error);
    nvrtc_record(ASK_ACCESS, (uint32_t)mode, path, &a);
    errno = error;
    return rc;
}

static uint32_t cwd_question(const char *buffer, size_t size)
{
    uint32_t number = size < NVRTC_NO_POINTER ? (uint32_t)size : NVRTC_NO_POINTER - 1;
    return buffer ? number : number | NVRTC_NO_POINTER;
}

static char *hook_getcwd(char *buffer, size_t size)
{
    char *cwd = real.getcwd(buffer, size);
    if (!nvrtc_recording())
        return cwd;
    int error = errno;
    struct nvrtc_answer a = {.size = 0};
    if (cwd)
        nvrtc_answer_text(&a, 'C', cwd, strlen(cwd));
    else
        nvrtc_answer_error(&a, error);
    nvrtc_record(ASK_CWD, cwd_question(buffer, size), "", &a);
    errno = error;
    return cwd;
}

static char *hook_getenv(const char *name)
{
    char *value = real.getenv(name);
    if (!nvrtc_recording() || !name)
        return value;
    struct nvrtc_answer a = {.size = 0};
    if (value)
        nvrtc_answer_text(&a, 'V', value, strlen(value));
    else
        nvrtc_answer_tag(&a, 'U');
    nvrtc_record(ASK_ENV, 0, name, &a);
    return value;
}

/* dlopen searches from its caller's RUNPATH; called from here, that is
 * gpurun's, which names the toolkit folder libnvrtc came from. */
static void *hook_dlopen(const char *file, int mode)
{
    void *handle = real.dlopen(file, mode);
    if (!nvrtc_recording())
        return handle;
    struct nvrtc_answer a = {.size = 0};
    nvrtc_answer_library(&a, handle);
    nvrtc_record(ASK_DLOPEN, (uint32_t)mode | (file ? 0 : NVRTC_NO_POINTER), file ? file : "", &a);
    return handle;
}

static ssize_t hook_readlink(const char *path, char *buffer, size_t size)
{
    ssize_t n = real.readlink(path, buffer, size);
    if (!nvrtc_recording() || !path)
        return n;
    int error = errno;
    struct nvrtc_answer a = {.size = 0};
    if (n >= 0)
        nvrtc_answer_text(&a, 'B', buffer, (size_t)n);
    else
        nvrtc_answer_error(&a, error);
    if (size > NVRTC_MAX_TEXT)
        size = NVRTC_MAX_TEXT + 1; /* any larger size reads the same: longer is refused */
    nvrtc_record(ASK_READLINK, (uint32_t)size, path, &a);
    errno = error;
    return n;
}

static char *hook_realpath(const char *path, char *resolved)
{
    char *result = real.realpath(path, resolved);
    if (!nvrtc_recording() || !path)
        return result;
    int error = errno;
    struct nvrtc_answer a = {.size = 0};
    if (result)
        nvrtc_answer_text(&a, 'P', result, strlen(result));
    else
        nvrtc_answer_error(&a, error);
    nvrtc_record(ASK_REALPATH, 0, path, &a);
    errno = error;
    return result;
}

/* Calls whose effect is not recorded: the compile is passed on, not stored. */
#define UNRECORDED(ret, name, params, args)                                                  \
    static ret hook_##name params                                                           \
    {                                                                                       \
        if (nvrtc_recording())                                                              \
            nvrtc_note_uncacheable("NVRTC called %s(), whose effect gpurun does not record", \
                                   #name);                                                  \
        return real.name args;                                                              \
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
    if (nvrtc_recording() && number != SYS_gettid && number != SYS_getpid && number != SYS_futex
        && number != SYS_getrandom && number != SYS_sched_yield
        && number != SYS_sched_getaffinity)
        nvrtc_note_uncacheable("NVRTC made system call %ld, whose effect gpurun does not record",
                               number);
    return real.syscall(number, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* ---- installing them ---------------------------------------------------- */

/* libnvrtc reaches the C library through its global offset table: the
 * slots of the calls that look at the outside world (open, fopen, stat,
 * access, getcwd, getenv, dlopen, readlink, realpath) are pointed at the
 * hooks above. Calls whose effect is not recorded (listing a directory,
 * writing or removing a file, starting a process) mark the compile as one
 * not to store. */
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
 * watch: a libnvrtc importing one is not watched at all, and the kernel
 * cache then stays off. */
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
