/* Tests for src/base/ptx_params.c, ptx_params_text.c and for the signatures
 * nvrtc_compile() and the kernel cache keep; spec/ptx_params_spec.lua runs
 * it, and main() at the end says how. No Lua. */
#define _GNU_SOURCE /* mkdtemp, asprintf */
#include "base/cuda_driver.h"
#include "base/kernel_cache.h"
#include "base/nvrtc_compile.h"
#include "base/ptx_params.h"
#include "check.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *read_path(const char *path, size_t *size)
{
    FILE *file = fopen(path, "rb");
    if (!file)
        return NULL;
    char *data = NULL;
    size_t capacity = 0, used = 0;
    for (;;) {
        if (used + 4096 + 1 > capacity) {
            capacity = capacity ? capacity * 2 : 8192;
            char *bigger = realloc(data, capacity);
            if (!bigger)
                break;
            data = bigger;
        }
        size_t n = fread(data + used, 1, capacity - used - 1, file);
        used += n;
        if (n == 0)
            break;
    }
    fclose(file);
    if (data) {
        data[used] = '\0';
        *size = used;
    }
    return data;
}

static char *read_whole(const char *dir, const char *name, size_t *size)
{
    char *path = NULL;
    if (asprintf(&path, "%s/%s", dir, name) < 0)
        return NULL;
    char *data = read_path(path, size);
    free(path);
    return data;
}

/* One line per kernel: "name: .u64?@0 .f32@8 (12 bytes)"; '?' marks a
 * parameter that may be a pointer, " .ptr" one that is. */
static char *dump(const struct ptx_signatures *signatures)
{
    char *text = NULL;
    size_t size = 0;
    FILE *out = open_memstream(&text, &size);
    if (!out)
        return NULL;
    fprintf(out, "target %d%s\n", signatures->target_arch,
            signatures->marks_pointers ? ", pointers marked" : "");
    for (size_t k = 0; k < signatures->kernel_count; k++) {
        const struct ptx_kernel_signature *kernel = &signatures->kernels[k];
        fprintf(out, "%s:", kernel->name);
        for (size_t i = 0; i < kernel->param_count; i++) {
            const struct ptx_param *p = &kernel->params[i];
            char type[48];
            fprintf(out, " %s%s@%u", ptx_param_describe(p, type, sizeof type),
                    p->pointer == PTX_POINTER_UNKNOWN ? "?" : "", p->offset);
        }
        fprintf(out, " (%zu bytes)\n", kernel->param_bytes);
    }
    fclose(out);
    return text;
}

/* Parses text and compares the dump; returns the dump's match. */
static int expect_parse(int line, const char *ptx, const char *expected)
{
    struct ptx_signatures signatures;
    char error[256];
    int parsed = ptx_signatures_parse(ptx, strlen(ptx), &signatures, error, sizeof error);
    if (!check_at(parsed, __FILE__, line, "parse failed: %s", error))
        return 0;
    char *got = dump(&signatures);
    int ok = check_at(got && strcmp(got, expected) == 0, __FILE__, line,
                      "parsed as\n%s\nexpected\n%s", got ? got : "(no memory)", expected);
    free(got);
    ptx_signatures_free(&signatures);
    return ok;
}

static void expect_error(int line, const char *ptx, const char *fragment)
{
    struct ptx_signatures signatures;
    char error[256];
    int parsed = ptx_signatures_parse(ptx, strlen(ptx), &signatures, error, sizeof error);
    check_at(!parsed && strstr(error, fragment) != NULL && signatures.kernels == NULL, __FILE__,
             line, "expected an error with '%s', got %s '%s'", fragment,
             parsed ? "success" : "error", parsed ? "" : error);
    if (parsed)
        ptx_signatures_free(&signatures);
}

#define EXPECT_PARSE(ptx, expected) expect_parse(__LINE__, ptx, expected)
#define EXPECT_ERROR(ptx, fragment) expect_error(__LINE__, ptx, fragment)

static void check_round_trip(const char *name, const char *ptx, size_t size);

