/* Tests for src/base/fatbin.c: the PTX read out of nvcc's fatbins, and
 * damaged fatbins, which must give either no PTX or text within the caps,
 * never a read past the bytes (this runs under ASan in the sanitizer job).
 * spec/fatbin_ptx_spec.lua runs it; main() at the end says how. No Lua. */
#include "base/fatbin.h"
#include "base/little_endian.h"
#include "base/ptx_params.h"
#include "check.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned char *read_path(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    unsigned char *data = NULL;
    if (fseek(file, 0, SEEK_END) == 0) {
        long length = ftell(file);
        data = length > 0 ? malloc((size_t)length) : NULL;
        rewind(file);
        if (data && fread(data, 1, (size_t)length, file) == (size_t)length)
            *size = (size_t)length;
        else {
            free(data);
            data = NULL;
        }
    }
    fclose(file);
    return data;
}

/* fatbin_ptx on an exact-sized copy (so that ASan sees a read past it):
 * its text, or NULL; a text is checked to be within the caps, and its
 * signatures parsed (garbage must be refused by the parser, not crash it). */
static char *read_ptx(const unsigned char *bytes, size_t size, char *why, size_t why_size)
{
    unsigned char *copy = malloc(size ? size : 1);
    memcpy(copy, bytes, size);
    size_t text_size = 0;
    why[0] = '\0';
    char *text = fatbin_ptx(copy, size, &text_size, why, why_size);
    free(copy);
    if (text) {
        CHECK(text_size <= FATBIN_PTX_MAX_SIZE && strlen(text) == text_size,
              "a text of %zu bytes", text_size);
        struct ptx_signatures signatures;
        char error[256];
        if (ptx_signatures_parse(text, text_size, &signatures, error, sizeof error))
            ptx_signatures_free(&signatures);
    } else {
        CHECK(why[0] != '\0', "no PTX and no reason");
    }
    return text;
}

/* Whether the reason for no PTX holds `expected`. */
static void expect_none(const unsigned char *bytes, size_t size, const char *expected,
                        const char *what)
{
    char why[256];
    char *text = read_ptx(bytes, size, why, sizeof why);
    CHECK(!text && strstr(why, expected), "%s: expected no PTX because \"%s\", got %s", what,
          expected, text ? "a text" : why);
    free(text);
}

/* The offset of the first PTX entry, and its header's and payload's sizes. */
static size_t first_ptx(const unsigned char *data, size_t size, uint32_t *header,
                        uint64_t *payload)
{
    size_t at = 16;
    while (at + 64 <= size) {
        memcpy(header, data + at + 4, 4);
        memcpy(payload, data + at + 8, 8);
        if (data[at] == 1 && data[at + 1] == 0)
            return at;
        at += *header + *payload;
    }
    return 0;
}

