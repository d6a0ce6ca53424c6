/* Reading a whole file into memory. No Lua. */
#ifndef GPURUN_BASE_READ_FILE_H
#define GPURUN_BASE_READ_FILE_H

#include <stddef.h>

/* Reads a whole regular file into a NUL-terminated malloc'd buffer (*data,
 * *size without the NUL). Returns 0, or an errno value. */
int read_whole_file(const char *path, unsigned char **data, size_t *size);

#endif
