/* Projection GEMMs: CLBlast, the library's CPU GEMM or oneDNN, and the weights' forms for each. */
#include "gemm.h"
#include "buffers.h"
#include "context_internal.h"
#include "base/constants.h"
#include "gemm_onednn.h"
#include "host_cpu.h"
#include "launch.h"

#ifdef CLATTN_HAVE_ONEDNN
#define CLATTN_HAVE_ONEDNN_BUILD 1
#else
#define CLATTN_HAVE_ONEDNN_BUILD 0
#endif

#include <clblast_c.h>
#include <pthread.h>
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

/* ---- Xgemm parameters from the tuning cache, per device ----
 * CLBlast keeps overridden parameters per device for the whole process, so the record of where
 * they came from is per device and process-wide too: parameters from a tuning cache, with what to
 * fall back to should CLBlast be unable to build or run them. */
#define CACHED_DEVICES 16
typedef struct cached_xgemm {
    cl_device_id device;         /* NULL: a free slot */
    clattn_gemm_params fallback; /* present 0: none */
    char cache_path[1024];
} cached_xgemm;
static cached_xgemm cached[CACHED_DEVICES];
static pthread_mutex_t cached_lock = PTHREAD_MUTEX_INITIALIZER;

/* The device's record, or NULL; with `create`, a free slot for it (NULL when none is left).
 * Called with cached_lock held. */
static cached_xgemm *cached_slot(cl_device_id device, bool create)
{
    cached_xgemm *free_slot = NULL;
    for (int i = 0; i < CACHED_DEVICES; i++) {
        if (cached[i].device == device)
            return &cached[i];
        if (!cached[i].device && !free_slot)
            free_slot = &cached[i];
    }
    return create ? free_slot : NULL;
}

static const char *override_params(cl_device_id device, const clattn_gemm_params *gemm)
{
    CLBlastStatusCode code = CLBlastOverrideParameters(
        device, "Xgemm", CLBlastPrecisionSingle, CLATTN_GEMM_PARAMETER_COUNT,
        (const char **)clattn__gemm_parameter_names, gemm->values);
    return code == CLBlastSuccess ? NULL : clblast_status_name(code);
}

/* Batch invariance (clattn/context.h): below XGEMM_MIN_INDIRECT_SIZE³ multiply-adds CLBlast runs
 * its single-kernel "direct" GEMM, above it its main tiled kernel; the two have their own tile
 * parameters, so how a row's sum over K is grouped could change with the number of rows. On GPUs
 * a minimum of 0 keeps every size on the main kernel (small matrices are padded by its pre- and
 * post-processing kernels). On CPU devices both kernels give every row the same bytes whatever M
 * is (measured on PoCL and llvmpipe, M 1 to 4096, K 384), and the direct kernel is kept for the
 * small GEMMs it serves faster. */
static const char *one_gemm_routine(cl_device_id device)
{
    cl_device_type type = 0;
    if (clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL) != CL_SUCCESS ||
        (type & CL_DEVICE_TYPE_CPU))
        return NULL;
    const char *names[1] = {"XGEMM_MIN_INDIRECT_SIZE"};
    size_t values[1] = {0};
    CLBlastStatusCode code = CLBlastOverrideParameters(device, "GemmRoutine", CLBlastPrecisionSingle,
                                                       1, names, values);
    return code == CLBlastSuccess ? NULL : clblast_status_name(code);
}

const char *clattn__gemm_apply_chosen(cl_device_id device, const clattn_gemm_choice *choice)
{
    const char *refused = one_gemm_routine(device);
    if (!refused && choice->params.present)
        refused = override_params(device, &choice->params);
    pthread_mutex_lock(&cached_lock);
    cached_xgemm *slot = cached_slot(device, choice->cache_path[0] && !refused);
    if (slot && choice->cache_path[0] && !refused) {
        slot->device = device;
        slot->fallback = choice->fallback;
        snprintf(slot->cache_path, sizeof(slot->cache_path), "%s", choice->cache_path);
    } else if (slot && choice->params.present) {
        slot->device = NULL; /* the defaults replaced cached parameters */
    }
    pthread_mutex_unlock(&cached_lock);
    return refused;
}

