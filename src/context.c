/* The context: device, queue, compiled kernels, scratch buffers. */
#include "internal.h"

#include <clblast_c.h>
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

static clattn_status check_params(const clattn_context_params *params, const char *function)
{
    if (params->log_level < CLATTN_LOG_DEBUG || params->log_level > CLATTN_LOG_NONE)
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "%s: invalid argument: params->log_level is %d, not a clattn_log_level",
                            function, (int)params->log_level);
    if (!clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)))
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "%s: invalid argument: params->reserved is not zero (initialise "
                            "params with clattn_context_params_default)",
                            function);
    return CLATTN_OK;
}

static clattn_context *context_alloc(const clattn_context_params *params)
{
    clattn_context *ctx = calloc(1, sizeof(*ctx));
    if (!ctx)
        return NULL;
    ctx->log_callback = params->log_callback;
    ctx->log_user_data = params->log_user_data;
    ctx->log_level = params->log_level;
    ctx->profiling = params->profiling != 0;
    ctx->workspace_limit = params->workspace_limit_bytes;
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
    clattn__tuning_init(ctx);
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
    CLATTN_CHECK_ARG(NULL, out, "clattn_context_create: invalid argument: ctx is NULL");
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
    CLATTN_CHECK_ARG(NULL, out, "clattn_context_wrap: invalid argument: ctx is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, cl_ctx, "clattn_context_wrap: invalid argument: cl_ctx is NULL");
    CLATTN_CHECK_ARG(NULL, queue, "clattn_context_wrap: invalid argument: queue is NULL");
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
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "clattn_context_wrap: invalid argument: the queue belongs to another "
                            "cl_context");
    if (queue_props & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE)
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "clattn_context_wrap: invalid argument: the queue is out-of-order; "
                            "libclattn needs an in-order queue");
    if (params->profiling && !(queue_props & CL_QUEUE_PROFILING_ENABLE))
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "clattn_context_wrap: invalid argument: params->profiling is set but "
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
    clattn__stats_release(ctx);
    for (int i = 0; i < CLATTN_SCRATCH_COUNT; i++)
        if (ctx->scratch[i])
            clReleaseMemObject(ctx->scratch[i]);
    if (ctx->pe)
        clReleaseMemObject(ctx->pe);
    for (size_t i = 0; i < ctx->fused_count; i++)
        clattn__fused_release(&ctx->fused[i]);
    clattn__kernels_release(&ctx->kernels);
    if (ctx->queue)
        clReleaseCommandQueue(ctx->queue);
    if (ctx->cl_ctx)
        clReleaseContext(ctx->cl_ctx);
    if (ctx->counted && atomic_fetch_sub(&live_contexts, 1) == 1)
        CLBlastClearCache();
    free(ctx->last_error);
    free(ctx);
    *pctx = NULL;
}

clattn_status clattn_context_device_info(const clattn_context *ctx, clattn_device_info *info)
{
    CLATTN_CHECK_ARG(NULL, ctx, "clattn_context_device_info: invalid argument: ctx is NULL");
    CLATTN_CHECK_ARG((clattn_context *)ctx, info,
                     "clattn_context_device_info: invalid argument: info is NULL");
    *info = ctx->info;
    return CLATTN_OK;
}

clattn_status clattn_context_finish(clattn_context *ctx)
{
    CLATTN_CHECK_ARG(NULL, ctx, "clattn_context_finish: invalid argument: ctx is NULL");
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

clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what)
{
    if (bytes > ctx->info.max_alloc_bytes)
        return clattn__fail(ctx, CLATTN_ERROR_TOO_LARGE,
                            "%s needs %zu bytes, more than the device's maximum allocation of "
                            "%llu bytes",
                            what, bytes, (unsigned long long)ctx->info.max_alloc_bytes);
    cl_int err;
    cl_mem mem = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, bytes ? bytes : 4, NULL, &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clCreateBuffer(%zu bytes) for %s failed", bytes, what);
    *buffer = mem;
    return CLATTN_OK;
}

clattn_status clattn__grow_buffer(clattn_context *ctx, cl_mem *mem, size_t *have, size_t need,
                                  const char *what)
{
    if (*mem && *have >= need)
        return CLATTN_OK;
    /* Allocate before releasing: on failure the old buffer stays, and oclgrind 21.10 would lose
     * track of initialised memory in a buffer that reuses a just-released one's id. */
    cl_mem grown;
    clattn_status status = clattn__buffer_create(ctx, need, &grown, what);
    if (status != CLATTN_OK)
        return status;
    if (*mem)
        clReleaseMemObject(*mem);
    *mem = grown;
    *have = need;
    return CLATTN_OK;
}

clattn_status clattn__scratch(clattn_context *ctx, clattn_scratch_slot slot, size_t bytes,
                              cl_mem *buffer)
{
    clattn_status status = clattn__grow_buffer(ctx, &ctx->scratch[slot], &ctx->scratch_bytes[slot],
                                               bytes, "the attention workspace");
    if (status == CLATTN_OK)
        *buffer = ctx->scratch[slot];
    return status;
}
