/* PTX signatures as text (base/ptx_params.h): the compact text that
 * ptx_signatures_parse reads back to the same signatures, kept beside a
 * CUBIN and in the kernel cache, and one parameter's type for messages.
 * The parser is ptx_params.c. */
#include "base/ptx_params.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* The text being written: data NULL only counts its length. */
struct text {
    char *data;
    size_t size, used;
    int failed;
};

static void append(struct text *text, const char *fmt, ...)
{
    if (text->failed)
        return;
    va_list args;
    va_start(args, fmt);
    int n = text->data ? vsnprintf(text->data + text->used, text->size - text->used, fmt, args)
                       : vsnprintf(NULL, 0, fmt, args);
    va_end(args);
    if (n < 0 || (text->data && (size_t)n >= text->size - text->used))
        text->failed = 1;
    else
        text->used += (size_t)n;
}

static void write_signatures(const struct ptx_signatures *signatures, struct text *text)
{
    if (signatures->target_arch)
        append(text, ".target sm_%d\n", signatures->target_arch);
    for (size_t k = 0; k < signatures->kernel_count; k++) {
        const struct ptx_kernel_signature *kernel = &signatures->kernels[k];
        append(text, ".entry %s(", kernel->name);
        for (size_t i = 0; i < kernel->param_count; i++) {
            const struct ptx_param *p = &kernel->params[i];
            append(text, "%s\n.param", i ? "," : "");
            if (p->align != p->element_size)
                append(text, " .align %u", p->align);
            append(text, " .%s", p->type);
            if (p->pointer == PTX_POINTER_YES) {
                append(text, " .ptr");
                if (p->space[0])
                    append(text, " .%s", p->space);
                if (p->pointee_align)
                    append(text, " .align %u", p->pointee_align);
            }
            append(text, " p%zu", i);
            if (p->count)
                append(text, "[%u]", p->count);
        }
        append(text, ")\n");
    }
}

/* Measured first, then written into a block of that size. */
char *ptx_signatures_format(const struct ptx_signatures *signatures, size_t *text_size)
{
    struct text measured = {0};
    write_signatures(signatures, &measured);
    if (measured.failed)
        return NULL;
    struct text text = {.data = malloc(measured.used + 1), .size = measured.used + 1};
    if (!text.data)
        return NULL;
    text.data[0] = '\0';
    write_signatures(signatures, &text);
    if (text.failed || text.used != measured.used) {
        free(text.data);
        return NULL;
    }
    *text_size = text.used;
    return text.data;
}

const char *ptx_param_describe(const struct ptx_param *param, char *buffer, size_t size)
{
    if (param->count && param->align != param->element_size)
        snprintf(buffer, size, ".align %u .%s[%u]", param->align, param->type, param->count);
    else if (param->count)
        snprintf(buffer, size, ".%s[%u]", param->type, param->count);
    else
        snprintf(buffer, size, ".%s%s", param->type,
                 param->pointer == PTX_POINTER_YES ? " .ptr" : "");
    return buffer;
}
