/* Tests for src/base/import_slots.c: redirecting a library's imports, and
 * what is left when its offset table cannot be written. The library is
 * tests/import_slots_library.c; this program's own mprotect refuses write
 * access as often as a case asks, and each case runs in a child process
 * (import_slots_redirect is called once per process). No Lua.
 *
 * Ends with "import_slots_test: N checks, M failed" and exits 1 on a
 * failure. */
#define _GNU_SOURCE
#include "base/import_slots.h"
#include "check.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

const char *import_slots_library_getenv(const char *name);
int (*import_slots_library_unlink(void))(const char *);

/* Requests for write access still to refuse; -1: all of them. */
static int refusals;

int mprotect(void *address, size_t length, int protection)
{
    if ((protection & PROT_WRITE) && refusals != 0) {
        if (refusals > 0)
            refusals--;
        errno = EACCES;
        return -1;
    }
    return (int)syscall(SYS_mprotect, address, length, protection);
}

static char *(*real_getenv)(const char *);
static int (*real_unlink)(const char *);
static int hooked_calls;

static char *hook_getenv(const char *name)
{
    hooked_calls++;
    return real_getenv(name);
}

static int hook_unlink(const char *path)
{
    hooked_calls++;
    return real_unlink(path);
}

static const struct import_hook hooks[] = {
    {"getenv", (void *)hook_getenv, (void **)&real_getenv},
    {"unlink", (void *)hook_unlink, (void **)&real_unlink},
};

/* Redirects the library's imports with `refusing` write requests refused,
 * then calls into it: in a child, which exits with its failure count. */
static void redirect_case(const char *what, int refusing)
{
    fflush(stderr);
    pid_t child = fork();
    if (child == 0) {
        failures = 0;
        refusals = refusing;
        const char *why = import_slots_redirect((const void *)import_slots_library_getenv,
                                                "the test library", hooks, 2, NULL, 0);
        refusals = 0;
        const char *home = import_slots_library_getenv("IMPORT_SLOTS_TEST");
        int (*unlink_slot)(const char *) = import_slots_library_unlink();
        if (refusing == 0) {
            CHECK(why == NULL, "%s: %s", what, why);
            CHECK(hooked_calls == 1, "%s: the hook ran %d times, not once", what, hooked_calls);
            CHECK(unlink_slot == hook_unlink, "%s: unlink's slot not redirected", what);
        } else {
            CHECK(why && strstr(why, "mprotect refused to make the test library's offset table "
                                     "writable (Permission denied)"),
                  "%s: %s", what, why ? why : "(redirected)");
            CHECK(hooked_calls == 0, "%s: the hook ran %d times", what, hooked_calls);
            CHECK(unlink_slot == unlink, "%s: unlink's slot is %p, not unlink", what,
                  (void *)unlink_slot);
        }
        CHECK(home && strcmp(home, "here") == 0, "%s: getenv gave %s", what, home ? home : "NULL");
        fflush(stderr);
        _exit(failures ? 1 : 0);
    }
    int status = 0;
    waitpid(child, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s: the child %s %d", what,
          WIFEXITED(status) ? "exited with" : "was killed by signal",
          WIFEXITED(status) ? WEXITSTATUS(status) : WTERMSIG(status));
}

int main(void)
{
    setenv("IMPORT_SLOTS_TEST", "here", 1);
    redirect_case("every slot written", 0);
    redirect_case("mprotect refusing always", -1);
    redirect_case("mprotect refusing once, then allowing the slots to be put back", 1);
    printf("import_slots_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
