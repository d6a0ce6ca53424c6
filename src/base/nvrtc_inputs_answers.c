/* Answers to NVRTC's questions, as bytes (base/nvrtc_inputs_answers.h).
 * A file NVRTC opens is answered by its content's hash, read through pread
 * so that NVRTC's descriptor stays where NVRTC expects it. */
#define _GNU_SOURCE /* dlinfo, memmem */
#include "base/nvrtc_inputs_answers.h"

#include "base/content_hash.h"
#include "base/nvrtc_inputs.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void put(struct nvrtc_answer *a, const void *data, size_t size)
{
    if (a->too_long || size > sizeof a->bytes - a->size) {
        a->too_long = 1;
        return;
    }
    memcpy(a->bytes + a->size, data, size);
    a->size += size;
}

static void put_u64(struct nvrtc_answer *a, uint64_t value)
{
    unsigned char bytes[8];
    for (int i = 0; i < 8; i++)
        bytes[i] = (unsigned char)(value >> (8 * i));
    put(a, bytes, sizeof bytes);
}

void nvrtc_answer_tag(struct nvrtc_answer *a, char tag)
{
    put(a, &tag, 1);
}

void nvrtc_answer_error(struct nvrtc_answer *a, int error)
{
    nvrtc_answer_tag(a, 'E');
    put_u64(a, (uint64_t)error);
}

void nvrtc_answer_text(struct nvrtc_answer *a, char tag, const char *text, size_t size)
{
    nvrtc_answer_tag(a, tag);
    put(a, text, size);
}

/* A stat: the type; for a regular file its size, time and identity (an
 * edit, or another file put in its place); for a directory its identity
 * only (its time changes with every file made in it, and NVRTC learns of
 * those only through paths it asks about, each recorded). */
void nvrtc_answer_stat(struct nvrtc_answer *a, const struct stat *st)
{
    nvrtc_answer_tag(a, 'S');
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

const char *nvrtc_file_type(mode_t mode)
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
static int answer_content(int fd, struct nvrtc_answer *a, int *time_macro)
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
    nvrtc_answer_tag(a, 'F');
    put_u64(a, done);
    put(a, digest, sizeof digest);
    return 1;
}

int nvrtc_answer_refused(struct nvrtc_answer *a, const struct stat *st)
{
    if (S_ISREG(st->st_mode) || S_ISDIR(st->st_mode))
        return 0;
    nvrtc_answer_tag(a, 'R');
    put_u64(a, st->st_mode & S_IFMT);
    return 1;
}

int nvrtc_answer_open(const char *path, int flags, int more, int keep, struct nvrtc_answer *a,
                      int *time_macro, mode_t *refused)
{
    struct stat st;
    int found = (flags & O_NOFOLLOW) ? lstat(path, &st) : stat(path, &st);
    if (found == 0 && nvrtc_answer_refused(a, &st)) {
        *refused = st.st_mode;
        errno = EINVAL;
        return -1;
    }
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC | flags);
    if (fd < 0) {
        int error = errno;
        nvrtc_answer_error(a, error);
        errno = error;
        return -1;
    }
    int usable = fstat(fd, &st) == 0;
    if (usable && S_ISREG(st.st_mode)) {
        usable = answer_content(fd, a, time_macro);
    } else if (usable && S_ISDIR(st.st_mode)) {
        nvrtc_answer_tag(a, 'D');
        put_u64(a, (uint64_t)st.st_dev);
        put_u64(a, (uint64_t)st.st_ino);
    } else if (usable && nvrtc_answer_refused(a, &st)) { /* put there since the stat */
        *refused = st.st_mode;
        close(fd);
        errno = EINVAL;
        return -1;
    }
    if (!usable) {
        int error = errno ? errno : EIO;
        nvrtc_answer_error(a, error);
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

void nvrtc_answer_library(struct nvrtc_answer *a, void *handle)
{
    struct link_map *map = NULL;
    if (!handle) {
        nvrtc_answer_tag(a, 'N');
        return;
    }
    if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || !map || !map->l_name) {
        nvrtc_answer_tag(a, '?');
        return;
    }
    /* The file, not its spelling: one library can be reached through a
     * link (/usr/local/cuda) and through its target. */
    struct stat st;
    nvrtc_answer_tag(a, 'L');
    if (map->l_name[0] && stat(map->l_name, &st) == 0)
        nvrtc_answer_stat(a, &st);
    else
        nvrtc_answer_text(a, 'N', map->l_name, strlen(map->l_name));
}
