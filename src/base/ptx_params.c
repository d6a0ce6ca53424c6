/* PTX signatures: a small tokenizer over the module text and a parser for
 * the .entry parameter lists, nothing else. The grammar followed is the
 * PTX ISA's kernel parameter declaration:
 *
 *   .param [.align N] .type [.ptr [.space] [.align N]] name [ '[' count ']' ]
 *
 * Everything outside the entries' parameter lists (bodies, device functions,
 * debug sections) is skipped by brace depth; comments and string literals
 * are skipped by the tokenizer, so an ".entry" inside either never counts. */
#include "base/ptx_params.h"

#include <limits.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Far beyond any real kernel (CUDA 12.1 allows 32764 bytes of parameters);
 * a bound keeps the arithmetic below free of overflow. */
#define MAX_PARAM_BYTES (1u << 20)
/* Far beyond any real architecture number (sm_120 is 120). */
#define MAX_TARGET_ARCH 1000000

/* ---- tokens ------------------------------------------------------------- */

enum token_kind { TOKEN_END, TOKEN_DIRECTIVE, TOKEN_WORD, TOKEN_NUMBER, TOKEN_STRING, TOKEN_PUNCT };

struct token {
    enum token_kind kind;
    const char *text;  /* for a directive, the name after the dot */
    size_t length;
    int line;
};

struct lexer {
    const char *p, *end;
    int line;
    struct token token;     /* the current token */
    char *error;
    size_t error_size;
    int failed;
};

static int is_word_start(char c)
{
    return c == '_' || c == '$' || c == '%' || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
}

static int is_word_char(char c)
{
    return is_word_start(c) || (c >= '0' && c <= '9');
}

static int fail(struct lexer *lx, const char *fmt, ...)
{
    if (lx->failed)
        return 0;
    lx->failed = 1;
    int n = snprintf(lx->error, lx->error_size, "line %d: ", lx->token.line);
    if (n >= 0 && (size_t)n < lx->error_size) {
        va_list args;
        va_start(args, fmt);
        vsnprintf(lx->error + n, lx->error_size - (size_t)n, fmt, args);
        va_end(args);
    }
    return 0;
}

/* Skips white space and comments; an unterminated block comment ends the text. */
static void skip_space(struct lexer *lx)
{
    while (lx->p < lx->end) {
        char c = *lx->p;
        if (c == '\n') {
            lx->line += lx->line < INT_MAX;
            lx->p++;
        } else if (c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v') {
            lx->p++;
        } else if (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '/') {
            while (lx->p < lx->end && *lx->p != '\n')
                lx->p++;
        } else if (c == '/' && lx->p + 1 < lx->end && lx->p[1] == '*') {
            lx->p += 2;
            while (lx->p < lx->end && !(*lx->p == '*' && lx->p + 1 < lx->end && lx->p[1] == '/')) {
                if (*lx->p == '\n')
                    lx->line += lx->line < INT_MAX;
                lx->p++;
            }
            lx->p = lx->p < lx->end ? lx->p + 2 : lx->end;
        } else {
            return;
        }
    }
}

static const struct token *next(struct lexer *lx)
{
    skip_space(lx);
    struct token *t = &lx->token;
    t->line = lx->line;
    t->text = lx->p;
    if (lx->p == lx->end) {
        t->kind = TOKEN_END;
        t->length = 0;
        return t;
    }
    char c = *lx->p;
    if (c == '.' && lx->p + 1 < lx->end && is_word_start(lx->p[1])) {
        t->kind = TOKEN_DIRECTIVE;
        t->text = ++lx->p;
        while (lx->p < lx->end && is_word_char(*lx->p))
            lx->p++;
    } else if (is_word_start(c)) {
        t->kind = TOKEN_WORD;
        while (lx->p < lx->end && is_word_char(*lx->p))
            lx->p++;
    } else if (c >= '0' && c <= '9') {
        t->kind = TOKEN_NUMBER;
        while (lx->p < lx->end && (is_word_char(*lx->p) || *lx->p == '.'))
            lx->p++;
    } else if (c == '"') {
        t->kind = TOKEN_STRING;
        lx->p++;
        while (lx->p < lx->end && *lx->p != '"' && *lx->p != '\n')
            lx->p += *lx->p == '\\' && lx->p + 1 < lx->end ? 2 : 1;
        if (lx->p < lx->end && *lx->p == '"')
            lx->p++;
    } else {
        t->kind = TOKEN_PUNCT;
        lx->p++;
    }
    t->length = (size_t)(lx->p - t->text);
    return t;
}

