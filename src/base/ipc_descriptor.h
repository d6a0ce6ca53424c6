/* The bytes that name a shared pool, buffer or event to another process
 * (MemoryPool:get_allocation_handle, Buffer:ipc_descriptor,
 * Event:ipc_descriptor): one fixed layout, little-endian, with a magic, a
 * version and its own length, so that a foreign, truncated or newer one is
 * refused before anything is read past its end. No Lua. */
#ifndef GPURUN_BASE_IPC_DESCRIPTOR_H
#define GPURUN_BASE_IPC_DESCRIPTOR_H

#include <stddef.h>
#include <stdint.h>

#define IPC_DESCRIPTOR_VERSION 1
#define IPC_DESCRIPTOR_BYTES 120
#define IPC_POOL_ID_BYTES 16
#define IPC_DATA_BYTES 64

enum ipc_descriptor_kind { IPC_KIND_POOL = 1, IPC_KIND_BUFFER = 2, IPC_KIND_EVENT = 3 };

struct ipc_descriptor {
    int kind;                                /* enum ipc_descriptor_kind */
    int device;                              /* the exporter's device ordinal */
    uint32_t dtype;                          /* a buffer's, as base/dtype.h numbers them */
    unsigned char pool_id[IPC_POOL_ID_BYTES]; /* the exporting pool's (none for an event) */
    uint64_t count;                          /* a buffer's elements; a pool's max_size */
    uint64_t bytes;                          /* a buffer's size in bytes */
    unsigned char data[IPC_DATA_BYTES];      /* the driver's export data or event handle */
};

/* Writes the descriptor's IPC_DESCRIPTOR_BYTES bytes to out. */
void ipc_descriptor_encode(const struct ipc_descriptor *descriptor, unsigned char *out);

/* Reads length bytes into *descriptor: 0, or -1 with why in why[size]
 * ("truncated: 12 of 120 bytes"). Only the layout is checked here. */
int ipc_descriptor_decode(const unsigned char *bytes, size_t length,
                          struct ipc_descriptor *descriptor, char *why, size_t size);

/* "pool", "buffer", "event", or "unknown". */
const char *ipc_descriptor_kind_name(int kind);

/* Fills id with random bytes (the identity of a pool shared between
 * processes): 0, or -1 where the system gives none. */
int ipc_new_pool_id(unsigned char id[IPC_POOL_ID_BYTES]);

#endif
