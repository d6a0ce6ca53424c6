/* The 128-bit FNV-1a hash the kernel cache names entries by and checks
 * the files NVRTC read with: two 64-bit lanes from different seeds. Small,
 * well known, and plenty for naming files and catching changes and damage;
 * nothing here defends against a deliberate collision. No Lua. */
#ifndef GPURUN_BASE_CONTENT_HASH_H
#define GPURUN_BASE_CONTENT_HASH_H

#include <stddef.h>
#include <stdint.h>

#define FNV1A_OFFSET 0xcbf29ce484222325ULL

/* One 64-bit FNV-1a lane: hash continued over size bytes of data. */
uint64_t fnv1a(uint64_t hash, const void *data, size_t size);

struct content_hash {
    uint64_t lane[2];
};

void content_hash_init(struct content_hash *hash);

/* Raw bytes, as a file's content is hashed. */
void content_hash_bytes(struct content_hash *hash, const void *data, size_t size);

/* One length-prefixed field, so that ("ab", "c") and ("a", "bc") differ. */
void content_hash_field(struct content_hash *hash, const void *data, size_t size);

/* The 16 bytes of the hash, little-endian lane by lane. */
void content_hash_digest(const struct content_hash *hash, unsigned char digest[16]);

#endif
