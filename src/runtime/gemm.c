/* Projection GEMMs through CLBlast. */
#include "gemm.h"
#include "context_internal.h"
#include "base/constants.h"
#include "launch.h"

#include <clblast_c.h>
#include <stdio.h>
#include <string.h>

static const char *clblast_status_name(CLBlastStatusCode code)
{
    switch (code) {
#define NAME(c) case c: return #c;
    NAME(CLBlastSuccess)
    NAME(CLBlastOpenCLCompilerNotAvailable)
    NAME(CLBlastTempBufferAllocFailure)
    NAME(CLBlastOpenCLOutOfResources)
    NAME(CLBlastOpenCLOutOfHostMemory)
    NAME(CLBlastOpenCLBuildProgramFailure)
    NAME(CLBlastInvalidValue)
    NAME(CLBlastInvalidCommandQueue)
    NAME(CLBlastInvalidMemObject)
    NAME(CLBlastInvalidBinary)
    NAME(CLBlastInvalidBuildOptions)
    NAME(CLBlastInvalidProgram)
    NAME(CLBlastInvalidProgramExecutable)
    NAME(CLBlastInvalidKernelName)
    NAME(CLBlastInvalidKernelDefinition)
    NAME(CLBlastInvalidKernel)
    NAME(CLBlastInvalidArgIndex)
    NAME(CLBlastInvalidArgValue)
    NAME(CLBlastInvalidArgSize)
    NAME(CLBlastInvalidKernelArgs)
    NAME(CLBlastInvalidLocalNumDimensions)
    NAME(CLBlastInvalidLocalThreadsTotal)
    NAME(CLBlastInvalidLocalThreadsDim)
    NAME(CLBlastInvalidGlobalOffset)
    NAME(CLBlastInvalidEventWaitList)
    NAME(CLBlastInvalidEvent)
    NAME(CLBlastInvalidOperation)
    NAME(CLBlastInvalidBufferSize)
    NAME(CLBlastInvalidGlobalWorkSize)
    NAME(CLBlastNotImplemented)
    NAME(CLBlastInvalidMatrixA)
    NAME(CLBlastInvalidMatrixB)
    NAME(CLBlastInvalidMatrixC)
    NAME(CLBlastInvalidVectorX)
    NAME(CLBlastInvalidVectorY)
    NAME(CLBlastInvalidDimension)
    NAME(CLBlastInvalidLeadDimA)
    NAME(CLBlastInvalidLeadDimB)
    NAME(CLBlastInvalidLeadDimC)
    NAME(CLBlastInvalidIncrementX)
    NAME(CLBlastInvalidIncrementY)
    NAME(CLBlastInsufficientMemoryA)
    NAME(CLBlastInsufficientMemoryB)
    NAME(CLBlastInsufficientMemoryC)
    NAME(CLBlastInsufficientMemoryX)
    NAME(CLBlastInsufficientMemoryY)
    NAME(CLBlastInsufficientMemoryTemp)
    NAME(CLBlastInvalidBatchCount)
    NAME(CLBlastInvalidOverrideKernel)
    NAME(CLBlastMissingOverrideParameter)
    NAME(CLBlastInvalidLocalMemUsage)
    NAME(CLBlastNoHalfPrecision)
    NAME(CLBlastNoDoublePrecision)
    NAME(CLBlastInvalidVectorScalar)
    NAME(CLBlastInsufficientMemoryScalar)
    NAME(CLBlastDatabaseError)
    NAME(CLBlastUnknownError)
    NAME(CLBlastUnexpectedError)
#undef NAME
    }
    return "unknown CLBlast status";
}

static clattn_status status_from_clblast(CLBlastStatusCode code)
{
    switch (code) {
    case CLBlastTempBufferAllocFailure:
    case CLBlastOpenCLOutOfResources: return CLATTN_ERROR_OUT_OF_DEVICE_MEMORY;
    case CLBlastOpenCLOutOfHostMemory: return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    default: return CLATTN_ERROR_CLBLAST;
    }
}

clattn_status clattn__gemm_nt(clattn_context *ctx, clattn_op op, size_t m, size_t n, size_t k,
                              cl_mem a, size_t a_offset, size_t lda, cl_mem b, size_t b_offset,
                              size_t ldb, float beta, cl_mem c, size_t c_offset, size_t ldc)
{
    if (m == 0 || n == 0 || k == 0)
        return CLATTN_OK;
    cl_event start = NULL, event = NULL;
    if (ctx->profiling) {
        cl_int err = clEnqueueMarkerWithWaitList(ctx->queue, 0, NULL, &start);
        if (err != CL_SUCCESS)
            return clattn__fail_cl(ctx, err, "clEnqueueMarkerWithWaitList before a GEMM failed");
    }
    CLBlastStatusCode code =
        CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k, 1.0f,
                     a, a_offset, lda, b, b_offset, ldb, beta, c, c_offset, ldc, &ctx->queue,
                     ctx->profiling ? &event : NULL);
    if (code != CLBlastSuccess) {
        if (start)
            clReleaseEvent(start);
        return clattn__fail(ctx, status_from_clblast(code),
                            "CLBlastSgemm (%s, m=%zu n=%zu k=%zu) failed: %s (%d)",
                            clattn_op_name(op), m, n, k, clblast_status_name(code), (int)code);
    }
    char name[CLATTN_STATS_NAME_SIZE];
    snprintf(name, sizeof(name), "gemm:%s", clattn_op_name(op));
    return clattn__account(ctx, name, op, (uint64_t)m * n * k, start, event);
}

