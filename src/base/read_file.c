/* Reading a whole file into memory, and writing one out. No Lua. */
#include "base/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int read_whole_file(const char *path, int open_flags, size_t max_size, unsigned char **data,
                    size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | open_flags);
    if (fd < 0)
        return (errno == ELOOP && (open_flags & O_NOFOLLOW)) ? READ_FILE_NOT_REGULAR : errno;
    int error = 0;
    struct stat st;
    unsigned char *buffer = NULL;
    size_t done = 0;
    if (fstat(fd, &st) != 0) {
        error = errno;
    } else if (!S_ISREG(st.st_mode)) {
        error = READ_FILE_NOT_REGULAR;
    } else if ((uint64_t)st.st_size > max_size) {
        error = READ_FILE_TOO_LARGE;
        *size = (size_t)st.st_size;
    } else if (!(buffer = malloc((size_t)st.st_size + 1))) {
        error = ENOMEM;
    } else {
        while (done < (size_t)st.st_size) {
            ssize_t n = read(fd, buffer + done, (size_t)st.st_size - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                error = errno;
                break;
            }
            if (n == 0)
                break; /* shrank under us: what was read is what there is */
            done += (size_t)n;
        }
    }
    close(fd);
    if (error) {
        free(buffer);
        return error;
    }
    buffer[done] = '\0';
    *data = buffer;
    *size = done;
    return 0;
}

int write_whole_file(const char *path, const void *data, size_t size)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NONBLOCK, 0666);
    if (fd < 0)
        return errno == ENXIO ? READ_FILE_NOT_REGULAR : errno; /* a FIFO nobody reads */
    struct stat st;
    int error = 0;
    if (fstat(fd, &st) != 0)
        error = errno;
    else if (!S_ISREG(st.st_mode))
        error = READ_FILE_NOT_REGULAR;
    const unsigned char *bytes = data;
    for (size_t done = 0; !error && done < size;) {
        ssize_t n = write(fd, bytes + done, size - done);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            error = errno;
        else
            done += (size_t)n;
    }
    if (close(fd) != 0 && !error)
        error = errno;
    if (error && error != READ_FILE_NOT_REGULAR)
        unlink(path);
    return error;
}

const char *file_kind(const char *path)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return "missing";
    if (S_ISREG(st.st_mode))
        return "a regular file";
    if (S_ISDIR(st.st_mode))
        return "a directory";
    if (S_ISFIFO(st.st_mode))
        return "a FIFO";
    if (S_ISLNK(st.st_mode))
        return "a symbolic link";
    if (S_ISSOCK(st.st_mode))
        return "a socket";
    return "a device";
}
