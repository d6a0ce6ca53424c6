/* The library tests/import_slots_test.c redirects the imports of: linked
 * with -z now, so every slot of its offset table is read-only after
 * relocation and each write to one goes through mprotect. */
#include <stdlib.h>
#include <unistd.h>

const char *import_slots_library_getenv(const char *name);
int (*import_slots_library_unlink(void))(const char *);

const char *import_slots_library_getenv(const char *name)
{
    return getenv(name);
}

/* unlink's address: read from the offset table (a GLOB_DAT slot). */
int (*import_slots_library_unlink(void))(const char *)
{
    return unlink;
}
