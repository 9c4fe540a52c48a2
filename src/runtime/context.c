/* The context: device, queue, compiled kernels; it owns and releases the parts in
 * context_internal.h, and applies the tuning that tuning.c chooses. */
#include "context_internal.h"
#include "gemm_onednn.h"
#include "device.h"
#include "gemm.h"
#include "tuning.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Contexts alive in the process: CLBlast keeps the programs it compiled for every OpenCL context
 * until told otherwise, so the last context to go releases them (CLBlastClearCache keeps the
 * parameter overrides). */
static atomic_int live_contexts;

unsigned clattn_version(void)
{
    return CLATTN_VERSION;
}

const char *clattn_version_string(void)
{
    return CLATTN_VERSION_STRING;
}

void clattn_context_params_default(clattn_context_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->log_level = CLATTN_LOG_WARNING;
}

/* Applies Xgemm parameters to CLBlast; a refusal is recorded as CLATTN_ERROR_CLBLAST. */
static clattn_status apply_gemm(clattn_context *ctx, const clattn_gemm_params *gemm,
                                const char *function)
{
    const char *refused = clattn__gemm_apply_params(ctx->device, gemm);
    if (refused)
        return clattn__fail(ctx, CLATTN_ERROR_CLBLAST,
                            "%s: CLBlastOverrideParameters(Xgemm) refused the parameters: %s",
                            function, refused);
    return CLATTN_OK;
}

/* Chooses and applies the tuning at creation: CLBlast's refusal is a warning, not an error. */
static void apply_initial_tuning(clattn_context *ctx)
{
    clattn_gemm_choice gemm;
    clattn__tuning_choose(ctx, &ctx->info, &ctx->tuning, &gemm);
    const char *refused = clattn__gemm_apply_chosen(ctx->device, &gemm);
    if (refused)
        clattn__log(ctx, CLATTN_LOG_WARNING,
                    "CLBlast refused the tuning's Xgemm parameters (%s); continuing with its own",
                    refused);
}

static clattn_status check_params(const clattn_context_params *params, const char *function)
{
    CLATTN_CHECK_ARG(NULL, function,
                     params->log_level >= CLATTN_LOG_DEBUG && params->log_level <= CLATTN_LOG_NONE,
                     "params->log_level is %d, not a clattn_log_level", (int)params->log_level);
    CLATTN_CHECK_ARG(NULL, function,
                     params->precision >= CLATTN_PRECISION_FP32 &&
                         params->precision <= CLATTN_PRECISION_INT8,
                     "params->precision is %d, not a clattn_precision", params->precision);
    CLATTN_CHECK_ARG(NULL, function,
                     clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_context_params_default)");
    return CLATTN_OK;
}

static clattn_context *context_alloc(const clattn_context_params *params)
{
    clattn_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    ctx->diag.log_callback = params->log_callback;
    ctx->diag.log_user_data = params->log_user_data;
    ctx->diag.log_level = clattn__log_threshold(params->log_level);
    ctx->profiling = params->profiling != 0;
    ctx->workspace_limit = params->workspace_limit_bytes;
    ctx->precision = params->precision;
    return ctx;
}

/* Everything after the queue exists: device facts, limits and kernels. */
static clattn_status context_finish_setup(clattn_context *ctx)
{
    clattn_status status = clattn__query_device_info(ctx, ctx->device, &ctx->info);
    if (status != CLATTN_OK)
        return status;
    if (ctx->workspace_limit == 0 || ctx->workspace_limit > ctx->info.max_alloc_bytes)
        ctx->workspace_limit = ctx->info.max_alloc_bytes;
    apply_initial_tuning(ctx);
    if (ctx->precision != CLATTN_PRECISION_FP32) {
        char missing[256];
        if (clattn__precision_missing(ctx, ctx->precision, missing, sizeof(missing)))
            return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED, "precision %s: %s",
                                ctx->precision == CLATTN_PRECISION_BF16 ? "bf16" : "int8",
                                missing);
        ctx->tuning.gemm_kernel = 2; /* the reduced precisions run on oneDNN */
    }
    status = clattn__kernels_build(ctx, &ctx->kernels);
    if (status != CLATTN_OK)
        return status;
    clattn__log(ctx, CLATTN_LOG_INFO, "using %s (%s, %s), kernels built with \"%s\"",
                ctx->info.name, clattn_device_type_name(ctx->info.type), ctx->info.platform_name,
                ctx->kernels.options);
    return CLATTN_OK;
}