static void test_damaged(const char *path)
{
    size_t size = 0;
    unsigned char *original = read_path(path, &size);
    if (!CHECK(original != NULL, "cannot read %s", path))
        return;
    char why[256];
    char *text = read_ptx(original, size, why, sizeof why);
    CHECK(text && strstr(text, ".entry"), "%s: no PTX read: %s", path, why);
    free(text);
    uint32_t header = 0;
    uint64_t payload = 0;
    size_t ptx = first_ptx(original, size, &header, &payload);
    if (!CHECK(ptx > 0, "%s: no PTX entry", path))
        return;
    int compressed = (original[ptx + 41] & 0x80) != 0;
    unsigned char *bytes = malloc(size);

    for (size_t cut = 0; cut < size; cut += cut < 200 ? 1 : 97)
        expect_none(original, cut, cut < 16 ? "not a fatbin" : "truncated", "a cut fatbin");

    memcpy(bytes, original, size);
    write_le64(bytes + ptx + 8, UINT64_MAX - 8);
    expect_none(bytes, size, "no PTX", "a payload size past the end");
    memcpy(bytes, original, size);
    write_le32(bytes + ptx + 4, 8);
    expect_none(bytes, size, "no PTX", "an entry header of 8 bytes");
    memcpy(bytes, original, size);
    write_le32(bytes + ptx + 4, UINT32_MAX);
    expect_none(bytes, size, "no PTX", "an entry header past the end");

    if (compressed) {
        uint64_t declared = 0;
        memcpy(&declared, original + ptx + 56, 8);
        memcpy(bytes, original, size);
        write_le64(bytes + ptx + 56, (uint64_t)1 << 40);
        expect_none(bytes, size, "not believed", "a huge uncompressed size");
        write_le64(bytes + ptx + 56, declared + 1);
        expect_none(bytes, size, "does not say", "an uncompressed size one too large");
        memcpy(bytes, original, size);
        write_le32(bytes + ptx + 16, (uint32_t)payload + 1);
        expect_none(bytes, size, "not a zstd frame", "a compressed size past the payload");
        memcpy(bytes, original, size);
        for (size_t i = ptx + header + 12; i < ptx + header + payload; i += 3)
            bytes[i] ^= 0x5A;
        free(read_ptx(bytes, size, why, sizeof why)); /* either; never past the bytes */
    } else {
        memcpy(bytes, original, size);
        for (size_t i = 0; i < payload; i++)
            bytes[ptx + header + i] = (unsigned char)(i * 131 + 7) | 1;
        text = read_ptx(bytes, size, why, sizeof why);
        CHECK(text && strlen(text) == payload, "garbage text is read whole: %s", why);
        free(text);
    }

    /* Random damage: a few bytes of the headers or anywhere changed. */
    uint64_t state = 0x9E3779B97F4A7C15u;
    for (int round = 0; round < 3000; round++) {
        memcpy(bytes, original, size);
        int changes = 1 + round % 6;
        for (int c = 0; c < changes; c++) {
            state = state * 6364136223846793005u + 1442695040888963407u;
            size_t limit = round % 2 ? size : ptx + header + 16;
            bytes[(state >> 33) % limit] = (unsigned char)(state >> 24);
        }
        free(read_ptx(bytes, size, why, sizeof why));
    }
    free(bytes);
    free(original);
}

/* Prints the compact signatures of the PTX of a fatbin, or of PTX text. */
static int print_signatures(const char *path)
{
    size_t size = 0;
    unsigned char *data = read_path(path, &size);
    if (!data) {
        fprintf(stderr, "%s: cannot read\n", path);
        return 1;
    }
    char why[256] = "";
    char *ptx = NULL;
    size_t ptx_size = 0;
    if (size >= 4 && memcmp(data, "\x50\xED\x55\xBA", 4) == 0) {
        ptx = fatbin_ptx(data, size, &ptx_size, why, sizeof why);
    } else if ((ptx = malloc(size + 1))) {
        memcpy(ptx, data, size);
        ptx[size] = '\0';
        ptx_size = size;
    }
    free(data);
    struct ptx_signatures signatures;
    if (!ptx) {
        fprintf(stderr, "%s: no PTX: %s\n", path, why);
        return 1;
    }
    int parsed = ptx_signatures_parse(ptx, ptx_size, &signatures, why, sizeof why);
    free(ptx);
    if (!parsed) {
        fprintf(stderr, "%s: %s\n", path, why);
        return 1;
    }
    size_t text_size = 0;
    char *text = ptx_signatures_format(&signatures, &text_size);
    ptx_signatures_free(&signatures);
    if (!text)
        return 1;
    fwrite(text, 1, text_size, stdout);
    free(text);
    return 0;
}

/*   fatbin_test --signatures FILE   prints the compact signatures of the
 *                                   PTX of FILE (a fatbin, or PTX text)
 *   fatbin_test FATBIN...           nvcc's fatbins read, then damaged
 *
 * Ends with "fatbin_test: N checks, M failed" and exits 1 on a failure. */
int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--signatures") == 0)
        return print_signatures(argv[2]);
    if (argc < 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s --signatures FILE | FATBIN...\n", argv[0]);
        return 2;
    }
    for (int i = 1; i < argc; i++)
        test_damaged(argv[i]);
    printf("fatbin_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : 0;
}
