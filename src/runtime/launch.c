/* Setting kernel arguments and enqueueing kernels. */
#include "launch.h"
#include "context_internal.h"

void clattn__arg(clattn_kernel_args *args, size_t size, const void *value)
{
    if (args->err == CL_SUCCESS) {
        args->err = clSetKernelArg(args->kernel, args->next, size, value);
        if (args->err != CL_SUCCESS)
            return; /* keep `next` at the failing index for the message */
    }
    args->next++;
}

void clattn__arg_mem(clattn_kernel_args *args, cl_mem mem)
{
    if (mem)
        clattn__arg(args, sizeof(mem), &mem);
    else
        clattn__arg(args, sizeof(cl_mem), NULL);
}

clattn_kernel_args clattn__kernel_args(clattn_context *ctx, clattn_kernel_id id)
{
    return (clattn_kernel_args){ctx->kernels.kernel[id], 0, CL_SUCCESS};
}

size_t clattn__reduce_wg(const clattn_context *ctx)
{
    return ctx->kernels.reduce_wg;
}

/* The most work-items of a work-group chosen by clattn__cpu_local_size: PoCL runs a work-group
 * as one loop that it vectorises along dimension 0, so beyond a few vectors' worth nothing is
 * gained. */
#define CPU_WORK_GROUP_CAP 256

void clattn__cpu_local_size(size_t max_work_group, cl_uint dims, const size_t *global,
                            size_t *local)
{
    size_t budget = max_work_group;
    if (budget == 0 || budget > CPU_WORK_GROUP_CAP)
        budget = CPU_WORK_GROUP_CAP;
    for (cl_uint d = 0; d < dims; d++) {
        size_t l = 1;
        while (l * 2 <= budget && global[d] % (l * 2) == 0)
            l *= 2;
        local[d] = l;
        budget /= l;
    }
}

clattn_status clattn__launch(clattn_context *ctx, const clattn_kernel_args *args, const char *name,
                             cl_uint dims, const size_t *global, const size_t *local, clattn_op op,
                             uint64_t macs)
{
    if (args->err != CL_SUCCESS)
        return clattn__fail_cl(ctx, args->err, "clSetKernelArg(%s, argument %u) failed", name,
                               (unsigned)args->next);
    size_t rounded[3];
    for (cl_uint d = 0; d < dims; d++) {
        if (global[d] == 0)
            return CLATTN_OK; /* nothing to compute */
        size_t l = local ? local[d] : 1;
        rounded[d] = (global[d] + l - 1) / l * l;
    }
    size_t chosen[3];
    if (!local && ctx->info.type == CLATTN_DEVICE_TYPE_CPU && dims <= 3) {
        clattn__cpu_local_size(ctx->info.max_work_group_size, dims, rounded, chosen);
        local = chosen;
    }
    cl_event event = NULL;
    cl_int err = clEnqueueNDRangeKernel(ctx->queue, args->kernel, dims, NULL, rounded, local, 0,
                                        NULL, ctx->profiling ? &event : NULL);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "clEnqueueNDRangeKernel(%s) failed", name);
    return clattn__account(ctx, name, op, macs, NULL, event);
}
