/*
 * libclattn — context.h: devices, the context, errors and statistics.
 *
 * A clattn_context owns one OpenCL device, one in-order command queue, the library's compiled
 * kernels, CLBlast's state for that queue, a workspace and the statistics counters.
 *
 * Thread safety: a context, and every object created from it (tensors, layers), must be used by
 * one thread at a time. Different contexts may be used from different threads concurrently.
 * clattn_list_devices, clattn_strerror, clattn_status_name and the version functions are
 * thread-safe.
 */
#ifndef CLATTN_CONTEXT_H
#define CLATTN_CONTEXT_H

#include "clattn/common.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_context clattn_context;

/* ------------------------------------------------------------------------------------------ */
/* Devices                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef enum clattn_device_type {
    CLATTN_DEVICE_TYPE_OTHER = 0,
    CLATTN_DEVICE_TYPE_CPU = 1,
    CLATTN_DEVICE_TYPE_GPU = 2,
    CLATTN_DEVICE_TYPE_ACCELERATOR = 3,
} clattn_device_type;

#define CLATTN_DEVICE_STRING_SIZE 256

/* Facts about one OpenCL device. Strings are NUL-terminated and truncated to fit. */
typedef struct clattn_device_info {
    unsigned platform_index; /* position of the platform in clGetPlatformIDs' list */
    unsigned device_index;   /* position of the device in its platform's list */
    char platform_name[CLATTN_DEVICE_STRING_SIZE];
    char name[CLATTN_DEVICE_STRING_SIZE];
    char vendor[CLATTN_DEVICE_STRING_SIZE];
    char driver_version[CLATTN_DEVICE_STRING_SIZE];
    char opencl_version[CLATTN_DEVICE_STRING_SIZE]; /* CL_DEVICE_VERSION, e.g. "OpenCL 3.0 ..." */
    clattn_device_type type;
    unsigned compute_units;
    unsigned max_clock_mhz;
    uint64_t global_mem_bytes;
    uint64_t local_mem_bytes;
    /* 1 when __local memory is emulated in global memory (CL_GLOBAL, e.g. PoCL's CPU device):
     * staging data through __local then only costs. */
    int local_mem_is_global;
    uint64_t max_alloc_bytes; /* CL_DEVICE_MAX_MEM_ALLOC_SIZE */
    size_t max_work_group_size;
    int fp16; /* cl_khr_fp16 */
    int fp64; /* cl_khr_fp64 or a double FP config */
} clattn_device_info;

/*
 * Lists every device of every OpenCL platform, in platform order then device order (the same
 * indices as a "P:D" device spec).
 *
 * infos:    array of `capacity` entries to fill, or NULL with capacity 0 to only count.
 * count:    receives the total number of devices found (may exceed capacity; only the first
 *           `capacity` are written).
 * Returns CLATTN_ERROR_DEVICE_NOT_FOUND when there is no OpenCL platform at all (the message says
 * so); zero devices on existing platforms is success with *count = 0.
 */
CLATTN_API clattn_status clattn_list_devices(clattn_device_info *infos, size_t capacity,
                                             size_t *count);

/* The short name of a device type ("cpu", "gpu", "accelerator", "other"). */
CLATTN_API const char *clattn_device_type_name(clattn_device_type type);

/* ------------------------------------------------------------------------------------------ */
/* Context                                                                                    */
/* ------------------------------------------------------------------------------------------ */

typedef struct clattn_context_params {
    /*
     * Which device to use. NULL or "" means: the environment variable CLATTN_DEVICE if set and
     * not empty, else the first GPU of any platform, else the first CPU, else the first device.
     * Forms (case-insensitive): "gpu", "cpu", "P:D" (platform and device index, see
     * clattn_list_devices), or any substring of the device name ("epyc", "A100").
     * A spec that matches nothing fails with CLATTN_ERROR_DEVICE_NOT_FOUND and a message listing
     * the devices that were found. The string need only live for the call.
     */
    const char *device;
    /* Receives log messages at or above log_level, including each returned error (at
     * CLATTN_LOG_ERROR). NULL: warnings (an ignored tuning cache, say) go to stderr, and returned
     * errors are not printed at all — the caller has the status and clattn_last_error. The
     * environment variable CLATTN_LOG (debug, info, warning, error or none) overrides log_level,
     * and with it set returned errors are printed to stderr too. */
    clattn_log_callback log_callback;
    void *log_user_data;
    clattn_log_level log_level; /* default CLATTN_LOG_WARNING */
    /* Non-zero: time every kernel and GEMM with OpenCL profiling events (see clattn_stats). */
    int profiling;
    /* Upper bound, in bytes, of any single scratch buffer the library allocates for attention
     * scores. 0 means the device's maximum allocation. Attention whose score matrix is larger is
     * processed in chunks of (batch, head) pairs. */
    uint64_t workspace_limit_bytes;
    /* The number format of the projection and feed-forward GEMMs of the weights loaded
     * afterwards (clattn_precision; default CLATTN_PRECISION_FP32). */
    int precision;
    /* Reserved for future fields: must be zero (clattn_context_params_default does this). */
    uint8_t reserved[60];
} clattn_context_params;