static int is(const struct token *t, enum token_kind kind, const char *text)
{
    return t->kind == kind && t->length == strlen(text) && memcmp(t->text, text, t->length) == 0;
}

static int is_punct(const struct token *t, char c)
{
    return t->kind == TOKEN_PUNCT && t->text[0] == c;
}

/* The current token for a message: at most 40 characters of it. */
#define TOKEN_FMT "'%.*s'"
#define TOKEN_ARG(t) (t)->kind == TOKEN_END ? 11 : (int)((t)->length > 40 ? 40 : (t)->length), \
                     (t)->kind == TOKEN_END ? "end of text" : (t)->text

/* A decimal or 0x number token -> value in 1..limit, or fails. */
static int take_number(struct lexer *lx, const char *what, uint32_t limit, uint32_t *value)
{
    const struct token *t = next(lx);
    char digits[24];
    if (t->kind != TOKEN_NUMBER || t->length >= sizeof digits)
        return fail(lx, "expected %s, got " TOKEN_FMT, what, TOKEN_ARG(t));
    memcpy(digits, t->text, t->length);
    digits[t->length] = '\0';
    char *stop;
    unsigned long long v = strtoull(digits, &stop, 0);
    if (*stop != '\0' || v == 0 || v > limit)
        return fail(lx, "%s " TOKEN_FMT " is not a number from 1 to %u", what, TOKEN_ARG(t), limit);
    *value = (uint32_t)v;
    return 1;
}

/* ---- types -------------------------------------------------------------- */

static const struct {
    const char *name;
    unsigned char size;
    enum ptx_param_kind kind;
} param_types[] = {
    {"u8", 1, PTX_PARAM_UNSIGNED}, {"u16", 2, PTX_PARAM_UNSIGNED},
    {"u32", 4, PTX_PARAM_UNSIGNED}, {"u64", 8, PTX_PARAM_UNSIGNED},
    {"s8", 1, PTX_PARAM_SIGNED}, {"s16", 2, PTX_PARAM_SIGNED},
    {"s32", 4, PTX_PARAM_SIGNED}, {"s64", 8, PTX_PARAM_SIGNED},
    {"f16", 2, PTX_PARAM_FLOAT}, {"bf16", 2, PTX_PARAM_FLOAT}, {"f16x2", 4, PTX_PARAM_FLOAT},
    {"bf16x2", 4, PTX_PARAM_FLOAT}, {"f32", 4, PTX_PARAM_FLOAT}, {"f64", 8, PTX_PARAM_FLOAT},
    {"b8", 1, PTX_PARAM_BITS}, {"b16", 2, PTX_PARAM_BITS}, {"b32", 4, PTX_PARAM_BITS},
    {"b64", 8, PTX_PARAM_BITS}, {"b128", 16, PTX_PARAM_BITS},
};

/* The longest name, kept whole in a parameter's type (it once lost its "2",
 * so the compact text did not read back: found by tests/fuzz_ptx_params.c). */
_Static_assert(sizeof "bf16x2" <= sizeof ((struct ptx_param *)0)->type, "ptx_param.type holds every type name");

static const char *const pointer_spaces[] = {"global", "const", "local", "shared"};

static int find_type(const struct token *t)
{
    for (size_t i = 0; i < sizeof param_types / sizeof param_types[0]; i++)
        if (is(t, TOKEN_DIRECTIVE, param_types[i].name))
            return (int)i;
    return -1;
}

static int find_space(const struct token *t)
{
    for (size_t i = 0; i < sizeof pointer_spaces / sizeof pointer_spaces[0]; i++)
        if (is(t, TOKEN_DIRECTIVE, pointer_spaces[i]))
            return (int)i;
    return -1;
}

static int is_power_of_two(uint32_t v)
{
    return v != 0 && (v & (v - 1)) == 0;
}

/* ---- the collected result ----------------------------------------------- */

struct kernel_entry {
    size_t name_at, name_length;  /* in the names pool */
    size_t first_param, param_count;
    size_t param_bytes;
};

struct collected {
    struct kernel_entry *kernels;
    size_t kernel_count, kernel_capacity;
    struct ptx_param *params;
    size_t param_count, param_capacity;
    char *names;
    size_t names_size, names_capacity;
    /* Open addressing over the kept kernels' names: kernel index + 1, 0 for
     * a free slot; a power of two at most half full. */
    size_t *name_slots;
    size_t name_slot_count;
    int target_arch;
};

