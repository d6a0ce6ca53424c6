/* The one rule for keeping a compiler's or linker's log: its first and its
 * last lines, with the number of bytes left out between them. One
 * diagnostic per token of a long line can make a log of gigabytes that
 * nobody reads whole. NVRTC's log and nvJitLink's logs are kept by it. No
 * Lua. */
#ifndef GPURUN_BASE_LOG_CAP_H
#define GPURUN_BASE_LOG_CAP_H

#include <stddef.h>

#define LOG_CAP_HEAD (48 * 1024)
#define LOG_CAP_TAIL (16 * 1024)

/* Cuts log (size bytes, NUL-terminated, malloc'd) to its head and tail, at
 * line ends where there are any near the cut, marking the cut with
 * "[gpurun: N bytes of <whose> left out here]" (whose: "NVRTC's log").
 * Returns the log to keep (log itself when short, or when memory runs out),
 * having freed the other. */
char *log_cap(char *log, size_t size, const char *whose);

#endif