/*
 * Precision of the GEMMs (clattn_context_params.precision). Attention, softmax, LayerNorm and
 * pooling stay float32 whatever it is.
 *   CLATTN_PRECISION_FP32: float32 throughout (the default).
 *   CLATTN_PRECISION_BF16: weights stored as bfloat16 in oneDNN's layout, activations rounded to
 *     bfloat16 (to nearest even) on their way into each product, float32 accumulation, bias
 *     and output. A token's outliers (as int8's below) are left out of the bfloat16 product and
 *     added in float32 with the float32 weights, which the weight keeps transposed for them:
 *     6 bytes per weight in all, 1.5 times float32's memory for the weights. Needs a CPU device, a build with oneDNN (the GEMMs then run on it: tuning
 *     gemm_kernel 2; another gemm_kernel chosen later runs the bfloat16-rounded weights in
 *     float32) and a CPU with AVX512_BF16 or AMX-BF16; elsewhere context creation fails with
 *     CLATTN_ERROR_UNSUPPORTED naming what is missing, never a slow emulation. Embeddings of
 *     all-MiniLM-L6-v2: worst cosine against float32 over tests/data/precision/corpus.txt is
 *     asserted >= 0.999 by tests/test_precision.c (all-mpnet-base-v2: by test_mpnet_real.sh,
 *     0.99997 measured). Rows keep their bytes whatever the batch (the rounding and the
 *     outliers are per row, the products are oneDNN's per-row-count primitives). On CPUs with
 *     AMX the library keeps oneDNN at AVX512_BF16 and VNNI, process-wide, when it loads it:
 *     oneDNN chose AMX for some row counts only, whose bytes differ. In a process whose oneDNN
 *     ran before (it then stays free to use AMX), bf16 and int8 fail with
 *     CLATTN_ERROR_UNSUPPORTED naming AMX.
 *   CLATTN_PRECISION_INT8: weights quantised per output channel (int8, scale = the row's
 *     largest magnitude / 127), activations per token on their way into each product (the same
 *     rule per row: dynamic, no calibration), int32 accumulation in oneDNN, then scaled back,
 *     the bias and the activation (ReLU, or GELU with oneDNN's erf as in float32) applied in
 *     float32 (SiLU by the library's kernel). A token's outliers, its elements above 8 times
 *     its root mean square (at most 32; the limit doubles while more are above it), are taken
 *     out of its int8 row and their products added in float32 with the weights' int8 columns,
 *     as LLM.int8() does but chosen per token: models with outlier channels (MPNet) keep their
 *     accuracy. Needs what bf16 needs but AVX512_VNNI, AVX-VNNI or AMX-INT8 in place of the
 *     bf16 instructions. Keeps the int8 weights twice (oneDNN's layout and transposed for the
 *     outliers): half of float32's memory. Worst cosine of the embeddings against float32
 *     over tests/data/precision/corpus.txt: all-MiniLM-L6-v2 >= 0.995 asserted by
 *     tests/test_precision.c (0.9981 measured), all-mpnet-base-v2 >= 0.99 by
 *     tests/test_mpnet_real.sh (0.9942). Rows keep their bytes whatever the batch (the scales
 *     and the outliers are per row).
 *   bf16 and int8 over 1000 texts of bench/embed_bench.py's corpus, worst / mean cosine:
 *   MiniLM bf16 0.99997 / 0.99999, int8 0.9977 / 0.9991; MPNet bf16 0.99953 / 0.99999, int8
 *   0.9946 / 0.9983.
 */
typedef enum clattn_precision {
    CLATTN_PRECISION_FP32 = 0,
    CLATTN_PRECISION_BF16 = 1,
    CLATTN_PRECISION_INT8 = 2,
} clattn_precision;

/* Fills *params with the defaults described above. */
CLATTN_API void clattn_context_params_default(clattn_context_params *params);

