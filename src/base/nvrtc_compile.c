/* NVRTC in one call: create, add name expressions, compile, collect the log,
 * the code and the lowered names, destroy. Every exit goes through one
 * cleanup path, so an NVRTC program is never leaked. */
#define _GNU_SOURCE /* dladdr */
#include "base/nvrtc_compile.h"
#include "base/library_loader.h"
#include "base/log_cap.h"
#include "base/nvrtc_inputs.h"
#include "base/ptx_params.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <nvrtc.h>

int nvrtc_compile_version(int *major, int *minor)
{
    return nvrtcVersion(major, minor) == NVRTC_SUCCESS;
}

const char *nvrtc_compile_identity(void)
{
    static char identity[PATH_MAX + 128];
    if (identity[0])
        return identity;

    int major = 0, minor = 0;
    nvrtc_compile_version(&major, &minor);
    char file[PATH_MAX + 64];
    library_file_identity((void *)nvrtcCompileProgram, file, sizeof file);
    snprintf(identity, sizeof identity, "nvrtc %d.%d %s", major, minor, file);
    return identity;
}

const char *nvrtc_compile_folder(void)
{
    static char folder[PATH_MAX];
    static int found;
    if (found)
        return folder;
    found = 1;
    Dl_info info;
    if (dladdr((void *)nvrtcCompileProgram, &info) && info.dli_fname) {
        const char *slash = strrchr(info.dli_fname, '/');
        if (slash && (size_t)(slash - info.dli_fname) < sizeof folder)
            snprintf(folder, sizeof folder, "%.*s", (int)(slash - info.dli_fname),
                     info.dli_fname);
    }
    return folder;
}

/* NVRTC opens libnvrtc-builtins.so.<major>.<minor> itself, by soname, on its
 * first compile, and that dlopen searches only the loader's own paths
 * (LD_LIBRARY_PATH, ld.so.cache, /lib, /usr/lib): not the RUNPATH through
 * which gpurun found libnvrtc, nor libnvrtc's folder. So a toolkit with no
 * ld.so.conf entry (NVIDIA's runfile, a toolkit mounted into a container)
 * compiles nothing. Opening the builtins from libnvrtc's own folder first
 * fixes that: the loader then finds NVRTC's request by soname among the
 * objects already loaded. The handle stays open for the life of the
 * process. Returns "" when the builtins are loaded, else why not, for the
 * error of a compile that then fails on them. */
static const char *load_builtins(void)
{
    static int attempted;
    static char why[440]; /* fits nvrtc_output.error with the result's name */
    if (attempted)
        return why;
    attempted = 1;

    int major = 0, minor = 0;
    if (!nvrtc_compile_version(&major, &minor)) {
        snprintf(why, sizeof why, "nvrtcVersion failed, so gpurun could not name NVRTC's "
                 "builtins library");
        return why;
    }
    char soname[64];
    snprintf(soname, sizeof soname, "libnvrtc-builtins.so.%d.%d", major, minor);

    char beside[PATH_MAX + 64] = "";
    const char *folder = nvrtc_compile_folder();
    if (folder[0])
        snprintf(beside, sizeof beside, "%s/%s", folder, soname);
    char beside_error[PATH_MAX + 128] = "libnvrtc's folder is unknown (dladdr failed)";
    if (beside[0]) {
        if (dlopen(beside, RTLD_NOW | RTLD_LOCAL))
            return why;
        snprintf(beside_error, sizeof beside_error, "%s", dlerror());
    }
    /* Where NVRTC itself looks: an ld.so.conf entry or LD_LIBRARY_PATH. */
    if (dlopen(soname, RTLD_NOW | RTLD_LOCAL))
        return why;
    snprintf(why, sizeof why, "NVRTC %d.%d needs %s beside libnvrtc or on the loader's "
             "path: %s; %s", major, minor, soname, beside_error, dlerror());
    return why;
}

void nvrtc_compile_prepare(void)
{
    load_builtins();
}

const char *nvrtc_target_name(enum nvrtc_target target)
{
    return target == NVRTC_TARGET_CUBIN ? "cubin" : target == NVRTC_TARGET_LTOIR ? "ltoir" : "ptx";
}

static int fail(struct nvrtc_output *output, const char *call, nvrtcResult result,
                const char *detail)
{
    snprintf(output->error, sizeof output->error, "%s: %s%s", call,
             nvrtcGetErrorString(result), detail ? detail : "");
    return 0;
}

static int out_of_memory(struct nvrtc_output *output, const char *what)
{
    snprintf(output->error, sizeof output->error, "out of memory while reading %s", what);
    return 0;
}

static int read_log(nvrtcProgram program, struct nvrtc_output *output)
{
    size_t size = 0;
    nvrtcResult rc = nvrtcGetProgramLogSize(program, &size);
    if (rc != NVRTC_SUCCESS)
        return fail(output, "nvrtcGetProgramLogSize", rc, NULL);
    output->log = calloc(size + 1, 1);
    if (!output->log)
        return out_of_memory(output, "the NVRTC log");
    rc = nvrtcGetProgramLog(program, output->log);
    if (rc != NVRTC_SUCCESS)
        return fail(output, "nvrtcGetProgramLog", rc, NULL);
    output->log = log_cap(output->log, strlen(output->log), "NVRTC's log");
    return 1;
}

