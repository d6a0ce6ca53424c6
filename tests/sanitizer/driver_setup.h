/* tests/sanitizer/driver_setup.h — what the programs of tests/sanitizer/
 * share: gpurun's driver loader and NVRTC call and nothing else of gpurun,
 * a failure check that names the program, device 0's primary context as
 * Device(0):set_current() makes it, and a compile to that device's cubin.
 * Each exits 1 on a failure, as the programs' usage says. */
#ifndef GPURUN_TESTS_DRIVER_SETUP_H
#define GPURUN_TESTS_DRIVER_SETUP_H

#include <stddef.h>

#include "base/cuda_driver.h"
#include "base/nvrtc_compile.h"

/* Prints "PROGRAM: the error\n  while WHAT" and exits 1 unless result is
 * CUDA_SUCCESS. */
void setup_check(const char *program, CUresult result, const char *what);

/* Loads the driver and makes device 0's primary context current; writes
 * "sm_XY" for it into arch. */
void setup_device(const char *program, CUdevice *device, CUcontext *context, char *arch,
                  size_t arch_size);

/* Compiles source (named name) for arch into a cubin, with include_dir on
 * the include path when not NULL. */
void setup_compile(const char *program, const char *source, const char *name, const char *arch,
                   const char *include_dir, struct nvrtc_output *output);

#endif
