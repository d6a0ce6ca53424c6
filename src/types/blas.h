/* gpurun.BlasHandle (internal) and the C side of gpurun.matmul, axpy, dot,
 * nrm2 and scal: cuBLAS on gpurun's streams. */
#ifndef GPURUN_TYPES_BLAS_H
#define GPURUN_TYPES_BLAS_H

#include "runtime/runtime.h"

/* Registers the handle type and sets package.loaded["gpurun.blas_core"]. */
void gpurun_open_blas(lua_State *L);

#endif
