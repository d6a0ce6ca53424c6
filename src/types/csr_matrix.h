/* gpurun.CsrMatrix: a sparse matrix in CSR form over three Buffers, and
 * the C side of gpurun.csr, spmv and spmm (cuSPARSE's generic API). */
#ifndef GPURUN_TYPES_CSR_MATRIX_H
#define GPURUN_TYPES_CSR_MATRIX_H

#include "runtime/runtime.h"

/* Registers the type and sets package.loaded["gpurun.sparse_core"]. */
void gpurun_open_csr_matrix(lua_State *L);

#endif
