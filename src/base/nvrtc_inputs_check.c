/* Asking NVRTC's questions again (base/nvrtc_inputs.h): each recorded
 * question is asked from this process and its working directory, never
 * blocking, and its answer compared with the one recorded. The records
 * come from a cache entry on disk, so each is checked before it is asked. */
#define _GNU_SOURCE /* RTLD_NOLOAD */
#include "base/nvrtc_inputs.h"

#include "base/nvrtc_inputs_answers.h"

#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void ask(int question, uint32_t number, const char *text, struct nvrtc_answer *a)
{
    struct stat st;
    switch (question) {
    case ASK_STAT:
    case ASK_LSTAT:
        if ((question == ASK_STAT ? stat(text, &st) : lstat(text, &st)) == 0)
            nvrtc_answer_stat(a, &st);
        else
            nvrtc_answer_error(a, errno);
        return;
    case ASK_ACCESS:
        if (access(text, (int)number) == 0)
            nvrtc_answer_tag(a, 'O');
        else
            nvrtc_answer_error(a, errno);
        return;
    case ASK_OPEN: {
        mode_t refused = 0;
        nvrtc_answer_open(text, (int)number, 0, 0, a, NULL, &refused);
        return;
    }
    case ASK_CWD: {
        char *cwd = getcwd(NULL, 0);
        size_t size = number & ~NVRTC_NO_POINTER;
        if (!cwd)
            nvrtc_answer_error(a, errno);
        else if (!(number & NVRTC_NO_POINTER) && size == 0)
            nvrtc_answer_error(a, EINVAL);
        else if (size != 0 && strlen(cwd) + 1 > size)
            nvrtc_answer_error(a, ERANGE);
        else
            nvrtc_answer_text(a, 'C', cwd, strlen(cwd));
        free(cwd);
        return;
    }
    case ASK_ENV: {
        const char *value = getenv(text);
        if (value)
            nvrtc_answer_text(a, 'V', value, strlen(value));
        else
            nvrtc_answer_tag(a, 'U');
        return;
    }
    case ASK_READLINK: {
        char target[NVRTC_MAX_TEXT + 1];
        size_t size = number < sizeof target ? number : sizeof target;
        ssize_t n = readlink(text, target, size);
        if (n >= 0)
            nvrtc_answer_text(a, 'B', target, (size_t)n);
        else
            nvrtc_answer_error(a, errno);
        return;
    }
    case ASK_REALPATH: {
        char *resolved = realpath(text, NULL);
        if (resolved)
            nvrtc_answer_text(a, 'P', resolved, strlen(resolved));
        else
            nvrtc_answer_error(a, errno);
        free(resolved);
        return;
    }
    case ASK_DLOPEN: {
        const char *file = (number & NVRTC_NO_POINTER) ? NULL : text;
        int mode = (int)(number & ~NVRTC_NO_POINTER);
        /* dlopen reads the file a path names, and would wait forever on a
         * FIFO there: a record from disk can name any path. */
        if (file && strchr(file, '/') && stat(file, &st) == 0 && nvrtc_answer_refused(a, &st))
            return;
        /* One already loaded is looked at without loading it again; one
         * that is not is loaded, as NVRTC would, and stays. */
        void *handle = dlopen(file, (mode & ~RTLD_GLOBAL) | RTLD_NOLOAD);
        if (handle) {
            nvrtc_answer_library(a, handle);
            dlclose(handle);
        } else {
            nvrtc_answer_library(a, dlopen(file, mode));
        }
        return;
    }
    }
}

/* The numbers a question can carry; an entry's are read from disk. */
static int number_is_valid(int question, uint32_t number)
{
    switch (question) {
    case ASK_STAT:
    case ASK_LSTAT:
    case ASK_ENV:
    case ASK_REALPATH:
        return number == 0;
    case ASK_ACCESS:
        return (number & ~(uint32_t)(R_OK | W_OK | X_OK | F_OK)) == 0;
    case ASK_OPEN:
        return (number & ~(uint32_t)NVRTC_WATCHED_OPEN_FLAGS) == 0;
    case ASK_READLINK:
        return number <= NVRTC_MAX_TEXT + 1;
    case ASK_DLOPEN:
        return (number & ~(NVRTC_NO_POINTER | RTLD_LAZY | RTLD_NOW | RTLD_GLOBAL | RTLD_NODELETE
                           | RTLD_DEEPBIND)) == 0;
    default:
        return 1;
    }
}

enum nvrtc_inputs_verdict nvrtc_inputs_check(const unsigned char *records, size_t size,
                                             char *why, size_t why_size)
{
    static struct nvrtc_answer again; /* too big for every stack; callers take turns */
    static pthread_mutex_t again_lock = PTHREAD_MUTEX_INITIALIZER;
    char text[NVRTC_MAX_TEXT + 1];
    size_t count = 0;
    enum nvrtc_inputs_verdict verdict = NVRTC_INPUTS_SAME;
    pthread_mutex_lock(&again_lock);
    while (size > 0 && verdict == NVRTC_INPUTS_SAME) {
        struct nvrtc_record record;
        if (!nvrtc_record_read(&records, &size, &record) || ++count > NVRTC_MAX_RECORDS
            || !number_is_valid(record.question, record.number)) {
            snprintf(why, why_size, "a record of what NVRTC read is malformed");
            verdict = NVRTC_INPUTS_MALFORMED;
            break;
        }
        memcpy(text, record.text, record.text_size);
        text[record.text_size] = '\0';
        again.size = 0;
        again.too_long = 0;
        ask(record.question, record.number, text, &again);
        if (again.too_long || again.size != record.answer_size
            || memcmp(again.bytes, record.answer, record.answer_size) != 0) {
            snprintf(why, why_size, "%s(%s) answers differently now",
                     nvrtc_question_name(record.question), text);
            verdict = NVRTC_INPUTS_CHANGED;
        }
    }
    pthread_mutex_unlock(&again_lock);
    return verdict;
}