/*
 * Creates a context on the device that params->device selects (params may be NULL for the
 * defaults), creates an in-order command queue and compiles the library's kernels for the device.
 *
 * On success *ctx receives the new context. On failure *ctx is set to NULL, nothing is leaked,
 * and clattn_last_error(NULL) on the same thread gives the message (for a build failure, the
 * complete build log, which also goes to the log callback).
 */
CLATTN_API clattn_status clattn_context_create(clattn_context **ctx,
                                               const clattn_context_params *params);

/*
 * Creates a context on a caller's OpenCL context and in-order command queue (device taken from
 * the queue). params->device is ignored. The library retains both objects and releases only its
 * own references on destroy: the caller keeps ownership and must release its references as
 * usual. All of the library's work is enqueued on `queue`. With params->profiling the queue must
 * have been created with CL_QUEUE_PROFILING_ENABLE; out-of-order queues are refused.
 */
CLATTN_API clattn_status clattn_context_wrap(clattn_context **ctx, cl_context cl_ctx,
                                             cl_command_queue queue,
                                             const clattn_context_params *params);

/*
 * Waits for all enqueued work, releases everything the context owns and sets *ctx to NULL.
 * Accepts NULL and a pointer to NULL. Destroy every tensor and layer of the context first.
 * When the last context of the process goes, CLBlast's cache of compiled programs is cleared too
 * (CLBlastClearCache), which releases the OpenCL contexts it still references.
 */
CLATTN_API void clattn_context_destroy(clattn_context **ctx);

/* Facts about the context's device. */
CLATTN_API clattn_status clattn_context_device_info(const clattn_context *ctx,
                                                    clattn_device_info *info);

/* Blocks until all work enqueued by the context has completed. */
CLATTN_API clattn_status clattn_context_finish(clattn_context *ctx);

/* The context's OpenCL objects, for interoperation. Owned by the context: do not release them
 * (retain them if they must outlive it). NULL when ctx is NULL. */
CLATTN_API cl_context clattn_context_cl_context(const clattn_context *ctx);
CLATTN_API cl_command_queue clattn_context_queue(const clattn_context *ctx);
CLATTN_API cl_device_id clattn_context_device(const clattn_context *ctx);

/*
 * The message of the latest failure: of the latest failing call on `ctx`, or, with ctx NULL, of
 * the latest failing call on this thread (including calls with no context, and
 * clattn_context_create). Never NULL; "" when there was none. Valid until the next failing call
 * on the same context or thread.
 */
CLATTN_API const char *clattn_last_error(const clattn_context *ctx);

/* ------------------------------------------------------------------------------------------ */
/* Tuning                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/*
 * How the context runs its attention kernel on its device: the library's own kernel choices.
 * Context creation chooses them in this order, each step overriding the previous one:
 *   1. defaults from the device's facts (CPUs, whose __local memory is global memory: no
 *      staging, 8 queries per work-item; GPUs: keys and values staged through __local memory);
 *   2. the entry for this device (name and driver version) and this library version in the
 *      tuning cache written by examples/tune: $CLATTN_TUNING_CACHE, else
 *      $XDG_CACHE_HOME/clattn/tuning.json, else ~/.cache/clattn/tuning.json. A corrupt cache,
 *      a stale entry (another library version), an entry with a field out of its range (named
 *      in the warning) and a cache that is not a regular file (a FIFO, a device: never opened)
 *      are ignored with a warning naming the cache, never fatal;
 *   3. the environment variable CLATTN_TUNE: comma-separated key=value pairs with the keys
 *      fused_qpw (1-16), fused_tk (1-256), fused_wg (a power of two up to the device's maximum
 *      work-group size), fused_local (0 or 1), gemm_kernel (0 to 2), split_keys (0, 1 or 2),
 *      fused_untiled (0 or 1) — the fields below; anything else is ignored with a warning.
 * The GEMMs' parameters (CLBlast's Xgemm kernel) are not part of this struct: they live in the
 * tuning cache (steps 1 and 2: PoCL's CPU devices get parameters examples/tune found there) and
 * are set with clattn_context_set_gemm_parameters. Cached ones are checked against CLBlast's
 * constraints and the device's limits; should CLBlast still fail to build or launch them, the
 * GEMM falls back to the defaults with a warning naming the cache.
 */
enum {
    CLATTN_SPLIT_KEYS_AUTO = 0,
    CLATTN_SPLIT_KEYS_ALWAYS = 1,
    CLATTN_SPLIT_KEYS_NEVER = 2,
};

