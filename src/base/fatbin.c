/* The PTX a fatbin carries: the walk over its entries and the PTX text out
 * of one, decompressed where nvcc compressed it. */
#include "base/fatbin.h"
#include "base/little_endian.h"
#include "base/zstd_loader.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An entry's header, as nvcc 12 and 13 write it (the offsets measured on
 * their fatbins): u16 kind, u16 version, u32 the header's size (the payload
 * follows it), u64 the payload's size (padded; the next entry follows it);
 * at 16 u32 the compressed size, at 28 u32 the arch (90 for sm_90), at 40
 * u64 flags, at 56 u64 the uncompressed size (0 when not compressed). */
#define ENTRY_MIN_HEADER_SIZE 64
#define ENTRY_COMPRESSED_SIZE 16
#define ENTRY_FLAGS 40
#define ENTRY_UNCOMPRESSED_SIZE 56
/* Flags: compressed with zstd (nvcc's default since 12.8, and --compress-mode
 * size), or in the older format that --compress-mode speed still writes,
 * which gpurun does not read. */
#define FLAG_ZSTD 0x8000u
#define FLAG_OTHER_COMPRESSION 0x2000u

static const unsigned char ZSTD_MAGIC[4] = {0x28, 0xB5, 0x2F, 0xFD};

__attribute__((format(printf, 3, 4)))
static char *none(char *why, size_t why_size, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(why, why_size, fmt, args);
    va_end(args);
    return NULL;
}

/* The text up to its first NUL, copied and NUL-terminated. */
static char *copy_text(const unsigned char *bytes, size_t size, size_t *text_size, char *why,
                       size_t why_size)
{
    const unsigned char *nul = memchr(bytes, '\0', size);
    size_t length = nul ? (size_t)(nul - bytes) : size;
    if (length == 0)
        return none(why, why_size, "its PTX entry is empty");
    char *text = malloc(length + 1);
    if (!text)
        return none(why, why_size, "not enough memory for its PTX (%zu bytes)", length);
    memcpy(text, bytes, length);
    text[length] = '\0';
    *text_size = length;
    return text;
}

unsigned char *fatbin_unpack(const unsigned char *entry, uint32_t header_size,
                             uint64_t payload_size, uint64_t max_size, size_t *unpacked_size,
                             char *why, size_t why_size)
{
    uint32_t compressed = read_le32(entry + ENTRY_COMPRESSED_SIZE);
    uint64_t declared = read_le64(entry + ENTRY_UNCOMPRESSED_SIZE);
    const unsigned char *payload = entry + header_size;
    if (compressed < sizeof ZSTD_MAGIC || compressed > payload_size
        || memcmp(payload, ZSTD_MAGIC, sizeof ZSTD_MAGIC) != 0)
        return (unsigned char *)none(why, why_size, "its compressed code is not a zstd frame within its entry");
    if (declared == 0 || declared > max_size
        || declared > (uint64_t)compressed * FATBIN_PTX_MAX_RATIO)
        return (unsigned char *)none(why, why_size, "its compressed code claims %llu bytes unpacked, from %u: "
                    "not believed", (unsigned long long)declared, compressed);
    if (zstd_loader_load() != 0)
        return (unsigned char *)none(why, why_size, "its code is compressed and %s", zstd_loader_error());
    if (zstd.ZSTD_getFrameContentSize(payload, compressed) != declared)
        return (unsigned char *)none(why, why_size, "its compressed code's frame does not say the %llu bytes "
                    "its entry does", (unsigned long long)declared);
    unsigned char *bytes = malloc((size_t)declared);
    if (!bytes)
        return (unsigned char *)none(why, why_size, "not enough memory to unpack its code (%llu bytes)",
                    (unsigned long long)declared);
    size_t made = zstd.ZSTD_decompress(bytes, (size_t)declared, payload, compressed);
    if (zstd.ZSTD_isError(made) || made != declared) {
        free(bytes);
        return (unsigned char *)none(why, why_size, "its compressed code does not unpack to the %llu bytes it "
                    "declares", (unsigned long long)declared);
    }
    *unpacked_size = (size_t)declared;
    return bytes;
}

