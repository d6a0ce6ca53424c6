/* The recorder of what NVRTC reads: what NVRTC's calls
 * (nvrtc_inputs_hooks.c) tell it while a compile is recorded. Safe from
 * any thread: NVRTC makes some of its calls from threads of its own. No
 * Lua. */
#ifndef GPURUN_BASE_NVRTC_INPUTS_RECORDING_H
#define GPURUN_BASE_NVRTC_INPUTS_RECORDING_H

#include <stdint.h>

#include "base/nvrtc_inputs_answers.h"

/* 1 between nvrtc_inputs_begin and nvrtc_inputs_end (of a watched compile). */
int nvrtc_recording(void);

/* Adds NVRTC's question (text: a path or a name, NULL as "") and its
 * answer. The same question asked twice in one compile with two answers
 * means something changed while NVRTC read it: the compile is not stored. */
void nvrtc_record(enum nvrtc_question question, uint32_t number, const char *text,
                  const struct nvrtc_answer *a);

/* Why the compile must not be stored, or the file NVRTC was kept from
 * opening; the first reason of each kind is kept. */
void nvrtc_note_uncacheable(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void nvrtc_note_refused(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

#endif
