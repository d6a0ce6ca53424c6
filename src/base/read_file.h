/* Reading a whole file into memory. No Lua. */
#ifndef GPURUN_BASE_READ_FILE_H
#define GPURUN_BASE_READ_FILE_H

#include <stddef.h>

/* read_whole_file's answer for a path that is not a regular file (a FIFO,
 * a directory, a device, a socket; a symbolic link under O_NOFOLLOW). */
#define READ_FILE_NOT_REGULAR (-1)

/* Reads a whole regular file into a NUL-terminated malloc'd buffer (*data,
 * *size without the NUL). It never blocks on a FIFO or a device: the file
 * is opened with O_NONBLOCK and read only when fstat says it is regular.
 * open_flags: more open(2) flags (O_NOFOLLOW). Returns 0, an errno value,
 * or READ_FILE_NOT_REGULAR. */
int read_whole_file(const char *path, int open_flags, unsigned char **data, size_t *size);

/* What the file at path is, for a message: "a FIFO", "a directory",
 * "a symbolic link", "a device", "a socket", "a regular file", or "missing"
 * (lstat: a link is not followed). */
const char *file_kind(const char *path);

#endif
