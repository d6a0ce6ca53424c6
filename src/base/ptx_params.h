/* Kernel parameter types read from PTX signatures: per kernel, each
 * parameter's PTX type, size, alignment and offset in the parameter buffer,
 * which is what a launch needs to check and pack its arguments by type.
 * What NVRTC's PTX tells and does not tell is measured in
 * tests/fixtures/ptx/README.md. No Lua, no GPU. */
#ifndef GPURUN_BASE_PTX_PARAMS_H
#define GPURUN_BASE_PTX_PARAMS_H

#include <stddef.h>
#include <stdint.h>

/* NVRTC writes every C integer type as .uN, `int` included (.sN never
 * appears in a signature; it shows only in the body's ld.param.s8). So a
 * PTX_PARAM_UNSIGNED parameter from NVRTC is "an integer of this size":
 * refusing -1 for it would refuse it for every `int` parameter. */
enum ptx_param_kind {
    PTX_PARAM_UNSIGNED,  /* .u8 .u16 .u32 .u64: any C integer (and, for sm_90, pointers) */
    PTX_PARAM_SIGNED,    /* .s8 .s16 .s32 .s64: only hand-written PTX has these */
    PTX_PARAM_FLOAT,     /* .f16 .bf16 .f32 .f64 */
    PTX_PARAM_BITS,      /* .b8 .b16 .b32 .b64 .b128 scalars: untyped bits */
    PTX_PARAM_AGGREGATE, /* an array such as .b8 x[16]: a struct, union or vector by value */
};

/* For .target sm_100 and up (and compute_100 and up) NVRTC writes
 * `.param .u64 .ptr .align 1 x` for every pointer parameter, and a plain
 * .u64 for 64-bit integers. For sm_90 and earlier a pointer and an
 * unsigned long long are the same .u64, with no attribute; nothing in the
 * PTX (options -G, -lineinfo, -rdc, -dopt tried) tells them apart. */
enum ptx_pointer {
    PTX_POINTER_NO,      /* not a pointer: not 64 bits, or .u64 where pointers are marked */
    PTX_POINTER_YES,     /* marked .ptr */
    PTX_POINTER_UNKNOWN, /* a 64-bit integer or a pointer: the target does not mark them */
};

struct ptx_param {
    enum ptx_param_kind kind;
    enum ptx_pointer pointer;
    uint32_t size;          /* bytes: element size times count for an array */
    uint32_t align;         /* bytes: .align N, else the element's own size */
    uint32_t offset;        /* in the kernel's parameter buffer */
    uint32_t element_size;  /* bytes of one element (the scalar's size for a scalar) */
    uint32_t count;         /* array elements; 0 for a scalar */
    uint32_t pointee_align; /* .ptr .align N: what the pointer promises; 0 if not said */
    char type[8];           /* the PTX type as written, without the dot: "u64", "bf16x2" */
    char space[8];          /* .ptr .global and the like, without the dot; "" if generic */
};

/* The parameter count known from the signature is also what keeps gpurun
 * sanitizer-clean: without it the count is found by calling
 * cuKernelGetParamInfo until it fails, and compute-sanitizer reports that
 * deliberate CUDA_ERROR_INVALID_VALUE as an error for every kernel. With a
 * signature, call cuKernelGetParamInfo only for indexes below param_count
 * (or not at all: the offsets here are the driver's layout). */
struct ptx_kernel_signature {
    const char *name;            /* as in the PTX: the extern "C" name or the mangled one */
    size_t param_count;
    const struct ptx_param *params;
    size_t param_bytes;          /* end of the last parameter: the buffer a launch packs */
};

struct ptx_signatures {
    int target_arch;       /* 90 for .target sm_90 (or compute_90, sm_90a); 0 if absent */
    int marks_pointers;    /* 1 when every pointer parameter carries .ptr (sm_100 and up) */
    size_t kernel_count;
    /* In the order the PTX declares them. One allocation, which also holds
     * the names, the parameter arrays and by_name. */
    struct ptx_kernel_signature *kernels;
    /* The same kernels sorted by name, for ptx_signatures_find's binary
     * search (a module may hold a great many kernels). */
    const struct ptx_kernel_signature **by_name;
    size_t block_size;     /* bytes of the one allocation, from kernels on */
};

/* Parses every .entry declaration of the PTX text (size bytes; NUL not
 * needed), in time linear in its size (kernels included) whatever it holds.
 * A PTX module declares every kernel with its parameters:
 *
 *   .visible .entry vec_add(
 *       .param .u64 vec_add_param_0,                  // a pointer or a 64-bit integer
 *       .param .f32 vec_add_param_1,                  // float
 *       .param .align 8 .b8 vec_add_param_2[16]       // a 16-byte struct passed by value
 *   )
 *
 * Device functions (.func), bodies, comments, strings and debug sections
 * are skipped; .visible and .weak entries count, .extern declarations
 * (defined in another module) do not. Returns 1 with *out filled (free it
 * with ptx_signatures_free), or 0 with `error` saying what and on which
 * line, and *out empty.
 *
 * NVRTC gives the PTX after a CUBIN compile too (nvrtcGetPTXSize works
 * after compiling for sm_90), so nvrtc_compile() reads the signatures for
 * both targets; only -dlto (NVVM IR, empty PTX) leaves them unknown. */
int ptx_signatures_parse(const char *ptx, size_t size, struct ptx_signatures *out,
                         char *error, size_t error_size);

void ptx_signatures_free(struct ptx_signatures *signatures);

/* Moves parsed signatures into `into` (block_size bytes that the caller
 * owns, such as a Lua userdata, which the collector frees even for an
 * object made while the state closes, when no finalizer runs), freeing
 * their heap block. After a move they are not to be freed. */
void ptx_signatures_move(struct ptx_signatures *signatures, void *into);

/* The kernel called `name` (the PTX name: for C++ linkage the lowered name
 * that nvrtcGetLoweredName gives), or NULL. */
const struct ptx_kernel_signature *ptx_signatures_find(const struct ptx_signatures *signatures,
                                                       const char *name);

/* The signatures as compact text that ptx_signatures_parse reads back to the
 * same result: a .target line and one .entry per kernel, parameters named
 * p0, p1, ... Heap-allocated and NUL-terminated (*text_size excludes the
 * NUL); NULL when out of memory. nvrtc_compile keeps this, not the whole
 * PTX, beside a CUBIN and in the kernel cache. */
char *ptx_signatures_format(const struct ptx_signatures *signatures, size_t *text_size);

/* The parameter's type as PTX writes it, for messages and kernel:params():
 * ".f32", ".u64 .ptr", ".b8[16]". Returns buffer. */
const char *ptx_param_describe(const struct ptx_param *param, char *buffer, size_t size);

#endif
