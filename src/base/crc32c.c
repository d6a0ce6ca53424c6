/* CRC-32C, in hardware where the CPU has it. No Lua. */
#include "base/crc32c.h"

#include <string.h>

#define CRC32C_POLYNOMIAL 0x82F63B78u /* reflected */

static uint32_t table[256];

static void fill_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t crc = i;
        for (int bit = 0; bit < 8; bit++)
            crc = crc & 1 ? crc >> 1 ^ CRC32C_POLYNOMIAL : crc >> 1;
        table[i] = crc;
    }
}

static uint32_t crc32c_table(uint32_t crc, const unsigned char *p, size_t size)
{
    for (size_t i = 0; i < size; i++)
        crc = table[(crc ^ p[i]) & 0xff] ^ crc >> 8;
    return crc;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#include <nmmintrin.h>

__attribute__((target("sse4.2")))
static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t size)
{
    uint64_t wide = crc;
    for (; size >= 8; p += 8, size -= 8) {
        uint64_t word;
        memcpy(&word, p, 8);
        wide = _mm_crc32_u64(wide, word);
    }
    crc = (uint32_t)wide;
    for (; size > 0; p++, size--)
        crc = _mm_crc32_u8(crc, *p);
    return crc;
}

static int have_sse42(void)
{
    return __builtin_cpu_supports("sse4.2");
}
#else
static uint32_t crc32c_sse42(uint32_t crc, const unsigned char *p, size_t size)
{
    return crc32c_table(crc, p, size);
}

static int have_sse42(void)
{
    return 0;
}
#endif

uint32_t crc32c(const void *data, size_t size)
{
    /* Decided once: the answer cannot change while the process runs. */
    static int hardware = -1;
    if (hardware < 0) {
        int has = have_sse42();
        if (!has)
            fill_table();
        hardware = has;
    }
    uint32_t crc = 0xFFFFFFFFu;
    crc = hardware ? crc32c_sse42(crc, data, size) : crc32c_table(crc, data, size);
    return crc ^ 0xFFFFFFFFu;
}
