/* The C unit tests' one assertion: CHECK(ok, fmt, ...) counts a check and
 * prints the file, line and message of one that fails (check_at: the same
 * at a caller's line); a test's main ends with "NAME: N checks, M failed"
 * from the two counts. */
#ifndef GPURUN_TESTS_CHECK_H
#define GPURUN_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int checks, failures;

static int check_at(int ok, const char *file, int line, const char *fmt, ...)
{
    checks++;
    if (!ok) {
        const char *name = strrchr(file, '/');
        failures++;
        fprintf(stderr, "%s:%d: check failed: ", name ? name + 1 : file, line);
        va_list args;
        va_start(args, fmt);
        vfprintf(stderr, fmt, args);
        va_end(args);
        fputc('\n', stderr);
    }
    return ok;
}

#define CHECK(ok, ...) check_at((ok), __FILE__, __LINE__, __VA_ARGS__)

#endif
