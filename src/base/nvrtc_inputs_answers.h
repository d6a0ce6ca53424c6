/* The answer to one of NVRTC's questions, as bytes: made by the same
 * functions for a call NVRTC made and for the question asked again, so
 * that equal answers are equal bytes. No Lua. */
#ifndef GPURUN_BASE_NVRTC_INPUTS_ANSWERS_H
#define GPURUN_BASE_NVRTC_INPUTS_ANSWERS_H

#include <stddef.h>
#include <sys/stat.h>

#include "base/nvrtc_inputs_records.h"

struct nvrtc_answer {
    unsigned char bytes[NVRTC_MAX_ANSWER];
    size_t size;
    int too_long; /* more than NVRTC_MAX_ANSWER bytes were put */
};

/* A one-byte tag alone: 'O' (allowed), 'U' (unset), 'N' (no library). */
void nvrtc_answer_tag(struct nvrtc_answer *a, char tag);
void nvrtc_answer_error(struct nvrtc_answer *a, int error);
/* A tag and text: 'C' working directory, 'V' value, 'B' link, 'P' path. */
void nvrtc_answer_text(struct nvrtc_answer *a, char tag, const char *text, size_t size);
/* The type; a regular file's size, time and identity; a folder's identity. */
void nvrtc_answer_stat(struct nvrtc_answer *a, const struct stat *st);
/* The file a dlopen handle is (NULL: none was found). */
void nvrtc_answer_library(struct nvrtc_answer *a, void *handle);

/* 1 when reading st's file could block or never end (anything but a
 * regular file or a directory: a FIFO, a device, a socket), with the
 * refusal put as the answer; else 0 and nothing put. */
int nvrtc_answer_refused(struct nvrtc_answer *a, const struct stat *st);

/* Opens path for reading the way NVRTC asked (flags: its
 * NVRTC_WATCHED_OPEN_FLAGS; more: its O_CLOEXEC and the like) and answers
 * with the content's hash. Anything but a regular file or a directory is
 * refused, never opened in a way that could block: *refused gets its
 * mode. keep: return the descriptor (blocking again, as NVRTC opened it)
 * instead of closing it. *time_macro (when not NULL) is set when the
 * content names __DATE__, __TIME__ or __TIMESTAMP__. Returns the
 * descriptor, 0 when not kept, or -1 with errno set. */
int nvrtc_answer_open(const char *path, int flags, int more, int keep, struct nvrtc_answer *a,
                      int *time_macro, mode_t *refused);

/* "a FIFO", "a character device", ... for messages. */
const char *nvrtc_file_type(mode_t mode);

#endif
