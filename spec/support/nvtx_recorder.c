/* A minimal NVTX tool for the specs: loaded by NVTX3 through
 * NVTX_INJECTION64_PATH, it appends each push ("push NAME"), pop ("pop")
 * and mark ("mark NAME") to the file named by $GPURUN_NVTX_RECORD, so a
 * spec can read back which ranges a run opened and whether every one was
 * closed. Built by spec/nvtx_spec.lua with the C compiler. */
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExt.h>

#include <stdio.h>
#include <stdlib.h>

static FILE *record;

static int record_push(const char *message)
{
    fprintf(record, "push %s\n", message);
    fflush(record);
    return 0;
}

static int record_pop(void)
{
    fputs("pop\n", record);
    fflush(record);
    return 0;
}

static void record_mark(const char *message)
{
    fprintf(record, "mark %s\n", message);
    fflush(record);
}

__attribute__((visibility("default")))
int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t get_export_table)
{
    const char *path = getenv("GPURUN_NVTX_RECORD");
    const NvtxExportTableCallbacks *callbacks = get_export_table(NVTX_ETID_CALLBACKS);
    NvtxFunctionTable core = NULL;
    unsigned int size = 0;
    if (path == NULL || callbacks == NULL
        || !callbacks->GetModuleFunctionTable(NVTX_CB_MODULE_CORE, &core, &size)
        || size < NVTX_CBID_CORE_RangePop)
        return 0;
    record = fopen(path, "a");
    if (record == NULL)
        return 0;
    *core[NVTX_CBID_CORE_RangePushA] = (NvtxFunctionPointer)record_push;
    *core[NVTX_CBID_CORE_RangePop] = (NvtxFunctionPointer)record_pop;
    *core[NVTX_CBID_CORE_MarkA] = (NvtxFunctionPointer)record_mark;
    return 1;
}
