/* nvJitLink in one call: create, add every input, complete, collect the
 * code and the logs, destroy. No Lua, no GPU needed. */
#ifndef GPURUN_BASE_NVJITLINK_LINK_H
#define GPURUN_BASE_NVJITLINK_LINK_H

#include <stddef.h>

#include "base/device_code.h"

struct link_input {
    enum device_code_type type;
    const char *data;  /* NUL-terminated past size for PTX (a Lua string is) */
    size_t size;
    const char *name;  /* what nvJitLink's log and gpurun's errors call it */
};

struct link_request {
    const struct link_input *inputs;
    size_t input_count;
    const char *const *options; /* nvJitLink's option strings ("-arch=sm_90", "-lto") */
    size_t option_count;
    int ptx;                    /* 1: the linked PTX (needs -lto and -ptx), 0: the cubin */
};

/* Everything a link produces, heap-owned: release with link_output_free. */
struct link_output {
    char *code;         /* the cubin, or the PTX text (no NUL counted) */
    size_t code_size;
    char *info_log;     /* NUL-terminated, "" when nvJitLink said nothing; long */
    char *error_log;    /* logs keep their head and tail (base/log_cap.h) */
    char error[768];    /* on failure: the step, the input it was on, the result */
};

/* Links. Returns 1, or 0 with output->error saying what failed ("adding
 * 'b.ltoir' (ltoir): NVJITLINK_ERROR_INVALID_INPUT") and the logs as far as
 * nvJitLink got; a missing library is a failure too, with the loader's
 * reason. output needs no initialisation; free it either way. */
int nvjitlink_link(const struct link_request *request, struct link_output *output);

void link_output_free(struct link_output *output);

#endif
