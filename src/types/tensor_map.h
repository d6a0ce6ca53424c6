/* gpurun.TensorMap: a TMA descriptor (the driver's 128-byte CUtensorMap)
 * over a Buffer's memory, made by Buffer:as_tensor_map and passed to a
 * kernel's `const __grid_constant__ CUtensorMap` parameter (types/launch.c). */
#ifndef GPURUN_TYPES_TENSOR_MAP_H
#define GPURUN_TYPES_TENSOR_MAP_H

#include "runtime/runtime.h"
#include "types/buffer/buffer.h"

extern const struct gpurun_tag gpurun_tensor_map_tag;

/* How NVRTC's PTX declares a CUtensorMap parameter (as base/ptx_params_text.c
 * describes it): a 128-byte array aligned to 64. */
#define GPURUN_TENSOR_MAP_PARAM ".align 64 .b8[128]"
#define GPURUN_TENSOR_MAP_ALIGN 64

struct gpurun_tensor_map {
    struct gpurun_object header;
    /* The descriptor, inside `storage` at the 64-byte alignment the driver
     * needs (a userdata is aligned less); a launch copies it. */
    CUtensorMap *map;
    /* What it points at: user value 2 keeps it, user value 1 its owner
     * (the base of a view), which is what stream-ordered frees wait on. */
    struct gpurun_buffer *buffer;
    int buffer_dtype;       /* the dtype a buffer it is pointed at must have */
    int data_type;          /* the elements it moves (enum gpurun_dtype) */
    int rank;
    size_t extent;          /* bytes from the address that its layout reaches */
    unsigned int alignment; /* of the address: 16, or 32 for interleave_32b */
    unsigned char storage[sizeof(CUtensorMap) + GPURUN_TENSOR_MAP_ALIGN - 1];
};

/* For graphs and plans, which copy a launch's arguments and so must keep the
 * memory they point at: pushes the Buffer or mapped PinnedBuffer that the
 * argument at index passes (itself; for a TensorMap, the owner of its
 * buffer) and returns 1, or pushes nothing and returns 0. */
int gpurun_push_argument_memory(lua_State *L, int index);

void gpurun_open_tensor_map(lua_State *L);

#endif
