/* gpurun.Kernel: one kernel of an ObjectCode, with the parameter layout
 * launches are checked against, read once at the kernel's first use. */
#ifndef GPURUN_TYPES_KERNEL_H
#define GPURUN_TYPES_KERNEL_H

#include "runtime/runtime.h"
#include "base/ptx_params.h"

extern const struct gpurun_tag gpurun_kernel_tag;

/* What a parameter takes, from the PTX signature (base/ptx_params.h). NVRTC's PTX
 * gives every C integer as unsigned, so INTEGER says only "an integer of
 * this size"; UNTYPED is a kernel whose signature could not be read, or a
 * .bN parameter: only its size is known. */
enum gpurun_param_kind {
    GPURUN_PARAM_UNTYPED, GPURUN_PARAM_INTEGER, GPURUN_PARAM_FLOAT, GPURUN_PARAM_AGGREGATE
};

/* Whether a 64-bit parameter is a pointer: only sm_100+ PTX says. */
enum gpurun_param_pointer { GPURUN_POINTER_NO, GPURUN_POINTER_YES, GPURUN_POINTER_MAYBE };

#define GPURUN_PARAM_TYPE_SIZE 24

struct gpurun_kernel {
    struct gpurun_object header;  /* counts_for: its ObjectCode, whose library holds the code */
    CUkernel handle;
    CUfunction function;          /* in `context`; NULL until its first use loads it */
    CUcontext context;            /* that context, made current around a launch from another */
    int device;                   /* its device: launches go on its streams */
    struct gpurun_object *code;   /* the ObjectCode: closing it closes every kernel */
    /* The PTX's types (NULL when the code carries none), the ObjectCode's
     * memory: valid while the code is open. */
    const struct ptx_kernel_signature *signature;
    int param_count;              /* -1 until the first use reads the layout */
    int max_threads_per_block;
    int max_dynamic_shared;       /* raised by set_max_dynamic_shared_size_bytes */
    size_t storage_size;
    size_t *param_offsets;
    size_t *param_sizes;
    size_t *param_aligns;         /* the PTX's .align (a scalar's size); 0 when unknown */
    unsigned char *param_kinds;   /* enum gpurun_param_kind */
    unsigned char *param_pointer; /* enum gpurun_param_pointer */
    char (*param_types)[GPURUN_PARAM_TYPE_SIZE]; /* ".f32", ".u64", "" when untyped */
    void **param_pointers;        /* param_pointers[i] = storage + param_offsets[i] */
    unsigned char *storage;       /* the packed arguments of the launch in progress */
    const char *name;
};

/* The Kernel at index when it and its ObjectCode are open, or an error;
 * its parameter layout read and its function loaded, at its first use. */
struct gpurun_kernel *gpurun_check_kernel(lua_State *L, int index);

/* Raises "attempt to use a closed ..." when the kernel or its code is closed. */
void gpurun_check_kernel_open(lua_State *L, const struct gpurun_kernel *kernel);

/* Raises unless a launch on a stream of `device` can run the kernel (its
 * function belongs to the device current when it was made). */
void gpurun_check_kernel_device(lua_State *L, const struct gpurun_kernel *kernel, int device);

/* Makes a Kernel for `handle` of the ObjectCode at code_index (kept alive
 * by the Kernel) and pushes it. At its first use the signature (NULL when
 * unknown) gives the parameter count and types, and the driver the offsets
 * and sizes. Needs a current device, whose context the kernel's function
 * is loaded into at its first use. */
void gpurun_push_kernel(lua_State *L, int code_index, CUkernel handle, const char *name,
                        const struct ptx_kernel_signature *signature);

/* The kernel at index takes the value at the top (the source of the
 * program it came from, for Kernel.source) and pops it. */
void gpurun_set_kernel_source(lua_State *L, int index);

void gpurun_open_kernel(lua_State *L);

#endif
