/* Cancel flags for device-side loops: words of page-locked host memory
 * mapped into every context, one per graph (shared by the Graphs completed
 * or updated from one capture), that the kernels gpurun adds to a while
 * loop read on each pass. The host sets a word with a plain store, which a
 * signal handler may make; the device never writes one, and a graph's
 * next launch clears its word in stream order (gpurun_cancel_rearm), so
 * that a cancel reaches the launches queued before it and no later one. */
#include "runtime/runtime.h"

#include <string.h>

#define SLOTS_PER_PAGE 1024 /* 4-byte words in a 4 KiB page */
#define PAGES 16

static volatile unsigned int *pages[PAGES];
static CUdeviceptr page_addresses[PAGES];
static int references[PAGES * SLOTS_PER_PAGE];

static volatile unsigned int *word(int slot)
{
    return pages[(slot - 1) / SLOTS_PER_PAGE] + (slot - 1) % SLOTS_PER_PAGE;
}

/* The first page with a free slot, allocated when none is. */
static CUresult free_slot(int *slot)
{
    for (int page = 0; page < PAGES; page++) {
        if (pages[page] == NULL) {
            void *host = NULL;
            CUdeviceptr address = 0;
            /* Unsafe during a capture, where loops are made: the caller
             * relaxes the capture around gpurun_cancel_take. */
            CUresult result = CUDA_CALL(cuMemHostAlloc, &host, SLOTS_PER_PAGE * sizeof(unsigned int),
                                        CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
            if (result == CUDA_SUCCESS)
                result = CUDA_CALL(cuMemHostGetDevicePointer, &address, host, 0);
            if (result != CUDA_SUCCESS) {
                if (host)
                    (void)CUDA_CALL(cuMemFreeHost, host);
                return result;
            }
            memset(host, 0, SLOTS_PER_PAGE * sizeof(unsigned int));
            page_addresses[page] = address;
            pages[page] = host;
        }
        for (int i = 0; i < SLOTS_PER_PAGE; i++) {
            if (references[page * SLOTS_PER_PAGE + i] == 0) {
                *slot = page * SLOTS_PER_PAGE + i + 1;
                return CUDA_SUCCESS;
            }
        }
    }
    return CUDA_ERROR_OUT_OF_MEMORY;
}

CUresult gpurun_cancel_take(int *slot)
{
    *slot = 0;
    int found = 0;
    CUresult result = free_slot(&found);
    if (result != CUDA_SUCCESS)
        return result;
    *word(found) = 0u;
    references[found - 1] = 1;
    *slot = found;
    return CUDA_SUCCESS;
}

void gpurun_cancel_retain(int slot)
{
    if (slot > 0)
        references[slot - 1]++;
}

void gpurun_cancel_release(int slot)
{
    if (slot > 0 && references[slot - 1] > 0)
        references[slot - 1]--;
}

CUdeviceptr gpurun_cancel_address(int slot)
{
    if (slot <= 0)
        return 0;
    return page_addresses[(slot - 1) / SLOTS_PER_PAGE]
           + (CUdeviceptr)((slot - 1) % SLOTS_PER_PAGE) * sizeof(unsigned int);
}

void gpurun_cancel_set(int slot)
{
    if (slot > 0)
        *word(slot) = 1u;
}

int gpurun_cancel_is_set(int slot)
{
    return slot > 0 && *word(slot) != 0u;
}

/* Async-signal-safe: plain stores to memory allocated before. A slot free
 * now is cleared when it is taken. */
void gpurun_cancel_all(void)
{
    for (int page = 0; page < PAGES; page++) {
        volatile unsigned int *words = pages[page];
        if (words == NULL)
            continue;
        for (int i = 0; i < SLOTS_PER_PAGE; i++)
            if (references[page * SLOTS_PER_PAGE + i] > 0)
                words[i] = 1u;
    }
}

CUresult gpurun_cancel_rearm(int slot, CUstream stream)
{
    return CUDA_CALL(cuMemsetD32Async, gpurun_cancel_address(slot), 0u, 1, stream);
}
