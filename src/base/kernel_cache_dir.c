/* Where the kernel cache lives (base/kernel_cache_dir.h).
 *
 * Entries are code that gpurun loads and runs, trusted once an unkeyed
 * checksum matches, so the directory must be the user's alone, as ssh
 * treats ~/.ssh: one owned by someone else, or writable by its group or
 * others, is refused, and so is the root folder however it is spelled. */
#include "base/kernel_cache_dir.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

void kernel_cache_dir_failed(const char *dir, const char *what, int error, char *warning,
                             size_t warning_size)
{
    snprintf(warning, warning_size, "kernel cache directory %s %s (%s); continuing without the cache",
             dir, what, strerror(error));
}

static int refused(const char *dir, const char *source, const char *problem, char *warning,
                   size_t warning_size)
{
    snprintf(warning, warning_size,
             "kernel cache directory %s, from %s, is %s; continuing without the cache", dir, source,
             problem);
    return -1;
}

static int failed(const char *dir, const char *what, int error, char *warning, size_t warning_size)
{
    kernel_cache_dir_failed(dir, what, error, warning, warning_size);
    return -1;
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

/* Refuses a directory that another user could put entries in: 0 when it
 * is the user's alone, else -1 with the warning. */
static int check_owner(const char *dir, char *warning, size_t warning_size)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return failed(dir, "cannot be examined", errno, warning, warning_size);
    uid_t user = geteuid();
    char why[96];
    if (st.st_uid != user) {
        snprintf(why, sizeof why, "is owned by uid %u, not by you (uid %u)", (unsigned)st.st_uid,
                 (unsigned)user);
    } else if (st.st_mode & (S_IWGRP | S_IWOTH)) {
        snprintf(why, sizeof why, "is writable by %s (mode %04o)",
                 (st.st_mode & S_IWGRP) && (st.st_mode & S_IWOTH) ? "its group and others"
                 : (st.st_mode & S_IWGRP)                          ? "its group"
                                                                   : "others",
                 (unsigned)(st.st_mode & 07777));
    } else {
        return 0;
    }
    snprintf(warning, warning_size,
             "kernel cache directory %s %s: its entries are code gpurun runs, so it must be yours "
             "alone (chmod go-w, or set GPURUN_CACHE_DIR); continuing without the cache",
             dir, why);
    return -1;
}

/* The root folder however it is spelled ("/", "//", "/tmp/.."): entries
 * would be written into it. */
static int is_root(const char *dir)
{
    struct stat st, root;
    return stat(dir, &st) == 0 && stat("/", &root) == 0 && st.st_dev == root.st_dev
           && st.st_ino == root.st_ino;
}

int kernel_cache_dir_prepare(char *dir, const char *source, char *warning, size_t warning_size)
{
    /* A relative one would move with the working directory. */
    if (dir[0] != '/')
        return refused(dir, source, "not an absolute path", warning, warning_size);
    if (make_directories(dir) != 0)
        return failed(dir, "cannot be created", errno, warning, warning_size);
    if (is_root(dir))
        return refused(dir, source, "the root folder: the cache needs a folder of its own", warning,
                       warning_size);
    if (check_owner(dir, warning, warning_size) != 0)
        return -1;
    if (access(dir, W_OK | X_OK) != 0)
        return failed(dir, "is not writable", errno, warning, warning_size);
    return 0;
}

/* The folder the environment names, or 0 when none or too long. */
static int name_directory(char *dir, size_t size, const char **source)
{
    const char *chosen = getenv("GPURUN_CACHE_DIR");
    if (chosen && *chosen) {
        *source = "GPURUN_CACHE_DIR";
        return snprintf(dir, size, "%s", chosen) < (int)size;
    }
    /* The XDG spec says a relative XDG_CACHE_HOME is to be ignored. */
    const char *xdg = getenv("XDG_CACHE_HOME");
    if (xdg && xdg[0] == '/') {
        *source = "XDG_CACHE_HOME";
        return snprintf(dir, size, "%s/gpurun", xdg) < (int)size;
    }
    const char *home = getenv("HOME");
    *source = "HOME";
    if (!home || !*home) {
        struct passwd *user = getpwuid(getuid());
        home = user ? user->pw_dir : NULL;
        *source = "the password database";
    }
    if (!home || !*home)
        return 0;
    return snprintf(dir, size, "%s/.cache/gpurun", home) < (int)size;
}

enum kernel_cache_dir_choice kernel_cache_dir_choose(char *dir, size_t size, const char **source,
                                                     char *warning, size_t warning_size)
{
    const char *off = getenv("GPURUN_NO_CACHE");
    if (off && *off && strcmp(off, "0") != 0)
        return KERNEL_CACHE_DIR_OFF;
    if (!name_directory(dir, size, source)) {
        kernel_cache_dir_failed("(none)", "cannot be chosen: no home directory and no "
                                "GPURUN_CACHE_DIR, or the path is too long", ENOENT, warning,
                                warning_size);
        return KERNEL_CACHE_DIR_NONE;
    }
    return KERNEL_CACHE_DIR_CHOSEN;
}
