/* The layout of an IPC descriptor: magic (8), version (2), kind (2),
 * length (4), device (4), dtype (4), pool id (16), count (8), bytes (8),
 * export data (64). */
#include "base/ipc_descriptor.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>

#include "base/little_endian.h"

static const char MAGIC[8] = {'g', 'p', 'u', 'r', 'u', 'n', 'I', 'P'};

void ipc_descriptor_encode(const struct ipc_descriptor *descriptor, unsigned char *out)
{
    memset(out, 0, IPC_DESCRIPTOR_BYTES);
    memcpy(out, MAGIC, sizeof MAGIC);
    out[8] = IPC_DESCRIPTOR_VERSION;
    out[10] = (unsigned char)descriptor->kind;
    write_le32(out + 12, IPC_DESCRIPTOR_BYTES);
    write_le32(out + 16, (uint32_t)descriptor->device);
    write_le32(out + 20, descriptor->dtype);
    memcpy(out + 24, descriptor->pool_id, IPC_POOL_ID_BYTES);
    write_le64(out + 40, descriptor->count);
    write_le64(out + 48, descriptor->bytes);
    memcpy(out + 56, descriptor->data, IPC_DATA_BYTES);
}

const char *ipc_descriptor_kind_name(int kind)
{
    switch (kind) {
    case IPC_KIND_POOL: return "pool";
    case IPC_KIND_BUFFER: return "buffer";
    case IPC_KIND_EVENT: return "event";
    default: return "unknown";
    }
}

int ipc_descriptor_decode(const unsigned char *bytes, size_t length,
                          struct ipc_descriptor *descriptor, char *why, size_t size)
{
    memset(descriptor, 0, sizeof *descriptor);
    if (length < 16 || memcmp(bytes, MAGIC, sizeof MAGIC) != 0) {
        if (length >= sizeof MAGIC && memcmp(bytes, MAGIC, sizeof MAGIC) == 0)
            snprintf(why, size, "truncated: %zu of %d bytes", length, IPC_DESCRIPTOR_BYTES);
        else
            snprintf(why, size, "not a gpurun IPC descriptor (%zu bytes without its magic)",
                     length);
        return -1;
    }
    unsigned version = read_le16(bytes + 8);
    if (version != IPC_DESCRIPTOR_VERSION) {
        snprintf(why, size, "descriptor version %u, this gpurun reads version %d", version,
                 IPC_DESCRIPTOR_VERSION);
        return -1;
    }
    uint32_t declared = read_le32(bytes + 12);
    if (declared != IPC_DESCRIPTOR_BYTES) {
        snprintf(why, size, "its length field says %lu bytes, a version %d descriptor has %d",
                 (unsigned long)declared, IPC_DESCRIPTOR_VERSION, IPC_DESCRIPTOR_BYTES);
        return -1;
    }
    if (length != IPC_DESCRIPTOR_BYTES) {
        snprintf(why, size, "%s: %zu of %d bytes", length < IPC_DESCRIPTOR_BYTES ? "truncated"
                                                      : "trailing bytes",
                 length, IPC_DESCRIPTOR_BYTES);
        return -1;
    }
    descriptor->kind = read_le16(bytes + 10);
    if (descriptor->kind < IPC_KIND_POOL || descriptor->kind > IPC_KIND_EVENT) {
        snprintf(why, size, "unknown descriptor kind %d", descriptor->kind);
        return -1;
    }
    uint32_t device = read_le32(bytes + 16);
    if (device > 0x7fffffff) {
        snprintf(why, size, "device %lu out of range", (unsigned long)device);
        return -1;
    }
    descriptor->device = (int)device;
    descriptor->dtype = read_le32(bytes + 20);
    memcpy(descriptor->pool_id, bytes + 24, IPC_POOL_ID_BYTES);
    descriptor->count = read_le64(bytes + 40);
    descriptor->bytes = read_le64(bytes + 48);
    memcpy(descriptor->data, bytes + 56, IPC_DATA_BYTES);
    return 0;
}

int ipc_new_pool_id(unsigned char id[IPC_POOL_ID_BYTES])
{
    size_t got = 0;
    while (got < IPC_POOL_ID_BYTES) {
        ssize_t n = getrandom(id + got, IPC_POOL_ID_BYTES - got, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        got += (size_t)n;
    }
    return 0;
}
