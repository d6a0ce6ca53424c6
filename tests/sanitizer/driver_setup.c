/* tests/sanitizer/driver_setup.c — see driver_setup.h. */
#include "driver_setup.h"

#include <stdio.h>
#include <stdlib.h>

void setup_check(const char *program, CUresult result, const char *what)
{
    if (result == CUDA_SUCCESS)
        return;
    char message[512];
    fprintf(stderr, "%s: %s\n  while %s\n", program,
            cuda_format_error(message, sizeof message, cuda_last_failed_call, result), what);
    exit(1);
}

void setup_device(const char *program, CUdevice *device, CUcontext *context, char *arch,
                  size_t arch_size)
{
    if (cuda_driver_load() != CUDA_SUCCESS) {
        fprintf(stderr, "%s: %s\n", program, cuda_driver_load_error());
        exit(1);
    }
    int major = 0, minor = 0;
    setup_check(program, CUDA_CALL(cuDeviceGet, device, 0), "getting device 0");
    setup_check(program, CUDA_CALL(cuDevicePrimaryCtxRetain, context, *device),
                "retaining the primary context");
    setup_check(program, CUDA_CALL(cuCtxSetCurrent, *context), "making the context current");
    setup_check(program, CUDA_CALL(cuDeviceGetAttribute, &major,
                                   CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, *device),
                "reading the compute capability");
    setup_check(program, CUDA_CALL(cuDeviceGetAttribute, &minor,
                                   CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, *device),
                "reading the compute capability");
    snprintf(arch, arch_size, "sm_%d%d", major, minor);
}

void setup_compile(const char *program, const char *source, const char *name, const char *arch,
                   const char *include_dir, struct nvrtc_output *output)
{
    char arch_option[64], include_option[1024];
    snprintf(arch_option, sizeof arch_option, "--gpu-architecture=%s", arch);
    const char *options[3] = {"--std=c++17", arch_option, NULL};
    size_t option_count = 2;
    if (include_dir) {
        snprintf(include_option, sizeof include_option, "--include-path=%s", include_dir);
        options[option_count++] = include_option;
    }
    struct nvrtc_request request = {
        .source = source, .name = name, .options = options,
        .option_count = option_count, .target = NVRTC_TARGET_CUBIN,
    };
    if (!nvrtc_compile(&request, output)) {
        fprintf(stderr, "%s: NVRTC: %s\n%s\n", program, output->error,
                output->log ? output->log : "");
        exit(1);
    }
}