static void test_syntax(void)
{
    /* Layout: each parameter at the next multiple of its alignment. */
    EXPECT_PARSE(".target sm_90\n.entry k(.param .u8 a, .param .u64 b, .param .u16 c, "
                 ".param .align 16 .b8 d[32], .param .b32 e[3], .param .f32 f)\n{ ret; }\n",
                 "target 90\nk: .u8@0 .u64?@8 .u16@16 .align 16 .b8[32]@32 .b32[3]@64 .f32@76"
                 " (80 bytes)\n");
    /* Linkage, line breaks anywhere, comments between tokens, CRLF, tabs. */
    EXPECT_PARSE("//\r\n// Generated\r\n.version 9.0\r\n.target\tsm_90a, debug\r\n"
                 ".visible\t.entry /* c */ one(\r\n\t.param /* x */ .u32\r\n one_p0, // first\r\n"
                 "\t.param\r\n.f64 one_p1\r\n)\r\n.maxntid 256, 1, 1\r\n{\r\n}\r\n"
                 ".weak .entry two(.param .s64 x){}\n.entry three(){}\n",
                 "target 90\none: .u32@0 .f64@8 (16 bytes)\ntwo: .s64?@0 (8 bytes)\n"
                 "three: (0 bytes)\n");
    /* Skipped: device functions, .extern declarations, strings, bodies with
     * their own .param declarations, debug sections. */
    EXPECT_PARSE(".target sm_80\n.file 1 \"/tmp/.entry fake(.param .u8 x)\"\n"
                 ".extern .entry elsewhere(.param .u32 x);\n"
                 ".func (.param .b32 r) f(.param .b32 x) { .param .b32 param0; ret; }\n"
                 ".visible .entry k(.param .b64 p) { { .param .b32 inner; } call f; }\n"
                 ".section .debug_info { .b8 1, 2 /* .entry no( */ }\n"
                 "// .entry commented(.param .u8 x)\n/* .entry block(.param .u8 x) */\n",
                 "target 80\nk: .b64?@0 (8 bytes)\n");
    /* A kernel with no list at all, a repeated declaration kept once. */
    EXPECT_PARSE(".entry bare\n{\n}\n.entry twice(.param .u32 a);\n.entry twice(.param .u32 a) {}\n",
                 "target 0\nbare: (0 bytes)\ntwice: .u32@0 (4 bytes)\n");
    /* Pointer attributes: marked always, state spaces, pointee alignment. */
    EXPECT_PARSE(".target sm_100\n.entry k(.param .u64 .ptr .global .align 16 a, .param .u64 .ptr"
                 " .align 1 b, .param .u64 n, .param .f64 d, .param .u64 .ptr .shared c)\n",
                 "target 100, pointers marked\nk: .u64 .ptr@0 .u64 .ptr@8 .u64@16 .f64@24"
                 " .u64 .ptr@32 (40 bytes)\n");
    EXPECT_PARSE("", "target 0\n");
    EXPECT_PARSE(".target compute_120\n", "target 120, pointers marked\n");

    struct ptx_signatures s;
    char error[256];
    const char *text = ".target sm_90\n.entry k(.param .u64 .ptr .global .align 4 a)\n";
    if (CHECK(ptx_signatures_parse(text, strlen(text), &s, error, sizeof error), "%s", error)) {
        const struct ptx_param *p = &s.kernels[0].params[0];
        CHECK(p->pointer == PTX_POINTER_YES && p->pointee_align == 4 && p->align == 8
              && strcmp(p->space, "global") == 0 && strcmp(p->type, "u64") == 0
              && p->kind == PTX_PARAM_UNSIGNED && p->count == 0 && p->element_size == 8,
              "pointer attributes read wrong");
        CHECK(ptx_signatures_find(&s, "k") == &s.kernels[0], "find k");
        CHECK(ptx_signatures_find(&s, "K") == NULL && ptx_signatures_find(&s, "") == NULL,
              "find is exact");
        ptx_signatures_free(&s);
        CHECK(s.kernels == NULL && s.kernel_count == 0, "free empties");
    }
    /* Kinds. */
    text = ".entry k(.param .s8 a, .param .bf16 b, .param .b128 c, .param .align 4 .b8 d[4])";
    if (CHECK(ptx_signatures_parse(text, strlen(text), &s, error, sizeof error), "%s", error)) {
        const struct ptx_param *p = s.kernels[0].params;
        CHECK(p[0].kind == PTX_PARAM_SIGNED && p[1].kind == PTX_PARAM_FLOAT
              && p[2].kind == PTX_PARAM_BITS && p[2].size == 16 && p[3].kind == PTX_PARAM_AGGREGATE
              && p[3].count == 4 && p[3].size == 4 && p[3].element_size == 1,
              "kinds read wrong");
        ptx_signatures_free(&s);
    }
    /* Every type name whole, the longest included, and through the compact text. */
    text = ".entry k(.param .f16x2 a, .param .bf16x2 b, .param .b128 c)";
    if (CHECK(ptx_signatures_parse(text, strlen(text), &s, error, sizeof error), "%s", error)) {
        const struct ptx_param *p = s.kernels[0].params;
        CHECK(strcmp(p[0].type, "f16x2") == 0 && strcmp(p[1].type, "bf16x2") == 0
              && strcmp(p[2].type, "b128") == 0, "type names cut: %s %s %s", p[0].type, p[1].type, p[2].type);
        ptx_signatures_free(&s);
    }
    check_round_trip("bf16x2", text, strlen(text));

    EXPECT_ERROR(".entry k(.param x)", "line 1: parameter without a type before 'x'");
    EXPECT_ERROR(".entry k(.param .pred p)", "unexpected 'pred' in a parameter declaration");
    EXPECT_ERROR(".entry k(.param .u32 .u64 p)", "unexpected 'u64'");
    EXPECT_ERROR(".entry k(.param .u32 a,\n.param .u32 b", "line 2: expected ',' or ')'");
    EXPECT_ERROR(".entry k(.param .u32 a .param .u32 b)", "expected ',' or ')' after a parameter");
    EXPECT_ERROR(".entry k(.u32 a)", "expected .param, got 'u32'");
    EXPECT_ERROR(".entry k(.param .align 3 .b8 a[4])", ".align 3 is not a power of two");
    EXPECT_ERROR(".entry k(.param .align 0 .b8 a[4])", "is not a number from 1 to");
    EXPECT_ERROR(".entry k(.param .align x .b8 a[4])", "expected .align's value, got 'x'");
    EXPECT_ERROR(".entry k(.param .u32 .ptr a)", ".ptr needs a 64-bit type before it");
    EXPECT_ERROR(".entry k(.param .u64 .global a)", "state space .global only follows .ptr");
    EXPECT_ERROR(".entry k(.param .u64 .ptr a[2])", "a .ptr parameter cannot be an array");
    EXPECT_ERROR(".entry k(.param .b8 a[99999999])", "is not a number from 1 to");
    EXPECT_ERROR(".entry k(.param .b8 a[4)", "expected ']' after the array size");
    EXPECT_ERROR(".entry k(.param .b64 a[200000])", "array parameter of 200000 elements is too large");
    EXPECT_ERROR(".entry k(.param .b8 a[1048576], .param .b8 b[1])", "parameters take more than");
    EXPECT_ERROR(".entry (.param .u8 a)", "expected a kernel name after .entry, got '('");
    EXPECT_ERROR(".entry", "got 'end of text'");
    EXPECT_ERROR("}", "unbalanced '}'");
    /* Numbers past any architecture: an error, never an overflow. */
    EXPECT_ERROR(".target sm_99999999999\n", ".target 'sm_99999999999': no architecture has so large");
    EXPECT_ERROR(".target compute_2147483648\n", "no architecture has so large a number");
    EXPECT_PARSE(".target sm_1000000\n", "target 1000000, pointers marked\n");
}

