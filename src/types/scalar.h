/* Typed scalars (gpurun.u64(n), i64, u32, i32, i16, u16, i8, u8, f32, f64,
 * f16, bf16: one per dtype): a value with the exact C type a kernel
 * parameter expects. */
#ifndef GPURUN_TYPES_SCALAR_H
#define GPURUN_TYPES_SCALAR_H

#include "runtime/runtime.h"

extern const struct gpurun_tag gpurun_scalar_tag;

struct gpurun_scalar {
    struct gpurun_object header;
    int dtype;                 /* enum gpurun_dtype */
    unsigned char bytes[8];    /* the value as the kernel reads it */
};

void gpurun_open_scalar(lua_State *L);

#endif
