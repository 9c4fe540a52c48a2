/*
 * The context's state. The context owns each part below and releases it; each part's contents
 * are read and changed only through the module named beside it.
 */
#ifndef CLATTN_CONTEXT_INTERNAL_H
#define CLATTN_CONTEXT_INTERNAL_H

#include <stdbool.h>

#include "buffers.h"
#include "base/errors.h"
#include "fused_cache.h"
#include "gemm_cpu.h"
#include "base/kernels.h"
#include "launch.h"
#include "positional_table.h"
#include "rotary_table.h"

struct clattn_context {
    cl_device_id device;
    cl_context cl_ctx;
    cl_command_queue queue;
    clattn_device_info info;
    bool profiling;
    uint64_t workspace_limit; /* bytes; already clamped to the device's max allocation */
    int precision;            /* clattn_precision of the GEMMs (gemm_onednn.c) */
    bool counted;             /* counted among the live contexts (context.c) */

    clattn_diagnostics diag;          /* error.c, log.c */
    clattn_kernels kernels;           /* program.c: the base program */
    clattn_tuning tuning;             /* tuning.c chooses it, context.c applies it */
    clattn_fused_cache fused;         /* fused_cache.c */
    clattn_workspace workspace;       /* buffers.c */
    clattn_positional_table pe_table; /* positional_table.c */
    clattn_rotary_table rope_table;   /* rotary_table.c */
    clattn_stats_state stats;         /* stats.c */
    clattn_gemm_cpu *gemm_cpu;        /* gemm.c: the CPU GEMM's program, built on first use */
    struct clattn_onednn *onednn;     /* gemm_onednn.c: oneDNN's engine and primitives, made on
                                       * first use (builds with oneDNN only) */
};

#endif /* CLATTN_CONTEXT_INTERNAL_H */
