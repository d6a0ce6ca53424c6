/* gpurun.Kernel: one kernel of an ObjectCode, with the parameter layout
 * launches are checked against, read once when the kernel is made. */
#ifndef GPURUN_LKERNEL_H
#define GPURUN_LKERNEL_H

#include "runtime.h"

extern const struct gpurun_tag gpurun_kernel_tag;

struct gpurun_kernel {
    struct gpurun_object header;  /* counts_for: its ObjectCode, whose library holds the code */
    CUkernel handle;
    CUfunction function;          /* the kernel in the context current at get_kernel */
    struct gpurun_object *code;   /* the ObjectCode: closing it closes every kernel */
    int param_count;
    int max_threads_per_block;
    int max_dynamic_shared;       /* raised by set_max_dynamic_shared_size_bytes */
    int device;                   /* the ordinal current at get_kernel, where function lives */
    size_t storage_size;
    size_t *param_offsets;
    size_t *param_sizes;
    void **param_pointers;        /* param_pointers[i] = storage + param_offsets[i] */
    unsigned char *storage;       /* the packed arguments of the launch in progress */
    const char *name;
};

/* The Kernel at index when it and its ObjectCode are open, or an error. */
struct gpurun_kernel *gpurun_check_kernel(lua_State *L, int index);

/* Raises "attempt to use a closed ..." when the kernel or its code is closed. */
void gpurun_check_kernel_open(lua_State *L, const struct gpurun_kernel *kernel);

/* Makes a Kernel for `handle` of the ObjectCode at code_index (kept alive
 * by the Kernel), reading its parameter layout once, and pushes it. Needs a
 * current device (for the kernel's launch limits). */
void gpurun_push_kernel(lua_State *L, int code_index, CUkernel handle, const char *name);

void gpurun_open_kernel(lua_State *L);

#endif
