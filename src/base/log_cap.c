/* Keeping a long log's head and tail (see base/log_cap.h). */
#include "base/log_cap.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *log_cap(char *log, size_t size, const char *whose)
{
    if (size <= LOG_CAP_HEAD + LOG_CAP_TAIL + 128)
        return log;
    size_t head = LOG_CAP_HEAD;
    while (head > LOG_CAP_HEAD / 2 && log[head - 1] != '\n')
        head--;
    if (log[head - 1] != '\n')
        head = LOG_CAP_HEAD;
    size_t tail = size - LOG_CAP_TAIL;
    while (tail < size - LOG_CAP_TAIL / 2 && log[tail - 1] != '\n')
        tail++;
    if (log[tail - 1] != '\n')
        tail = size - LOG_CAP_TAIL;
    char marker[128];
    int marker_size = snprintf(marker, sizeof marker, "%s[gpurun: %zu bytes of %s left out here]\n",
                               log[head - 1] == '\n' ? "" : "\n", tail - head, whose);
    if (marker_size < 0 || (size_t)marker_size >= sizeof marker)
        return log;
    char *capped = malloc(head + (size_t)marker_size + (size - tail) + 1);
    if (!capped)
        return log;
    memcpy(capped, log, head);
    memcpy(capped + head, marker, (size_t)marker_size);
    memcpy(capped + head + marker_size, log + tail, size - tail + 1);
    free(log);
    return capped;
}