static int grow(void **array, size_t *capacity, size_t needed, size_t element)
{
    if (needed <= *capacity)
        return 1;
    size_t wanted = *capacity ? *capacity : 16;
    while (wanted < needed) {
        if (wanted > SIZE_MAX / 2 / element)
            return 0;
        wanted *= 2;
    }
    void *bigger = realloc(*array, wanted * element);
    if (!bigger)
        return 0;
    *array = bigger;
    *capacity = wanted;
    return 1;
}

static void collected_free(struct collected *c)
{
    free(c->kernels);
    free(c->params);
    free(c->names);
    free(c->name_slots);
}

/* FNV-1a over a name: where its slot search starts. */
static size_t name_hash(const char *name, size_t length)
{
    uint64_t hash = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < length; i++)
        hash = (hash ^ (unsigned char)name[i]) * 0x100000001b3ULL;
    return (size_t)hash;
}

/* The slot that holds the kernel called name, or the free slot where it
 * would go. */
static size_t *name_slot(const struct collected *c, const char *name, size_t length)
{
    size_t mask = c->name_slot_count - 1;
    for (size_t i = name_hash(name, length) & mask;; i = (i + 1) & mask) {
        size_t *slot = &c->name_slots[i];
        if (*slot == 0)
            return slot;
        const struct kernel_entry *kernel = &c->kernels[*slot - 1];
        if (kernel->name_length == length && memcmp(c->names + kernel->name_at, name, length) == 0)
            return slot;
    }
}

/* Room for one more name in the slots; 0 when out of memory. */
static int reserve_name_slot(struct collected *c)
{
    if (c->name_slot_count && (c->kernel_count + 1) * 2 <= c->name_slot_count)
        return 1;
    size_t count = c->name_slot_count ? c->name_slot_count : 64;
    while ((c->kernel_count + 1) * 2 > count) {
        if (count > SIZE_MAX / 2 / sizeof(size_t))
            return 0;
        count *= 2;
    }
    size_t *slots = calloc(count, sizeof *slots);
    if (!slots)
        return 0;
    free(c->name_slots);
    c->name_slots = slots;
    c->name_slot_count = count;
    for (size_t k = 0; k < c->kernel_count; k++)
        *name_slot(c, c->names + c->kernels[k].name_at, c->kernels[k].name_length) = k + 1;
    return 1;
}

/* ---- the parser --------------------------------------------------------- */

/* One `.param ...` declaration, the `.param` already read. */
static int parse_param(struct lexer *lx, struct ptx_param *param)
{
    memset(param, 0, sizeof *param);
    int type = -1, ptr = 0;
    uint32_t align = 0;
    const struct token *t;
    for (t = next(lx); t->kind == TOKEN_DIRECTIVE; t = next(lx)) {
        int space = find_space(t);
        if (is(t, TOKEN_DIRECTIVE, "align")) {
            uint32_t value;
            if (!take_number(lx, ".align's value", 1u << 16, &value))
                return 0;
            if (!is_power_of_two(value))
                return fail(lx, ".align %u is not a power of two", value);
            if (ptr)
                param->pointee_align = value;
            else
                align = value;
        } else if (is(t, TOKEN_DIRECTIVE, "ptr")) {
            if (type < 0 || param_types[type].size != 8)
                return fail(lx, ".ptr needs a 64-bit type before it");
            ptr = 1;
        } else if (space >= 0) {
            if (!ptr || param->space[0])
                return fail(lx, "state space .%s only follows .ptr", pointer_spaces[space]);
            snprintf(param->space, sizeof param->space, "%s", pointer_spaces[space]);
        } else {
            int found = find_type(t);
            if (found < 0 || type >= 0)
                return fail(lx, "unexpected " TOKEN_FMT " in a parameter declaration",
                            TOKEN_ARG(t));
            type = found;
        }
    }
    if (type < 0)
        return fail(lx, "parameter without a type before " TOKEN_FMT, TOKEN_ARG(t));
    if (t->kind != TOKEN_WORD)
        return fail(lx, "expected a parameter name, got " TOKEN_FMT, TOKEN_ARG(t));
    snprintf(param->type, sizeof param->type, "%s", param_types[type].name);
    param->kind = param_types[type].kind;
    param->element_size = param_types[type].size;
    param->size = param->element_size;
    param->pointer = ptr ? PTX_POINTER_YES : PTX_POINTER_NO;
    const char *rest = lx->p;
    int rest_line = lx->line;
    t = next(lx);
    if (is_punct(t, '[')) {
        if (ptr)
            return fail(lx, "a .ptr parameter cannot be an array");
        if (!take_number(lx, "an array size", MAX_PARAM_BYTES, &param->count))
            return 0;
        if (param->count > MAX_PARAM_BYTES / param->element_size)
            return fail(lx, "array parameter of %u elements is too large", param->count);
        param->size = param->element_size * param->count;
        param->kind = PTX_PARAM_AGGREGATE;
        if (!is_punct(next(lx), ']'))
            return fail(lx, "expected ']' after the array size, got " TOKEN_FMT,
                        TOKEN_ARG(&lx->token));
    } else {
        lx->p = rest; /* not ours: the ',' or ')' after the name */
        lx->line = rest_line;
    }
    param->align = align ? align : param->element_size;
    return 1;
}

