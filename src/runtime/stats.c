/* Counting executed multiply-adds and timing kernels through profiling events. */
#include "context_internal.h"
#include "launch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Events kept before they are read in one go: bounds memory in long profiled runs. */
#define PENDING_LIMIT 4096

const char *clattn_op_name(clattn_op op)
{
    switch (op) {
    case CLATTN_OP_IN_PROJECTION: return "in_projection";
    case CLATTN_OP_SCORES: return "scores";
    case CLATTN_OP_WEIGHTS_V: return "weights_v";
    case CLATTN_OP_OUT_PROJECTION: return "out_projection";
    case CLATTN_OP_FEED_FORWARD: return "feed_forward";
    case CLATTN_OP_OTHER: return "other";
    case CLATTN_OP_COUNT: break;
    }
    return "unknown";
}

/* The stats.kernels entry named `name`, created if new; the last entry collects the overflow. */
static size_t kernel_slot(clattn_stats *stats, const char *name)
{
    for (size_t i = 0; i < stats->kernel_count; i++)
        if (strncmp(stats->kernels[i].name, name, CLATTN_STATS_NAME_SIZE - 1) == 0)
            return i;
    if (stats->kernel_count == CLATTN_STATS_MAX_KERNELS) {
        snprintf(stats->kernels[CLATTN_STATS_MAX_KERNELS - 1].name, CLATTN_STATS_NAME_SIZE,
                 "(others)");
        return CLATTN_STATS_MAX_KERNELS - 1;
    }
    size_t slot = stats->kernel_count++;
    snprintf(stats->kernels[slot].name, CLATTN_STATS_NAME_SIZE, "%s", name);
    return slot;
}

static clattn_status stats_collect(clattn_context *ctx);

void clattn__count_macs(clattn_context *ctx, clattn_op op, uint64_t macs)
{
    ctx->stats.stats.macs[op] += macs;
    ctx->stats.stats.total_macs += macs;
}

clattn_status clattn__account(clattn_context *ctx, const char *name, clattn_op op, uint64_t macs,
                              cl_event start, cl_event event)
{
    clattn__count_macs(ctx, op, macs);
    clattn_stats_state *st = &ctx->stats;
    st->stats.kernel_launches++;
    if (!event) {
        if (start)
            clReleaseEvent(start);
        return CLATTN_OK;
    }

    if (st->pending_count == st->pending_capacity) {
        size_t cap = st->pending_capacity ? st->pending_capacity * 2 : 64;
        clattn_pending_event *grown = realloc(st->pending, cap * sizeof(*grown));
        if (!grown) {
            clReleaseEvent(event);
            if (start)
                clReleaseEvent(start);
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "out of host memory recording a profiling event");
        }
        st->pending = grown;
        st->pending_capacity = cap;
    }
    st->pending[st->pending_count++] =
        (clattn_pending_event){event, start, kernel_slot(&st->stats, name)};
    st->stats.kernels[st->pending[st->pending_count - 1].slot].launches++;
    if (st->pending_count >= PENDING_LIMIT)
        return stats_collect(ctx);
    return CLATTN_OK;
}

clattn_status clattn__account_host(clattn_context *ctx, const char *name, clattn_op op,
                                   uint64_t macs, double ms)
{
    clattn__count_macs(ctx, op, macs);
    clattn_stats_state *st = &ctx->stats;
    st->stats.kernel_launches++;
    if (ctx->profiling) {
        size_t slot = kernel_slot(&st->stats, name);
        st->stats.kernels[slot].launches++;
        st->stats.kernels[slot].total_ms += ms;
        st->stats.total_kernel_ms += ms;
    }
    return CLATTN_OK;
}

/* Reads every queued profiling event into the per-kernel times. */
static clattn_status stats_collect(clattn_context *ctx)
{
    clattn_stats_state *st = &ctx->stats;
    if (st->pending_count == 0)
        return CLATTN_OK;
    cl_int err = clFinish(ctx->queue);
    clattn_status status = CLATTN_OK;
    if (err != CL_SUCCESS)
        status = clattn__fail_cl(ctx, err, "clFinish before reading profiling events failed");
    for (size_t i = 0; i < st->pending_count; i++) {
        cl_ulong start = 0, end = 0;
        cl_event ev = st->pending[i].event;
        cl_event from = st->pending[i].start ? st->pending[i].start : ev;
        cl_int e1 = clGetEventProfilingInfo(from, st->pending[i].start ? CL_PROFILING_COMMAND_END
                                                                        : CL_PROFILING_COMMAND_START,
                                            sizeof(start), &start, NULL);
        cl_int e2 = clGetEventProfilingInfo(ev, CL_PROFILING_COMMAND_END, sizeof(end), &end, NULL);
        if (e1 == CL_SUCCESS && e2 == CL_SUCCESS && end >= start) {
            double ms = (double)(end - start) * 1e-6;
            st->stats.kernels[st->pending[i].slot].total_ms += ms;
            st->stats.total_kernel_ms += ms;
        } else if (status == CLATTN_OK) {
            status = clattn__fail_cl(ctx, e1 != CL_SUCCESS ? e1 : e2,
                                     "clGetEventProfilingInfo failed");
        }
        clReleaseEvent(ev);
        if (st->pending[i].start)
            clReleaseEvent(st->pending[i].start);
    }
    st->pending_count = 0;
    return status;
}

void clattn__stats_release(clattn_stats_state *st)
{
    for (size_t i = 0; i < st->pending_count; i++) {
        clReleaseEvent(st->pending[i].event);
        if (st->pending[i].start)
            clReleaseEvent(st->pending[i].start);
    }
    free(st->pending);
    st->pending = NULL;
    st->pending_count = st->pending_capacity = 0;
}

clattn_status clattn_stats_get(clattn_context *ctx, clattn_stats *stats)
{
    CLATTN_CHECK_ARG(NULL, "clattn_stats_get", ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, "clattn_stats_get", stats, "stats is NULL");
    clattn_status status = stats_collect(ctx);
    *stats = ctx->stats.stats;
    return status;
}

clattn_status clattn_stats_reset(clattn_context *ctx)
{
    CLATTN_CHECK_ARG(NULL, "clattn_stats_reset", ctx, "ctx is NULL");
    clattn_status status = stats_collect(ctx);
    memset(&ctx->stats.stats, 0, sizeof(ctx->stats.stats));
    return status;
}
