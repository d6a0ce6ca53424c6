/* A function run in a forked child, its answer read back through a pipe:
 * for libraries that parse outside bytes and can crash on them (nvJitLink
 * on hostile LTO-IR), so that a crash ends the child, not gpurun. The child
 * must not call the CUDA driver. No Lua. */
#ifndef GPURUN_BASE_CHILD_CALL_H
#define GPURUN_BASE_CHILD_CALL_H

#include <stddef.h>

/* What the function is doing, kept where the parent still reads it after a
 * crash: the function sets step (its own numbering) before each risky call. */
struct child_progress {
    volatile int step;
};

/* Writes all of data to the child's answer; 0 when the pipe is gone. */
int child_reply(int fd, const void *data, size_t size);

struct child_answer {
    char *data;   /* everything the child wrote, malloc'd (NULL when nothing) */
    size_t size;
    int signal;   /* the signal that ended the child, 0 when it exited */
    int status;   /* its exit status when it exited */
    int step;     /* progress->step when it ended */
};

/* Runs fn(arg, fd, progress) in a child that then exits 0, and reads what it
 * wrote to fd until it ends. Returns 1 with *answer filled (free
 * answer->data), or 0 with error saying why no child could run. SIGINT and
 * SIGTERM end the child as they would a plain process. */
int child_call(void (*fn)(void *arg, int fd, struct child_progress *progress), void *arg,
               struct child_answer *answer, char *error, size_t error_size);

#endif