typedef struct clattn_tuning {
    int fused_local;  /* fused_local: 1 stages keys and values through __local memory */
    size_t fused_qpw; /* fused_qpw: queries per work-item (without staging) */
    size_t fused_tk;  /* fused_tk: keys per block (without staging: rounded down to 1, 2, 4, 8
                       * or 16) */
    size_t fused_wg;  /* fused_wg: work-group size (a power of two up to the device's
                       * max_work_group_size) */
    int gemm_kernel;  /* gemm_kernel: which GEMM runs the projection and feed-forward layers.
                       * 2: oneDNN's matmul on the host, on the device buffers' mapped memory
                       * (zero-copy where the driver maps in place, as PoCL does), weights
                       * reordered once into its layout, bias and activation fused; CPU devices
                       * in builds with oneDNN only (meson -Donednn), where it is the default
                       * (its OpenMP threads: as many as the device's compute units). 1: the
                       * library's CPU GEMM (register-blocked micro-tiles of the device's native
                       * vector width over weights packed once, bias and activation fused; the
                       * default on PoCL's CPU devices without oneDNN, see
                       * docs/pocl-cpu-performance.md); 0: CLBlast (the default elsewhere: GPUs,
                       * Mesa's llvmpipe without oneDNN) */
    int split_keys;   /* split_keys: split-key attention (flash-decoding) for few queries
                       * against many keys, e.g. a decoding step against its cache: the keys are
                       * split across work-items whose partial softmax states a second kernel
                       * merges. CLATTN_SPLIT_KEYS_AUTO (0, the default) for a single query
                       * (a decoding step of one token) against 128 keys or more, in as many
                       * splits of at least 64 keys as fill the device: a count that depends on
                       * the key count and the device only, never on the batch (see "Batch
                       * invariance" below); _ALWAYS (1) whenever there are two keys or more
                       * (a setting for tests: not batch-invariant), _NEVER (2) */
    int fused_untiled; /* fused_untiled: 0 runs the unstaged fused kernel's micro-tiled variant
                        * where it applies (float keys and values, no split; every query count):
                        * keys packed transposed in tiles of 16, scores as outer products (the
                        * default on PoCL's CPU devices); 1 keeps the plain unstaged kernel (the
                        * default elsewhere, e.g. Mesa's llvmpipe) */
    uint8_t reserved[52]; /* must be zero */
} clattn_tuning;

/*
 * Batch invariance. A row's results — a sequence's outputs, a text's embedding — are the same
 * bytes whatever batch computes them: alone or among other rows, at any row, padded to any
 * length with a key-padding mask. This holds for clattn_sdpa, clattn_mha_forward, the encoder
 * (clattn_encoder_forward, _forward_tokens), clattn_decoder_step (a sentence alone or inside a
 * beam batch), clattn_pool and clattn_sentence_model_embed (whatever the batch size, the order
 * of the texts or what they are batched with), and so for examples/encode and examples/embed
 * (its in-memory path and its corpus job, on any number of processes), for the same input,
 * device, driver, library version and tuning. Every reduction of a row runs in an order fixed by
 * the row alone: the GEMMs sum each output over K in one order whatever M is (the library's CPU
 * GEMM; oneDNN, with one primitive per row count, all reading the weights in one layout, its
 * brgemm kernels then blocking K alike; on GPUs CLBlast is kept on its main kernel for every
 * size, while on CPU devices its direct and main kernels were measured to agree bit for bit);
 * the attention visits a row's keys in the same blocks from key 0 with the same kernel variant
 * for every query count and padded length, masked keys adding exact zeros; LayerNorm, pooling
 * (a masked mean over the real tokens) and normalisation are per row. tests/test_invariance.c checks it byte for byte
 * on every tuning the tests run (PoCL's CPU device: the micro-tiled and plain kernels, oneDNN,
 * the library's GEMM and CLBlast, the __local variant; Mesa's llvmpipe).
 * Not guaranteed: the same bytes on another device, driver, library version or tuning (another
 * kernel variant or GEMM tiling sums in another order: results then agree to float32 rounding,
 * not bit for bit); split_keys = CLATTN_SPLIT_KEYS_ALWAYS (its splits follow the batch); a
 * single query against 128 keys or more (split-key attention) compared with the same query
 * computed together with others (clattn_sdpa with several queries): pad such rows to the same
 * query count.
 */

/* The tuning in effect. */
CLATTN_API clattn_status clattn_context_get_tuning(const clattn_context *ctx,
                                                   clattn_tuning *tuning);

/* Applies a tuning from now on (kernels specialised by it are rebuilt on their next use).
 * Out-of-range values are CLATTN_ERROR_INVALID_ARGUMENT. */
CLATTN_API clattn_status clattn_context_set_tuning(clattn_context *ctx,
                                                   const clattn_tuning *tuning);

