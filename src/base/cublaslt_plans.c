/* cuBLASLt plans kept per shape: made once, run many times. */
#include "base/cublaslt_plans.h"

#include <stdint.h>
#include <string.h>

static void destroy_plan(struct cublaslt_plan *plan)
{
    if (plan->desc)
        (void)cublaslt.cublasLtMatmulDescDestroy(plan->desc);
    if (plan->a)
        (void)cublaslt.cublasLtMatrixLayoutDestroy(plan->a);
    if (plan->b)
        (void)cublaslt.cublasLtMatrixLayoutDestroy(plan->b);
    if (plan->c)
        (void)cublaslt.cublasLtMatrixLayoutDestroy(plan->c);
    memset(plan, 0, sizeof *plan);
}

/* The descriptor and layouts of shape: CUBLAS_SUCCESS or the failure. */
static cublas_status describe(struct cublaslt_plan *plan, const struct cublaslt_shape *s,
                              const char **call)
{
    int32_t transa = s->transa, transb = s->transb;
    uint32_t epilogue = (uint32_t)s->epilogue;
    cublas_status status;
    *call = "cublasLtMatmulDescCreate";
    status = cublaslt.cublasLtMatmulDescCreate(&plan->desc, s->compute, s->scale_type);
    if (status != CUBLAS_SUCCESS)
        return status;
    *call = "cublasLtMatmulDescSetAttribute";
    status = cublaslt.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_DESC_TRANSA, &transa,
                                                     sizeof transa);
    if (status == CUBLAS_SUCCESS)
        status = cublaslt.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_DESC_TRANSB,
                                                         &transb, sizeof transb);
    if (status == CUBLAS_SUCCESS)
        status = cublaslt.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_DESC_EPILOGUE,
                                                         &epilogue, sizeof epilogue);
    if (status != CUBLAS_SUCCESS)
        return status;
    *call = "cublasLtMatrixLayoutCreate";
    /* Stored as op(X) is read: op(A) is m x k, so A is k x m when transposed. */
    status = cublaslt.cublasLtMatrixLayoutCreate(&plan->a, s->type, s->transa ? s->k : s->m,
                                                 s->transa ? s->m : s->k, s->lda);
    if (status == CUBLAS_SUCCESS)
        status = cublaslt.cublasLtMatrixLayoutCreate(&plan->b, s->type, s->transb ? s->n : s->k,
                                                     s->transb ? s->k : s->n, s->ldb);
    if (status == CUBLAS_SUCCESS)
        status = cublaslt.cublasLtMatrixLayoutCreate(&plan->c, s->type, s->m, s->n, s->ldc);
    return status;
}

int cublaslt_alignment(const void *pointer)
{
    uintptr_t address = (uintptr_t)pointer | 256;
    return (int)(address & -address);
}

/* The heuristic's first algorithm within the workspace, for pointers of
 * the shape's alignments (the bias pointer's the heuristic reads from the
 * descriptor: one of that alignment stands in). */
