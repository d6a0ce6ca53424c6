/* The CUDA driver's own linker (cuLink*), for a link that nvJitLink cannot
 * make because it is missing: PTX, cubins, fatbins, objects and libraries
 * into a cubin, in this process (the driver cannot be used from a forked
 * child) and in the current context. No Lua. */
#ifndef GPURUN_BASE_DRIVER_LINK_H
#define GPURUN_BASE_DRIVER_LINK_H

#include <stddef.h>

#include "base/nvjitlink_link.h"

/* 0 when the driver's linker can make this link, else 1 with why it cannot
 * in `why` ("LTO-IR ('b.ltoir') needs nvJitLink"). */
int driver_link_refusal(const struct link_request *request, char *why, size_t size);

/* Links as nvjitlink_link does, with the same output and error shapes
 * ("cuLinkAddData of input 2 'b.ptx' (ptx): CUDA_ERROR_INVALID_PTX (...)").
 * Needs the driver loaded and a current context. */
int driver_link(const struct link_request *request, struct link_output *output);

#endif