/* The parameter list of one entry, after its name; the token after the
 * closing ')' is read. */
static int parse_params(struct lexer *lx, struct collected *c, struct kernel_entry *entry)
{
    entry->first_param = c->param_count;
    uint32_t offset = 0;
    const struct token *t = next(lx);
    if (!is_punct(t, '('))
        return 1; /* no list at all: a kernel without parameters */
    t = next(lx);
    if (is_punct(t, ')')) {
        next(lx);
        return 1;
    }
    for (;;) {
        if (!is(t, TOKEN_DIRECTIVE, "param"))
            return fail(lx, "expected .param, got " TOKEN_FMT, TOKEN_ARG(t));
        if (!grow((void **)&c->params, &c->param_capacity, c->param_count + 1, sizeof *c->params))
            return fail(lx, "out of memory");
        struct ptx_param *param = &c->params[c->param_count];
        if (!parse_param(lx, param))
            return 0;
        uint32_t at = (offset + param->align - 1) / param->align * param->align;
        if (at > MAX_PARAM_BYTES || param->size > MAX_PARAM_BYTES - at)
            return fail(lx, "parameters take more than %u bytes", MAX_PARAM_BYTES);
        param->offset = at;
        offset = at + param->size;
        c->param_count++;
        entry->param_count++;
        t = next(lx);
        if (is_punct(t, ')'))
            break;
        if (!is_punct(t, ','))
            return fail(lx, "expected ',' or ')' after a parameter, got " TOKEN_FMT, TOKEN_ARG(t));
        t = next(lx);
    }
    entry->param_bytes = offset;
    next(lx);
    return 1;
}

/* ".target sm_90a, debug" -> 90; fails on a number no architecture has. */
static int read_target(struct lexer *lx, struct collected *c)
{
    const struct token *t = next(lx);
    if (t->kind != TOKEN_WORD)
        return 1;
    const char *digits = NULL;
    if (t->length > 3 && memcmp(t->text, "sm_", 3) == 0)
        digits = t->text + 3;
    else if (t->length > 8 && memcmp(t->text, "compute_", 8) == 0)
        digits = t->text + 8;
    if (!digits)
        return 1;
    int arch = 0;
    for (; digits < t->text + t->length && *digits >= '0' && *digits <= '9'; digits++) {
        if (arch > (MAX_TARGET_ARCH - (*digits - '0')) / 10)
            return fail(lx, ".target " TOKEN_FMT ": no architecture has so large a number",
                        TOKEN_ARG(t));
        arch = arch * 10 + (*digits - '0');
    }
    if (c->target_arch == 0)
        c->target_arch = arch;
    return 1;
}

/* `.entry` has been read: the name, the list and what follows it. */
static int parse_entry(struct lexer *lx, struct collected *c, int external)
{
    const struct token *t = next(lx);
    if (t->kind != TOKEN_WORD)
        return fail(lx, "expected a kernel name after .entry, got " TOKEN_FMT, TOKEN_ARG(t));
    struct token name = *t;
    /* A kernel declared twice (a declaration, then the definition) has one
     * parameter list; a later copy is parsed for syntax and dropped. */
    if (!reserve_name_slot(c))
        return fail(lx, "out of memory");
    int keep = !external && *name_slot(c, name.text, name.length) == 0;
    struct kernel_entry entry = {0};
    size_t params_before = c->param_count;
    if (!parse_params(lx, c, &entry))
        return 0;
    if (!keep) {
        c->param_count = params_before;
        return 1;
    }
    if (!grow((void **)&c->kernels, &c->kernel_capacity, c->kernel_count + 1, sizeof *c->kernels)
        || !grow((void **)&c->names, &c->names_capacity, c->names_size + name.length + 1, 1))
        return fail(lx, "out of memory");
    entry.name_at = c->names_size;
    entry.name_length = name.length;
    memcpy(c->names + c->names_size, name.text, name.length);
    c->names[c->names_size + name.length] = '\0';
    c->names_size += name.length + 1;
    c->kernels[c->kernel_count++] = entry;
    *name_slot(c, name.text, name.length) = c->kernel_count;
    return 1;
}

