/* Finds every file a CUDA C++ program's #include lines could name. No Lua. */
#ifndef GPURUN_BASE_INCLUDE_SCAN_H
#define GPURUN_BASE_INCLUDE_SCAN_H

#include <stddef.h>

#include "base/nvrtc_compile.h"

/* Called once per file found, in a fixed order: its path and contents. */
typedef void (*include_visit)(void *context, const char *path, const void *text, size_t size);

/* Walks the program's source, its pre-included headers and, recursively,
 * what they include, resolved in the including file's directory, "." and the
 * request's include paths (--include-path=, -I). Returns 1, or 0 when an
 * #include cannot be followed. */
int include_scan(const struct nvrtc_request *request, include_visit visit, void *context);

#endif
