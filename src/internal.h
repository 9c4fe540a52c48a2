/*
 * Internal declarations shared by the library's source files. Nothing here is installed or
 * exported; tests link the static library and may call these functions.
 */
#ifndef CLATTN_INTERNAL_H
#define CLATTN_INTERNAL_H

#include "clattn/clattn.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>

#include "kernels.h"

#if defined(__GNUC__)
#define CLATTN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLATTN_PRINTF(fmt, args)
#endif

/* A profiling event waiting to be read, and the stats.kernels slot it adds to. With `start`, the
 * time runs from the end of `start` (a marker enqueued before a multi-kernel CLBlast routine,
 * whose own event covers only its last kernel) to the end of `event`. */
typedef struct clattn_pending_event {
    cl_event event;
    cl_event start;
    size_t slot;
} clattn_pending_event;

/* Scratch buffers the context keeps between calls, grown on demand. */
typedef enum clattn_scratch_slot {
    CLATTN_SCRATCH_SCORES = 0, /* attention scores/probabilities: [pairs, Nq, Nk] */
    CLATTN_SCRATCH_PACKED = 1, /* keys and values packed per head for the fused kernel */
    CLATTN_SCRATCH_COUNT
} clattn_scratch_slot;

/* A fused attention program specialised for one pair of head widths. */
typedef struct clattn_fused_variant {
    size_t dk, dv;
    cl_program program;
    cl_kernel kernel;
    bool local;
    size_t qpw, tk, wg;
} clattn_fused_variant;

#define CLATTN_FUSED_CACHE 8

void clattn__fused_release(clattn_fused_variant *variant);

struct clattn_context {
    cl_device_id device;
    cl_context cl_ctx;
    cl_command_queue queue;
    clattn_device_info info;

    clattn_log_callback log_callback; /* NULL: stderr */
    void *log_user_data;
    clattn_log_level log_level;
    bool profiling;
    uint64_t workspace_limit; /* bytes; already clamped to the device's max allocation */

    clattn_kernels kernels;
    clattn_tuning tuning;
    clattn_fused_variant fused[CLATTN_FUSED_CACHE];
    size_t fused_count;

    cl_mem scratch[CLATTN_SCRATCH_COUNT];
    size_t scratch_bytes[CLATTN_SCRATCH_COUNT];

    /* The sinusoidal table on the device: [pe_positions, pe_dim], grown on demand. */
    cl_mem pe;
    size_t pe_positions, pe_dim;

    clattn_stats stats;
    clattn_pending_event *pending;
    size_t pending_count, pending_capacity;

    char *last_error; /* heap; NULL when there was no failure yet */
    bool counted;     /* counted among the live contexts (see context.c) */
};

/* A float32 tensor: element (i0..i3) is at mem[offset + Σ i_d · strides[d]] (in floats). */
struct clattn_tensor {
    clattn_context *ctx;
    cl_mem mem; /* one reference held by this tensor */
    size_t offset;
    int ndim;
    size_t shape[CLATTN_MAX_DIMS];
    size_t strides[CLATTN_MAX_DIMS];
};

/* ---- errors and logging (error.c, log.c) ---- */

/* Records a failure: formats the message, stores it as the context's and the thread's last error,
 * logs it at error level, and returns `status` so callers can `return clattn__fail(...)`. */
