/* nvJitLink in one call. Every exit goes through one cleanup path, so a
 * handle is never leaked. */
#include "base/nvjitlink_link.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/log_cap.h"
#include "base/nvjitlink_loader.h"

static nvJitLinkInputType input_type(enum device_code_type type)
{
    switch (type) {
    case DEVICE_CODE_PTX: return NVJITLINK_INPUT_PTX;
    case DEVICE_CODE_CUBIN: return NVJITLINK_INPUT_CUBIN;
    case DEVICE_CODE_LTOIR: return NVJITLINK_INPUT_LTOIR;
    case DEVICE_CODE_FATBIN: return NVJITLINK_INPUT_FATBIN;
    case DEVICE_CODE_OBJECT: return NVJITLINK_INPUT_OBJECT;
    case DEVICE_CODE_LIBRARY: return NVJITLINK_INPUT_LIBRARY;
    }
    return NVJITLINK_INPUT_NONE;
}

static int fail(struct link_output *output, const char *step, nvJitLinkResult result)
{
    snprintf(output->error, sizeof output->error, "%s: %s", step, nvjitlink_result_name(result));
    return 0;
}

/* Reads one of the logs into *log (capped), "" when it cannot. */
static void read_log(nvJitLinkHandle handle, char **log, const char *whose,
                     nvJitLinkResult (*get_size)(nvJitLinkHandle, size_t *),
                     nvJitLinkResult (*get)(nvJitLinkHandle, char *))
{
    size_t size = 0;
    if (get_size(handle, &size) != NVJITLINK_SUCCESS)
        size = 0;
    *log = calloc(size + 1, 1);
    if (*log && size > 0 && get(handle, *log) != NVJITLINK_SUCCESS)
        (*log)[0] = '\0';
    if (*log)
        *log = log_cap(*log, strlen(*log), whose);
}

static int read_code(nvJitLinkHandle handle, int ptx, struct link_output *output)
{
    size_t size = 0;
    nvJitLinkResult rc = ptx ? nvjitlink.nvJitLinkGetLinkedPtxSize(handle, &size)
                             : nvjitlink.nvJitLinkGetLinkedCubinSize(handle, &size);
    if (rc != NVJITLINK_SUCCESS)
        return fail(output, ptx ? "nvJitLinkGetLinkedPtxSize" : "nvJitLinkGetLinkedCubinSize", rc);
    output->code = malloc(size + 1);
    if (!output->code) {
        snprintf(output->error, sizeof output->error, "out of memory for the linked code");
        return 0;
    }
    rc = ptx ? nvjitlink.nvJitLinkGetLinkedPtx(handle, output->code)
             : nvjitlink.nvJitLinkGetLinkedCubin(handle, output->code);
    if (rc != NVJITLINK_SUCCESS)
        return fail(output, ptx ? "nvJitLinkGetLinkedPtx" : "nvJitLinkGetLinkedCubin", rc);
    output->code[size] = '\0';
    output->code_size = ptx ? strnlen(output->code, size) : size;
    return 1;
}

static int link_inputs(nvJitLinkHandle handle, const struct link_request *request,
                       struct link_output *output)
{
    for (size_t i = 0; i < request->input_count; i++) {
        const struct link_input *input = &request->inputs[i];
        /* PTX goes with its NUL, as NVRTC gives it. */
        size_t size = input->size + (input->type == DEVICE_CODE_PTX);
        nvJitLinkResult rc = nvjitlink.nvJitLinkAddData(handle, input_type(input->type),
                                                        input->data, size, input->name);
        if (rc != NVJITLINK_SUCCESS) {
            char step[512];
            snprintf(step, sizeof step, "adding input %zu '%s' (%s)", i + 1, input->name,
                     device_code_type_name(input->type));
            return fail(output, step, rc);
        }
    }
    nvJitLinkResult rc = nvjitlink.nvJitLinkComplete(handle);
    if (rc != NVJITLINK_SUCCESS)
        return fail(output, "nvJitLinkComplete", rc);
    return read_code(handle, request->ptx, output);
}

int nvjitlink_link(const struct link_request *request, struct link_output *output)
{
    memset(output, 0, sizeof *output);
    if (nvjitlink_loader_load() != 0) {
        snprintf(output->error, sizeof output->error, "%s", nvjitlink_loader_error());
        return 0;
    }
    if (request->option_count > UINT32_MAX) {
        snprintf(output->error, sizeof output->error, "too many nvJitLink options");
        return 0;
    }
    nvJitLinkHandle handle = NULL;
    nvJitLinkResult rc = nvjitlink.nvJitLinkCreate(&handle, (uint32_t)request->option_count,
                                                   (const char **)request->options);
    int ok = rc == NVJITLINK_SUCCESS ? link_inputs(handle, request, output)
                                     : fail(output, "nvJitLinkCreate", rc);
    if (handle) {
        read_log(handle, &output->info_log, "nvJitLink's info log",
                 nvjitlink.nvJitLinkGetInfoLogSize, nvjitlink.nvJitLinkGetInfoLog);
        read_log(handle, &output->error_log, "nvJitLink's error log",
                 nvjitlink.nvJitLinkGetErrorLogSize, nvjitlink.nvJitLinkGetErrorLog);
        nvjitlink.nvJitLinkDestroy(&handle);
    }
    if (!ok) {
        free(output->code);
        output->code = NULL;
        output->code_size = 0;
    }
    return ok;
}

void link_output_free(struct link_output *output)
{
    free(output->code);
    free(output->info_log);
    free(output->error_log);
    memset(output, 0, sizeof *output);
}