/* --many N: a module of N kernels, each declared, then defined, then looked
 * up by name; prints "N kernels, N found". Linear work: a quadratic lookup
 * would take minutes at N = 200000 (spec/ptx_params_spec.lua's timeout). */
static int many_kernels(const char *count_text)
{
    long count = strtol(count_text, NULL, 10);
    if (count <= 0 || count > 10000000)
        return 2;
    size_t size = 0, capacity = (size_t)count * 96 + 64;
    char *ptx = malloc(capacity);
    if (!ptx)
        return 1;
    size += (size_t)snprintf(ptx + size, capacity - size, ".target sm_90\n");
    for (long i = 0; i < count; i++)
        size += (size_t)snprintf(ptx + size, capacity - size,
                                 ".entry k%ld(.param .u32 a);\n.entry k%ld(.param .u32 a) { }\n", i, i);
    struct ptx_signatures s;
    char error[256];
    if (!ptx_signatures_parse(ptx, size, &s, error, sizeof error)) {
        fprintf(stderr, "%s\n", error);
        free(ptx);
        return 1;
    }
    long found = 0;
    char name[32];
    for (long i = 0; i < count; i++) {
        snprintf(name, sizeof name, "k%ld", i);
        const struct ptx_kernel_signature *kernel = ptx_signatures_find(&s, name);
        found += kernel != NULL && strcmp(kernel->name, name) == 0 && kernel->param_count == 1;
    }
    int missing = ptx_signatures_find(&s, "k") == NULL && ptx_signatures_find(&s, "zzz") == NULL;
    printf("%zu kernels, %ld found%s\n", s.kernel_count, found, missing ? "" : ", and a wrong one");
    ptx_signatures_free(&s);
    free(ptx);
    return found == count && missing && s.kernel_count == 0 ? 0 : 1;
}

