/*
 * Kernel launches and the work they count (launch.c, stats.c): setting arguments, enqueueing,
 * adding multiply-adds to the context's counters and, with profiling on, timing each launch.
 */
#ifndef CLATTN_LAUNCH_H
#define CLATTN_LAUNCH_H

#include "base/errors.h"
#include "base/kernels.h"

/* A profiling event waiting to be read, and the stats.kernels slot it adds to. With `start`, the
 * time runs from the end of `start` (a marker enqueued before a multi-kernel CLBlast routine,
 * whose own event covers only its last kernel) to the end of `event`. */
typedef struct clattn_pending_event {
    cl_event event;
    cl_event start;
    size_t slot;
} clattn_pending_event;

/* The counters and the events not yet read: part of the context, owned by stats.c. */
typedef struct clattn_stats_state {
    clattn_stats stats;
    clattn_pending_event *pending;
    size_t pending_count, pending_capacity;
} clattn_stats_state;

/* Sets a kernel's arguments one after another, keeping the first error. */
typedef struct clattn_kernel_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
} clattn_kernel_args;

/* The arguments of the base program's kernel `id` (base/kernels.h), none set yet. */
clattn_kernel_args clattn__kernel_args(clattn_context *ctx, clattn_kernel_id id);
/* The work-group size of the base program's row-reduction kernels (softmax, LayerNorm, the L2
 * norm): the program was built for it. */
size_t clattn__reduce_wg(const clattn_context *ctx);

void clattn__arg(clattn_kernel_args *args, size_t size, const void *value);
#define CLATTN_ARG(args, value) clattn__arg((args), sizeof(value), &(value))
/* A __global pointer argument that may be absent (NULL). */
void clattn__arg_mem(clattn_kernel_args *args, cl_mem mem);

/* Enqueues `kernel` over `global` work-items (rounded up to multiples of `local` when given) and
 * adds `macs` multiply-adds to the counter of `op`. `name` labels the profile entry. Without
 * `local`, a CPU device gets clattn__cpu_local_size's; other devices choose their own. */
clattn_status clattn__launch(clattn_context *ctx, const clattn_kernel_args *args, const char *name,
                             cl_uint dims, const size_t *global, const size_t *local, clattn_op op,
                             uint64_t macs);

/* The work-group size clattn__launch gives a kernel that leaves it open, on a CPU device. CPU
 * implementations (PoCL) compile a kernel once per work-group size they run it with, and their
 * own choice divides the global size as finely as it can: every new shape (a server's batches
 * of other sizes and lengths) would cost a compilation and keep one more loaded object, without
 * end. Here each dimension takes the largest power of two that divides its global size, within
 * 256 work-items and `max_work_group` for the product: a few sizes per kernel whatever the
 * shapes. The global size is not changed (such kernels need not check bounds), and a kernel that
 * leaves the size open cannot depend on it, so results do not change. */
void clattn__cpu_local_size(size_t max_work_group, cl_uint dims, const size_t *global,
                            size_t *local);

/* Records `macs` for `op` and, when profiling, queues `event` (which it takes over) for timing;
 * with `start` (also taken over) the time runs from the end of that marker. */
clattn_status clattn__account(clattn_context *ctx, const char *name, clattn_op op, uint64_t macs,
                              cl_event start, cl_event event);
/* The same for work done on the host (oneDNN's GEMMs) that took `ms` milliseconds: counted as a
 * launch, its time added to the profile when profiling. */
clattn_status clattn__account_host(clattn_context *ctx, const char *name, clattn_op op,
                                   uint64_t macs, double ms);
/* Adds `macs` more multiply-adds under `op` for a launch already accounted (a kernel that does
 * the work of two operations). */
void clattn__count_macs(clattn_context *ctx, clattn_op op, uint64_t macs);
/* Releases the pending events (context destruction). */
void clattn__stats_release(clattn_stats_state *state);

#endif /* CLATTN_LAUNCH_H */
