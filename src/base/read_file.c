/* Reading a whole file into memory. No Lua. */
#include "base/read_file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

int read_whole_file(const char *path, unsigned char **data, size_t *size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return errno;
    int error = 0;
    struct stat st;
    unsigned char *buffer = NULL;
    size_t done = 0;
    if (fstat(fd, &st) != 0) {
        error = errno;
    } else if (!S_ISREG(st.st_mode)) {
        error = EISDIR;
    } else if (!(buffer = malloc((size_t)st.st_size + 1))) {
        error = ENOMEM;
    } else {
        while (done < (size_t)st.st_size) {
            ssize_t n = read(fd, buffer + done, (size_t)st.st_size - done);
            if (n < 0 && errno == EINTR)
                continue;
            if (n < 0) {
                error = errno;
                break;
            }
            if (n == 0)
                break; /* shrank under us: what was read is what there is */
            done += (size_t)n;
        }
    }
    close(fd);
    if (error) {
        free(buffer);
        return error;
    }
    buffer[done] = '\0';
    *data = buffer;
    *size = done;
    return 0;
}
