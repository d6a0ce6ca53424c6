/* Checks on device code from outside: magic numbers and declared sizes. */
#define _GNU_SOURCE /* memmem */
#include "base/device_code.h"
#include "base/fatbin.h"
#include "base/little_endian.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

const char *device_code_type_name(enum device_code_type type)
{
    switch (type) {
    case DEVICE_CODE_PTX: return "ptx";
    case DEVICE_CODE_CUBIN: return "cubin";
    case DEVICE_CODE_LTOIR: return "ltoir";
    case DEVICE_CODE_FATBIN: return "fatbin";
    case DEVICE_CODE_OBJECT: return "object";
    case DEVICE_CODE_LIBRARY: return "library";
    }
    return "?";
}

/* ELF's layout (the System V ABI, 64-bit little-endian: what CUDA writes). */
#define ELF_HEADER_SIZE 64
#define ELF_SECTION_HEADER_SIZE 64
#define ELF_PROGRAM_HEADER_SIZE 56
#define ELF_MACHINE_CUDA 190 /* EM_CUDA */
#define ELF_SECTION_NOBITS 8 /* SHT_NOBITS: takes no bytes of the file */

/* NVVM's LTO-IR, as NVRTC (-dlto) and nvcc (-dlto -dc) write it. */
#define LTOIR_MAGIC 0x7F4E43EDu

__attribute__((format(printf, 3, 4)))
static int refuse(char *why, size_t why_size, const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    vsnprintf(why, why_size, fmt, args);
    va_end(args);
    return 0;
}

/* A table of count entries of entry_size bytes at offset lies within size. */
static int table_fits(uint64_t offset, uint64_t count, uint64_t entry_size, size_t size,
                      uint64_t *end)
{
    *end = offset + count * entry_size;
    return count <= UINT32_MAX && offset <= size && *end >= offset && *end <= size;
}

static int check_elf(const unsigned char *data, size_t size, int want_cuda, char *why,
                     size_t why_size)
{
    const char *what = want_cuda ? "a cubin" : "a host object";
    if (size < 4 || memcmp(data, "\177ELF", 4) != 0)
        return refuse(why, why_size, "is not %s: it does not start with ELF's magic number",
                      what);
    if (size < ELF_HEADER_SIZE)
        return refuse(why, why_size, "is truncated: %zu bytes, less than an ELF header", size);
    if (data[4] != 2 || data[5] != 1)
        return refuse(why, why_size, "is not %s: not a 64-bit little-endian ELF", what);
    uint16_t machine = read_le16(data + 18);
    if (want_cuda && machine != ELF_MACHINE_CUDA)
        return refuse(why, why_size, "is not a cubin: an ELF for machine %u, not for an NVIDIA "
                      "GPU (machine %u)", machine, ELF_MACHINE_CUDA);
    if (!want_cuda && machine == ELF_MACHINE_CUDA)
        return refuse(why, why_size, "is a cubin, not a host object: load it with from_cubin");
    uint64_t program_headers = read_le64(data + 32), section_headers = read_le64(data + 40);
    uint16_t program_size = read_le16(data + 54), program_count = read_le16(data + 56);
    uint16_t section_size = read_le16(data + 58), section_count = read_le16(data + 60);
    uint64_t end = 0;
    if (program_count > 0 && (program_size < ELF_PROGRAM_HEADER_SIZE
                              || !table_fits(program_headers, program_count, program_size, size,
                                             &end)))
        return refuse(why, why_size, "is truncated: its program headers end at byte %llu of %zu",
                      (unsigned long long)end, size);
    if (section_count > 0 && section_size < ELF_SECTION_HEADER_SIZE)
        return refuse(why, why_size, "is a damaged ELF: section headers of %u bytes",
                      section_size);
    if (!table_fits(section_headers, section_count, section_size, size, &end))
        return refuse(why, why_size, "is truncated: its section headers end at byte %llu of %zu",
                      (unsigned long long)end, size);
    for (uint16_t i = 0; i < section_count; i++) {
        const unsigned char *section = data + section_headers + (uint64_t)i * section_size;
        if (read_le32(section + 4) == ELF_SECTION_NOBITS)
            continue;
        uint64_t offset = read_le64(section + 24), length = read_le64(section + 32);
        if (!table_fits(offset, 1, length, size, &end))
            return refuse(why, why_size, "is truncated: its section %u ends at byte %llu of %zu",
                          i, (unsigned long long)end, size);
    }
    return 1;
}