struct fixture {
    const char *file;
    const char *expected;
};

#define EVERY_TYPE(q, p) \
    "every_type: .u64" p "@0 .u64" q "@8 .f32@16 .f64@24 .u32@32 .u32@36 .u16@40 .u16@42" \
    " .u8@44 .u8@45 .u8@46 .u8@47 .u64" q "@48 .align 8 .b8[16]@56 .align 4 .b8[12]@72" \
    " .align 16 .b8[16]@96 .u64" p "@112 .align 2 .b8[2]@120 .align 16 .b8[16]@128" \
    " .align 8 .b8[8]@144 .u64" p "@152 .u64" q "@160 (168 bytes)\n" \
    "no_params: (0 bytes)\n" \
    "uses_params: .u64" p "@0 .u64" p "@8 .u64" q "@16 .f32@24 .u8@28 (29 bytes)\n" \
    "by_grid_constant: .align 8 .b8[16]@0 (16 bytes)\n" \
    "padded: .u8@0 .f64@8 .u16@16 .align 16 .b8[16]@32 .u8@48 (49 bytes)\n"

#define CPP(p) \
    "_Z5scaleIfEvPT_S0_: .u64" p "@0 .f32@8 (12 bytes)\n" \
    "_Z5scaleIdEvPT_S0_: .u64" p "@0 .f64@8 (16 bytes)\n" \
    "_Z5scaleIiEvPT_S0_: .u64" p "@0 .u32@8 (12 bytes)\n" \
    "_Z7boundedP6float46float24int4f: .u64" p "@0 .align 8 .b8[8]@8 .align 16 .b8[16]@16" \
    " .f32@32 (36 bytes)\n" \
    "_ZN8pipeline5countEPij: .u64" p "@0 .u32@8 (12 bytes)\n"

#define CUDAGRAPHS(q, p) \
    "vec_add: .u64" p "@0 .u64" p "@8 .u64" p "@16 .u64" q "@24 (32 bytes)\n" \
    "vec_mul: .u64" p "@0 .u64" p "@8 .u64" p "@16 .u64" q "@24 (32 bytes)\n" \
    "vec_sub: .u64" p "@0 .u64" p "@8 .u64" p "@16 .u64" q "@24 (32 bytes)\n"