const char *clattn__gemm_apply_params(cl_device_id device, const clattn_gemm_params *gemm)
{
    if (!gemm->present)
        return NULL;
    CLBlastStatusCode code = CLBlastOverrideParameters(
        device, "Xgemm", CLBlastPrecisionSingle, CLATTN_GEMM_PARAMETER_COUNT,
        (const char **)clattn__gemm_parameter_names, gemm->values);
    return code == CLBlastSuccess ? NULL : clblast_status_name(code);
}

void clattn__gemm_clear_cache(void)
{
    CLBlastClearCache();
}

/* ---- the library's CPU GEMM ---- */

void clattn__gemm_cpu_destroy(clattn_gemm_cpu **g)
{
    if (*g)
        clattn__gemm_cpu_release(*g);
    *g = NULL;
}

void clattn__gemm_weight_release(clattn_gemm_weight *w)
{
    if (w->packed)
        clReleaseMemObject(w->packed);
    memset(w, 0, sizeof(*w));
}

/* The context's CPU GEMM, built on first use (about a second on a cold PoCL cache). */
static clattn_status cpu_gemm(clattn_context *ctx, clattn_gemm_cpu **out)
{
    if (!ctx->gemm_cpu) {
        char error[1024] = "";
        clattn_status status = clattn__gemm_cpu_create(ctx->cl_ctx, ctx->device, NULL,
                                                       &ctx->gemm_cpu, error, sizeof(error));
        if (status != CLATTN_OK)
            return clattn__fail(ctx, status, "building the CPU GEMM: %s", error);
        clattn__log(ctx, CLATTN_LOG_INFO, "CPU GEMM built with \"%s\"",
                    clattn__gemm_cpu_options(ctx->gemm_cpu));
    }
    *out = ctx->gemm_cpu;
    return CLATTN_OK;
}

static clattn_status run_cpu(clattn_context *ctx, clattn_op op, size_t m, cl_mem a,
                             size_t a_offset, size_t lda, clattn_gemm_weight *w, cl_mem bias,
                             size_t bias_offset, int act, cl_mem c, size_t c_offset, size_t ldc,
                             clattn_gemm_left *left)
{
    clattn_gemm_cpu *g;
    clattn_status status = cpu_gemm(ctx, &g);
    if (status != CLATTN_OK)
        return status;
    if (!w->packed) {
        cl_event event = NULL;
        status = clattn__gemm_cpu_pack_b(g, ctx->queue, w->n, w->k, w->mem, w->offset, w->ld,
                                         &w->packed, ctx->profiling ? &event : NULL);
        if (status != CLATTN_OK)
            return clattn__fail(ctx, status, "packing a weight for the CPU GEMM: %s",
                                clattn__gemm_cpu_error(g));
        if ((status = clattn__account(ctx, "gemm_pack", CLATTN_OP_OTHER, 0, NULL, event)))
            return status;
    }
    clattn_gemm_cpu_act fused = act == CLATTN_ACT_RELU   ? CLATTN_GEMM_CPU_ACT_RELU
                                : act == CLATTN_ACT_GELU ? CLATTN_GEMM_CPU_ACT_GELU
                                                         : CLATTN_GEMM_CPU_ACT_NONE;
    cl_event event = NULL;
    status = clattn__gemm_cpu_run(g, ctx->queue, m, w->n, w->k, a, a_offset, lda, w->packed, bias,
                                  bias_offset, 0.0f, c, c_offset, ldc, fused,
                                  ctx->profiling ? &event : NULL);
    if (status != CLATTN_OK)
        return clattn__fail(ctx, status, "the CPU GEMM (%s, m=%zu n=%zu k=%zu): %s",
                            clattn_op_name(op), m, w->n, w->k, clattn__gemm_cpu_error(g));
    left->bias = false;
    left->act = act == CLATTN_ACT_GELU_TANH ? CLATTN_ACT_GELU_TANH : CLATTN_ACT_NONE;
    char name[CLATTN_STATS_NAME_SIZE];
    snprintf(name, sizeof(name), "gemm:%s", clattn_op_name(op));
    return clattn__account(ctx, name, op, (uint64_t)m * w->n * w->k, NULL, event);
}

clattn_status clattn__gemm_weighted(clattn_context *ctx, clattn_op op, size_t m, cl_mem a,
                                    size_t a_offset, size_t lda, clattn_gemm_weight *w,
                                    cl_mem bias, size_t bias_offset, int act, cl_mem c,
                                    size_t c_offset, size_t ldc, clattn_gemm_left *left)
{
    left->bias = false;
    left->act = CLATTN_ACT_NONE;
    if (m == 0 || w->n == 0 || w->k == 0)
        return CLATTN_OK;
    if (ctx->tuning.gemm_kernel)
        return run_cpu(ctx, op, m, a, a_offset, lda, w, bias, bias_offset, act, c, c_offset, ldc,
                       left);
    left->bias = bias != NULL;
    left->act = act;
    return clattn__gemm_nt(ctx, op, m, w->n, w->k, a, a_offset, lda, w->mem, w->offset, w->ld,
                           0.0f, c, c_offset, ldc);
}