const char *clattn__gemm_apply_params(cl_device_id device, const clattn_gemm_params *gemm)
{
    if (!gemm->present)
        return NULL;
    const char *refused = override_params(device, gemm);
    pthread_mutex_lock(&cached_lock);
    cached_xgemm *slot = cached_slot(device, false);
    if (slot && !refused) /* the caller's own parameters: no fallback from them */
        slot->device = NULL;
    pthread_mutex_unlock(&cached_lock);
    return refused;
}

/* CLBlast's answers to parameters it cannot build or launch on the device. */
static bool parameters_failed(CLBlastStatusCode code)
{
    return code == CLBlastOpenCLBuildProgramFailure || code == CLBlastInvalidLocalMemUsage ||
           code == CLBlastInvalidLocalThreadsTotal || code == CLBlastInvalidLocalThreadsDim ||
           code == CLBlastInvalidLocalNumDimensions;
}

/* After `code` from parameters out of a tuning cache: applies their fallback, forgets where they
 * came from and logs a warning naming the cache; true when the GEMM is worth trying again.
 * Otherwise the cache the parameters came from, if any, goes into `cache_path`. */
static bool fall_back_from_cache(clattn_context *ctx, CLBlastStatusCode code, char *cache_path,
                                 size_t size)
{
    cache_path[0] = '\0';
    if (!parameters_failed(code))
        return false;
    pthread_mutex_lock(&cached_lock);
    cached_xgemm *slot = cached_slot(ctx->device, false);
    cached_xgemm record = slot ? *slot : (cached_xgemm){0};
    const char *refused = "no fallback for this device";
    if (slot && record.fallback.present && !(refused = override_params(ctx->device,
                                                                       &record.fallback)))
        slot->device = NULL;
    pthread_mutex_unlock(&cached_lock);
    if (!record.device)
        return false;
    if (refused) {
        snprintf(cache_path, size, "%s", record.cache_path);
        return false;
    }
    clattn__log(ctx, CLATTN_LOG_WARNING,
                "tuning cache %s: CLBlast cannot use its Xgemm parameters for %s (%s); using the "
                "defaults (run examples/tune again)",
                record.cache_path, ctx->info.name, clblast_status_name(code));
    return true;
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
    char cache_path[1024];
    CLBlastStatusCode code;
    do
        code = CLBlastSgemm(CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k,
                            1.0f, a, a_offset, lda, b, b_offset, ldb, beta, c, c_offset, ldc,
                            &ctx->queue, ctx->profiling ? &event : NULL);
    while (code != CLBlastSuccess &&
           fall_back_from_cache(ctx, code, cache_path, sizeof(cache_path)));
    if (code != CLBlastSuccess) {
        if (start)
            clReleaseEvent(start);
        return clattn__fail(ctx, status_from_clblast(code),
                            "CLBlastSgemm (%s, m=%zu n=%zu k=%zu) failed: %s (%d)%s%s%s",
                            clattn_op_name(op), m, n, k, clblast_status_name(code), (int)code,
                            cache_path[0] ? " with the Xgemm parameters of the tuning cache " : "",
                            cache_path, cache_path[0] ? " (run examples/tune again)" : "");
    }
    char name[CLATTN_STATS_NAME_SIZE];
    snprintf(name, sizeof(name), "gemm:%s", clattn_op_name(op));
    return clattn__account(ctx, name, op, (uint64_t)m * n * k, start, event);
}

void clattn__gemm_clear_cache(void)
{
    CLBlastClearCache();
}

/* ---- reduced precisions ---- */

/* The CPU's bfloat16 dot products: AVX512_BF16 or AMX-BF16. */
static bool cpu_has_bf16(void)
{
    return clattn__cpu_has(CLATTN_CPU_AVX512_BF16) || clattn__cpu_has(CLATTN_CPU_AMX_BF16);
}

/* The CPU's int8 dot products: AVX512_VNNI, AVX-VNNI or AMX-INT8. */
static bool cpu_has_int8_dot(void)
{
    return clattn__cpu_has(CLATTN_CPU_AVX512_VNNI) || clattn__cpu_has(CLATTN_CPU_AVX_VNNI) ||
           clattn__cpu_has(CLATTN_CPU_AMX_INT8);
}

