/* gpurun.LaunchConfig: grid, block and dynamic shared memory, checked once
 * against the limits every CUDA device shares; a kernel's own limits are
 * checked at launch. */
#ifndef GPURUN_LLAUNCH_CONFIG_H
#define GPURUN_LLAUNCH_CONFIG_H

#include "runtime.h"

extern const struct gpurun_tag gpurun_config_tag;

struct gpurun_launch_config {
    struct gpurun_object header;
    unsigned int grid[3];
    unsigned int block[3];
    unsigned int shmem_size;
};

void gpurun_open_launch_config(lua_State *L);

#endif
