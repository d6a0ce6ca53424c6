/* One message between two processes over a Unix-domain socket: bytes and
 * file descriptors (SCM_RIGHTS). The receiver listens at a path, the
 * sender connects to it, sends, and waits for the receiver's one-byte
 * acknowledgement, so that each side learns whether the other got the
 * message. Every wait ends at a deadline. No Lua. */
#ifndef GPURUN_BASE_IPC_SOCKET_H
#define GPURUN_BASE_IPC_SOCKET_H

#include <stddef.h>

/* File descriptors a message may carry. */
#define IPC_SOCKET_MAX_FDS 8

/* Sends length bytes and fd_count descriptors to the receiver listening at
 * path, waiting up to timeout seconds in all (for the socket to appear,
 * for the receiver to accept, for its acknowledgement). 0, or -1 with
 * why in why[size]. The descriptors stay the caller's. */
int ipc_socket_send(const char *path, const unsigned char *bytes, size_t length, const int *fds,
                    int fd_count, double timeout, char *why, size_t size);

/* Listens at path (a stale socket there is replaced; anything else there
 * is refused), takes one message of at most max_bytes, acknowledges it and
 * removes the socket, waiting up to timeout seconds in all. 0 with
 * *bytes (malloc'd, the caller frees), *length, fds[*fd_count] (the
 * caller's to close); or -1 with why in why[size], nothing left open. */
int ipc_socket_receive(const char *path, double timeout, size_t max_bytes, unsigned char **bytes,
                       size_t *length, int fds[IPC_SOCKET_MAX_FDS], int *fd_count, char *why,
                       size_t size);

#endif
