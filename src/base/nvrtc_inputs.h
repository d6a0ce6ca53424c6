/* What NVRTC reads while it compiles, besides its arguments: the paths it
 * looks at, the files it opens, the working directory, the environment
 * variables and libraries it asks for. NVRTC cannot list them itself, so
 * gpurun watches its calls to the C library (nvrtc_inputs.c) and records
 * each question with the answer NVRTC got. Asking the same questions later
 * and getting the same answers means NVRTC would compile the same way: the
 * kernel cache's test that an entry is still good. No Lua. */
#ifndef GPURUN_BASE_NVRTC_INPUTS_H
#define GPURUN_BASE_NVRTC_INPUTS_H

#include <stddef.h>

/* What one compile read. records: the questions and answers, as bytes for
 * nvrtc_inputs_check() (malloc'd; NULL when nothing was recorded).
 * uncacheable: when not empty, why a compile with them must not be stored
 * (the watch could not be installed, NVRTC listed a directory, wrote a
 * file, looked at too many paths...). refused: when not empty, the file
 * NVRTC was kept from opening ("include file /tmp/f is a FIFO, not a
 * regular file"). */
struct nvrtc_inputs {
    unsigned char *records;
    size_t records_size;
    char uncacheable[400];
    char refused[400];
};

/* 1 when NVRTC's calls can be watched in this process, installing the watch
 * on first use; else 0 with *why saying why not (a static string). */
int nvrtc_inputs_watchable(const char **why);

/* Bracket the life of one NVRTC program. begin takes the process-wide
 * compile lock (NVRTC compiles one program at a time in this process) and
 * starts recording; end stops, hands over what was recorded (free it with
 * nvrtc_inputs_free()) and releases the lock. While recording, an open of
 * anything but a regular file or a directory is refused before it can
 * block. Where the watch cannot be installed, NVRTC runs unwatched and
 * inputs->uncacheable says why. */
void nvrtc_inputs_begin(void);
void nvrtc_inputs_end(struct nvrtc_inputs *inputs);
void nvrtc_inputs_free(struct nvrtc_inputs *inputs);

/* 1 when text names __DATE__, __TIME__ or __TIMESTAMP__: NVRTC's output
 * then changes with the clock, so such a compile is not stored. */
int nvrtc_inputs_names_the_time(const void *text, size_t size);

enum nvrtc_inputs_verdict { NVRTC_INPUTS_SAME, NVRTC_INPUTS_CHANGED, NVRTC_INPUTS_MALFORMED };

/* Asks every recorded question again, from this process and its working
 * directory, never blocking, and compares the answers. records come from
 * disk: anything malformed is NVRTC_INPUTS_MALFORMED. why gets the first
 * difference or what is malformed. */
enum nvrtc_inputs_verdict nvrtc_inputs_check(const unsigned char *records, size_t size,
                                             char *why, size_t why_size);

#endif