static const struct fixture fixtures[] = {
    {"types.sm_90.ptx", "target 90\n" EVERY_TYPE("?", "?")},
    {"types.sm_90.debug.ptx", "target 90\n" EVERY_TYPE("?", "?")},
    {"types.sm_100.ptx", "target 100, pointers marked\n" EVERY_TYPE("", " .ptr")},
    {"cpp.sm_90.ptx", "target 90\n" CPP("?")},
    {"cpp.sm_100.ptx", "target 100, pointers marked\n" CPP(" .ptr")},
    {"cudagraphs.sm_90.ptx", "target 90\n" CUDAGRAPHS("?", "?")},
    {"cudagraphs.sm_100.ptx", "target 100, pointers marked\n" CUDAGRAPHS("", " .ptr")},
};

/* parse(format(parse(x))) reads as parse(x). */
static void check_round_trip(const char *name, const char *ptx, size_t size)
{
    struct ptx_signatures first, second;
    char error[256];
    if (!CHECK(ptx_signatures_parse(ptx, size, &first, error, sizeof error), "%s: %s", name, error))
        return;
    size_t text_size = 0;
    char *text = ptx_signatures_format(&first, &text_size);
    if (CHECK(text && strlen(text) == text_size, "%s: format", name)
        && CHECK(ptx_signatures_parse(text, text_size, &second, error, sizeof error),
                 "%s: formatted text does not parse: %s\n%s", name, error, text)) {
        char *a = dump(&first), *b = dump(&second);
        CHECK(a && b && strcmp(a, b) == 0, "%s: round trip changed\n%s\ninto\n%s", name, a, b);
        free(a);
        free(b);
        ptx_signatures_free(&second);
    }
    free(text);
    ptx_signatures_free(&first);
}

/* Every prefix of real PTX parses or fails with a message: never a crash,
 * never a read past the end (the sanitizer builds run this). */
static void check_prefixes(const char *name, const char *ptx, size_t size)
{
    int bad = 0;
    for (size_t n = 0; n < size; n++) {
        char *copy = malloc(n ? n : 1); /* exactly n bytes, no NUL: ASan sees overreads */
        if (!copy)
            return;
        memcpy(copy, ptx, n);
        struct ptx_signatures s;
        char error[256] = "";
        if (ptx_signatures_parse(copy, n, &s, error, sizeof error))
            ptx_signatures_free(&s);
        else if (error[0] == '\0')
            bad++;
        free(copy);
    }
    CHECK(bad == 0, "%s: %d prefixes failed without a message", name, bad);
}

static void test_fixtures(const char *dir)
{
    for (size_t i = 0; i < sizeof fixtures / sizeof fixtures[0]; i++) {
        size_t size = 0;
        char *ptx = read_whole(dir, fixtures[i].file, &size);
        if (!CHECK(ptx != NULL, "cannot read %s/%s", dir, fixtures[i].file))
            continue;
        /* The files hold the text as NVRTC gave it, without a NUL. */
        expect_parse(__LINE__, ptx, fixtures[i].expected);
        check_round_trip(fixtures[i].file, ptx, size);
        if (strstr(fixtures[i].file, "debug") == NULL)
            check_prefixes(fixtures[i].file, ptx, size);
        free(ptx);
    }
}

/* ---- NVRTC and the kernel cache ----------------------------------------- */

static const char *const SAMPLE_SOURCE =
    "extern \"C\" __global__ void axpy(float *y, const float *x, float a, size_t n)\n"
    "{ size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; if (i < n) y[i] += a * x[i]; }\n"
    "template <typename T> __global__ void fill(T *x, T v) { x[threadIdx.x] = v; }\n";

static const char *const SAMPLE_SIGNATURES =
    "target 90\naxpy: .u64?@0 .u64?@8 .f32@16 .u64?@24 (32 bytes)\n"
    "_Z4fillIdEvPT_S0_: .u64?@0 .f64@8 (16 bytes)\n";

static int compile(enum nvrtc_target target, const char *arch, struct nvrtc_output *out,
                   int *from_cache)
{
    static const char *const expressions[] = {"fill<double>"};
    const char *options[] = {arch};
    struct nvrtc_request request = {
        .source = SAMPLE_SOURCE, .name = "sample.cu", .options = options, .option_count = 1,
        .target = target, .name_expressions = expressions, .name_expression_count = 1,
    };
    return kernel_cache_compile(&request, "ptx_params_test", out, from_cache);
}

