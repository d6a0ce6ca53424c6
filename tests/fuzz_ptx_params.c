/* libFuzzer target for the PTX signature parser (src/base/ptx_params.c)
 * and its compact text (ptx_params_text.c), built with clang
 * -fsanitize=fuzzer,address,undefined by tools/fuzz-ptx.sh, which seeds it
 * from tests/fixtures/ptx and runs it for a fixed time. */
#include "base/ptx_params.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void broken(const char *promise)
{
    fprintf(stderr, "fuzz_ptx_params: %s\n", promise);
    abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Any input: the parser must not overflow, read out of bounds or leak
 * (the sanitizers), and when it accepts a text, what it keeps must hold
 * together: the compact text it writes (what the kernel cache stores) reads
 * back to the same text, every kernel is found by its own name, and every
 * parameter describes itself. A broken promise aborts, which libFuzzer
 * reports with the input. */
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct ptx_signatures first;
    char error[256];
    if (!ptx_signatures_parse((const char *)data, size, &first, error, sizeof error)) {
        if (first.kernels != NULL || first.kernel_count != 0 || strlen(error) >= sizeof error)
            broken("a refused text left signatures or an unterminated message");
        return 0;
    }
    for (size_t k = 0; k < first.kernel_count; k++) {
        const struct ptx_kernel_signature *kernel = &first.kernels[k];
        if (ptx_signatures_find(&first, kernel->name) != kernel)
            broken("a kernel is not found by its own name");
        char described[64];
        for (size_t i = 0; i < kernel->param_count; i++)
            if (ptx_param_describe(&kernel->params[i], described, sizeof described) != described)
                broken("a parameter does not describe itself");
    }
    size_t text_size = 0;
    char *text = ptx_signatures_format(&first, &text_size);
    if (!text)
        broken("no text for parsed signatures");
    struct ptx_signatures second;
    if (!ptx_signatures_parse(text, text_size, &second, error, sizeof error))
        broken("the compact text does not read back");
    size_t again_size = 0;
    char *again = ptx_signatures_format(&second, &again_size);
    if (!again || again_size != text_size || memcmp(again, text, text_size) != 0
        || second.kernel_count != first.kernel_count || second.target_arch != first.target_arch)
        broken("the compact text reads back to different signatures");
    free(again);
    free(text);
    ptx_signatures_free(&second);
    ptx_signatures_free(&first);
    return 0;
}