/* The compressed PTX entry at `entry`, its payload of payload_size bytes
 * lying within the file. */
static char *decompress(const unsigned char *entry, uint32_t header_size, uint64_t payload_size,
                        size_t *text_size, char *why, size_t why_size)
{
    size_t size = 0;
    unsigned char *bytes = fatbin_unpack(entry, header_size, payload_size, FATBIN_PTX_MAX_SIZE,
                                         &size, why, why_size);
    if (!bytes)
        return NULL;
    char *copy = copy_text(bytes, size, text_size, why, why_size);
    free(bytes);
    return copy;
}

/* A walk over the entries of a fatbin's first container, each step
 * checked against the container's bytes: the one reading of the layout
 * that both the check and the PTX reader go by. */
struct entry_walk {
    const unsigned char *data;
    size_t first, at, end;   /* the first entry's offset, this one's, the end's */
    unsigned number;         /* of the entry at `at`, from 1 */
    uint32_t header_size;    /* of the entry `next` gave */
    uint64_t payload_size;
};

enum walk_step { WALK_ENTRY, WALK_END, WALK_NO_HEADER, WALK_PAST_END };

/* 0 when the container's header does not fit within its size bytes. */
static int walk_start(struct entry_walk *walk, const unsigned char *data, size_t size)
{
    if (size < FATBIN_HEADER_SIZE)
        return 0;
    uint16_t header_size = read_le16(data + 6);
    uint64_t entries = read_le64(data + 8);
    if (header_size < FATBIN_HEADER_SIZE || header_size > size || entries > size - header_size)
        return 0;
    *walk = (struct entry_walk){data, header_size, header_size, header_size + (size_t)entries,
                                0, 0, 0};
    return 1;
}

/* The entry at walk->at, when its header and code lie within the
 * container (then `walk_advance` moves past it), or why the walk ends. */
static enum walk_step walk_next(struct entry_walk *walk)
{
    if (walk->at >= walk->end)
        return WALK_END;
    walk->number++;
    size_t left = walk->end - walk->at;
    const unsigned char *entry = walk->data + walk->at;
    if (left < ENTRY_MIN_HEADER_SIZE)
        return WALK_NO_HEADER;
    walk->header_size = read_le32(entry + 4);
    walk->payload_size = read_le64(entry + 8);
    if (walk->header_size < ENTRY_MIN_HEADER_SIZE || walk->header_size > left)
        return WALK_NO_HEADER;
    if (walk->payload_size > left - walk->header_size)
        return WALK_PAST_END;
    return WALK_ENTRY;
}

static void walk_advance(struct entry_walk *walk)
{
    walk->at += walk->header_size + (size_t)walk->payload_size;
}

/* What the driver will read of one entry whose bytes lie within the
 * fatbin: plain code as it is, zstd code unpacked, each given to `check`;
 * an entry compressed in a format gpurun cannot unpack is refused, since
 * nothing then says the driver can read it safely. */
static int check_content(const unsigned char *entry, unsigned number, size_t at,
                         uint32_t header_size, uint64_t payload_size, fatbin_content_check check,
                         char *why, size_t why_size)
{
    uint64_t flags = read_le64(entry + ENTRY_FLAGS);
    unsigned kind = read_le16(entry);
    char detail[256] = "";
    if (flags & FLAG_OTHER_COMPRESSION) {
        snprintf(why, why_size, "is refused: its entry %u (at byte %zu) is compressed in a format "
                 "gpurun cannot check (nvcc --compress-mode=speed); build it with "
                 "--compress-mode=default or none", number, at);
        return 0;
    }
    if (!(flags & FLAG_ZSTD)) {
        if (read_le32(entry + ENTRY_COMPRESSED_SIZE) != 0
            || read_le64(entry + ENTRY_UNCOMPRESSED_SIZE) != 0) {
            snprintf(why, why_size, "is damaged: its entry %u (at byte %zu) is not compressed but "
                     "gives compressed sizes", number, at);
            return 0;
        }
        if (check(kind, entry + header_size, (size_t)payload_size, detail, sizeof detail))
            return 1;
    } else {
        size_t size = 0;
        unsigned char *bytes = fatbin_unpack(entry, header_size, payload_size,
                                             FATBIN_ENTRY_MAX_UNPACKED, &size, detail,
                                             sizeof detail);
        int ok = bytes && check(kind, bytes, size, detail, sizeof detail);
        free(bytes);
        if (ok)
            return 1;
    }
    snprintf(why, why_size, "is damaged: its entry %u (at byte %zu): %s", number, at, detail);
    return 0;
}

