/* The kernel cache's entries as bytes: the key an entry is named by and
 * the file it is, written and read back (kernel_cache_entry.c gives the
 * layout). Nothing here touches a file. No Lua. */
#ifndef GPURUN_BASE_KERNEL_CACHE_ENTRY_H
#define GPURUN_BASE_KERNEL_CACHE_ENTRY_H

#include <stddef.h>
#include <stdint.h>

#include "base/nvjitlink_link.h"
#include "base/nvrtc_compile.h"

#define KERNEL_CACHE_KEY_SIZE 16
#define KERNEL_CACHE_HEADER_SIZE 48

/* The key: a hash of everything a compile is given, the working directory
 * included. Returns 0 when it cannot be made (no working directory). */
int kernel_cache_entry_key(const struct nvrtc_request *request, const char *tool_version,
                           unsigned char key[KERNEL_CACHE_KEY_SIZE]);

/* The key of a link: a hash of every input's type, name and bytes, every
 * option, the target, gpurun and the nvJitLink in use (linker_identity).
 * Nothing outside the request is read by a link. */
void kernel_cache_entry_link_key(const struct link_request *request, const char *tool_version,
                                 const char *linker_identity,
                                 unsigned char key[KERNEL_CACHE_KEY_SIZE]);

/* The whole entry file for a compile (malloc'd, *size bytes), or NULL when
 * out of memory or larger than any entry is allowed to be. */
unsigned char *kernel_cache_entry_encode(const unsigned char key[KERNEL_CACHE_KEY_SIZE],
                                         const struct nvrtc_request *request,
                                         const struct nvrtc_output *output, size_t *size);

/* Checks a header against the file's size (file_size bytes), the key and
 * the target before anything more is read: NULL with *payload_size set, or
 * why the entry is corrupt (in why, or a static string). */
const char *kernel_cache_entry_check_header(const unsigned char *header, uint64_t file_size,
                                            const unsigned char key[KERNEL_CACHE_KEY_SIZE],
                                            const struct nvrtc_request *request,
                                            uint64_t *payload_size, char *why, size_t why_size);

/* Decodes the payload of an entry whose header was checked: NULL with
 * output filled (what NVRTC read in output->inputs.records), or why it is
 * corrupt. Free output with nvrtc_output_free either way. */
const char *kernel_cache_entry_decode(const unsigned char *header, const unsigned char *payload,
                                      size_t size, const struct nvrtc_request *request,
                                      struct nvrtc_output *output);

#endif
