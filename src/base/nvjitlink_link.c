/* nvJitLink in one call, made in a child process: nvJitLink reads past
 * the end of some damaged LTO-IR, and a crash there must end the child, not
 * gpurun. Every exit goes through one cleanup path, so a handle is never
 * leaked. */
#include "base/nvjitlink_link.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/child_call.h"
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
                       struct link_output *output, struct child_progress *progress)
{
    for (size_t i = 0; i < request->input_count; i++) {
        progress->step = (int)i + 1;
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
    progress->step = (int)request->input_count + 1;
    nvJitLinkResult rc = nvjitlink.nvJitLinkComplete(handle);
    if (rc != NVJITLINK_SUCCESS)
        return fail(output, "nvJitLinkComplete", rc);
    progress->step = (int)request->input_count + 2;
    return read_code(handle, request->ptx, output);
}

static int link_here(const struct link_request *request, struct link_output *output,
                     struct child_progress *progress)
{
    nvJitLinkHandle handle = NULL;
    nvJitLinkResult rc = nvjitlink.nvJitLinkCreate(&handle, (uint32_t)request->option_count,
                                                   (const char **)request->options);
    int ok = rc == NVJITLINK_SUCCESS ? link_inputs(handle, request, output, progress)
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

/* The child's answer: this header, then the code and the two logs. */
struct link_answer {
    int ok;
    size_t code_size, info_size, error_size;
    char error[sizeof((struct link_output *)0)->error];
};

static void link_in_child(void *arg, int fd, struct child_progress *progress)
{
    const struct link_request *request = arg;
    struct link_output output;
    memset(&output, 0, sizeof output);
    struct link_answer answer = {.ok = link_here(request, &output, progress)};
    answer.code_size = output.code_size;
    answer.info_size = output.info_log ? strlen(output.info_log) : 0;
    answer.error_size = output.error_log ? strlen(output.error_log) : 0;
    memcpy(answer.error, output.error, sizeof answer.error);
    if (child_reply(fd, &answer, sizeof answer) && child_reply(fd, output.code, answer.code_size) &&
        child_reply(fd, output.info_log, answer.info_size))
        child_reply(fd, output.error_log, answer.error_size);
    link_output_free(&output);
}

static char *copy_out(const char *at, size_t size)
{
    char *copy = malloc(size + 1);
    if (copy) {
        memcpy(copy, at, size);
        copy[size] = '\0';
    }
    return copy;
}

/* Where the child was when it ended, for the error. */
static void describe_step(const struct link_request *request, int step, char *where, size_t size)
{
    if (step >= 1 && (size_t)step <= request->input_count) {
        const struct link_input *input = &request->inputs[step - 1];
        snprintf(where, size, "adding input %d '%s' (%s): the input is damaged, or not %s",
                 step, input->name, device_code_type_name(input->type),
                 device_code_type_name(input->type));
    } else if ((size_t)step == request->input_count + 1)
        snprintf(where, size, "in nvJitLinkComplete: one of the inputs is damaged");
    else
        snprintf(where, size, "%s", step == 0 ? "in nvJitLinkCreate" : "reading the linked code");
}

static int from_answer(const struct link_request *request, const struct child_answer *child,
                       struct link_output *output)
{
    struct link_answer answer;
    if (child->signal == 0 && child->status == 0 && child->size >= sizeof answer) {
        memcpy(&answer, child->data, sizeof answer);
        size_t rest = child->size - sizeof answer;
        if (answer.code_size <= rest && answer.info_size <= rest - answer.code_size &&
            answer.error_size == rest - answer.code_size - answer.info_size) {
            const char *at = child->data + sizeof answer;
            memcpy(output->error, answer.error, sizeof output->error);
            output->error[sizeof output->error - 1] = '\0';
            output->code = copy_out(at, answer.code_size);
            output->code_size = answer.code_size;
            output->info_log = copy_out(at + answer.code_size, answer.info_size);
            output->error_log = copy_out(at + answer.code_size + answer.info_size,
                                         answer.error_size);
            if (output->code && output->info_log && output->error_log)
                return answer.ok;
            snprintf(output->error, sizeof output->error, "out of memory for the linked code");
            return 0;
        }
    }
    char where[600];
    describe_step(request, child->step, where, sizeof where);
    if (child->signal != 0)
        snprintf(output->error, sizeof output->error, "nvJitLink crashed (signal %d, %s) %s",
                 child->signal, strsignal(child->signal), where);
    else
        snprintf(output->error, sizeof output->error,
                 "nvJitLink's process ended with status %d %s", child->status, where);
    return 0;
}

int nvjitlink_link(const struct link_request *request, struct link_output *output)
{
    memset(output, 0, sizeof *output);
    if (nvjitlink_loader_load() != 0) {
        snprintf(output->error, sizeof output->error, "%s", nvjitlink_loader_error());
        return 0;
    }
    if (request->option_count > UINT32_MAX || request->input_count > INT32_MAX - 2) {
        snprintf(output->error, sizeof output->error, "too many nvJitLink options or inputs");
        return 0;
    }
    struct child_answer child;
    char error[256];
    if (!child_call(link_in_child, (void *)request, &child, error, sizeof error)) {
        snprintf(output->error, sizeof output->error, "nvJitLink runs in a child process: %s",
                 error);
        return 0;
    }
    int ok = from_answer(request, &child, output);
    free(child.data);
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
