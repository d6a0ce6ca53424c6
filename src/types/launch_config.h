/* gpurun.LaunchConfig: grid, block, dynamic shared memory and launch
 * attributes, checked once against the limits every CUDA device shares; a
 * kernel's and a device's own limits are checked at launch. */
#ifndef GPURUN_TYPES_LAUNCH_CONFIG_H
#define GPURUN_TYPES_LAUNCH_CONFIG_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_config_tag;

struct gpurun_launch_config {
    struct gpurun_object header;
    unsigned int grid[3];         /* as given: clusters when a cluster is set, else blocks */
    unsigned int blocks[3];       /* the grid in blocks: what is launched */
    unsigned int block[3];
    unsigned int shmem_size;
    unsigned int cluster[3];      /* blocks per cluster; 0 when none */
    int cooperative;              /* CU_LAUNCH_ATTRIBUTE_COOPERATIVE */
    int programmatic;             /* programmatic stream serialization (PDL) */
    int has_priority;             /* CU_LAUNCH_ATTRIBUTE_PRIORITY given */
    int priority;                 /* lower runs first, as a stream's priority */
    /* The launch attributes the above make: with any, launches go through
     * cuLaunchKernelEx; a plain config keeps cuLaunchKernel's path. */
    unsigned int attribute_count;
    CUlaunchAttribute attributes[4];
    /* The last kernel (and device) whose limits the attributes were checked
     * against (types/launch.c): checks that ask the driver run once per kernel. */
    const void *checked_kernel;
    int checked_device;
};

void gpurun_open_launch_config(lua_State *L);

#endif
