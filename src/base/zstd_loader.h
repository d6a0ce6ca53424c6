/* libzstd, opened on first use, for the PTX nvcc compresses into fatbins.
 *
 * gpurun never links libzstd: the first fatbin with compressed PTX
 * dlopen()s libzstd.so.1 (on every Debian and Ubuntu system: dpkg needs it)
 * and takes the three entry points below by name. The declarations are
 * zstd.h's (stable since zstd 1.3), so gpurun builds without its headers.
 * Knows nothing about Lua. */
#ifndef GPURUN_BASE_ZSTD_LOADER_H
#define GPURUN_BASE_ZSTD_LOADER_H

#include <stddef.h>

/* ZSTD_getFrameContentSize's answers for "not said" and "not a frame". */
#define ZSTD_LOADER_CONTENTSIZE_UNKNOWN (0ULL - 1)
#define ZSTD_LOADER_CONTENTSIZE_ERROR (0ULL - 2)

#define ZSTD_ENTRY_POINTS(X)                                                                 \
    X(size_t, ZSTD_decompress, (void *dst, size_t dst_capacity, const void *src,            \
                                size_t compressed_size))                                     \
    X(unsigned, ZSTD_isError, (size_t code))                                                 \
    X(unsigned long long, ZSTD_getFrameContentSize, (const void *src, size_t src_size))

struct zstd_library {
#define ZSTD_MEMBER(result, name, params) result(*name) params;
    ZSTD_ENTRY_POINTS(ZSTD_MEMBER)
#undef ZSTD_MEMBER
};

/* The table, valid once zstd_loader_load() has returned 0. */
extern struct zstd_library zstd;

/* Opens the library and fills the table, once per process: 0, or -1 with
 * the reason in zstd_loader_error(). */
int zstd_loader_load(void);
const char *zstd_loader_error(void);

#endif