static int parse_module(struct lexer *lx, struct collected *c)
{
    int depth = 0, external = 0;
    const struct token *t = next(lx);
    while (t->kind != TOKEN_END && !lx->failed) {
        if (is_punct(t, '{')) {
            depth++;
        } else if (is_punct(t, '}')) {
            if (depth == 0)
                return fail(lx, "unbalanced '}'");
            depth--;
            external = 0;
        } else if (depth == 0 && is_punct(t, ';')) {
            external = 0;
        } else if (depth == 0 && is(t, TOKEN_DIRECTIVE, "extern")) {
            external = 1;
        } else if (depth == 0 && is(t, TOKEN_DIRECTIVE, "target")) {
            if (!read_target(lx, c))
                return 0;
        } else if (depth == 0 && is(t, TOKEN_DIRECTIVE, "entry")) {
            if (!parse_entry(lx, c, external))
                return 0;
            external = 0;
            continue; /* parse_entry read the token after the list */
        }
        t = next(lx);
    }
    return !lx->failed;
}

/* Settles each parameter's pointer question once the target is known. */
static void classify_pointers(struct collected *c, int marks_pointers)
{
    for (size_t i = 0; i < c->param_count; i++) {
        struct ptx_param *param = &c->params[i];
        if (param->pointer == PTX_POINTER_YES)
            continue;
        int could_be_pointer = param->count == 0 && param->size == 8
                               && param->kind != PTX_PARAM_FLOAT;
        param->pointer = could_be_pointer && !marks_pointers ? PTX_POINTER_UNKNOWN
                                                             : PTX_POINTER_NO;
    }
}

static int by_name_order(const void *a, const void *b)
{
    const struct ptx_kernel_signature *const *x = a, *const *y = b;
    return strcmp((*x)->name, (*y)->name);
}

/* Moves the collected arrays into one block: kernels, the by-name index,
 * params, then names. */
static int pack(struct collected *c, struct ptx_signatures *out)
{
    size_t kernels_bytes = c->kernel_count * sizeof(struct ptx_kernel_signature);
    size_t index_bytes = c->kernel_count * sizeof(struct ptx_kernel_signature *);
    size_t params_bytes = c->param_count * sizeof(struct ptx_param);
    size_t block_size = kernels_bytes + index_bytes + params_bytes + c->names_size + 1;
    unsigned char *block = malloc(block_size);
    if (!block)
        return 0;
    out->block_size = block_size;
    struct ptx_kernel_signature *kernels = (struct ptx_kernel_signature *)block;
    const struct ptx_kernel_signature **by_name =
        (const struct ptx_kernel_signature **)(block + kernels_bytes);
    struct ptx_param *params = (struct ptx_param *)(block + kernels_bytes + index_bytes);
    char *names = (char *)(block + kernels_bytes + index_bytes + params_bytes);
    if (params_bytes)
        memcpy(params, c->params, params_bytes);
    if (c->names_size)
        memcpy(names, c->names, c->names_size);
    for (size_t i = 0; i < c->kernel_count; i++) {
        kernels[i].name = names + c->kernels[i].name_at;
        kernels[i].param_count = c->kernels[i].param_count;
        kernels[i].params = params + c->kernels[i].first_param;
        kernels[i].param_bytes = c->kernels[i].param_bytes;
        by_name[i] = &kernels[i];
    }
    if (c->kernel_count > 1)
        qsort(by_name, c->kernel_count, sizeof *by_name, by_name_order);
    out->kernels = kernels;
    out->by_name = by_name;
    out->kernel_count = c->kernel_count;
    return 1;
}

