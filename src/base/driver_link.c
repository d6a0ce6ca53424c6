/* cuLinkCreate, cuLinkAddData, cuLinkComplete, cuLinkDestroy, with the
 * nvJitLink option strings of a link request read back into the driver's
 * JIT options. Every exit goes through one cleanup path. */
#include "base/driver_link.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/cuda_driver.h"
#include "base/log_cap.h"

#define LOG_SIZE (64 * 1024)
#define MAX_OPTIONS 16 /* six translated ones and the four of the logs */

struct jit_options {
    CUjit_option names[MAX_OPTIONS];
    void *values[MAX_OPTIONS];
    unsigned count;
};

static void add(struct jit_options *jit, CUjit_option name, uintptr_t value)
{
    jit->names[jit->count] = name;
    jit->values[jit->count] = (void *)value;
    jit->count++;
}

/* "sm_90" -> 90, "sm_90a" -> CU_TARGET_COMPUTE_90A; 0 for anything else. */
static unsigned parse_target(const char *arch)
{
    if (strncmp(arch, "sm_", 3) != 0)
        return 0;
    char *end = NULL;
    unsigned long number = strtoul(arch + 3, &end, 10);
    if (end == arch + 3 || number < 30 || number > 999)
        return 0;
    if (*end == '\0')
        return (unsigned)number;
    if (strcmp(end, "a") == 0)
        return CU_COMPUTE_ACCELERATED_TARGET_BASE + (unsigned)number;
    return 0;
}

/* An unsigned number after a prefix ("-maxrregcount=64"); -1 if none. */
static long number_after(const char *option, const char *prefix)
{
    size_t length = strlen(prefix);
    if (strncmp(option, prefix, length) != 0 || option[length] < '0' || option[length] > '9')
        return -1;
    char *end = NULL;
    long value = strtol(option + length, &end, 10);
    return *end == '\0' && value >= 0 && value <= 1024 ? value : -1;
}

/* Translates one option; 0 with `why` when the driver has no counterpart. */
static int translate(const char *option, struct jit_options *jit, char *why, size_t size)
{
    long value;
    if (strncmp(option, "-arch=", 6) == 0) {
        unsigned target = parse_target(option + 6);
        if (target == 0) {
            snprintf(why, size, "it makes code for sm_XX or sm_XXa only, not %s", option + 6);
            return 0;
        }
        add(jit, CU_JIT_TARGET, target);
    } else if ((value = number_after(option, "-maxrregcount=")) >= 0) {
        add(jit, CU_JIT_MAX_REGISTERS, (uintptr_t)value);
    } else if ((value = number_after(option, "-O")) >= 0 && value <= 4) {
        add(jit, CU_JIT_OPTIMIZATION_LEVEL, (uintptr_t)value);
    } else if (strcmp(option, "-g") == 0) {
        add(jit, CU_JIT_GENERATE_DEBUG_INFO, 1);
    } else if (strcmp(option, "-lineinfo") == 0) {
        add(jit, CU_JIT_GENERATE_LINE_INFO, 1);
    } else if (strcmp(option, "-verbose") == 0) {
        add(jit, CU_JIT_LOG_VERBOSE, 1);
    } else if (strcmp(option, "-no-cache") != 0) {
        /* -no-cache is gpurun's kernel cache, which the driver's links skip. */
        snprintf(why, size, "it has no counterpart of nvJitLink's %s", option);
        return 0;
    }
    return 1;
}

static int translate_all(const struct link_request *request, struct jit_options *jit, char *why,
                         size_t size)
{
    jit->count = 0;
    for (size_t i = 0; i < request->option_count; i++) {
        if (jit->count + 1 > MAX_OPTIONS - 4) {
            snprintf(why, size, "too many options");
            return 0;
        }
        if (!translate(request->options[i], jit, why, size))
            return 0;
    }
    return 1;
}

static CUjitInputType input_type(enum device_code_type type)
{
    switch (type) {
    case DEVICE_CODE_PTX: return CU_JIT_INPUT_PTX;
    case DEVICE_CODE_CUBIN: return CU_JIT_INPUT_CUBIN;
    case DEVICE_CODE_FATBIN: return CU_JIT_INPUT_FATBINARY;
    case DEVICE_CODE_OBJECT: return CU_JIT_INPUT_OBJECT;
    case DEVICE_CODE_LIBRARY: return CU_JIT_INPUT_LIBRARY;
    case DEVICE_CODE_LTOIR: break;
    }
    return CU_JIT_NUM_INPUT_TYPES;
}