static int read_code(nvrtcProgram program, enum nvrtc_target target,
                     struct nvrtc_output *output)
{
    static const struct {
        const char *size_call, *code_call;
        nvrtcResult (*size)(nvrtcProgram, size_t *);
        nvrtcResult (*code)(nvrtcProgram, char *);
    } readers[] = {
        [NVRTC_TARGET_PTX] = {"nvrtcGetPTXSize", "nvrtcGetPTX", nvrtcGetPTXSize, nvrtcGetPTX},
        [NVRTC_TARGET_CUBIN] = {"nvrtcGetCUBINSize", "nvrtcGetCUBIN", nvrtcGetCUBINSize,
                                nvrtcGetCUBIN},
        [NVRTC_TARGET_LTOIR] = {"nvrtcGetLTOIRSize", "nvrtcGetLTOIR", nvrtcGetLTOIRSize,
                                nvrtcGetLTOIR},
    };
    size_t size = 0;
    nvrtcResult rc = readers[target].size(program, &size);
    if (rc != NVRTC_SUCCESS)
        return fail(output, readers[target].size_call, rc, NULL);
    /* NVRTC reports success with no CUBIN when the architecture was a
     * virtual one (only PTX exists for compute_XX), and with no LTO-IR
     * without -dlto. */
    if (size == 0) {
        snprintf(output->error, sizeof output->error, "%s",
                 target == NVRTC_TARGET_LTOIR
                     ? "no ltoir was produced (LTO-IR needs the -dlto option: "
                       "ProgramOptions{ link_time_optimization = true })"
                     : "no cubin was produced (a cubin needs a real architecture such as "
                       "sm_90, not a virtual compute_90)");
        return 0;
    }
    output->code = malloc(size + 1);
    if (!output->code)
        return out_of_memory(output, "the compiled code");
    rc = readers[target].code(program, output->code);
    if (rc != NVRTC_SUCCESS)
        return fail(output, readers[target].code_call, rc, NULL);
    output->code[size] = '\0';
    /* PTX comes NUL-terminated; the text is what callers want. */
    output->code_size = target == NVRTC_TARGET_PTX ? strnlen(output->code, size) : size;
    return 1;
}

/* Keeps the parameter lists of the PTX (base/ptx_params.h) as compact text. */
static void keep_signatures(const char *ptx, size_t size, struct nvrtc_output *output)
{
    struct ptx_signatures signatures;
    char why[200];
    if (!ptx_signatures_parse(ptx, size, &signatures, why, sizeof why)) {
        snprintf(output->signatures_error, sizeof output->signatures_error,
                 "the PTX's kernel signatures could not be read: %s", why);
        return;
    }
    output->signatures = ptx_signatures_format(&signatures, &output->signatures_size);
    ptx_signatures_free(&signatures);
    if (!output->signatures)
        snprintf(output->signatures_error, sizeof output->signatures_error,
                 "out of memory while keeping the kernel signatures");
}

static void no_ptx(struct nvrtc_output *output, const char *why)
{
    snprintf(output->signatures_error, sizeof output->signatures_error,
             "NVRTC gave no PTX to read the kernel signatures from (%s)", why);
}

static void read_signatures(nvrtcProgram program, enum nvrtc_target target,
                            struct nvrtc_output *output)
{
    /* With -dlto NVRTC makes NVVM IR and its PTX is one NUL byte. */
    if (target == NVRTC_TARGET_LTOIR) {
        no_ptx(output, "LTO-IR comes with none");
        return;
    }
    if (target == NVRTC_TARGET_PTX) {
        if (output->code_size == 0)
            no_ptx(output, "empty PTX");
        else
            keep_signatures(output->code, output->code_size, output);
        return;
    }
    size_t size = 0;
    nvrtcResult rc = nvrtcGetPTXSize(program, &size);
    if (rc != NVRTC_SUCCESS || size <= 1) {
        no_ptx(output, rc != NVRTC_SUCCESS ? nvrtcGetErrorString(rc) : "empty PTX");
        return;
    }
    char *ptx = malloc(size);
    if (!ptx) {
        snprintf(output->signatures_error, sizeof output->signatures_error,
                 "out of memory while reading the PTX for the kernel signatures");
        return;
    }
    rc = nvrtcGetPTX(program, ptx);
    if (rc == NVRTC_SUCCESS)
        keep_signatures(ptx, strnlen(ptx, size), output);
    else
        no_ptx(output, nvrtcGetErrorString(rc));
    free(ptx);
}