static cublas_status choose(struct cublaslt_plans *plans, struct cublaslt_plan *plan,
                            size_t workspace_bytes, const char **call)
{
    const struct cublaslt_shape *s = &plan->shape;
    cublaslt_preference preference = NULL;
    uint64_t bytes = workspace_bytes;
    uint32_t align[4] = {(uint32_t)s->align_a, (uint32_t)s->align_b, (uint32_t)s->align_c,
                         (uint32_t)s->align_c};
    const void *bias = (const void *)(uintptr_t)s->align_bias;
    cublas_status status = CUBLAS_SUCCESS;
    *call = "cublasLtMatmulDescSetAttribute";
    if (s->epilogue & CUBLASLT_EPILOGUE_BIAS)
        status = cublaslt.cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_DESC_BIAS_POINTER,
                                                         &bias, sizeof bias);
    if (status != CUBLAS_SUCCESS)
        return status;
    *call = "cublasLtMatmulPreferenceCreate";
    status = cublaslt.cublasLtMatmulPreferenceCreate(&preference);
    if (status != CUBLAS_SUCCESS)
        return status;
    *call = "cublasLtMatmulPreferenceSetAttribute";
    status = cublaslt.cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_PREF_MAX_WORKSPACE_BYTES, &bytes, sizeof bytes);
    for (int i = 0; i < 4 && status == CUBLAS_SUCCESS; i++)
        status = cublaslt.cublasLtMatmulPreferenceSetAttribute(
            preference, CUBLASLT_PREF_MIN_ALIGNMENT_A_BYTES + i, &align[i], sizeof align[i]);
    cublaslt_heuristic result;
    int returned = 0;
    memset(&result, 0, sizeof result);
    if (status == CUBLAS_SUCCESS) {
        *call = "cublasLtMatmulAlgoGetHeuristic";
        status = cublaslt.cublasLtMatmulAlgoGetHeuristic(plans->handle, plan->desc, plan->a,
                                                         plan->b, plan->c, plan->c, preference, 1,
                                                         &result, &returned);
    }
    (void)cublaslt.cublasLtMatmulPreferenceDestroy(preference);
    if (status == CUBLAS_SUCCESS && (returned < 1 || result.state != CUBLAS_SUCCESS))
        status = returned < 1 ? CUBLAS_STATUS_NOT_SUPPORTED : result.state;
    if (status == CUBLAS_SUCCESS)
        plan->algo = result.algo;
    return status;
}

const struct cublaslt_plan *cublaslt_plan_for(struct cublaslt_plans *plans,
                                              const struct cublaslt_shape *shape,
                                              size_t workspace_bytes, const char **call,
                                              cublas_status *status)
{
    for (int i = 0; i < plans->count; i++)
        if (memcmp(&plans->plan[i].shape, shape, sizeof *shape) == 0)
            return &plans->plan[i];
    int slot = plans->count < CUBLASLT_PLANS ? plans->count : plans->next;
    struct cublaslt_plan *plan = &plans->plan[slot];
    destroy_plan(plan);
    plan->shape = *shape;
    *status = describe(plan, shape, call);
    if (*status == CUBLAS_SUCCESS)
        *status = choose(plans, plan, workspace_bytes, call);
    if (*status != CUBLAS_SUCCESS) {
        destroy_plan(plan);
        if (slot < plans->count) {
            /* The slot emptied: the last plan fills it. */
            plans->count--;
            if (slot != plans->count) {
                *plan = plans->plan[plans->count];
                memset(&plans->plan[plans->count], 0, sizeof *plan);
            }
            plans->next = 0;
        }
        return NULL;
    }
    if (plans->count < CUBLASLT_PLANS)
        plans->count++;
    else
        plans->next = (plans->next + 1) % CUBLASLT_PLANS;
    return plan;
}

cublas_status cublaslt_plan_run(const struct cublaslt_plans *plans,
                                const struct cublaslt_plan *plan, const void *alpha,
                                const void *a, const void *b, const void *beta, void *c,
                                const void *bias, void *workspace, size_t workspace_bytes,
                                cublas_stream stream, const char **call)
{
    if (bias) {
        *call = "cublasLtMatmulDescSetAttribute";
        cublas_status status = cublaslt.cublasLtMatmulDescSetAttribute(
            plan->desc, CUBLASLT_DESC_BIAS_POINTER, &bias, sizeof bias);
        if (status != CUBLAS_SUCCESS)
            return status;
    }
    *call = "cublasLtMatmul";
    return cublaslt.cublasLtMatmul(plans->handle, plan->desc, alpha, a, plan->a, b, plan->b, beta,
                                   c, plan->c, c, plan->c, &plan->algo, workspace,
                                   workspace_bytes, stream);
}

void cublaslt_plans_clear(struct cublaslt_plans *plans)
{
    for (int i = 0; i < plans->count; i++)
        destroy_plan(&plans->plan[i]);
    plans->count = 0;
    plans->next = 0;
}