clattn_status clattn__fail(clattn_context *ctx, clattn_status status, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* Same, for a failed OpenCL call: appends ": CL_NAME (code)" and picks the status from the code. */
clattn_status clattn__fail_cl(clattn_context *ctx, cl_int err, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
/* For calls without a context (file formats): records "<function>: <where>: <detail>", where is
 * typically the file's path. */
clattn_status clattn__fail_in(const char *function, const char *where, clattn_status status,
                              const char *fmt, ...) CLATTN_PRINTF(4, 5);
/* Records a message without logging it (used when the log already received the details). */
clattn_status clattn__fail_quiet(clattn_context *ctx, clattn_status status, const char *message);
/* The name of an OpenCL error code ("CL_INVALID_VALUE"), or "unknown OpenCL error". */
const char *clattn__cl_error_name(cl_int err);
/* The status a failed OpenCL call maps to. */
clattn_status clattn__status_from_cl(cl_int err);

void clattn__log(const clattn_context *ctx, clattn_log_level level, const char *fmt, ...)
    CLATTN_PRINTF(3, 4);
void clattn__log_message(clattn_log_callback callback, void *user_data, clattn_log_level threshold,
                         clattn_log_level level, const char *message);

/* Validates an argument of a public function: on failure records
 * "<function>: invalid argument: <what>" and returns CLATTN_ERROR_INVALID_ARGUMENT. */
#define CLATTN_CHECK_ARG(ctx, cond, ...)                                                   \
    do {                                                                                   \
        if (!(cond))                                                                       \
            return clattn__fail((ctx), CLATTN_ERROR_INVALID_ARGUMENT, __VA_ARGS__);        \
    } while (0)

/* ---- devices (device.c) ---- */

/* Resolves a device spec (see clattn_context_params.device; NULL/"" = default rules). */
clattn_status clattn__select_device(clattn_context *ctx, const char *spec, cl_device_id *device,
                                    cl_platform_id *platform);
clattn_status clattn__query_device_info(clattn_context *ctx, cl_device_id device,
                                        clattn_device_info *info);

/* ---- shapes and argument checks (shape.c) ---- */

/* Writes "[2, 3, 4]" into buf. */
void clattn__format_shape(char *buf, size_t size, int ndim, const size_t *shape);
/* Fails with CLATTN_ERROR_SHAPE_MISMATCH ("<function>: <name> has shape [..] but must be
 * <meaning> = [..]") unless t has exactly the shape `want`. */
clattn_status clattn__expect_shape(clattn_context *ctx, const char *function, const char *name,
                                   const clattn_tensor *t, int ndim, const size_t *want,
                                   const char *meaning);
/* True when every byte of a params struct's reserved[] is zero. */
bool clattn__reserved_is_zero(const uint8_t *reserved, size_t size);

/* ---- files (file_io.c) ---- */

/* Reads a whole regular file into a new malloc'd buffer (never more than the file's size);
 * errors are recorded as "<function>: <path>: <what>". */
clattn_status clattn__read_file(const char *function, const char *path, unsigned char **bytes,
                                size_t *size);
/* Opens a new temporary file next to path (a symbolic link followed) for writing: *target and
 * *temp receive the malloc'd names clattn__finish_file needs. Refuses an existing path that is
 * not a regular file; records "cannot create" with the system's reason. */
clattn_status clattn__create_file(const char *function, const char *path, FILE **f, char **target,
                                  char **temp);
/* Closes a file written with `ok` telling whether every write succeeded and renames it over the
 * target; on any failure removes the temporary file (only) and records "write failed" with the
 * system's reason. Frees target and temp. */
clattn_status clattn__finish_file(const char *function, const char *path, FILE *f, char *target,
                                  char *temp, bool ok);
/* Writes `count` floats to f in little-endian byte order; false on a write error. */
bool clattn__write_floats(FILE *f, const float *data, size_t count);

/* ---- sizes (tensor.c) ---- */

/* *out = a * b; false on overflow. */
bool clattn__mul_size(size_t a, size_t b, size_t *out);

/* ---- scratch buffers (context.c) ---- */

/* Returns a scratch buffer of at least `bytes` bytes, reallocating the slot when it is smaller. */
clattn_status clattn__scratch(clattn_context *ctx, clattn_scratch_slot slot, size_t bytes,
                              cl_mem *buffer);
/* Allocates a device buffer with a named error on failure. `what` names it in the message. */
clattn_status clattn__buffer_create(clattn_context *ctx, size_t bytes, cl_mem *buffer,
                                    const char *what);

/* ---- kernel launches and statistics (launch.c, stats.c) ---- */

/* Sets a kernel's arguments one after another, keeping the first error. */
typedef struct clattn_kernel_args {
    cl_kernel kernel;
    cl_uint next;
    cl_int err;
} clattn_kernel_args;

void clattn__arg(clattn_kernel_args *args, size_t size, const void *value);
#define CLATTN_ARG(args, value) clattn__arg((args), sizeof(value), &(value))
/* A NULL __global pointer argument (an absent optional input). */
void clattn__arg_null(clattn_kernel_args *args);

/* Enqueues `kernel` over `global` work-items (rounded up to multiples of `local` when given) and
 * adds `macs` multiply-adds to the counter of `op`. `name` labels the profile entry. */
clattn_status clattn__launch(clattn_context *ctx, const clattn_kernel_args *args, const char *name,
                             cl_uint dims, const size_t *global, const size_t *local, clattn_op op,
                             uint64_t macs);

/* Records `macs` for `op` and, when profiling, queues `event` (which it takes over) for timing. */
clattn_status clattn__account(clattn_context *ctx, const char *name, clattn_op op, uint64_t macs,
                              cl_event event);
/* The same for work that began after the marker event `start` (also taken over). */
clattn_status clattn__account_span(clattn_context *ctx, const char *name, clattn_op op,
                                   uint64_t macs, cl_event start, cl_event event);
/* Reads every queued profiling event into the per-kernel times. */
clattn_status clattn__stats_collect(clattn_context *ctx);
void clattn__stats_release(clattn_context *ctx);

/* ---- GEMM through CLBlast (gemm.c) ---- */

/* C[m, n] = A[m, k] · B[n, k]ᵀ + beta · C[m, n], row-major, leading dimensions in floats and
 * offsets in floats. B is a PyTorch weight [out, in] used as it is. */
clattn_status clattn__gemm_nt(clattn_context *ctx, clattn_op op, size_t m, size_t n, size_t k,
                              cl_mem a, size_t a_offset, size_t lda, cl_mem b, size_t b_offset,
                              size_t ldb, float beta, cl_mem c, size_t c_offset, size_t ldc);

/* ---- element-wise kernels (elementwise.c) ---- */

typedef enum clattn_activation_kind {
    CLATTN_ACT_NONE = 0,
    CLATTN_ACT_RELU = 1,
    CLATTN_ACT_GELU = 2, /* exact, with erf */
} clattn_activation_kind;

/* y[r, c] = act(y[r, c] + bias[bias_offset + c]) on y[rows, cols] (leading dimension ld,
 * offsets in floats); bias NULL adds nothing. */
clattn_status clattn__bias_act(clattn_context *ctx, cl_mem y, size_t y_offset, size_t ld,
                               size_t rows, size_t cols, cl_mem bias, size_t bias_offset,
                               clattn_activation_kind act);

/* y = LayerNorm(x + (res + res_bias)) row by row on [rows, width] contiguous blocks (offsets in
 * floats); res and res_bias may be NULL; y may be x. */
clattn_status clattn__layernorm(clattn_context *ctx, cl_mem x, size_t x_offset, cl_mem res,
                                size_t res_offset, cl_mem res_bias, cl_mem y, size_t y_offset,
                                size_t rows, size_t width, cl_mem weight, cl_mem bias, float eps);
/* y[r, c] += x[r, c] + bias[c] on [rows, width] contiguous blocks; bias may be NULL. */
clattn_status clattn__add(clattn_context *ctx, cl_mem y, size_t y_offset, cl_mem x,
                          size_t x_offset, cl_mem bias, size_t rows, size_t width);
/* Makes *mem at least `need` bytes (allocating the new buffer before releasing the old one). */
clattn_status clattn__grow_buffer(clattn_context *ctx, cl_mem *mem, size_t *have, size_t need,
                                  const char *what);

/* ---- positional encoding and embedding (positional.c) ---- */

/* The device's sinusoidal table with at least `positions` rows of width d (grown on demand). */
clattn_status clattn__positional_table(clattn_context *ctx, size_t positions, size_t d,
                                       cl_mem *table);
/* out[t] = in[t] + PE[offset + t % seq] for tokens = batch·seq rows of width d. */
clattn_status clattn__add_positional(clattn_context *ctx, cl_mem in, size_t in_offset, cl_mem out,
                                     size_t out_offset, size_t tokens, size_t seq, size_t d,
                                     size_t offset);
/* x[t] = emb[ids[t]] · scale (+ PE[offset + t % seq] when with_positions); ids: int32 [tokens]. */
clattn_status clattn__embed(clattn_context *ctx, cl_mem ids, cl_mem emb, float scale,
                            bool with_positions, size_t offset, size_t tokens, size_t seq, size_t d,
                            cl_mem x);

/* ---- tuning (tuning.c) ---- */

/* Chooses ctx->tuning (defaults, cache, CLATTN_TUNE: see clattn_tuning) and applies it. */
void clattn__tuning_init(clattn_context *ctx);
/* Applies ctx->tuning's Xgemm parameters to CLBlast (no-op when it has none); records a
 * CLATTN_ERROR_CLBLAST when CLBlast refuses them. */
clattn_status clattn__gemm_apply_tuning(clattn_context *ctx);
/* The same without recording anything: NULL on success, else CLBlast's status name. */
const char *clattn__gemm_override(clattn_context *ctx);

/* ---- test hooks ---- */

/* When set, context creation appends this source to the library's kernel sources (tests use it
 * to prove the build-failure path). Not thread-safe; tests only. */
extern const char *clattn__test_extra_source;

#endif /* CLATTN_INTERNAL_H */
