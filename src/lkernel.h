/* What the launch path (lkernel.c) reads from typed scalars (lscalar.c) and
 * launch configurations (llaunch_config.c). */
#ifndef GPURUN_LKERNEL_H
#define GPURUN_LKERNEL_H

#include "gpurun.h"

enum scalar_kind { SCALAR_I32, SCALAR_U32, SCALAR_I64, SCALAR_U64, SCALAR_F32, SCALAR_F64 };

extern const char *const gpurun_scalar_names[];
extern const unsigned char gpurun_scalar_sizes[];

struct scalar {
    const struct gpurun_tag *tag;
    enum scalar_kind kind;
    union {
        int32_t i32;
        uint32_t u32;
        int64_t i64;
        uint64_t u64;
        float f32;
        double f64;
        unsigned char bytes[8];
    } value;
};

struct launch_config {
    const struct gpurun_tag *tag;
    unsigned int grid[3];
    unsigned int block[3];
    unsigned int shmem_size;
};

/* Registration: gpurun.u64 and friends; gpurun.LaunchConfig. */
void gpurun_open_scalar(lua_State *L);
void gpurun_open_launch_config(lua_State *L);

#endif
