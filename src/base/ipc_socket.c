/* A message: a 4-byte little-endian length, with the descriptors attached
 * to it, then the bytes; the receiver answers one byte. Nonblocking sockets
 * and poll() against one deadline, so that no wait outlives the timeout. */
#define _GNU_SOURCE
#include "base/ipc_socket.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "base/little_endian.h"

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* Milliseconds left before the deadline, at least 0. */
static int left_ms(double deadline)
{
    double left = deadline - now();
    if (left <= 0)
        return 0;
    return left > 3600.0 ? 3600000 : (int)(left * 1000.0) + 1;
}

/* Waits for `events` on fd until the deadline: 1 ready, 0 timed out, -1 error. */
static int wait_for(int fd, short events, double deadline)
{
    for (;;) {
        struct pollfd p = {fd, events, 0};
        int ready = poll(&p, 1, left_ms(deadline));
        if (ready < 0 && errno == EINTR)
            continue;
        return ready;
    }
}

static int set_address(const char *path, struct sockaddr_un *address, char *why, size_t size)
{
    memset(address, 0, sizeof *address);
    address->sun_family = AF_UNIX;
    size_t length = strlen(path);
    if (length == 0 || length >= sizeof address->sun_path) {
        snprintf(why, size, "socket path '%s' is %zu bytes: a Unix socket's path has 1 to %zu",
                 path, length, sizeof address->sun_path - 1);
        return -1;
    }
    memcpy(address->sun_path, path, length);
    return 0;
}

static int fail(char *why, size_t size, const char *what, const char *path)
{
    snprintf(why, size, "%s '%s': %s", what, path, strerror(errno));
    return -1;
}

/* ---- sending ------------------------------------------------------------- */

static int connect_until(const char *path, const struct sockaddr_un *address, double deadline,
                         double timeout, char *why, size_t size)
{
    for (;;) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return fail(why, size, "making a socket for", path);
        if (connect(fd, (const struct sockaddr *)address, sizeof *address) == 0) {
            fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
            return fd;
        }
        int error = errno;
        close(fd);
        /* The receiver may not listen yet: wait for it until the deadline. */
        if (error != ENOENT && error != ECONNREFUSED && error != EINTR && error != EAGAIN) {
            errno = error;
            return fail(why, size, "connecting to", path);
        }
        if (left_ms(deadline) == 0) {
            snprintf(why, size, "no receiver at '%s' within %.3g s (%s): start "
                                "gpurun.ipc.receive there first, or pass a longer timeout",
                     path, timeout, error == ENOENT ? "no such socket" : "connection refused");
            return -1;
        }
        struct timespec pause = {0, 5000000};
        nanosleep(&pause, NULL);
    }
}

/* Writes all of bytes, waiting until the deadline. */
static int write_all(int fd, const unsigned char *bytes, size_t length, double deadline,
                     double timeout, char *why, size_t size)
{
    size_t done = 0;
    while (done < length) {
        ssize_t n = send(fd, bytes + done, length - done, MSG_NOSIGNAL);
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            snprintf(why, size, "the receiver closed the connection after %zu of %zu bytes (%s)",
                     done, length, strerror(errno));
            return -1;
        }
        if (wait_for(fd, POLLOUT, deadline) == 0) {
            snprintf(why, size, "timed out after %.3g s sending %zu bytes (%zu sent)", timeout,
                     length, done);
            return -1;
        }
    }
    return 0;
}

int ipc_socket_send(const char *path, const unsigned char *bytes, size_t length, const int *fds,
                    int fd_count, double timeout, char *why, size_t size)
{
    struct sockaddr_un address;
    if (set_address(path, &address, why, size) != 0)
        return -1;
    if (fd_count < 0 || fd_count > IPC_SOCKET_MAX_FDS || length > UINT32_MAX) {
        snprintf(why, size, "a message carries at most %d descriptors and 4 GiB",
                 IPC_SOCKET_MAX_FDS);
        return -1;
    }
    double deadline = now() + timeout;
    int fd = connect_until(path, &address, deadline, timeout, why, size);
    if (fd < 0)
        return -1;
    unsigned char header[4];
    write_le32(header, (uint32_t)length);
    union {
        struct cmsghdr align;
        char space[CMSG_SPACE(sizeof(int) * IPC_SOCKET_MAX_FDS)];
    } control;
    memset(&control, 0, sizeof control);
    struct iovec part = {header, sizeof header};
    struct msghdr message = {0};
    message.msg_iov = &part;
    message.msg_iovlen = 1;
    if (fd_count > 0) {
        message.msg_control = control.space;
        message.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)fd_count);
        struct cmsghdr *rights = CMSG_FIRSTHDR(&message);
        rights->cmsg_level = SOL_SOCKET;
        rights->cmsg_type = SCM_RIGHTS;
        rights->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)fd_count);
        memcpy(CMSG_DATA(rights), fds, sizeof(int) * (size_t)fd_count);
    }
    int result = -1;
    ssize_t sent;
    do
        sent = sendmsg(fd, &message, MSG_NOSIGNAL);
    while (sent < 0 && errno == EINTR);
    if (sent != (ssize_t)sizeof header) {
        /* A fresh socket's buffer takes 4 bytes at once; anything else is
         * a receiver gone. */
        snprintf(why, size, "the receiver at '%s' closed the connection (%s)", path,
                 sent < 0 ? strerror(errno) : "short write");
        goto done;
    }
    if (write_all(fd, bytes, length, deadline, timeout, why, size) != 0)
        goto done;
    unsigned char ack = 0;
    for (;;) {
        ssize_t n = recv(fd, &ack, 1, 0);
        if (n == 1 && ack == 1) {
            result = 0;
            break;
        }
        if (n == 0 || (n == 1 && ack != 1) || (n < 0 && errno != EAGAIN && errno != EINTR)) {
            snprintf(why, size, "the receiver at '%s' closed the connection before confirming "
                                "the message (did it fail or exit?)", path);
            break;
        }
        if (wait_for(fd, POLLIN, deadline) == 0) {
            snprintf(why, size, "the receiver at '%s' did not confirm the message within "
                                "%.3g s", path, timeout);
            break;
        }
    }
