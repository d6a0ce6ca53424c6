/* The PTX a fatbin carries, read so that its kernels get their parameter
 * types from the PTX as code given as PTX does. nvcc's fatbins hold, after
 * the 16-byte header, entries back to back: PTX or cubin, for one arch
 * each, the PTX as text or compressed (nvcc's default: zstd, through
 * base/zstd_loader). No Lua, no GPU. */
#ifndef GPURUN_BASE_FATBIN_H
#define GPURUN_BASE_FATBIN_H

#include <stddef.h>
#include <stdint.h>

/* The container's header: u32 magic, u16 version, u16 the header's size,
 * u64 the size of the entries that follow it. */
#define FATBIN_MAGIC 0xBA55ED50u
#define FATBIN_HEADER_SIZE 16

/* The largest PTX text read out of a fatbin, and the most it may be larger
 * than its compressed bytes: what the file says past these is not believed,
 * so that a few damaged bytes never cost a huge allocation. */
#define FATBIN_PTX_MAX_SIZE ((size_t)64 << 20)
#define FATBIN_PTX_MAX_RATIO 1024

/* What an entry may say its code unpacks to: past this a size is damage. */
#define FATBIN_ENTRY_MAX_UNPACKED ((uint64_t)1 << 30)

/* The entry kinds the driver loads. */
#define FATBIN_KIND_PTX 1
#define FATBIN_KIND_ELF 2

/* Checks the code of one entry, of `kind`, as the driver will read it
 * (unpacked): 1, or 0 with `why` saying what is wrong. */
typedef int (*fatbin_content_check)(unsigned kind, const unsigned char *bytes, size_t size,
                                    char *why, size_t why_size);

/* Whether every entry of the fatbin's first container (size bytes at data,
 * a whole header already checked) lies within it, back to back, each with a
 * whole header and a believable unpacked size, and its code passes `check`
 * (unpacked through libzstd where nvcc compressed it): the driver walks the
 * entries trusting their sizes, and reads past the end of code that lies.
 * Returns 1, or 0 with `why` saying what is wrong, written to follow a name. */
int fatbin_check_entries(const unsigned char *data, size_t size, fatbin_content_check check,
                         char *why, size_t why_size);

/* The zstd-compressed code of the entry at `entry` (its payload of
 * payload_size bytes within the fatbin), unpacked: a malloc'd copy of the
 * size the entry declares (at most max_size), in *unpacked_size; NULL with
 * `why` where it cannot be (not a frame, a size not believed, no libzstd,
 * a frame that does not unpack to what it says). */
unsigned char *fatbin_unpack(const unsigned char *entry, uint32_t header_size,
                             uint64_t payload_size, uint64_t max_size, size_t *unpacked_size,
                             char *why, size_t why_size);

/* The text of a PTX entry of the size bytes at data (one in plain text if
 * there is one, else the first compressed one): a malloc'd copy,
 * NUL-terminated, its length in *ptx_size. NULL where none can be read,
 * with `why` saying why ("carries no PTX", "its PTX is compressed and
 * libzstd could not be loaded (...)"): the kernels are then typed by the
 * driver's sizes, and the fatbin is not refused, since the driver may
 * still load its cubins. Every size in the file is checked against the
 * bytes before it is used. */
char *fatbin_ptx(const unsigned char *data, size_t size, size_t *ptx_size, char *why,
                 size_t why_size);

#endif
