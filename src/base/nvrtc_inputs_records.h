/* The record of what NVRTC read, as bytes: one record per question NVRTC
 * asked, in the order asked, which the kernel cache keeps in an entry and
 * reads back (so a record from disk is checked before it is believed).
 * Shared by the recorder, NVRTC's calls and the check. No Lua. */
#ifndef GPURUN_BASE_NVRTC_INPUTS_RECORDS_H
#define GPURUN_BASE_NVRTC_INPUTS_RECORDS_H

#include <fcntl.h>
#include <stddef.h>
#include <stdint.h>

#define NVRTC_MAX_RECORDS 4096
#define NVRTC_MAX_TEXT 4096 /* a path, a name, a value */
#define NVRTC_MAX_ANSWER (NVRTC_MAX_TEXT + 64)

enum nvrtc_question {
    ASK_STAT = 1,
    ASK_LSTAT,
    ASK_ACCESS,
    ASK_OPEN,
    ASK_CWD,
    ASK_ENV,
    ASK_READLINK,
    ASK_REALPATH,
    ASK_DLOPEN,
    ASK_LAST = ASK_DLOPEN
};

/* getcwd's number: the size it was given, and this bit when its buffer
 * was NULL; dlopen's: the mode, and this bit for dlopen(NULL). */
#define NVRTC_NO_POINTER 0x80000000u

/* An open's number: the flags that change what a read-only open finds. */
#define NVRTC_WATCHED_OPEN_FLAGS (O_NOFOLLOW | O_DIRECTORY)

/* u8 question | u32 number | u32 n, text | u32 n, answer (little-endian). */
struct nvrtc_record {
    int question;
    uint32_t number;     /* the flags, mode or size it asked with */
    const char *text;    /* the path or name, not NUL-terminated */
    uint32_t text_size;
    const unsigned char *answer;
    uint32_t answer_size;
};

size_t nvrtc_record_size(const struct nvrtc_record *record);

/* Writes nvrtc_record_size(record) bytes at `at`. */
void nvrtc_record_write(unsigned char *at, const struct nvrtc_record *record);

/* Reads the record at *at, of the *left bytes there: 1, with *at and *left
 * moved past it; 0 when it is malformed (cut short, an unknown question, a
 * length over the limits, a NUL in its text). */
int nvrtc_record_read(const unsigned char **at, size_t *left, struct nvrtc_record *record);

/* "stat", "open", ... for messages. */
const char *nvrtc_question_name(int question);

#endif
