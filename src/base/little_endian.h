/* Little-endian integers read from and written to bytes of any alignment:
 * the layout of the device code files CUDA writes (ELF, fatbins) and of
 * the kernel cache's entries. No Lua. */
#ifndef GPURUN_BASE_LITTLE_ENDIAN_H
#define GPURUN_BASE_LITTLE_ENDIAN_H

#include <stdint.h>

static inline uint16_t read_le16(const unsigned char *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}

static inline uint32_t read_le32(const unsigned char *p)
{
    return (uint32_t)read_le16(p) | (uint32_t)read_le16(p + 2) << 16;
}

static inline uint64_t read_le64(const unsigned char *p)
{
    return (uint64_t)read_le32(p) | (uint64_t)read_le32(p + 4) << 32;
}

static inline void write_le32(unsigned char *p, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(value >> (8 * i));
}

static inline void write_le64(unsigned char *p, uint64_t value)
{
    for (int i = 0; i < 8; i++)
        p[i] = (unsigned char)(value >> (8 * i));
}

#endif