clattn_status clattn_context_create(clattn_context **out, const clattn_context_params *params)
{
    CLATTN_CHECK_ARG(NULL, "clattn_context_create", out, "ctx is NULL");
    *out = NULL;
    clattn_context_params defaults;
    if (!params) {
        clattn_context_params_default(&defaults);
        params = &defaults;
    }
    clattn_status status = check_params(params, "clattn_context_create");
    if (status != CLATTN_OK)
        return status;

    clattn_context *ctx = context_alloc(params);
    if (!ctx)
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_context_create: out of host memory");

    cl_platform_id platform;
    status = clattn__select_device(ctx, params->device, &ctx->device, &platform);
    if (status != CLATTN_OK)
        goto fail;

    cl_context_properties props[] = {CL_CONTEXT_PLATFORM, (cl_context_properties)platform, 0};
    cl_int err;
    ctx->cl_ctx = clCreateContext(props, 1, &ctx->device, NULL, NULL, &err);
    if (err != CL_SUCCESS) {
        ctx->cl_ctx = NULL;
        status = clattn__fail_cl(ctx, err, "clCreateContext failed");
        goto fail;
    }
    cl_command_queue_properties queue_props = ctx->profiling ? CL_QUEUE_PROFILING_ENABLE : 0;
    ctx->queue = clCreateCommandQueue(ctx->cl_ctx, ctx->device, queue_props, &err);
    if (err != CL_SUCCESS) {
        ctx->queue = NULL;
        status = clattn__fail_cl(ctx, err, "clCreateCommandQueue failed");
        goto fail;
    }
    status = context_finish_setup(ctx);
    if (status != CLATTN_OK)
        goto fail;
    ctx->counted = true;
    atomic_fetch_add(&live_contexts, 1);
    *out = ctx;
    return CLATTN_OK;

fail:
    clattn_context_destroy(&ctx);
    return status;
}