/* One fatbin entry's code as the driver reads it: PTX text that ends within
 * its bytes and has a .version, or a cubin whose headers and sections lie
 * within them. */
static int check_fatbin_code(unsigned kind, const unsigned char *bytes, size_t size, char *why,
                             size_t why_size)
{
    char inner[200];
    if (kind == FATBIN_KIND_PTX) {
        const unsigned char *nul = memchr(bytes, '\0', size);
        if (!nul)
            return refuse(why, why_size, "its PTX does not end within its %zu bytes", size);
        if (!memmem(bytes, (size_t)(nul - bytes), ".version", 8))
            return refuse(why, why_size, "its PTX has no .version directive");
        return 1;
    }
    if (kind == FATBIN_KIND_ELF) {
        if (check_elf(bytes, size, 1, inner, sizeof inner))
            return 1;
        return refuse(why, why_size, "its code %s", inner);
    }
    return refuse(why, why_size, "its kind is %u, not PTX (%u) or a cubin (%u)", kind,
                  FATBIN_KIND_PTX, FATBIN_KIND_ELF);
}

static int check_fatbin(const unsigned char *data, size_t size, char *why, size_t why_size)
{
    if (size < 4 || read_le32(data) != FATBIN_MAGIC)
        return refuse(why, why_size, "is not a fatbin: it does not start with the fatbin magic "
                      "number 0x%08X", FATBIN_MAGIC);
    if (size < FATBIN_HEADER_SIZE)
        return refuse(why, why_size, "is truncated: %zu bytes, less than a fatbin header", size);
    uint16_t header_size = read_le16(data + 6);
    uint64_t payload = read_le64(data + 8), end = 0;
    if (header_size < FATBIN_HEADER_SIZE || !table_fits(header_size, 1, payload, size, &end))
        return refuse(why, why_size, "is truncated: its header says it ends at byte %llu of %zu",
                      (unsigned long long)end, size);
    return fatbin_check_entries(data, size, check_fatbin_code, why, why_size);
}

static int check_ptx(const unsigned char *data, size_t size, char *why, size_t why_size)
{
    if (size >= 4 && memcmp(data, "\177ELF", 4) == 0)
        return refuse(why, why_size, "is not PTX text: it is an ELF file (a cubin?)");
    /* The driver reads PTX up to its first NUL: one inside would cut it. */
    const unsigned char *nul = memchr(data, '\0', size);
    if (nul && (size_t)(nul - data) + 1 < size)
        return refuse(why, why_size, "is not PTX text: it holds a NUL byte at offset %zu",
                      (size_t)(nul - data));
    size_t text = nul ? (size_t)(nul - data) : size;
    if (!memmem(data, text, ".version", 8))
        return refuse(why, why_size, "is not PTX: it has no .version directive");
    return 1;
}

int device_code_check(enum device_code_type type, const unsigned char *data, size_t size,
                      char *why, size_t why_size)
{
    if (size == 0)
        return refuse(why, why_size, "is empty");
    switch (type) {
    case DEVICE_CODE_PTX:
        return check_ptx(data, size, why, why_size);
    case DEVICE_CODE_CUBIN:
        return check_elf(data, size, 1, why, why_size);
    case DEVICE_CODE_OBJECT:
        return check_elf(data, size, 0, why, why_size);
    case DEVICE_CODE_FATBIN:
        return check_fatbin(data, size, why, why_size);
    case DEVICE_CODE_LTOIR:
        if (size < 4 || read_le32(data) != LTOIR_MAGIC)
            return refuse(why, why_size, "is not LTO-IR: it does not start with the LTO-IR "
                          "magic number 0x%08X", LTOIR_MAGIC);
        return 1;
    case DEVICE_CODE_LIBRARY:
        if (size < 8 || memcmp(data, "!<arch>\n", 8) != 0)
            return refuse(why, why_size, "is not a library: it does not start with an ar "
                          "archive's \"!<arch>\"");
        return 1;
    }
    return refuse(why, why_size, "is of an unknown kind");
}
