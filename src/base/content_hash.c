/* The 128-bit FNV-1a hash of the kernel cache. No Lua. */
#include "base/content_hash.h"

uint64_t fnv1a(uint64_t hash, const void *data, size_t size)
{
    const unsigned char *p = data;
    for (size_t i = 0; i < size; i++)
        hash = (hash ^ p[i]) * 0x100000001b3ULL;
    return hash;
}

void content_hash_init(struct content_hash *hash)
{
    static const char second_seed[] = "gpurun kernel cache, second lane";
    hash->lane[0] = FNV1A_OFFSET;
    hash->lane[1] = fnv1a(FNV1A_OFFSET, second_seed, sizeof second_seed - 1);
}

void content_hash_bytes(struct content_hash *hash, const void *data, size_t size)
{
    const unsigned char *p = data;
    uint64_t a = hash->lane[0], b = hash->lane[1];
    for (size_t i = 0; i < size; i++) {
        a = (a ^ p[i]) * 0x100000001b3ULL;
        b = (b ^ p[i]) * 0x100000001b3ULL;
    }
    hash->lane[0] = a;
    hash->lane[1] = b;
}

void content_hash_field(struct content_hash *hash, const void *data, size_t size)
{
    unsigned char length[8];
    for (int i = 0; i < 8; i++)
        length[i] = (unsigned char)((uint64_t)size >> (8 * i));
    content_hash_bytes(hash, length, sizeof length);
    content_hash_bytes(hash, data, size);
}

void content_hash_digest(const struct content_hash *hash, unsigned char digest[16])
{
    for (int lane = 0; lane < 2; lane++)
        for (int i = 0; i < 8; i++)
            digest[8 * lane + i] = (unsigned char)(hash->lane[lane] >> (8 * i));
}