int driver_link_refusal(const struct link_request *request, char *why, size_t size)
{
    if (request->ptx) {
        snprintf(why, size, "it makes no PTX");
        return 1;
    }
    for (size_t i = 0; i < request->input_count; i++) {
        if (input_type(request->inputs[i].type) == CU_JIT_NUM_INPUT_TYPES) {
            snprintf(why, size, "LTO-IR ('%s') needs nvJitLink", request->inputs[i].name);
            return 1;
        }
    }
    struct jit_options jit;
    return !translate_all(request, &jit, why, size);
}

static int fail(struct link_output *output, const char *step, CUresult result)
{
    cuda_format_error(output->error, sizeof output->error, step, result);
    return 0;
}

static int link_inputs(CUlinkState state, const struct link_request *request,
                       struct link_output *output)
{
    for (size_t i = 0; i < request->input_count; i++) {
        const struct link_input *input = &request->inputs[i];
        /* PTX goes with its NUL, as NVRTC gives it. */
        size_t size = input->size + (input->type == DEVICE_CODE_PTX);
        CUresult rc = CUDA_CALL(cuLinkAddData, state, input_type(input->type),
                                (void *)input->data, size, input->name, 0, NULL, NULL);
        if (rc != CUDA_SUCCESS) {
            char step[512];
            snprintf(step, sizeof step, "cuLinkAddData of input %zu '%s' (%s)", i + 1,
                     input->name, device_code_type_name(input->type));
            return fail(output, step, rc);
        }
    }
    void *cubin = NULL;
    size_t size = 0;
    CUresult rc = CUDA_CALL(cuLinkComplete, state, &cubin, &size);
    if (rc != CUDA_SUCCESS)
        return fail(output, "cuLinkComplete", rc);
    output->code = malloc(size + 1);
    if (!output->code) {
        snprintf(output->error, sizeof output->error, "out of memory for the linked code");
        return 0;
    }
    memcpy(output->code, cubin, size); /* the state owns cubin */
    output->code[size] = '\0';
    output->code_size = size;
    return 1;
}

/* The driver fills a log up to its buffer's size: a log is kept whole or
 * cut by log_cap's rule, as nvJitLink's are. */
static char *kept_log(char *log, const char *whose)
{
    if (!log)
        return calloc(1, 1);
    log[LOG_SIZE - 1] = '\0';
    return log_cap(log, strlen(log), whose);
}

int driver_link(const struct link_request *request, struct link_output *output)
{
    memset(output, 0, sizeof *output);
    struct jit_options jit;
    char why[256];
    if (driver_link_refusal(request, why, sizeof why) || !translate_all(request, &jit, why,
                                                                         sizeof why)) {
        snprintf(output->error, sizeof output->error, "the driver's linker cannot link this: %s",
                 why);
        return 0;
    }
    char *info = calloc(LOG_SIZE, 1), *error = calloc(LOG_SIZE, 1);
    int ok = 0;
    if (!info || !error) {
        snprintf(output->error, sizeof output->error, "out of memory for the link's logs");
    } else {
        add(&jit, CU_JIT_INFO_LOG_BUFFER, (uintptr_t)info);
        add(&jit, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES, LOG_SIZE);
        add(&jit, CU_JIT_ERROR_LOG_BUFFER, (uintptr_t)error);
        add(&jit, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES, LOG_SIZE);
        CUlinkState state = NULL;
        CUresult rc = CUDA_CALL(cuLinkCreate, jit.count, jit.names, jit.values, &state);
        ok = rc == CUDA_SUCCESS ? link_inputs(state, request, output)
                                : fail(output, "cuLinkCreate", rc);
        if (state)
            CUDA_CALL(cuLinkDestroy, state);
    }
    output->info_log = kept_log(info, "the driver linker's info log");
    output->error_log = kept_log(error, "the driver linker's error log");
    if (!ok) {
        free(output->code);
        output->code = NULL;
        output->code_size = 0;
    }
    return ok;
}
