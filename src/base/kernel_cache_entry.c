/* The kernel cache's entries as bytes (base/kernel_cache_entry.h): the
 * key, and the file an entry is, encoded and decoded. */
#include "base/kernel_cache_entry.h"

#include "base/content_hash.h"
#include "base/crc32c.h"
#include "base/little_endian.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* An entry is one file named by the 128-bit key in hex:
 *
 *   header  "GPURUNKC" | u32 format | u32 target | u64 payload length |
 *           u64 payload CRC-32C | 16-byte key           (48 bytes, little-endian)
 *   payload u64 n, code | u64 n, log | u64 count, then per name expression:
 *           u64 n, expression | u64 n, lowered name |
 *           u64 n, kernel signatures | u64 n, why there are none ("" when there are) |
 *           u64 n, what NVRTC read (base/nvrtc_inputs.h's records)
 *
 * The key covers what a compile is given (source, name, options, target,
 * name expressions, NVRTC and gpurun, the working directory); what NVRTC
 * read from outside while compiling is in the entry. A link's entry is of
 * the same layout (its info log as the log, no names, no signatures, no
 * records: nvJitLink reads nothing but its inputs), under a key of its own. The checksum catches
 * a truncated copy or a flipped bit; a reader checks the header and the
 * file's size before reading further. */
#define ENTRY_MAGIC "GPURUNKC"
#define ENTRY_FORMAT 4u /* changes with the layout and the checksum */
/* No compile makes this much; a header saying more is not believed. */
#define MAX_PAYLOAD ((uint64_t)256 << 20)

/* ---- the key ------------------------------------------------------------ */

static void key_string(struct content_hash *hash, const char *s)
{
    content_hash_field(hash, s, strlen(s));
}

static void key_count(struct content_hash *hash, size_t count)
{
    unsigned char bytes[8];
    write_le64(bytes, count);
    content_hash_field(hash, bytes, sizeof bytes);
}

/* The key: everything a compile is given. The working directory is in it
 * because NVRTC reads it on every compile (and so each entry would hold
 * it): each folder compiled from has entries of its own. Returns 0 when
 * the request cannot be cached. */
int kernel_cache_entry_key(const struct nvrtc_request *request, const char *tool_version,
                           unsigned char key[KERNEL_CACHE_KEY_SIZE])
{
    char cwd[PATH_MAX];
    if (!getcwd(cwd, sizeof cwd))
        return 0;
    struct content_hash hash;
    content_hash_init(&hash);
    key_string(&hash, "gpurun kernel cache");
    key_count(&hash, ENTRY_FORMAT);
    key_string(&hash, tool_version);
    key_string(&hash, nvrtc_compile_identity());
    key_string(&hash, cwd);
    key_string(&hash, nvrtc_target_name(request->target));
    key_string(&hash, request->name);
    key_string(&hash, request->source);
    key_count(&hash, request->option_count);
    for (size_t i = 0; i < request->option_count; i++)
        key_string(&hash, request->options[i]);
    key_count(&hash, request->name_expression_count);
    for (size_t i = 0; i < request->name_expression_count; i++)
        key_string(&hash, request->name_expressions[i]);
    content_hash_digest(&hash, key);
    return 1;
}

void kernel_cache_entry_link_key(const struct link_request *request, const char *tool_version,
                                 const char *linker_identity,
                                 unsigned char key[KERNEL_CACHE_KEY_SIZE])
{
    struct content_hash hash;
    content_hash_init(&hash);
    key_string(&hash, "gpurun link cache");
    key_count(&hash, ENTRY_FORMAT);
    key_string(&hash, tool_version);
    key_string(&hash, linker_identity);
    key_string(&hash, request->ptx ? "ptx" : "cubin");
    key_count(&hash, request->option_count);
    for (size_t i = 0; i < request->option_count; i++)
        key_string(&hash, request->options[i]);
    key_count(&hash, request->input_count);
    for (size_t i = 0; i < request->input_count; i++) {
        key_string(&hash, device_code_type_name(request->inputs[i].type));
        key_string(&hash, request->inputs[i].name);
        content_hash_field(&hash, request->inputs[i].data, request->inputs[i].size);
    }
    content_hash_digest(&hash, key);
}

/* ---- the bytes ---------------------------------------------------------- */

static size_t payload_size(const struct nvrtc_request *request, const struct nvrtc_output *output)
{
    size_t size = 8 + output->code_size + 8 + strlen(output->log) + 8;
    for (size_t i = 0; i < output->lowered_name_count; i++)
        size += 8 + strlen(request->name_expressions[i]) + 8 + strlen(output->lowered_names[i]);
    return size + 8 + output->signatures_size + 8 + strlen(output->signatures_error)
           + 8 + output->inputs.records_size;
}

static unsigned char *put_field(unsigned char *p, const void *data, size_t size)
{
    write_le64(p, size);
    if (size > 0) /* data may be NULL then */
        memcpy(p + 8, data, size);
    return p + 8 + size;
}

unsigned char *kernel_cache_entry_encode(const unsigned char key[KERNEL_CACHE_KEY_SIZE],
                                         const struct nvrtc_request *request,
                                         const struct nvrtc_output *output, size_t *size)
{
    size_t payload = payload_size(request, output);
    if (payload > MAX_PAYLOAD)
        return NULL;
    unsigned char *entry = malloc(KERNEL_CACHE_HEADER_SIZE + payload);
    if (!entry)
        return NULL;
    unsigned char *p = entry + KERNEL_CACHE_HEADER_SIZE;
    p = put_field(p, output->code, output->code_size);
    p = put_field(p, output->log, strlen(output->log));
    write_le64(p, output->lowered_name_count);
    p += 8;
    for (size_t i = 0; i < output->lowered_name_count; i++) {
        p = put_field(p, request->name_expressions[i], strlen(request->name_expressions[i]));
        p = put_field(p, output->lowered_names[i], strlen(output->lowered_names[i]));
    }
    p = put_field(p, output->signatures, output->signatures_size);
    p = put_field(p, output->signatures_error, strlen(output->signatures_error));
    put_field(p, output->inputs.records, output->inputs.records_size);
    memcpy(entry, ENTRY_MAGIC, 8);
    write_le32(entry + 8, ENTRY_FORMAT);
    write_le32(entry + 12, (uint32_t)request->target);
    write_le64(entry + 16, payload);
    write_le64(entry + 24, crc32c(entry + KERNEL_CACHE_HEADER_SIZE, payload));
    memcpy(entry + 32, key, KERNEL_CACHE_KEY_SIZE);
    *size = KERNEL_CACHE_HEADER_SIZE + payload;
    return entry;
}

struct reader {
    const unsigned char *p;
    size_t left;
};

/* A NUL-terminated heap copy of the next length-prefixed field, or NULL. */
static char *take_field(struct reader *r, size_t *size)
{
    if (r->left < 8)
        return NULL;
    uint64_t n = read_le64(r->p);
    if (n > r->left - 8)
        return NULL;
    char *copy = malloc((size_t)n + 1);
    if (!copy)
        return NULL;
    memcpy(copy, r->p + 8, (size_t)n);
    copy[n] = '\0';
    r->p += 8 + n;
    r->left -= 8 + (size_t)n;
    if (size)
        *size = (size_t)n;
    return copy;
}

const char *kernel_cache_entry_check_header(const unsigned char *header, uint64_t file_size,
                                            const unsigned char key[KERNEL_CACHE_KEY_SIZE],
                                            const struct nvrtc_request *request,
                                            uint64_t *payload, char *why, size_t why_size)
{
    if (file_size < KERNEL_CACHE_HEADER_SIZE) {
        snprintf(why, why_size, "truncated: %llu bytes, shorter than the %d-byte header",
                 (unsigned long long)file_size, KERNEL_CACHE_HEADER_SIZE);
        return why;
    }
    if (memcmp(header, ENTRY_MAGIC, 8) != 0)
        return "bad magic";
    if (read_le32(header + 8) != ENTRY_FORMAT) {
        snprintf(why, why_size, "format %u, expected %u", read_le32(header + 8), ENTRY_FORMAT);
        return why;
    }
    *payload = read_le64(header + 16);
    if (*payload != file_size - KERNEL_CACHE_HEADER_SIZE) {
        snprintf(why, why_size, "wrong length: payload is %llu bytes, header says %llu",
                 (unsigned long long)(file_size - KERNEL_CACHE_HEADER_SIZE),
                 (unsigned long long)*payload);
        return why;
    }
    if (*payload > MAX_PAYLOAD) {
        snprintf(why, why_size, "too large: %llu bytes of payload, more than the %llu MiB any "
                 "compile makes", (unsigned long long)*payload,
                 (unsigned long long)(MAX_PAYLOAD >> 20));
        return why;
    }
    if (memcmp(header + 32, key, KERNEL_CACHE_KEY_SIZE) != 0
        || read_le32(header + 12) != (uint32_t)request->target)
        return "key mismatch";
    return NULL;
}

const char *kernel_cache_entry_decode(const unsigned char *header, const unsigned char *payload,
                                      size_t size, const struct nvrtc_request *request,
                                      struct nvrtc_output *output)
{
    if (crc32c(payload, size) != read_le64(header + 24))
        return "bad checksum";
    struct reader r = {payload, size};
    memset(output, 0, sizeof *output);
    output->code = take_field(&r, &output->code_size);
    output->log = output->code ? take_field(&r, NULL) : NULL;
    if (!output->log || r.left < 8)
        return "malformed payload";
    uint64_t count = read_le64(r.p);
    r.p += 8;
    r.left -= 8;
    if (count != request->name_expression_count)
        return "name expressions differ";
    if (count > 0 && !(output->lowered_names = calloc((size_t)count, sizeof(char *))))
        return "malformed payload";
    for (size_t i = 0; i < count; i++) {
        char *expression = take_field(&r, NULL);
        int same = expression && strcmp(expression, request->name_expressions[i]) == 0;
        free(expression);
        if (!same)
            return "name expressions differ";
        if (!(output->lowered_names[i] = take_field(&r, NULL)))
            return "malformed payload";
        output->lowered_name_count = i + 1;
    }
    output->signatures = take_field(&r, &output->signatures_size);
    char *why_none = output->signatures ? take_field(&r, NULL) : NULL;
    if (!why_none)
        return "malformed payload";
    size_t why_length = strlen(why_none);
    int consistent = why_length < sizeof output->signatures_error
                     && (why_length == 0 || output->signatures_size == 0);
    if (consistent)
        memcpy(output->signatures_error, why_none, why_length + 1);
    free(why_none);
    if (!consistent)
        return "malformed payload";
    if (why_length > 0) {
        free(output->signatures);
        output->signatures = NULL;
    }
    output->inputs.records = (unsigned char *)take_field(&r, &output->inputs.records_size);
    if (!output->inputs.records)
        return "malformed payload";
    return r.left == 0 ? NULL : "malformed payload";
}