static void check_sample_signatures(const char *what, const struct nvrtc_output *out,
                                    const char *expected)
{
    if (!CHECK(out->signatures != NULL, "%s: no signatures: %s", what, out->signatures_error))
        return;
    CHECK(out->signatures_error[0] == '\0', "%s: signatures and an error", what);
    CHECK(strlen(out->signatures) == out->signatures_size, "%s: signature size", what);
    expect_parse(__LINE__, out->signatures, expected);
}

/* Every entry file of the cache directory, rewritten by damage(). */
static void damage_entries(const char *dir, void (*damage)(FILE *))
{
    char *command = NULL;
    if (asprintf(&command, "ls %s/*.entry", dir) < 0)
        return;
    FILE *list = popen(command, "r");
    free(command);
    char path[4096];
    while (list && fgets(path, sizeof path, list)) {
        path[strcspn(path, "\n")] = '\0';
        FILE *entry = fopen(path, "r+b");
        if (entry) {
            damage(entry);
            fclose(entry);
        }
    }
    if (list)
        pclose(list);
}

static void set_format_one(FILE *entry)
{
    unsigned char one[4] = {1, 0, 0, 0};
    fseek(entry, 8, SEEK_SET);
    fwrite(one, 1, sizeof one, entry);
}

static void test_nvrtc_and_cache(void)
{
    char dir[] = "/tmp/ptx_params_test-XXXXXX";
    if (!CHECK(mkdtemp(dir) != NULL, "mkdtemp"))
        return;
    setenv("GPURUN_CACHE_DIR", dir, 1);
    unsetenv("GPURUN_NO_CACHE");

    static const enum nvrtc_target targets[] = {NVRTC_TARGET_CUBIN, NVRTC_TARGET_PTX};
    for (size_t t = 0; t < 2; t++) {
        const char *what = nvrtc_target_name(targets[t]);
        struct nvrtc_output fresh, cached;
        int from_cache = -1;
        /* A CUBIN compile for a real architecture still yields the PTX's signatures. */
        if (CHECK(compile(targets[t], "--gpu-architecture=sm_90", &fresh, &from_cache),
                  "%s compile: %s %s", what, fresh.error, fresh.log ? fresh.log : "")) {
            CHECK(from_cache == 0, "%s: first compile from the cache", what);
            check_sample_signatures(what, &fresh, SAMPLE_SIGNATURES);
        }
        if (CHECK(compile(targets[t], "--gpu-architecture=sm_90", &cached, &from_cache),
                  "%s recompile: %s", what, cached.error)) {
            CHECK(from_cache == 1, "%s: second compile not from the cache", what);
            CHECK(fresh.signatures && cached.signatures
                  && fresh.signatures_size == cached.signatures_size
                  && memcmp(fresh.signatures, cached.signatures, fresh.signatures_size) == 0,
                  "%s: the cache changed the signatures", what);
        }
        nvrtc_output_free(&fresh);
        nvrtc_output_free(&cached);
    }

    /* Blackwell: pointers marked, and the cache keeps the marks. */
    for (int round = 0; round < 2; round++) {
        struct nvrtc_output out;
        int from_cache = -1;
        if (CHECK(compile(NVRTC_TARGET_PTX, "--gpu-architecture=compute_100", &out, &from_cache),
                  "compute_100: %s", out.error)) {
            CHECK(from_cache == round, "compute_100 round %d: from_cache %d", round, from_cache);
            check_sample_signatures("compute_100", &out,
                                    "target 100, pointers marked\n"
                                    "axpy: .u64 .ptr@0 .u64 .ptr@8 .f32@16 .u64@24 (32 bytes)\n"
                                    "_Z4fillIdEvPT_S0_: .u64 .ptr@0 .f64@8 (16 bytes)\n");
        }
        nvrtc_output_free(&out);
    }

    /* An entry of the old format is corrupt, reported and replaced. */
    damage_entries(dir, set_format_one);
    struct kernel_cache_stats before, after;
    kernel_cache_get_stats(&before);
    struct nvrtc_output out;
    int from_cache = -1;
    fprintf(stderr, "ptx_params_test: a corrupt-entry warning is expected next:\n");
    if (CHECK(compile(NVRTC_TARGET_CUBIN, "--gpu-architecture=sm_90", &out, &from_cache),
              "after damage: %s", out.error)) {
        kernel_cache_get_stats(&after);
        CHECK(from_cache == 0 && after.corrupt == before.corrupt + 1,
              "a format-1 entry was not refused (from_cache %d)", from_cache);
        check_sample_signatures("after damage", &out, SAMPLE_SIGNATURES);
    }
    nvrtc_output_free(&out);

    /* -dlto: NVVM IR, no PTX, so no signatures, and a reason. */
    const char *options[] = {"--gpu-architecture=sm_90", "-dlto"};
    struct nvrtc_request request = {.source = SAMPLE_SOURCE, .name = "sample.cu",
                                    .options = options, .option_count = 2,
                                    .target = NVRTC_TARGET_PTX};
    if (CHECK(nvrtc_compile(&request, &out), "-dlto compile: %s", out.error))
        CHECK(out.signatures == NULL && strstr(out.signatures_error, "no PTX") != NULL,
              "-dlto: expected no signatures, got '%s' / '%s'",
              out.signatures ? out.signatures : "(null)", out.signatures_error);
    nvrtc_output_free(&out);

    char *command = NULL;
    if (asprintf(&command, "rm -rf %s", dir) >= 0 && system(command) != 0)
        fprintf(stderr, "ptx_params_test: could not remove %s\n", dir);
    free(command);
}