bool clattn__precision_missing(clattn_context *ctx, int precision, char *missing, size_t size)
{
    if (!clattn__onednn_available())
        snprintf(missing, size, "needs oneDNN, which %s",
                 CLATTN_HAVE_ONEDNN_BUILD ? "could not be loaded (libdnnl.so.2)"
                                          : "this build lacks (meson -Donednn, libdnnl-dev)");
    else if (ctx->info.type != CLATTN_DEVICE_TYPE_CPU)
        snprintf(missing, size, "needs a CPU device (%s is a %s)", ctx->info.name,
                 clattn_device_type_name(ctx->info.type));
    else if (precision == CLATTN_PRECISION_BF16 && !cpu_has_bf16())
        snprintf(missing, size, "the CPU lacks AVX512_BF16 and AMX-BF16");
    else if (precision == CLATTN_PRECISION_INT8 && !cpu_has_int8_dot())
        snprintf(missing, size, "the CPU lacks AVX512_VNNI, AVX-VNNI and AMX-INT8");
    else if (!clattn__onednn_reduced_row_invariant())
        snprintf(missing, size,
                 "oneDNN may run it on AMX, whose results change with the batch's row count "
                 "(this process used oneDNN before libclattn could keep it off AMX)");
    else
        return false;
    return true;
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
#ifdef CLATTN_HAVE_ONEDNN
    clattn__onednn_weight_release(&w->onednn);
#endif
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

/* A weight kept only in a packed form, unpacked into the workspace as a contiguous [n, k]: *b
 * its buffer (reused by the next unpacking). */
static clattn_status unpacked(clattn_context *ctx, const clattn_gemm_weight *w, cl_mem *b)
{
    clattn_status status = clattn__workspace_slot(ctx, CLATTN_SLOT_UNPACKED_WEIGHT,
                                                  w->n * w->k * sizeof(float), b);
    if (status != CLATTN_OK)
        return status;
    if (w->packed) {
        clattn_gemm_cpu *g;
        if ((status = cpu_gemm(ctx, &g)))
            return status;
        if ((status = clattn__gemm_cpu_unpack_b(g, ctx->queue, w->n, w->k, w->packed, *b)))
            return clattn__fail(ctx, status, "unpacking a weight: %s", clattn__gemm_cpu_error(g));
        return CLATTN_OK;
    }
#ifdef CLATTN_HAVE_ONEDNN
    if (w->onednn)
        return clattn__onednn_weight_unpack(ctx, w->onednn, *b);
#endif
    return clattn__fail(ctx, CLATTN_ERROR_INVALID_ARGUMENT,
                        "a GEMM weight [%zu, %zu] has neither its buffer nor a packed form", w->n,
                        w->k);
}

/* Where w's plain [n, k] form is: its own buffer, else a packed form unpacked into the
 * workspace. */
static clattn_status plain(clattn_context *ctx, const clattn_gemm_weight *w, cl_mem *b,
                           size_t *offset, size_t *ld)
{
    *b = w->mem, *offset = w->offset, *ld = w->ld;
    if (w->mem)
        return CLATTN_OK;
    *offset = 0, *ld = w->k;
    return unpacked(ctx, w, b);
}

/* w's packed form for the CPU GEMM, made on first use. */
static clattn_status ensure_packed(clattn_context *ctx, clattn_gemm_cpu *g, clattn_gemm_weight *w)
{
    if (w->packed)
        return CLATTN_OK;
    cl_mem b;
    size_t offset, ld;
    clattn_status status = plain(ctx, w, &b, &offset, &ld);
    if (status != CLATTN_OK)
        return status;
    cl_event event = NULL;
    status = clattn__gemm_cpu_pack_b(g, ctx->queue, w->n, w->k, b, offset, ld, &w->packed,
                                     ctx->profiling ? &event : NULL);
    if (status != CLATTN_OK)
        return clattn__fail(ctx, status, "packing a weight for the CPU GEMM: %s",
                            clattn__gemm_cpu_error(g));
    return clattn__account(ctx, "gemm_pack", CLATTN_OP_OTHER, 0, NULL, event);
}

#ifdef CLATTN_HAVE_ONEDNN
/* w in oneDNN's layout, made on first use. */
static clattn_status ensure_onednn(clattn_context *ctx, clattn_gemm_weight *w)
{
    if (w->onednn)
        return CLATTN_OK;
    cl_mem b;
    size_t offset, ld;
    clattn_status status = plain(ctx, w, &b, &offset, &ld);
    if (status == CLATTN_OK)
        status = clattn__onednn_weight_create(ctx, w->n, w->k, b, offset, ld, &w->onednn);
    return status;
}
#endif

clattn_status clattn__gemm_weight_pack(clattn_context *ctx, clattn_gemm_weight *w, bool *packed)
{
    *packed = false;
    if (!ctx->tuning.gemm_kernel || w->n == 0 || w->k == 0 || w->quant)
        return CLATTN_OK;
    clattn_status status;
    if (ctx->tuning.gemm_kernel == 2) {
#ifdef CLATTN_HAVE_ONEDNN
        status = ensure_onednn(ctx, w);
#else
        status = clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED, "gemm_kernel 2: built without oneDNN");
#endif
    } else {
        clattn_gemm_cpu *g;
        status = cpu_gemm(ctx, &g);
        if (status == CLATTN_OK)
            status = ensure_packed(ctx, g, w);
    }
    if (status == CLATTN_OK)
        *packed = true;
    /* Finished before the caller releases the unpacked buffer: a release waits for the
     * commands that use it, so without this every weight would be held twice until the end. */
    cl_int err = status == CLATTN_OK ? clFinish(ctx->queue) : CL_SUCCESS;
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "packing a weight for the CPU GEMM");
    return status;
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
    if ((status = ensure_packed(ctx, g, w)))
        return status;
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
    left->act = fused != CLATTN_GEMM_CPU_ACT_NONE ? CLATTN_ACT_NONE : act;
    char name[CLATTN_STATS_NAME_SIZE];
    snprintf(name, sizeof(name), "gemm:%s", clattn_op_name(op));
    return clattn__account(ctx, name, op, (uint64_t)m * w->n * w->k, NULL, event);
}

