/* Building the embedded OpenCL C sources for the context's device. */
#include "base/kernels.h"
#include "context_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *clattn__test_extra_source = NULL;

static const char *const kernel_names[CLATTN_KERNEL_COUNT] = {
#define CLATTN_KERNEL_NAME(id, name) name,
    CLATTN_KERNEL_LIST(CLATTN_KERNEL_NAME)
#undef CLATTN_KERNEL_NAME
};

static char *build_log(cl_program program, cl_device_id device)
{
    size_t size = 0;
    if (clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, 0, NULL, &size) != CL_SUCCESS)
        return NULL;
    char *log = calloc(size + 1, 1);
    if (log && clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, size, log, NULL) !=
                   CL_SUCCESS) {
        free(log);
        return NULL;
    }
    return log;
}

clattn_status clattn__program_build(clattn_context *ctx, const char *const *sources,
                                    const size_t *lengths, size_t count, const char *options,
                                    cl_program *out)
{
    cl_int err;
    cl_program program = clCreateProgramWithSource(ctx->cl_ctx, (cl_uint)count, (const char **)sources,
                                                   lengths, &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clCreateProgramWithSource failed");

    err = clBuildProgram(program, 1, &ctx->device, options, NULL, NULL);
    if (err == CL_SUCCESS) {
        *out = program;
        return CLATTN_OK;
    }

    clattn_status status;
    char *log = build_log(program, ctx->device);
    if (err == CL_BUILD_PROGRAM_FAILURE) {
        status = clattn__fail(ctx, CLATTN_ERROR_BUILD_FAILED,
                              "building the OpenCL program for %s with options \"%s\" failed; "
                              "build log:\n%s",
                              ctx->info.name, options, log ? log : "(build log unavailable)");
    } else {
        status = clattn__fail_cl(ctx, err, "clBuildProgram with options \"%s\" failed; build log:\n%s",
                                 options, log ? log : "(unavailable)");
    }
    free(log);
    clReleaseProgram(program);
    return status;
}

/* The largest power of two <= n (n >= 1). */
static size_t floor_pow2(size_t n)
{
    size_t p = 1;
    while (p * 2 <= n)
        p *= 2;
    return p;
}

/* The -D options that specialise the kernels for this device. */
static void choose_options(const clattn_context *ctx, clattn_kernels *kernels)
{
    size_t max_wg = ctx->info.max_work_group_size ? ctx->info.max_work_group_size : 1;
    kernels->reduce_wg = floor_pow2(max_wg < 64 ? max_wg : 64);
    snprintf(kernels->options, sizeof(kernels->options),
             "-cl-std=CL1.2 -DCLATTN_LOCAL_IS_GLOBAL=%d -DCLATTN_REDUCE_WG=%zu",
             ctx->info.local_mem_is_global, kernels->reduce_wg);
}

clattn_status clattn__kernels_build(clattn_context *ctx, clattn_kernels *kernels)
{
    memset(kernels, 0, sizeof(*kernels));
    choose_options(ctx, kernels);

    size_t count = clattn__cl_source_count + (clattn__test_extra_source ? 1 : 0);
    const char **sources = calloc(count, sizeof(*sources));
    size_t *lengths = calloc(count, sizeof(*lengths));
    if (!sources || !lengths) {
        free(sources);
        free(lengths);
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory building kernels");
    }
    for (size_t i = 0; i < clattn__cl_source_count; i++) {
        sources[i] = (const char *)clattn__cl_sources[i].data;
        lengths[i] = clattn__cl_sources[i].size;
    }
    if (clattn__test_extra_source) {
        sources[count - 1] = clattn__test_extra_source;
        lengths[count - 1] = strlen(clattn__test_extra_source);
    }
    clattn_status status =
        clattn__program_build(ctx, sources, lengths, count, kernels->options, &kernels->program);
    free(sources);
    free(lengths);
    if (status != CLATTN_OK)
        return status;

    for (int i = 0; i < CLATTN_KERNEL_COUNT; i++) {
        cl_int err;
        kernels->kernel[i] = clCreateKernel(kernels->program, kernel_names[i], &err);
        if (err != CL_SUCCESS) {
            kernels->kernel[i] = NULL;
            status = clattn__fail_cl(ctx, err, "clCreateKernel(%s) failed", kernel_names[i]);
            clattn__kernels_release(kernels);
            return status;
        }
    }
    return CLATTN_OK;
}

void clattn__kernels_release(clattn_kernels *kernels)
{
    for (int i = 0; i < CLATTN_KERNEL_COUNT; i++) {
        if (kernels->kernel[i])
            clReleaseKernel(kernels->kernel[i]);
        kernels->kernel[i] = NULL;
    }
    if (kernels->program)
        clReleaseProgram(kernels->program);
    kernels->program = NULL;
}
