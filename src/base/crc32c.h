/* CRC-32C (Castagnoli), the checksum the kernel cache's entries carry: the
 * one storage formats use to catch torn writes and flipped bits (iSCSI,
 * ext4's metadata, LevelDB's blocks), in hardware on x86-64 with SSE4.2,
 * from a table elsewhere. No Lua. */
#ifndef GPURUN_BASE_CRC32C_H
#define GPURUN_BASE_CRC32C_H

#include <stddef.h>
#include <stdint.h>

/* The CRC-32C of size bytes at data (crc32c("123456789", 9) = 0xE3069283). */
uint32_t crc32c(const void *data, size_t size);

#endif