/*
 * Sets the parameters of CLBlast's GEMM kernel (Xgemm) for the context's device, given as text:
 * "GEMMK=0,MWG=64,..." with all 16 of CLBlast's Xgemm parameter names (CLBlast's documentation
 * lists them and their constraints). Text keeps CLBlast's parameter set out of libclattn's ABI.
 * CLBlast applies them process-wide for that device (every context on it, and any other CLBlast
 * user in the process). A malformed text, a value out of its range, or parameters that break
 * one of CLBlast's constraints between them or the device's work-group and local-memory limits
 * (which may build and then compute wrong results) are CLATTN_ERROR_INVALID_ARGUMENT naming the
 * parameter; parameters CLBlast refuses are CLATTN_ERROR_CLBLAST.
 */
CLATTN_API clattn_status clattn_context_set_gemm_parameters(clattn_context *ctx,
                                                            const char *parameters);

/* Stores a tuning, and optionally GEMM parameters (text as for
 * clattn_context_set_gemm_parameters; NULL or "" for none), as the cache entry of the context's
 * device, driver and library version (replacing an older one; other devices' entries are kept).
 * The file is replaced atomically (written to a new temporary file beside it, then renamed), and
 * only when it is a regular file (through a symbolic link: the file it names) or does not exist
 * yet: a FIFO, a device or a directory is CLATTN_ERROR_IO, naming it. GEMM parameters outside
 * CLBlast's constraints or the device's limits are CLATTN_ERROR_INVALID_ARGUMENT. */
CLATTN_API clattn_status clattn_tuning_cache_store(clattn_context *ctx,
                                                   const clattn_tuning *tuning,
                                                   const char *gemm_parameters);

/* Bytes the context's workspace holds now: the scratch buffers that operations borrow during a
 * call and keep for the next (grown on demand, released with the context). 0 for NULL. */
CLATTN_API size_t clattn_context_workspace_bytes(const clattn_context *ctx);

/* The tuning cache's path (see clattn_tuning), or NULL when no home directory is known. The
 * string stays valid until the next call on the same thread. */
CLATTN_API const char *clattn_tuning_cache_path(void);

/* ------------------------------------------------------------------------------------------ */
/* Statistics                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* The operations whose work is counted separately. */
typedef enum clattn_op {
    CLATTN_OP_IN_PROJECTION = 0, /* Q, K, V projections (GEMM) */
    CLATTN_OP_SCORES = 1,        /* Q·Kᵀ */
    CLATTN_OP_WEIGHTS_V = 2,     /* softmax(scores)·V */
    CLATTN_OP_OUT_PROJECTION = 3,/* concatenated heads · W_oᵀ (GEMM) */
    CLATTN_OP_FEED_FORWARD = 4,  /* linear1 and linear2 of the encoder (GEMM) */
    CLATTN_OP_OTHER = 5,         /* everything else: softmax, biases, norms, copies */
    CLATTN_OP_COUNT = 6,
} clattn_op;

/* The short name of an operation ("in_projection", "scores", ...). */
CLATTN_API const char *clattn_op_name(clattn_op op);

#define CLATTN_STATS_MAX_KERNELS 32
#define CLATTN_STATS_NAME_SIZE 48

typedef struct clattn_kernel_time {
    char name[CLATTN_STATS_NAME_SIZE]; /* kernel name, or "gemm:<op>" for CLBlast calls */
    uint64_t launches;
    double total_ms; /* sum of (end - start) of the launches' profiling events */
} clattn_kernel_time;

/*
 * What the context has executed since it was created or last reset. Multiply-adds follow
 * fvcore's convention (one multiply-add = one FLOP) and count the work actually launched: GEMMs
 * by M·N·K, attention by its score and weights·V products. Element-wise work counts 0.
 */
typedef struct clattn_stats {
    uint64_t macs[CLATTN_OP_COUNT];
    uint64_t total_macs;
    uint64_t kernel_launches; /* our kernels and CLBlast calls */
    /* With profiling on: time per kernel, in order of first launch. */
    size_t kernel_count;
    clattn_kernel_time kernels[CLATTN_STATS_MAX_KERNELS];
    double total_kernel_ms;
} clattn_stats;

/* Copies the counters into *stats. With profiling on, first waits for the enqueued work. */
CLATTN_API clattn_status clattn_stats_get(clattn_context *ctx, clattn_stats *stats);
/* Sets every counter to zero (waits for enqueued work first when profiling). */
CLATTN_API clattn_status clattn_stats_reset(clattn_context *ctx);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_CONTEXT_H */