#ifdef CLATTN_HAVE_ONEDNN
static clattn_status run_onednn(clattn_context *ctx, clattn_op op, size_t m, cl_mem a,
                                size_t a_offset, size_t lda, clattn_gemm_weight *w, cl_mem bias,
                                size_t bias_offset, int act, cl_mem c, size_t c_offset,
                                size_t ldc, clattn_gemm_left *left)
{
    clattn_status status = ensure_onednn(ctx, w);
    double ms;
    if (status == CLATTN_OK)
        status = clattn__onednn_run(ctx, m, a, a_offset, lda, w->onednn, bias, bias_offset, act,
                                    c, c_offset, ldc, &ms);
    if (status != CLATTN_OK) {
        char cause[512];
        snprintf(cause, sizeof(cause), "%s", clattn_last_error(ctx));
        return clattn__fail(ctx, status, "oneDNN's GEMM (%s, m=%zu n=%zu k=%zu): %s",
                            clattn_op_name(op), m, w->n, w->k, cause);
    }
    left->bias = false;
    left->act = clattn__onednn_fuses(w->onednn, act) ? CLATTN_ACT_NONE : act;
    char name[CLATTN_STATS_NAME_SIZE];
    snprintf(name, sizeof(name), "gemm:%s", clattn_op_name(op));
    return clattn__account_host(ctx, name, op, (uint64_t)m * w->n * w->k, ms);
}
#endif

clattn_status clattn__gemm_weighted(clattn_context *ctx, clattn_op op, size_t m, cl_mem a,
                                    size_t a_offset, size_t lda, clattn_gemm_weight *w,
                                    cl_mem bias, size_t bias_offset, int act, cl_mem c,
                                    size_t c_offset, size_t ldc, clattn_gemm_left *left)
{
    left->bias = false;
    left->act = CLATTN_ACT_NONE;
    if (m == 0 || w->n == 0 || w->k == 0)
        return CLATTN_OK;
#ifdef CLATTN_HAVE_ONEDNN
    if (ctx->tuning.gemm_kernel == 2)
        return run_onednn(ctx, op, m, a, a_offset, lda, w, bias, bias_offset, act, c, c_offset,
                          ldc, left);
#endif
    if (ctx->tuning.gemm_kernel)
        return run_cpu(ctx, op, m, a, a_offset, lda, w, bias, bias_offset, act, c, c_offset, ldc,
                       left);
    left->bias = bias != NULL;
    left->act = act;
    cl_mem b;
    size_t offset, ld;
    clattn_status status = plain(ctx, w, &b, &offset, &ld);
    if (status != CLATTN_OK)
        return status;
    return clattn__gemm_nt(ctx, op, m, w->n, w->k, a, a_offset, lda, b, offset, ld, 0.0f, c,
                           c_offset, ldc);
}
