/* gpurun.FftPlanCore (internal) and the C side of gpurun.fft: cuFFT plans
 * on gpurun's streams. */
#ifndef GPURUN_TYPES_FFT_PLAN_H
#define GPURUN_TYPES_FFT_PLAN_H

#include "runtime/runtime.h"

/* Registers the plan type and sets package.loaded["gpurun.fft_core"]. */
void gpurun_open_fft_plan(lua_State *L);

#endif
