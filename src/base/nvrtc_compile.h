/* NVRTC: CUDA C++ source -> PTX, CUBIN or LTO-IR. No Lua, no GPU needed. */
#ifndef GPURUN_BASE_NVRTC_COMPILE_H
#define GPURUN_BASE_NVRTC_COMPILE_H

#include <stddef.h>

#include "base/nvrtc_inputs.h"

/* NVRTC's version; returns 0 if NVRTC cannot tell. */
int nvrtc_compile_version(int *major, int *minor);

/* A string that changes whenever the NVRTC library in use changes: its
 * version, the file it was loaded from and that file's size and time. The
 * kernel cache keys on it, so a toolkit update never serves stale code. */
const char *nvrtc_compile_identity(void);

/* The folder the NVRTC library in use was loaded from ("" when unknown):
 * the toolkit's library folder, where its other libraries (NVRTC's
 * builtins, nvJitLink) are looked for first. */
const char *nvrtc_compile_folder(void);

/* Loads what NVRTC needs before its first compile (its builtins library,
 * from libnvrtc's own folder). nvrtc_compile() does it; the kernel cache
 * does it before asking NVRTC's questions again, so that they find NVRTC's
 * libraries as a compile would. */
void nvrtc_compile_prepare(void);

/* LTOIR: NVVM's IR for a link with link-time optimization (nvJitLink);
 * the compile needs -dlto. */
enum nvrtc_target { NVRTC_TARGET_PTX, NVRTC_TARGET_CUBIN, NVRTC_TARGET_LTOIR };

/* "ptx", "cubin" or "ltoir". */
const char *nvrtc_target_name(enum nvrtc_target target);

struct nvrtc_request {
    const char *source;              /* NUL-terminated CUDA C++ */
    const char *name;                /* file name the log and __FILE__ show */
    const char *const *options;      /* NVRTC option strings, in order */
    size_t option_count;
    enum nvrtc_target target;
    const char *const *name_expressions; /* e.g. "scale<float>": lowered after compiling */
    size_t name_expression_count;
};

/* Everything a compile produces, all heap-owned: release with
 * nvrtc_output_free(). */
struct nvrtc_output {
    char *code;             /* PTX text (no trailing NUL counted), CUBIN or LTO-IR bytes */
    size_t code_size;
    char *log;              /* NVRTC's log, NUL-terminated; "" when it said nothing. A
                             * long one keeps its first 48 KiB and last 16 KiB of
                             * lines, saying how much was left out between. */
    char **lowered_names;   /* one per name expression, same order */
    size_t lowered_name_count;
    /* The kernels' parameter lists as ptx_signatures_format() text, read
     * from the PTX for PTX and CUBIN (NVRTC gives PTX after a CUBIN compile
     * too); parse it with ptx_signatures_parse(). NULL when they could not
     * be read (always for LTO-IR, which comes with no PTX), with signatures_error saying why: a compile never fails
     * for want of them. */
    char *signatures;
    size_t signatures_size;
    char signatures_error[256];
    char error[512];        /* on failure: which step failed and NVRTC's result */
    /* What NVRTC read besides the request (base/nvrtc_inputs.h), recorded
     * on every compile; a file refused there names the failure in error. */
    struct nvrtc_inputs inputs;
};

/* Compiles. Returns 1 on success; on failure 0, with output->error saying
 * what failed ("NVRTC_ERROR_COMPILATION" for a compile error, else
 * "nvrtcCall: NVRTC_ERROR_X ...") and output->log holding the compiler's log
 * when it got that far. output needs no initialisation; free it either way. */
int nvrtc_compile(const struct nvrtc_request *request, struct nvrtc_output *output);

void nvrtc_output_free(struct nvrtc_output *output);

#endif