/* ---- the driver's view (GPU) -------------------------------------------- */

static int driver_failed(const char *call, CUresult result)
{
    char message[256];
    return CHECK(0, "%s", cuda_format_error(message, sizeof message, call, result));
}

#define DRIVER(call, ...) \
    (CUDA_CALL(call, __VA_ARGS__) == CUDA_SUCCESS || driver_failed(#call, cuda_last_failed_result))

/* Every kernel of one fixture source, compiled for the device: the
 * signatures' offsets and sizes against cuKernelGetParamInfo, which is
 * asked only for indexes below the signature's count. */
static void compare_with_driver(const char *dir, const char *file, const char *arch)
{
    size_t size = 0;
    char *source = read_whole(dir, file, &size);
    if (!CHECK(source != NULL, "cannot read %s/%s", dir, file))
        return;
    char *include = NULL;
    const char *cuda_home = getenv("CUDA_HOME");
    if (asprintf(&include, "--include-path=%s/include", cuda_home ? cuda_home : "/usr/local/cuda") < 0)
        include = NULL;
    const char *options[] = {arch, "--std=c++17", include};
    struct nvrtc_request request = {.source = source, .name = file, .options = options,
                                    .option_count = include ? 3 : 2,
                                    .target = NVRTC_TARGET_CUBIN};
    struct nvrtc_output out;
    struct ptx_signatures signatures = {0};
    char error[256];
    CUlibrary library = NULL;
    if (CHECK(nvrtc_compile(&request, &out), "%s: %s %s", file, out.error, out.log ? out.log : "")
        && CHECK(out.signatures != NULL, "%s: %s", file, out.signatures_error)
        && CHECK(ptx_signatures_parse(out.signatures, out.signatures_size, &signatures, error,
                                      sizeof error), "%s: %s", file, error)
        && DRIVER(cuLibraryLoadData, &library, out.code, NULL, NULL, 0, NULL, NULL, 0)) {
        for (size_t k = 0; k < signatures.kernel_count; k++) {
            const struct ptx_kernel_signature *kernel = &signatures.kernels[k];
            CUkernel handle;
            if (!DRIVER(cuLibraryGetKernel, &handle, library, kernel->name))
                continue;
            for (size_t i = 0; i < kernel->param_count; i++) {
                size_t offset = 0, param_size = 0;
                if (DRIVER(cuKernelGetParamInfo, handle, i, &offset, &param_size))
                    CHECK(offset == kernel->params[i].offset && param_size == kernel->params[i].size,
                          "%s %s parameter %zu: driver says offset %zu size %zu, signature %u %u",
                          file, kernel->name, i, offset, param_size, kernel->params[i].offset,
                          kernel->params[i].size);
            }
            printf("%s %s: %zu parameters agree with the driver\n", file, kernel->name,
                   kernel->param_count);
        }
        CUDA_CALL(cuLibraryUnload, library);
    }
    ptx_signatures_free(&signatures);
    nvrtc_output_free(&out);
    free(include);
    free(source);
}

static int test_driver(const char *dir)
{
    if (cuda_driver_device_count() == 0) {
        printf("ptx_params_test: skipped: no usable GPU (%s)\n",
               cuda_driver_load_error() ? cuda_driver_load_error() : "no device");
        return 77;
    }
    CUdevice device;
    CUcontext context;
    int major = 0, minor = 0;
    if (!DRIVER(cuDeviceGet, &device, 0)
        || !DRIVER(cuDeviceGetAttribute, &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
        || !DRIVER(cuDeviceGetAttribute, &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
        || !DRIVER(cuDevicePrimaryCtxRetain, &context, device)
        || !DRIVER(cuCtxSetCurrent, context))
        return 1;
    char arch[64];
    snprintf(arch, sizeof arch, "--gpu-architecture=sm_%d%d", major, minor);
    static const char *const sources[] = {"types.cu", "cpp.cu", "cudagraphs.cu"};
    for (size_t i = 0; i < sizeof sources / sizeof sources[0]; i++)
        compare_with_driver(dir, sources[i], arch);
    CUDA_CALL(cuDevicePrimaryCtxRelease, device);
    return 0;
}

/* ---- main --------------------------------------------------------------- */

/*   ptx_params_test FIXTURE_DIR          the parser on hand-made text and on
 *                                        NVRTC's own PTX (tests/fixtures/ptx),
 *                                        then NVRTC and the cache (no GPU)
 *   ptx_params_test --dump FILE...       prints what the parser reads
 *   ptx_params_test --many N             a module of N kernels (many_kernels)
 *   ptx_params_test --driver FIXTURE_DIR compiles the fixtures for device 0 and
 *                                        compares every parameter's offset and
 *                                        size with cuKernelGetParamInfo (GPU)
 *
 * Ends with "ptx_params_test: N checks, M failed" and exits 1 on a failure
 * (77, "skipped", for --driver without a usable GPU). */

static int dump_files(int count, char **paths)
{
    int status = 0;
    for (int i = 0; i < count; i++) {
        size_t size = 0;
        char *ptx = read_path(paths[i], &size);
        struct ptx_signatures s;
        char error[256];
        if (!ptx) {
            fprintf(stderr, "%s: cannot read\n", paths[i]);
            status = 1;
        } else if (!ptx_signatures_parse(ptx, size, &s, error, sizeof error)) {
            fprintf(stderr, "%s: %s\n", paths[i], error);
            status = 1;
        } else {
            char *text = dump(&s);
            fputs(text ? text : "(no memory)\n", stdout);
            free(text);
            ptx_signatures_free(&s);
        }
        free(ptx);
    }
    return status;
}

static int finish(int status)
{
    printf("ptx_params_test: %d checks, %d failed\n", checks, failures);
    return failures ? 1 : status;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--dump") == 0)
        return dump_files(argc - 2, argv + 2);
    if (argc == 3 && strcmp(argv[1], "--many") == 0)
        return many_kernels(argv[2]);
    if (argc == 3 && strcmp(argv[1], "--driver") == 0)
        return finish(test_driver(argv[2]));
    if (argc != 2 || argv[1][0] == '-') {
        fprintf(stderr, "usage: %s FIXTURE_DIR | --driver FIXTURE_DIR | --dump FILE... | --many N\n", argv[0]);
        return 2;
    }
    test_syntax();
    test_fixtures(argv[1]);
    test_nvrtc_and_cache();
    return finish(0);
}
