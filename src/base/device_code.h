/* Device code that gpurun did not compile itself: its kinds, their names
 * (cuda.core's code_type strings) and the checks that bytes are what they
 * claim to be before they reach the driver or nvJitLink, which read
 * malformed input past its end. No Lua, no GPU. */
#ifndef GPURUN_BASE_DEVICE_CODE_H
#define GPURUN_BASE_DEVICE_CODE_H

#include <stddef.h>

enum device_code_type {
    DEVICE_CODE_PTX,
    DEVICE_CODE_CUBIN,
    DEVICE_CODE_LTOIR,
    DEVICE_CODE_FATBIN,
    DEVICE_CODE_OBJECT,  /* a host object file holding device code (nvcc -dc) */
    DEVICE_CODE_LIBRARY, /* an ar archive of such objects (libcudadevrt.a) */
};

/* "ptx", "cubin", "ltoir", "fatbin", "object", "library". */
const char *device_code_type_name(enum device_code_type type);

/* The largest file gpurun reads as device code. The biggest single modules
 * NVIDIA ships (cuBLAS's fatbins) are a few hundred MiB; past this a file
 * is a mistake, and reading it whole would be a huge allocation. */
#define DEVICE_CODE_MAX_FILE_SIZE ((size_t)1 << 30)

/* Whether size bytes of data are plausibly code of `type`: the magic
 * numbers and, for ELF and fatbin files, that every header, section and
 * payload they declare lies within the bytes. Returns 1, or 0 with `why`
 * saying what is wrong ("is truncated: its section headers end at byte
 * 4096 of 1000"), written to follow a name. Whether the code is valid for a
 * GPU only the driver can tell. */
int device_code_check(enum device_code_type type, const unsigned char *data, size_t size,
                      char *why, size_t why_size);

#endif