int fatbin_check_entries(const unsigned char *data, size_t size, fatbin_content_check check,
                         char *why, size_t why_size)
{
    struct entry_walk walk;
    if (!walk_start(&walk, data, size)) {
        snprintf(why, why_size, "is truncated: its header says it ends past its %zu bytes", size);
        return 0;
    }
    for (enum walk_step step; (step = walk_next(&walk)) != WALK_END; walk_advance(&walk)) {
        const unsigned char *entry = data + walk.at;
        if (step == WALK_NO_HEADER) {
            snprintf(why, why_size, "is damaged: its entry %u (at byte %zu) has no whole header "
                     "within the %zu bytes its header gives the entries", walk.number, walk.at,
                     walk.end - walk.first);
            return 0;
        }
        if (step == WALK_PAST_END) {
            snprintf(why, why_size, "is damaged: its entry %u (at byte %zu) says its code runs "
                     "%llu bytes, past the fatbin's end at byte %zu", walk.number, walk.at,
                     (unsigned long long)walk.payload_size, walk.end);
            return 0;
        }
        uint64_t unpacked = read_le64(entry + ENTRY_UNCOMPRESSED_SIZE);
        if (unpacked > FATBIN_ENTRY_MAX_UNPACKED) {
            snprintf(why, why_size, "is damaged: its entry %u (at byte %zu) says its code "
                     "unpacks to %llu bytes, more than any GPU code is", walk.number, walk.at,
                     (unsigned long long)unpacked);
            return 0;
        }
        if (!check_content(entry, walk.number, walk.at, walk.header_size, walk.payload_size,
                           check, why, why_size))
            return 0;
    }
    return 1;
}

char *fatbin_ptx(const unsigned char *data, size_t size, size_t *ptx_size, char *why,
                 size_t why_size)
{
    if (size < FATBIN_HEADER_SIZE || read_le32(data) != FATBIN_MAGIC)
        return none(why, why_size, "is not a fatbin");
    struct entry_walk walk;
    if (!walk_start(&walk, data, size))
        return none(why, why_size, "is truncated");
    const unsigned char *compressed = NULL;
    int unreadable = 0;
    uint32_t compressed_header = 0;
    uint64_t compressed_payload = 0;
    /* A damaged entry ends the walk: what came before it still counts. */
    for (; walk_next(&walk) == WALK_ENTRY; walk_advance(&walk)) {
        const unsigned char *entry = data + walk.at;
        uint64_t flags = read_le64(entry + ENTRY_FLAGS);
        if (read_le16(entry) == FATBIN_KIND_PTX && walk.payload_size > 0) {
            if (!(flags & (FLAG_ZSTD | FLAG_OTHER_COMPRESSION)))
                return copy_text(entry + walk.header_size, (size_t)walk.payload_size, ptx_size,
                                 why, why_size);
            unreadable |= (flags & FLAG_OTHER_COMPRESSION) != 0;
            if ((flags & FLAG_ZSTD) && !(flags & FLAG_OTHER_COMPRESSION) && !compressed) {
                compressed = entry;
                compressed_header = walk.header_size;
                compressed_payload = walk.payload_size;
            }
        }
    }
    if (!compressed && unreadable)
        return none(why, why_size, "its PTX is compressed in a format gpurun does not read "
                    "(nvcc --compress-mode=speed)");
    if (!compressed)
        return none(why, why_size, "carries no PTX");
    return decompress(compressed, compressed_header, compressed_payload, ptx_size, why,
                      why_size);
}