done:
    close(fd);
    return result;
}

/* ---- receiving ----------------------------------------------------------- */

/* Binds a listening socket at path: a socket left there by a receiver that
 * is gone is replaced, anything else is refused. */
static int listen_at(const char *path, const struct sockaddr_un *address, char *why, size_t size)
{
    struct stat info;
    if (lstat(path, &info) == 0) {
        if (!S_ISSOCK(info.st_mode)) {
            snprintf(why, size, "'%s' exists and is not a socket (choose another path)", path);
            return -1;
        }
        unlink(path);
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0)
        return fail(why, size, "making a socket for", path);
    if (bind(fd, (const struct sockaddr *)address, sizeof *address) != 0
        || listen(fd, 1) != 0) {
        int error = errno;
        close(fd);
        errno = error;
        return fail(why, size, "listening at", path);
    }
    return fd;
}

/* Reads exactly length bytes (the header's descriptors into fds). */
static int read_all(int fd, unsigned char *bytes, size_t length, int *fds, int *fd_count,
                    double deadline, double timeout, char *why, size_t size)
{
    size_t done = 0;
    while (done < length) {
        union {
            struct cmsghdr align;
            char space[CMSG_SPACE(sizeof(int) * IPC_SOCKET_MAX_FDS)];
        } control;
        struct iovec part = {bytes + done, length - done};
        struct msghdr message = {0};
        message.msg_iov = &part;
        message.msg_iovlen = 1;
        if (fds) {
            message.msg_control = control.space;
            message.msg_controllen = sizeof control.space;
        }
        ssize_t n = recvmsg(fd, &message, MSG_CMSG_CLOEXEC);
        if (n > 0 && fds) {
            for (struct cmsghdr *c = CMSG_FIRSTHDR(&message); c; c = CMSG_NXTHDR(&message, c)) {
                if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
                    continue;
                size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                const unsigned char *data = CMSG_DATA(c);
                for (size_t i = 0; i < count; i++) {
                    int received;
                    memcpy(&received, data + i * sizeof(int), sizeof(int));
                    if (*fd_count < IPC_SOCKET_MAX_FDS)
                        fds[(*fd_count)++] = received;
                    else
                        close(received);
                }
            }
            fds = NULL; /* descriptors come with the first byte only */
        }
        if (n > 0) {
            done += (size_t)n;
            continue;
        }
        if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
            snprintf(why, size, "the sender closed the connection after %zu of %zu bytes", done,
                     length);
            return -1;
        }
        if (wait_for(fd, POLLIN, deadline) == 0) {
            snprintf(why, size, "timed out after %.3g s with %zu of %zu bytes of the message",
                     timeout, done, length);
            return -1;
        }
    }
    return 0;
}

static int take_message(int connection, double deadline, double timeout, size_t max_bytes,
                        unsigned char **bytes, size_t *length, int *fds, int *fd_count,
                        char *why, size_t size)
{
    unsigned char header[4];
    if (read_all(connection, header, sizeof header, fds, fd_count, deadline, timeout, why,
                 size) != 0)
        return -1;
    *length = read_le32(header);
    if (*length > max_bytes) {
        snprintf(why, size, "the message announces %zu bytes, more than the %zu a message "
                            "may have", *length, max_bytes);
        return -1;
    }
    *bytes = malloc(*length ? *length : 1);
    if (*bytes == NULL) {
        snprintf(why, size, "out of memory for a %zu-byte message", *length);
        return -1;
    }
    if (read_all(connection, *bytes, *length, NULL, NULL, deadline, timeout, why, size) != 0)
        return -1;
    unsigned char ack = 1;
    if (send(connection, &ack, 1, MSG_NOSIGNAL) != 1) {
        snprintf(why, size, "the sender closed the connection before the acknowledgement");
        return -1;
    }
    return 0;
}

int ipc_socket_receive(const char *path, double timeout, size_t max_bytes, unsigned char **bytes,
                       size_t *length, int fds[IPC_SOCKET_MAX_FDS], int *fd_count, char *why,
                       size_t size)
{
    *bytes = NULL;
    *length = 0;
    *fd_count = 0;
    struct sockaddr_un address;
    if (set_address(path, &address, why, size) != 0)
        return -1;
    double deadline = now() + timeout;
    int listener = listen_at(path, &address, why, size);
    if (listener < 0)
        return -1;
    int result = -1, connection = -1;
    for (;;) {
        connection = accept4(listener, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (connection >= 0)
            break;
        if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
            fail(why, size, "accepting a connection at", path);
            goto done;
        }
        if (wait_for(listener, POLLIN, deadline) == 0) {
            snprintf(why, size, "no sender connected to '%s' within %.3g s", path, timeout);
            goto done;
        }
    }
    result = take_message(connection, deadline, timeout, max_bytes, bytes, length, fds,
                          fd_count, why, size);
done:
    if (connection >= 0)
        close(connection);
    close(listener);
    unlink(path);
    if (result != 0) {
        free(*bytes);
        *bytes = NULL;
        for (int i = 0; i < *fd_count; i++)
            close(fds[i]);
        *fd_count = 0;
    }
    return result;
}
