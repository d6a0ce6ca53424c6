/* Reading a whole file into memory, and writing one out. No Lua. */
#ifndef GPURUN_BASE_READ_FILE_H
#define GPURUN_BASE_READ_FILE_H

#include <stddef.h>

/* read_whole_file's answer for a path that is not a regular file (a FIFO,
 * a directory, a device, a socket; a symbolic link under O_NOFOLLOW). */
#define READ_FILE_NOT_REGULAR (-1)

/* read_whole_file's answer for a regular file larger than max_size bytes
 * (told by fstat, before anything is read or allocated). */
#define READ_FILE_TOO_LARGE (-2)

/* Reads a whole regular file of at most max_size bytes into a
 * NUL-terminated malloc'd buffer (*data, *size without the NUL). It never
 * blocks on a FIFO or a device: the file is opened with O_NONBLOCK and read
 * only when fstat says it is regular. open_flags: more open(2) flags
 * (O_NOFOLLOW). Returns 0, an errno value, READ_FILE_NOT_REGULAR or
 * READ_FILE_TOO_LARGE (*size then holds the file's size). */
int read_whole_file(const char *path, int open_flags, size_t max_size, unsigned char **data,
                    size_t *size);

/* Writes size bytes to path, created or truncated. A FIFO or a device is
 * refused (READ_FILE_NOT_REGULAR) without blocking; a failed write removes
 * what it had begun. Returns 0 or an errno value. */
int write_whole_file(const char *path, const void *data, size_t size);

/* What the file at path is, for a message: "a FIFO", "a directory",
 * "a symbolic link", "a device", "a socket", "a regular file", or "missing"
 * (lstat: a link is not followed). */
const char *file_kind(const char *path);

#endif
