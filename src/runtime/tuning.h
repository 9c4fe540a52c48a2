/*
 * Choosing a tuning (tuning.c): defaults from the device's facts, the per-user cache, the
 * CLATTN_TUNE environment variable. This module only computes; the context applies the result
 * (context.c: clattn_context_set_tuning and context creation).
 */
#ifndef CLATTN_TUNING_H
#define CLATTN_TUNING_H

#include "base/errors.h"

/* CLBlast's 16 Xgemm kernel parameters: kept in the tuning cache and handed to CLBlast, never
 * part of the public API. */
#define CLATTN_GEMM_PARAMETER_COUNT 16
typedef struct clattn_gemm_params {
    int present; /* 1: `values` are to be applied; 0: CLBlast keeps its own */
    size_t values[CLATTN_GEMM_PARAMETER_COUNT];
} clattn_gemm_params;

/* The parameters' names, in the order of clattn_gemm_params.values. */
extern const char *const clattn__gemm_parameter_names[CLATTN_GEMM_PARAMETER_COUNT];

/* The Xgemm parameters a context starts with. */
typedef struct clattn_gemm_choice {
    clattn_gemm_params params;   /* to apply */
    clattn_gemm_params fallback; /* for when CLBlast cannot build or run cached `params`: the
                                  * device's defaults (or, where CLBlast's own are the default,
                                  * conservative ones: CLBlast cannot be given its own back) */
    char cache_path[1024];       /* the tuning cache `params` came from; "" for the defaults */
} clattn_gemm_choice;

/* The tuning for a device: defaults from `info`, then its cache entry, then CLATTN_TUNE.
 * Problems with the cache or the variable are warnings logged on ctx, never errors. */
void clattn__tuning_choose(clattn_context *ctx, const clattn_device_info *info,
                           clattn_tuning *tuning, clattn_gemm_choice *gemm);
/* What makes Xgemm parameters unusable on the device (a value out of its range, one of
 * CLBlast's constraints between them, the work-group size, the local memory), written into
 * `problem` naming the parameter; false when nothing does. */
bool clattn__gemm_params_problem(const clattn_device_info *info, const clattn_gemm_params *gemm,
                                 char *problem, size_t problem_size);
/* CLATTN_ERROR_INVALID_ARGUMENT ("<function>: invalid argument: <field> is ...") for a tuning
 * with an out-of-range field. */
clattn_status clattn__tuning_check(clattn_context *ctx, const clattn_device_info *info,
                                   const clattn_tuning *tuning, const char *function);
/* Parses "NAME=VALUE,..." (CLBlast Xgemm parameter names, all 16) into *gemm; false with a
 * reason in `problem` when it does not hold exactly the 16 parameters. */
bool clattn__gemm_params_parse(const char *text, clattn_gemm_params *gemm, char *problem,
                               size_t problem_size);

#endif /* CLATTN_TUNING_H */