int ptx_signatures_parse(const char *ptx, size_t size, struct ptx_signatures *out,
                         char *error, size_t error_size)
{
    memset(out, 0, sizeof *out);
    if (error_size)
        error[0] = '\0';
    struct lexer lx = {.p = ptx, .end = ptx + size, .line = 1, .error = error,
                       .error_size = error_size};
    struct collected c = {0};
    int ok = parse_module(&lx, &c);
    if (ok) {
        /* NVRTC 13 marks every pointer parameter .ptr for these targets and
         * none for earlier ones (tests/fixtures/ptx/README.md). */
        out->target_arch = c.target_arch;
        out->marks_pointers = c.target_arch >= 100;
        classify_pointers(&c, out->marks_pointers);
        ok = pack(&c, out);
        if (!ok)
            snprintf(error, error_size, "out of memory");
    }
    collected_free(&c);
    if (!ok)
        memset(out, 0, sizeof *out);
    return ok;
}

void ptx_signatures_free(struct ptx_signatures *signatures)
{
    free(signatures->kernels);
    memset(signatures, 0, sizeof *signatures);
}

void ptx_signatures_move(struct ptx_signatures *signatures, void *into)
{
    unsigned char *from = (unsigned char *)signatures->kernels;
    unsigned char *to = into;
    if (!from)
        return;
    memcpy(to, from, signatures->block_size);
    struct ptx_kernel_signature *kernels = (struct ptx_kernel_signature *)to;
    const struct ptx_kernel_signature **by_name =
        (const struct ptx_kernel_signature **)(to + ((unsigned char *)signatures->by_name - from));
    for (size_t i = 0; i < signatures->kernel_count; i++) {
        kernels[i].name = (const char *)to + ((const unsigned char *)kernels[i].name - from);
        kernels[i].params = (const struct ptx_param *)
            (to + ((const unsigned char *)kernels[i].params - from));
        by_name[i] = (const struct ptx_kernel_signature *)
            (to + ((const unsigned char *)by_name[i] - from));
    }
    free(from);
    signatures->kernels = kernels;
    signatures->by_name = by_name;
}

const struct ptx_kernel_signature *ptx_signatures_find(const struct ptx_signatures *signatures,
                                                       const char *name)
{
    size_t low = 0, high = signatures->kernel_count;
    while (low < high) {
        size_t middle = low + (high - low) / 2;
        int order = strcmp(signatures->by_name[middle]->name, name);
        if (order == 0)
            return signatures->by_name[middle];
        if (order < 0)
            low = middle + 1;
        else
            high = middle;
    }
    return NULL;
}

/* ---- text --------------------------------------------------------------- */

struct text {
    char *data;
    size_t size, capacity;
    int failed;
};

static void append(struct text *text, const char *fmt, ...)
{
    if (text->failed)
        return;
    for (;;) {
        va_list args;
        va_start(args, fmt);
        size_t room = text->capacity - text->size;
        int n = vsnprintf(text->data ? text->data + text->size : NULL, room, fmt, args);
        va_end(args);
        if (n < 0) {
            text->failed = 1;
            return;
        }
        if ((size_t)n < room) {
            text->size += (size_t)n;
            return;
        }
        if (!grow((void **)&text->data, &text->capacity, text->size + (size_t)n + 1, 1)) {
            text->failed = 1;
            return;
        }
    }
}

char *ptx_signatures_format(const struct ptx_signatures *signatures, size_t *text_size)
{
    struct text text = {0};
    if (signatures->target_arch)
        append(&text, ".target sm_%d\n", signatures->target_arch);
    for (size_t k = 0; k < signatures->kernel_count; k++) {
        const struct ptx_kernel_signature *kernel = &signatures->kernels[k];
        append(&text, ".entry %s(", kernel->name);
        for (size_t i = 0; i < kernel->param_count; i++) {
            const struct ptx_param *p = &kernel->params[i];
            append(&text, "%s\n.param", i ? "," : "");
            if (p->align != p->element_size)
                append(&text, " .align %u", p->align);
            append(&text, " .%s", p->type);
            if (p->pointer == PTX_POINTER_YES) {
                append(&text, " .ptr");
                if (p->space[0])
                    append(&text, " .%s", p->space);
                if (p->pointee_align)
                    append(&text, " .align %u", p->pointee_align);
            }
            append(&text, " p%zu", i);
            if (p->count)
                append(&text, "[%u]", p->count);
        }
        append(&text, ")\n");
    }
    if (!text.data && !text.failed)
        append(&text, "%s", ""); /* no kernels and no target: still a string */
    if (text.failed) {
        free(text.data);
        return NULL;
    }
    *text_size = text.size;
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