static int read_lowered_names(nvrtcProgram program, const struct nvrtc_request *request,
                              struct nvrtc_output *output)
{
    if (request->name_expression_count == 0)
        return 1;
    output->lowered_names = calloc(request->name_expression_count, sizeof(char *));
    if (!output->lowered_names)
        return out_of_memory(output, "the lowered names");
    for (size_t i = 0; i < request->name_expression_count; i++) {
        const char *lowered = NULL;
        nvrtcResult rc = nvrtcGetLoweredName(program, request->name_expressions[i], &lowered);
        if (rc != NVRTC_SUCCESS || !lowered) {
            char detail[300];
            snprintf(detail, sizeof detail, " for name expression '%s'",
                     request->name_expressions[i]);
            return fail(output, "nvrtcGetLoweredName", rc, detail);
        }
        /* The lowered name lives in the NVRTC program, which is destroyed
         * before the caller sees it. */
        output->lowered_names[i] = strdup(lowered);
        if (!output->lowered_names[i])
            return out_of_memory(output, "the lowered names");
        output->lowered_name_count = i + 1;
    }
    return 1;
}

static int compile_program(nvrtcProgram program, const struct nvrtc_request *request,
                           struct nvrtc_output *output)
{
    for (size_t i = 0; i < request->name_expression_count; i++) {
        nvrtcResult rc = nvrtcAddNameExpression(program, request->name_expressions[i]);
        if (rc != NVRTC_SUCCESS) {
            char detail[300];
            snprintf(detail, sizeof detail, " for name expression '%s'",
                     request->name_expressions[i]);
            return fail(output, "nvrtcAddNameExpression", rc, detail);
        }
    }
    if (request->option_count > INT_MAX) {
        snprintf(output->error, sizeof output->error, "too many NVRTC options (%zu)",
                 request->option_count);
        return 0;
    }
    nvrtcResult compiled = nvrtcCompileProgram(program, (int)request->option_count,
                                               request->options);
    if (!read_log(program, output))
        return 0;
    if (compiled != NVRTC_SUCCESS) {
        /* The log says what and where; the result names the kind of failure. */
        const char *builtins = load_builtins();
        if (compiled == NVRTC_ERROR_BUILTIN_OPERATION_FAILURE && builtins[0])
            snprintf(output->error, sizeof output->error, "%s: %s",
                     nvrtcGetErrorString(compiled), builtins);
        else
            snprintf(output->error, sizeof output->error, "%s", nvrtcGetErrorString(compiled));
        return 0;
    }
    if (!read_code(program, request->target, output))
        return 0;
    read_signatures(program, request->target, output);
    return read_lowered_names(program, request, output);
}

static void free_products(struct nvrtc_output *output)
{
    free(output->code);
    output->code = NULL;
    output->code_size = 0;
    for (size_t i = 0; i < output->lowered_name_count; i++)
        free(output->lowered_names[i]);
    free(output->lowered_names);
    output->lowered_names = NULL;
    output->lowered_name_count = 0;
    free(output->signatures);
    output->signatures = NULL;
    output->signatures_size = 0;
}

/* The clock is an input NVRTC reads without asking the file system: a
 * program that names it (in its source, its options or the name
 * expressions NVRTC compiles with it) is compiled every time. */
static void check_for_the_time(const struct nvrtc_request *request, struct nvrtc_inputs *inputs)
{
    int names_it = nvrtc_inputs_names_the_time(request->source, strlen(request->source));
    for (size_t i = 0; i < request->option_count && !names_it; i++)
        names_it = nvrtc_inputs_names_the_time(request->options[i], strlen(request->options[i]));
    for (size_t i = 0; i < request->name_expression_count && !names_it; i++)
        names_it = nvrtc_inputs_names_the_time(request->name_expressions[i],
                                               strlen(request->name_expressions[i]));
    if (names_it && !inputs->uncacheable[0])
        snprintf(inputs->uncacheable, sizeof inputs->uncacheable,
                 "it names __DATE__, __TIME__ or __TIMESTAMP__, which change with every compile");
}

int nvrtc_compile(const struct nvrtc_request *request, struct nvrtc_output *output)
{
    memset(output, 0, sizeof *output);
    load_builtins();
    /* What NVRTC reads from outside is recorded from its first call on
     * this program to its last. */
    const char *unwatchable = NULL;
    nvrtc_inputs_watchable(&unwatchable);
    nvrtc_inputs_begin(unwatchable);
    nvrtcProgram program = NULL;
    nvrtcResult rc = nvrtcCreateProgram(&program, request->source, request->name,
                                        0, NULL, NULL);
    int ok = rc == NVRTC_SUCCESS ? compile_program(program, request, output)
                                 : fail(output, "nvrtcCreateProgram", rc, NULL);
    if (program)
        nvrtcDestroyProgram(&program);
    nvrtc_inputs_end(&output->inputs);
    check_for_the_time(request, &output->inputs);
    /* NVRTC says only that it could not open a file we kept it from. */
    if (!ok && output->inputs.refused[0])
        snprintf(output->error, sizeof output->error, "%s", output->inputs.refused);
    /* A failure keeps only what explains it: the log and the error. */
    if (!ok)
        free_products(output);
    return ok;
}

void nvrtc_output_free(struct nvrtc_output *output)
{
    free_products(output);
    nvrtc_inputs_free(&output->inputs);
    free(output->log);
    memset(output, 0, sizeof *output);
}
