/* The record of what NVRTC read, as bytes (base/nvrtc_inputs_records.h). */
#include "base/nvrtc_inputs_records.h"

#include <string.h>

#define HEAD_SIZE 9 /* question, number, text length */

static void put_u32_at(unsigned char *p, uint32_t value)
{
    for (int i = 0; i < 4; i++)
        p[i] = (unsigned char)(value >> (8 * i));
}

static uint32_t get_u32_at(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

size_t nvrtc_record_size(const struct nvrtc_record *record)
{
    return HEAD_SIZE + (size_t)record->text_size + 4 + record->answer_size;
}

void nvrtc_record_write(unsigned char *at, const struct nvrtc_record *record)
{
    at[0] = (unsigned char)record->question;
    put_u32_at(at + 1, record->number);
    put_u32_at(at + 5, record->text_size);
    memcpy(at + HEAD_SIZE, record->text, record->text_size);
    at += HEAD_SIZE + record->text_size;
    put_u32_at(at, record->answer_size);
    memcpy(at + 4, record->answer, record->answer_size);
}

int nvrtc_record_read(const unsigned char **at, size_t *left, struct nvrtc_record *record)
{
    const unsigned char *p = *at;
    size_t size = *left;
    if (size < HEAD_SIZE || p[0] < 1 || p[0] > ASK_LAST)
        return 0;
    uint32_t text_size = get_u32_at(p + 5);
    if (text_size > NVRTC_MAX_TEXT || text_size > size - HEAD_SIZE
        || size - HEAD_SIZE - text_size < 4)
        return 0;
    const unsigned char *answer = p + HEAD_SIZE + text_size + 4;
    uint32_t answer_size = get_u32_at(answer - 4);
    size_t rest = size - HEAD_SIZE - text_size - 4;
    if (answer_size > NVRTC_MAX_ANSWER || answer_size > rest
        || memchr(p + HEAD_SIZE, '\0', text_size))
        return 0;
    record->question = p[0];
    record->number = get_u32_at(p + 1);
    record->text = (const char *)(p + HEAD_SIZE);
    record->text_size = text_size;
    record->answer = answer;
    record->answer_size = answer_size;
    *at = answer + answer_size;
    *left = rest - answer_size;
    return 1;
}

const char *nvrtc_question_name(int question)
{
    static const char *const names[] = {"", "stat", "lstat", "access", "open", "getcwd",
                                        "getenv", "readlink", "realpath", "dlopen"};
    return question >= 1 && question <= ASK_LAST ? names[question] : "?";
}