clattn_status clattn_context_wrap(clattn_context **out, cl_context cl_ctx, cl_command_queue queue,
                                  const clattn_context_params *params)
{
    CLATTN_CHECK_ARG(NULL, "clattn_context_wrap", out, "ctx is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, "clattn_context_wrap", cl_ctx, "cl_ctx is NULL");
    CLATTN_CHECK_ARG(NULL, "clattn_context_wrap", queue, "queue is NULL");
    clattn_context_params defaults;
    if (!params) {
        clattn_context_params_default(&defaults);
        params = &defaults;
    }
    clattn_status status = check_params(params, "clattn_context_wrap");
    if (status != CLATTN_OK)
        return status;

    cl_context queue_ctx = NULL;
    cl_device_id device = NULL;
    cl_command_queue_properties queue_props = 0;
    cl_int err = clGetCommandQueueInfo(queue, CL_QUEUE_CONTEXT, sizeof(queue_ctx), &queue_ctx, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_DEVICE, sizeof(device), &device, NULL);
    if (err == CL_SUCCESS)
        err = clGetCommandQueueInfo(queue, CL_QUEUE_PROPERTIES, sizeof(queue_props), &queue_props,
                                    NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(NULL, err, "clattn_context_wrap: invalid argument: querying the queue");
    if (queue_ctx != cl_ctx)
        return clattn__fail_arg(NULL, "clattn_context_wrap",
                            "the queue belongs to another "
                            "cl_context");
    if (queue_props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return clattn__fail_arg(NULL, "clattn_context_wrap",
                            "the queue is out-of-order; "
                            "libclattn needs an in-order queue");
    if (params->profiling && !(queue_props & CL_QUEUE_PROFILING_ENABLE))
        return clattn__fail_arg(NULL, "clattn_context_wrap",
                            "params->profiling is set but "
                            "the queue was created without CL_QUEUE_PROFILING_ENABLE");

    clattn_context *ctx = context_alloc(params);
    if (!ctx)
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "clattn_context_wrap: out of host memory");
    ctx->device = device;
    ctx->cl_ctx = cl_ctx;
    ctx->queue = queue;
    clRetainContext(cl_ctx);
    clRetainCommandQueue(queue);
    status = context_finish_setup(ctx);
    if (status != CLATTN_OK) {
        clattn_context_destroy(&ctx);
        return status;
    }
    ctx->counted = true;
    atomic_fetch_add(&live_contexts, 1);
    *out = ctx;
    return CLATTN_OK;
}

void clattn_context_destroy(clattn_context **pctx)
{
    if (!pctx || !*pctx)
        return;
    clattn_context *ctx = *pctx;
    if (ctx->queue)
        clFinish(ctx->queue);
    clattn__stats_release(&ctx->stats);
    clattn__workspace_release(&ctx->workspace);
    clattn__positional_table_release(&ctx->pe_table);
    clattn__rotary_table_release(&ctx->rope_table);
    clattn__fused_cache_clear(&ctx->fused);
    clattn__gemm_cpu_destroy(&ctx->gemm_cpu);
#ifdef CLATTN_HAVE_ONEDNN
    clattn__onednn_destroy(&ctx->onednn);
#endif
    clattn__kernels_release(&ctx->kernels);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->cl_ctx)
        clReleaseContext(ctx->cl_ctx);
    if (ctx->counted && atomic_fetch_sub(&live_contexts, 1) == 1)
        clattn__gemm_clear_cache();
    free(ctx->diag.last_error);
    free(ctx);
    *pctx = NULL;
}

clattn_status clattn_context_device_info(const clattn_context *ctx, clattn_device_info *info)
{
    CLATTN_CHECK_ARG(NULL, "clattn_context_device_info", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG((clattn_context *)ctx, "clattn_context_device_info", info,
                     "info is NULL");
    *info = ctx->info;
    return CLATTN_OK;
}

clattn_status clattn_context_finish(clattn_context *ctx)
{
    CLATTN_CHECK_ARG(NULL, "clattn_context_finish", ctx, "ctx is NULL");
    cl_int err = clFinish(ctx->queue);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clFinish failed (an earlier kernel may have faulted)");
    return CLATTN_OK;
}

cl_context clattn_context_cl_context(const clattn_context *ctx)
{
    return ctx ? ctx->cl_ctx : NULL;
}

cl_command_queue clattn_context_queue(const clattn_context *ctx)
{
    return ctx ? ctx->queue : NULL;
}

cl_device_id clattn_context_device(const clattn_context *ctx)
{
    return ctx ? ctx->device : NULL;
}

clattn_status clattn_context_get_tuning(const clattn_context *ctx, clattn_tuning *tuning)
{
    static const char fn[] = "clattn_context_get_tuning";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG((clattn_context *)ctx, fn, tuning, "tuning is NULL");
    *tuning = ctx->tuning;
    return CLATTN_OK;
}

clattn_status clattn_context_set_tuning(clattn_context *ctx, const clattn_tuning *tuning)
{
    static const char fn[] = "clattn_context_set_tuning";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, tuning, "tuning is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(tuning->reserved, sizeof(tuning->reserved)),
                     "tuning->reserved is not zero");
    clattn_status status = clattn__tuning_check(ctx, &ctx->info, tuning, fn);
    if (status != CLATTN_OK)
        return status;
    /* Specialised fused programs follow the new parameters on their next use. */
    clattn_status finished = clattn_context_finish(ctx);
    ctx->tuning = *tuning;
    clattn__fused_cache_clear(&ctx->fused);
    return finished;
}

clattn_status clattn_context_set_gemm_parameters(clattn_context *ctx, const char *parameters)
{
    static const char fn[] = "clattn_context_set_gemm_parameters";
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, parameters, "parameters is NULL");
    clattn_gemm_params gemm;
    char problem[256];
    /* Parameters that break CLBlast's constraints may build and then compute wrong results:
     * refused like the cache's. */
    if (!clattn__gemm_params_parse(parameters, &gemm, problem, sizeof(problem)) ||
        clattn__gemm_params_problem(&ctx->info, &gemm, problem, sizeof(problem)))
        return clattn__fail_arg(ctx, fn, "%s", problem);
    return apply_gemm(ctx, &gemm, fn);
}

size_t clattn_context_workspace_bytes(const clattn_context *ctx)
{
    return ctx ? clattn__workspace_bytes(&ctx->workspace) : 0;
}
