/* The recorder of what NVRTC reads (base/nvrtc_inputs.h's begin and end,
 * base/nvrtc_inputs_recording.h): one compile at a time, from
 * nvrtc_inputs_begin to nvrtc_inputs_end, is recorded as
 * the questions NVRTC asked with the answers it got. NVRTC's calls are
 * seen in nvrtc_inputs_hooks.c; the answers are asked again in
 * nvrtc_inputs_check.c.
 *
 * The recorder is process-wide: NVRTC may run parts of a compile on its own
 * threads, so records are kept under a lock, and compiles take turns. */
#include "base/nvrtc_inputs_recording.h"

#include "base/content_hash.h"
#include "base/nvrtc_inputs.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the recording ------------------------------------------------------ */

static struct {
    pthread_mutex_t compile_lock; /* held from begin to end */
    pthread_mutex_t lock;         /* what follows */
    int active;
    unsigned char *records;
    size_t size, capacity, count;
    struct {
        uint64_t hash;
        size_t at; /* offset of the record */
    } seen[NVRTC_MAX_RECORDS];
    char uncacheable[400];
    char refused[400];
} watch = {.compile_lock = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER};

int nvrtc_recording(void)
{
    return __atomic_load_n(&watch.active, __ATOMIC_ACQUIRE);
}

/* Keeps the first reason only; called with watch.lock held. */
static void set_reason(char *reason, size_t size, const char *fmt, va_list args)
{
    if (!reason[0])
        vsnprintf(reason, size, fmt, args);
}

void nvrtc_note_uncacheable(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&watch.lock);
    if (watch.active)
        set_reason(watch.uncacheable, sizeof watch.uncacheable, fmt, args);
    pthread_mutex_unlock(&watch.lock);
    va_end(args);
}

void nvrtc_note_refused(const char *fmt, ...)
{
    va_list args;
    va_start(args, fmt);
    pthread_mutex_lock(&watch.lock);
    if (watch.active)
        set_reason(watch.refused, sizeof watch.refused, fmt, args);
    pthread_mutex_unlock(&watch.lock);
    va_end(args);
}

void nvrtc_record(enum nvrtc_question question, uint32_t number, const char *text,
                  const struct nvrtc_answer *a)
{
    size_t text_size = text ? strnlen(text, NVRTC_MAX_TEXT + 1) : 0;
    pthread_mutex_lock(&watch.lock);
    if (!watch.active || watch.uncacheable[0])
        goto done;
    if (text_size > NVRTC_MAX_TEXT || a->too_long) {
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "NVRTC asked about a path, name or value longer than %d bytes", NVRTC_MAX_TEXT);
        goto done;
    }
    struct nvrtc_record asked = {question, number, text ? text : "", (uint32_t)text_size,
                                 a->bytes, (uint32_t)a->size};
    uint64_t hash = fnv1a(FNV1A_OFFSET, &question, sizeof question);
    hash = fnv1a(hash, &number, sizeof number);
    hash = fnv1a(hash, asked.text, text_size);
    for (size_t i = 0; i < watch.count; i++) {
        const unsigned char *at = watch.records + watch.seen[i].at;
        size_t left = watch.size - watch.seen[i].at;
        struct nvrtc_record seen;
        if (watch.seen[i].hash != hash || !nvrtc_record_read(&at, &left, &seen)
            || seen.question != (int)question || seen.number != number
            || seen.text_size != text_size || memcmp(seen.text, asked.text, text_size) != 0)
            continue;
        if (seen.answer_size != a->size || memcmp(seen.answer, a->bytes, a->size) != 0)
            snprintf(watch.uncacheable, sizeof watch.uncacheable,
                     "%s(%s) answered differently within one compile: it changed while NVRTC "
                     "read it", nvrtc_question_name(question), asked.text);
        goto done;
    }
    if (watch.count == NVRTC_MAX_RECORDS) {
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "NVRTC looked at more than %d paths, names and files", NVRTC_MAX_RECORDS);
        goto done;
    }
    size_t size = nvrtc_record_size(&asked);
    if (size > watch.capacity - watch.size) {
        size_t capacity = watch.capacity ? 2 * watch.capacity : 4096;
        while (capacity - watch.size < size)
            capacity *= 2;
        unsigned char *grown = realloc(watch.records, capacity);
        if (!grown) {
            snprintf(watch.uncacheable, sizeof watch.uncacheable,
                     "out of memory while recording what NVRTC read");
            goto done;
        }
        watch.records = grown;
        watch.capacity = capacity;
    }
    nvrtc_record_write(watch.records + watch.size, &asked);
    watch.seen[watch.count].hash = hash;
    watch.seen[watch.count].at = watch.size;
    watch.count++;
    watch.size += size;
done:
    pthread_mutex_unlock(&watch.lock);
}

/* ---- one compile ------------------------------------------------------- */

void nvrtc_inputs_begin(const char *unwatchable)
{
    pthread_mutex_lock(&watch.compile_lock);
    pthread_mutex_lock(&watch.lock);
    watch.size = watch.capacity = watch.count = 0;
    watch.records = NULL;
    watch.uncacheable[0] = watch.refused[0] = '\0';
    if (unwatchable)
        snprintf(watch.uncacheable, sizeof watch.uncacheable,
                 "gpurun cannot watch what NVRTC reads: %s", unwatchable);
    __atomic_store_n(&watch.active, unwatchable == NULL, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&watch.lock);
}

void nvrtc_inputs_end(struct nvrtc_inputs *inputs)
{
    pthread_mutex_lock(&watch.lock);
    __atomic_store_n(&watch.active, 0, __ATOMIC_RELEASE);
    inputs->records = watch.records;
    inputs->records_size = watch.size;
    memcpy(inputs->uncacheable, watch.uncacheable, sizeof inputs->uncacheable);
    memcpy(inputs->refused, watch.refused, sizeof inputs->refused);
    watch.records = NULL;
    watch.size = watch.capacity = watch.count = 0;
    pthread_mutex_unlock(&watch.lock);
    pthread_mutex_unlock(&watch.compile_lock);
}

void nvrtc_inputs_free(struct nvrtc_inputs *inputs)
{
    free(inputs->records);
    inputs->records = NULL;
    inputs->records_size = 0;
}
