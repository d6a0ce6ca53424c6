/* fork, pipe and waitpid for base/child_call.h. The progress word lives in
 * a shared anonymous mapping, so it survives the child's crash. */
#include "base/child_call.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

int child_reply(int fd, const void *data, size_t size)
{
    const char *at = data;
    while (size > 0) {
        ssize_t n = write(fd, at, size);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return 0;
        at += n;
        size -= (size_t)n;
    }
    return 1;
}

static void run_child(void (*fn)(void *, int, struct child_progress *), void *arg, int fd,
                      struct child_progress *progress)
{
    /* A crash ends the child quietly, for the parent to report, past any
     * handler the parent (or a sanitizer's runtime) installed. */
    static const int defaults[] = {SIGINT, SIGTERM, SIGPIPE, SIGSEGV, SIGBUS, SIGABRT, SIGFPE,
                                   SIGILL};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        signal(defaults[i], SIG_DFL);
    fn(arg, fd, progress);
    _exit(0);
}

/* Reads until end of file. 0 when memory runs out (the rest is drained). */
static int read_all(int fd, struct child_answer *answer)
{
    size_t capacity = 0;
    int ok = 1;
    char chunk[65536];
    for (;;) {
        ssize_t n = read(fd, chunk, sizeof chunk);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return ok;
        if (!ok)
            continue;
        if (answer->size + (size_t)n > capacity) {
            size_t grown = capacity ? capacity * 2 : sizeof chunk;
            while (grown < answer->size + (size_t)n)
                grown *= 2;
            char *data = realloc(answer->data, grown);
            if (!data) {
                ok = 0;
                continue;
            }
            answer->data = data;
            capacity = grown;
        }
        memcpy(answer->data + answer->size, chunk, (size_t)n);
        answer->size += (size_t)n;
    }
}

static int wait_for(pid_t pid, struct child_answer *answer)
{
    int status = 0;
    while (waitpid(pid, &status, 0) < 0) {
        if (errno != EINTR)
            return 0;
    }
    if (WIFSIGNALED(status))
        answer->signal = WTERMSIG(status);
    else
        answer->status = WEXITSTATUS(status);
    return 1;
}

int child_call(void (*fn)(void *arg, int fd, struct child_progress *progress), void *arg,
               struct child_answer *answer, char *error, size_t error_size)
{
    memset(answer, 0, sizeof *answer);
    struct child_progress *progress = mmap(NULL, sizeof *progress, PROT_READ | PROT_WRITE,
                                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (progress == MAP_FAILED) {
        snprintf(error, error_size, "no shared page for the child process: %s", strerror(errno));
        return 0;
    }
    progress->step = 0;
    int fds[2];
    if (pipe(fds) != 0) {
        snprintf(error, error_size, "no pipe to the child process: %s", strerror(errno));
        munmap(progress, sizeof *progress);
        return 0;
    }
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        close(fds[0]);
        run_child(fn, arg, fds[1], progress);
    }
    int saved = errno;
    close(fds[1]);
    int ok = pid > 0;
    if (!ok)
        snprintf(error, error_size, "cannot start the child process: %s", strerror(saved));
    int read_ok = ok ? read_all(fds[0], answer) : 0;
    close(fds[0]);
    if (ok && !wait_for(pid, answer)) {
        snprintf(error, error_size, "cannot wait for the child process: %s", strerror(errno));
        ok = 0;
    }
    if (ok && !read_ok) {
        snprintf(error, error_size, "out of memory for the child process's answer");
        ok = 0;
    }
    answer->step = progress->step;
    munmap(progress, sizeof *progress);
    if (!ok) {
        free(answer->data);
        answer->data = NULL;
        answer->size = 0;
    }
    return ok;
}
