/* Projection GEMMs through oneDNN's matmul on the mapped buffers of a CPU device. */
#include "gemm_onednn.h"
#include "context_internal.h"
#include "base/constants.h"
#include "host_cpu.h"

#include <dlfcn.h>
#include <float.h>
#include <math.h>
#include <oneapi/dnnl/dnnl.h>
#include <oneapi/dnnl/dnnl_version.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ---- loading oneDNN ----
 * Debian's oneDNN runs its parallel regions on OpenMP (libgomp), whose idle threads spin for
 * milliseconds after each region before they sleep (OMP_WAIT_POLICY unset: GOMP_SPINCOUNT
 * 300000). Between two GEMMs PoCL's own threads run the attention and LayerNorm kernels, and a
 * spinning OpenMP thread takes a core from them: embedding 500 texts with all-MiniLM-L6-v2 took
 * 9.9 s with the spin (9.6 s of CPU time) against 4.5 s (4.0 s) with OMP_WAIT_POLICY=passive, on
 * 2 cores. libgomp reads its environment once, when it is loaded, and no call changes the policy
 * afterwards (omp_pause_resource_all did not help either). So oneDNN is loaded here with dlopen
 * on first use, not linked: when the process has not loaded libgomp yet and the user has not
 * chosen OMP_WAIT_POLICY or GOMP_SPINCOUNT, GOMP_SPINCOUNT=SHORT_SPIN is set for libgomp's
 * start-up, then removed again (setenv is not thread-safe against another thread's getenv at
 * that moment: the first oneDNN use, normally context creation). A short spin, not none
 * (OMP_WAIT_POLICY=passive, the first choice here): a GEMM of bf16 or int8 is three or four
 * parallel regions back to back (A's rounding or quantisation, the matmul, the scaling back or
 * the outliers, GELU), and with no spin every one of them woke the other threads through the
 * kernel. Measured with all-MiniLM-L6-v2, 1000 texts, 2 cores (farm-bench, 8 interleaved pairs,
 * median wall-time ratios): 2000 against passive 0.90 (int8), 0.93 (bf16), 1.00 (fp32); 500
 * against 2000 1.00 (bf16); 20000 against 2000 1.06 (bf16): longer spins take the core from
 * PoCL's kernels again. A process that loaded libgomp before (an OpenMP program) keeps its own
 * policy; oneDNN's first use then logs how to choose passive waiting. */
#define SHORT_SPIN "2000" /* libgomp's spin iterations before a thread sleeps (see above) */
#define ONEDNN_SONAME "libdnnl.so." CLATTN_STRINGIFY(DNNL_VERSION_MAJOR)
#define CLATTN_STRINGIFY(x) CLATTN_STRINGIFY_(x)
#define CLATTN_STRINGIFY_(x) #x

#define ONEDNN_FUNCTIONS(X)                                                                   \
    X(dnnl_engine_create) X(dnnl_engine_destroy) X(dnnl_eltwise_forward_desc_init)          \
    X(dnnl_matmul_desc_init)                     \
    X(dnnl_memory_create) X(dnnl_memory_desc_equal) X(dnnl_memory_desc_init_by_strides)       \
    X(dnnl_memory_desc_init_by_tag) X(dnnl_memory_destroy) X(dnnl_memory_get_data_handle)     \
    X(dnnl_post_ops_append_eltwise) X(dnnl_post_ops_create) X(dnnl_post_ops_destroy)          \
    X(dnnl_primitive_attr_create) X(dnnl_primitive_attr_destroy)                              \
    X(dnnl_primitive_attr_set_post_ops) X(dnnl_primitive_create) X(dnnl_primitive_desc_create) \
    X(dnnl_primitive_desc_destroy) X(dnnl_primitive_desc_query)                               \
    X(dnnl_primitive_desc_query_md) X(dnnl_primitive_destroy) X(dnnl_primitive_execute)       \
    X(dnnl_reorder_primitive_desc_create) X(dnnl_stream_create) X(dnnl_stream_destroy)        \
    X(dnnl_stream_wait) X(dnnl_set_max_cpu_isa) X(dnnl_get_effective_cpu_isa)

#define POINTER(name) static __typeof__(name) *name##_ptr;
ONEDNN_FUNCTIONS(POINTER)
#undef POINTER
/* OpenMP's functions, from the libgomp oneDNN brings. */
static int (*omp_get_max_threads_ptr)(void);
static void (*omp_set_num_threads_ptr)(int);
static int (*omp_get_thread_num_ptr)(void);
static int (*omp_get_num_threads_ptr)(void);
/* libgomp's entry for a parallel region (what `#pragma omp parallel` compiles to): int8's
 * quantisation passes run on oneDNN's OpenMP threads without linking OpenMP. */
static void (*GOMP_parallel_ptr)(void (*fn)(void *), void *data, unsigned threads, unsigned flags);
/* A loaded function: D(dnnl_stream_wait)(stream). */
#define D(name) (name##_ptr)

static pthread_once_t load_once = PTHREAD_ONCE_INIT;
static char load_error[512]; /* "" once loaded */
static bool spin_policy_kept; /* libgomp was loaded before with its default policy */
static bool amx_dispatch;     /* oneDNN may still dispatch to AMX (cap_isa could not cap it) */

/* On CPUs with AMX, oneDNN 2.6 runs a bf16 matmul on AMX for some shapes and on AVX512_BF16 for
 * others — chosen by the row count too (96 columns: 1 row on AVX512_BF16, 37 on AMX) — and the
 * two give other bytes, so a row's result would change with its batch. Capped at AVX512_BF16
 * (with VNNI for int8) before its first primitive, every shape takes the same instructions (CPUs
 * without AMX-TILE, CPUID leaf 7, are left alone: AVX-VNNI is not below the cap). The cap is
 * process-wide and fixed once oneDNN has dispatched; if it cannot be set (the process ran oneDNN
 * before), amx_dispatch says whether AMX stays reachable, and the reduced precisions are then
 * refused (clattn__onednn_reduced_row_invariant). */
static void cap_isa(void)
{
    bool amx_tile = clattn__cpu_has(CLATTN_CPU_AMX_TILE);
    const unsigned amx = dnnl_cpu_isa_avx512_core_amx;
    if (amx_tile && D(dnnl_set_max_cpu_isa)(dnnl_cpu_isa_avx512_core_bf16) != dnnl_success)
        amx_dispatch = ((unsigned)D(dnnl_get_effective_cpu_isa)() & amx) == amx;
}

static void load(void)
{
    void *gomp = dlopen("libgomp.so.1", RTLD_LAZY | RTLD_NOLOAD);
    bool gomp_loaded = gomp != NULL;
    if (gomp)
        dlclose(gomp); /* only asked whether it was loaded */
    bool chosen = getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT");
    bool set = !gomp_loaded && !chosen && setenv("GOMP_SPINCOUNT", SHORT_SPIN, 0) == 0;
    spin_policy_kept = gomp_loaded && !chosen;
    void *lib = dlopen(ONEDNN_SONAME, RTLD_NOW | RTLD_LOCAL);
    if (set)
        unsetenv("GOMP_SPINCOUNT");
    if (!lib) {
        snprintf(load_error, sizeof(load_error), "%s could not be loaded: %s", ONEDNN_SONAME,
                 dlerror());
        return;
    }
#define RESOLVE(name)                                                                         \
    if (!(*(void **)&name##_ptr = dlsym(lib, #name))) {                                       \
        snprintf(load_error, sizeof(load_error), "%s lacks %s", ONEDNN_SONAME, #name);        \
        return;                                                                               \
    }
    ONEDNN_FUNCTIONS(RESOLVE)
    RESOLVE(omp_get_max_threads)
    RESOLVE(omp_set_num_threads)
    RESOLVE(omp_get_thread_num)
    RESOLVE(omp_get_num_threads)
    RESOLVE(GOMP_parallel)
#undef RESOLVE
    cap_isa();
}

bool clattn__onednn_available(void)
{
    pthread_once(&load_once, load);
    return !load_error[0];
}

/* Whether oneDNN runs a float32 matmul with its brgemm implementation ("brg:…": AVX-512 and
 * newer instruction sets), asked once of a primitive for 512 × 1024 × 1024 on a CPU engine of
 * its own. */
static pthread_once_t probe_once = PTHREAD_ONCE_INIT;
static bool f32_brgemm;

static void probe(void)
{
    dnnl_engine_t engine = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t src, weights, dst;
    dnnl_matmul_desc_t desc;
    const char *impl = NULL;
    if (D(dnnl_engine_create)(&engine, dnnl_cpu, 0) == dnnl_success &&
        D(dnnl_memory_desc_init_by_tag)(&src, 2, (dnnl_dims_t){512, 1024}, dnnl_f32, dnnl_ab) ==
            dnnl_success &&
        D(dnnl_memory_desc_init_by_tag)(&weights, 2, (dnnl_dims_t){1024, 1024}, dnnl_f32,
                                        dnnl_format_tag_any) == dnnl_success &&
        D(dnnl_memory_desc_init_by_tag)(&dst, 2, (dnnl_dims_t){512, 1024}, dnnl_f32, dnnl_ab) ==
            dnnl_success &&
        D(dnnl_matmul_desc_init)(&desc, &src, &weights, NULL, &dst) == dnnl_success &&
        D(dnnl_primitive_desc_create)(&pd, &desc, NULL, engine, NULL) == dnnl_success &&
        D(dnnl_primitive_desc_query)(pd, dnnl_query_impl_info_str, 0, &impl) == dnnl_success)
        f32_brgemm = impl && strncmp(impl, "brg", 3) == 0;
    if (pd)
        D(dnnl_primitive_desc_destroy)(pd);
    if (engine)
        D(dnnl_engine_destroy)(engine);
}

bool clattn__onednn_reduced_row_invariant(void)
{
    return clattn__onednn_available() && !amx_dispatch;
}

bool clattn__onednn_f32_row_invariant(void)
{
    if (!clattn__onednn_available())
        return false;
    pthread_once(&probe_once, probe);
    return f32_brgemm;
}

/* Primitives kept per context, by shape: a model's GEMMs come in a handful of (n, k) pairs, times
 * the row counts its batches have. The least recently used one makes room (oneDNN's own
 * primitive cache then often still has its compiled kernel). */
#define PRIMITIVES 64

typedef struct matmul_key {
    size_t m, n, k; /* A [m, k] and C [m, n] dense */
    dnnl_data_type_t type; /* of A and W: f32 or bf16 (C and the bias are f32) */
    bool bias;
    int act; /* fused CLATTN_ACT_*, or CLATTN_ACT_NONE */
} matmul_key;

typedef struct matmul_entry {
    matmul_key key;
    dnnl_memory_desc_t weights; /* the layout the primitive reads W in */
    dnnl_primitive_t primitive; /* NULL: a free entry */
    uint64_t used;              /* the call counter when last used */
} matmul_entry;

/* int8's GELU: oneDNN's eltwise primitive, in place on the scaled-back products (the same
 * gelu_erf / gelu_tanh as the float32 matmul's post-op), kept per element count. */
#define ELTWISES 16

typedef struct eltwise_entry {
    size_t count; /* elements, as one dense row */
    int act;      /* CLATTN_ACT_GELU or CLATTN_ACT_GELU_TANH */
    dnnl_primitive_t primitive; /* NULL: a free entry */
    uint64_t used;
} eltwise_entry;

/* Host addresses kept at once (see maps_in_place): the buffers a model's GEMMs meet, its
 * workspace and one bias per projection (all-mpnet-base-v2: 48), with room for the largest. */
#define MAPPED_BUFFERS 256
#define FORGET_EVERY 64 /* GEMMs between two looks for released buffers (see forget_released) */

struct clattn_onednn {
    dnnl_engine_t engine;
    dnnl_stream_t stream;
    int threads; /* OpenMP threads for oneDNN: the device's compute units */
    uint64_t calls;
    float *dense;        /* host scratch for strided A and C (see clattn__onednn_run) */
    size_t dense_floats; /* its size */
    bool warned_ref;     /* a warning about oneDNN's reference matmul was logged */
    /* Where the device maps its buffers in place, at the same address every time (PoCL's CPU
     * device): each buffer is mapped once and its host address kept, retained, in `mapped`
     * (released once the library holds it no longer: looked for when a new buffer comes and
     * every FORGET_EVERY GEMMs), so that a GEMM needs a clFinish but no map or unmap (each a
     * round trip through the device's thread). Otherwise every GEMM maps its buffers. */
    bool maps_in_place;
    unsigned gemms_since_forget;
    struct {
        cl_mem mem; /* retained */
        float *host;
    } mapped[MAPPED_BUFFERS];
    matmul_entry entries[PRIMITIVES];
    eltwise_entry eltwises[ELTWISES];
};

struct clattn_onednn_weight {
    size_t n, k;
    dnnl_data_type_t type; /* f32, bf16 (CLATTN_PRECISION_BF16) or s8 (CLATTN_PRECISION_INT8) */
    float *scales;         /* s8: W[j, :] ≈ scales[j]·q[j, :], one per output channel [n] */
    int8_t *transposed;    /* s8: q transposed, [k, n]: row l is input channel l's column, for
                            * the outliers' products (see outlier_limit) */
    float *columns;        /* bf16: W transposed in float32, [k, n], for the outliers' products */
    dnnl_memory_desc_t md; /* W as oneDNN's K x N "weights", in its preferred blocked layout */
    dnnl_memory_t mem;     /* owns the reordered data */
};

static const char *dnnl_status_name(dnnl_status_t s)
{
    switch (s) {
    case dnnl_success: return "success";
    case dnnl_out_of_memory: return "out of memory";
    case dnnl_invalid_arguments: return "invalid arguments";
    case dnnl_unimplemented: return "unimplemented";
    case dnnl_iterator_ends: return "iterator ends";
    case dnnl_runtime_error: return "runtime error";
    case dnnl_not_required: return "not required";
    }
    return "unknown oneDNN status";
}

static clattn_status fail_dnnl(clattn_context *ctx, dnnl_status_t s, const char *what)
{
    return clattn__fail(ctx,
                        s == dnnl_out_of_memory ? CLATTN_ERROR_OUT_OF_HOST_MEMORY
                                                : CLATTN_ERROR_UNSUPPORTED,
                        "oneDNN: %s failed: %s (%d)", what, dnnl_status_name(s), (int)s);
}

#define DNNL_TRY(call, what)                                                                  \
    do {                                                                                      \
        dnnl_status_t s_ = (call);                                                            \
        if (s_ != dnnl_success) {                                                             \
            status = fail_dnnl(ctx, s_, what);                                                \
            goto done;                                                                        \
        }                                                                                     \
    } while (0)

static void entry_clear(matmul_entry *e)
{
    if (e->primitive)
        D(dnnl_primitive_destroy)(e->primitive);
    memset(e, 0, sizeof(*e));
}

void clattn__onednn_destroy(clattn_onednn **po)
{
    clattn_onednn *o = *po;
    if (!o)
        return;
    for (int i = 0; i < PRIMITIVES; i++)
        entry_clear(&o->entries[i]);
    for (int i = 0; i < MAPPED_BUFFERS; i++)
        if (o->mapped[i].mem)
            clReleaseMemObject(o->mapped[i].mem);
    for (int i = 0; i < ELTWISES; i++)
        if (o->eltwises[i].primitive)
            D(dnnl_primitive_destroy)(o->eltwises[i].primitive);
    if (o->stream)
        D(dnnl_stream_destroy)(o->stream);
    if (o->engine)
        D(dnnl_engine_destroy)(o->engine);
    free(o->dense);
    free(o);
    *po = NULL;
}

/* Whether the device maps its buffers in place (zero-copy: PoCL's CPU device returns the
 * buffer's own host memory): a buffer like the library's mapped twice at once gives the same
 * pointer both times, and mapped again after both unmaps the same pointer once more, where a
 * driver that maps through a staging copy gives other ones. The GEMMs are right either way: in
 * place, each buffer is mapped once (maps_in_place); otherwise every GEMM maps its buffers, and
 * a copying driver makes them pay a copy of A and C per call. */
static bool check_zero_copy(clattn_context *ctx)
{
    cl_int err;
    cl_mem probe = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE, 4096, NULL, &err);
    if (err != CL_SUCCESS)
        return false;
    void *first = clEnqueueMapBuffer(ctx->queue, probe, CL_TRUE, CL_MAP_READ, 0, 4096, 0, NULL,
                                     NULL, &err);
    void *second = err == CL_SUCCESS ? clEnqueueMapBuffer(ctx->queue, probe, CL_TRUE, CL_MAP_READ,
                                                          0, 4096, 0, NULL, NULL, &err)
                                     : NULL;
    if (second)
        clEnqueueUnmapMemObject(ctx->queue, probe, second, 0, NULL, NULL);
    if (first)
        clEnqueueUnmapMemObject(ctx->queue, probe, first, 0, NULL, NULL);
    clFinish(ctx->queue);
    void *third = second ? clEnqueueMapBuffer(ctx->queue, probe, CL_TRUE, CL_MAP_READ, 0, 4096, 0,
                                              NULL, NULL, &err)
                         : NULL;
    bool in_place = second && first == second && third == first;
    if (third)
        clEnqueueUnmapMemObject(ctx->queue, probe, third, 0, NULL, NULL);
    clFinish(ctx->queue);
    clReleaseMemObject(probe);
    if (second && !in_place)
        clattn__log(ctx, CLATTN_LOG_WARNING,
                    "oneDNN: %s maps buffers through copies (two maps of one buffer gave two "
                    "pointers): its GEMMs pay a copy of their inputs and outputs",
                    ctx->info.name);
    else if (in_place)
        clattn__log(ctx, CLATTN_LOG_INFO, "oneDNN: %s maps buffers in place (zero-copy)",
                    ctx->info.name);
    return in_place;
}

/* The context's oneDNN state, made on first use. */
static clattn_status state(clattn_context *ctx, clattn_onednn **out)
{
    if (ctx->onednn) {
        *out = ctx->onednn;
        return CLATTN_OK;
    }
    if (!clattn__onednn_available())
        return clattn__fail(ctx, CLATTN_ERROR_UNSUPPORTED, "oneDNN: %s", load_error);
    if (spin_policy_kept)
        clattn__log(ctx, CLATTN_LOG_WARNING,
                    "oneDNN: OpenMP (libgomp) was loaded before oneDNN with its busy-waiting "
                    "threads, which slow PoCL's kernels between the GEMMs: set "
                    "GOMP_SPINCOUNT=2000 (or OMP_WAIT_POLICY=passive) in the environment, or "
                    "CLATTN_TUNE=gemm_kernel=1");
    clattn_status status = CLATTN_OK;
    clattn_onednn *o = calloc(1, sizeof(*o));
    if (!o)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for oneDNN's state");
    DNNL_TRY(D(dnnl_engine_create)(&o->engine, dnnl_cpu, 0), "creating a CPU engine");
    DNNL_TRY(D(dnnl_stream_create)(&o->stream, o->engine, dnnl_stream_default_flags),
             "creating a stream");
    o->threads = ctx->info.compute_units ? (int)ctx->info.compute_units : 1;
    o->maps_in_place = check_zero_copy(ctx);
    ctx->onednn = o;
    *out = o;
    return CLATTN_OK;
done:
    clattn__onednn_destroy(&o);
    return status;
}

/* ---- the mapped buffers ---- */

/* Maps `floats` floats of `mem` from `offset` (in floats) into *ptr; blocking. */
static clattn_status map_range(clattn_context *ctx, cl_mem mem, size_t offset, size_t floats,
                               cl_map_flags flags, float **ptr)
{
    cl_int err;
    *ptr = clEnqueueMapBuffer(ctx->queue, mem, CL_TRUE, flags, offset * sizeof(float),
                              floats * sizeof(float), 0, NULL, NULL, &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "mapping a buffer of %zu floats for oneDNN", floats);
    return CLATTN_OK;
}

static clattn_status unmap_range(clattn_context *ctx, cl_mem mem, float *ptr,
                                 clattn_status status)
{
    if (!ptr)
        return status;
    cl_int err = clEnqueueUnmapMemObject(ctx->queue, mem, ptr, 0, NULL, NULL);
    if (err != CL_SUCCESS && status == CLATTN_OK)
        status = clattn__fail_cl(ctx, err, "unmapping a buffer after oneDNN");
    return status;
}

/* Lets go of the kept host addresses of buffers nobody else holds any more (the library
 * released them: a workspace that grew, a tensor destroyed), so that their memory is freed and
 * their handles can be reused; the others stay in order, packed at the front of `mapped`. */
static void forget_released(clattn_onednn *o)
{
    o->gemms_since_forget = 0;
    int kept = 0;
    for (int i = 0; i < MAPPED_BUFFERS; i++) {
        if (!o->mapped[i].mem)
            continue;
        cl_uint refs = 0;
        if (clGetMemObjectInfo(o->mapped[i].mem, CL_MEM_REFERENCE_COUNT, sizeof(refs), &refs,
                               NULL) == CL_SUCCESS &&
            refs <= 1) {
            clReleaseMemObject(o->mapped[i].mem);
            continue;
        }
        o->mapped[kept++] = o->mapped[i];
    }
    for (int i = kept; i < MAPPED_BUFFERS; i++)
        o->mapped[i].mem = NULL;
}

/* Maps `floats` floats of `mem` from `offset` (in floats) into *ptr, after the queue has
 * finished (oneDNN runs on the host, after everything queued before). Blocking: the pointer is
 * valid on return. Where the device maps in place, the buffer's kept host address (the whole
 * buffer mapped once, then unmapped: the same memory the kernels use), and no unmap is due. */
static clattn_status map(clattn_context *ctx, clattn_onednn *o, cl_mem mem, size_t offset,
                         size_t floats, cl_map_flags flags, float **ptr)
{
    cl_int err;
    if (o->maps_in_place) {
        for (int i = 0; i < MAPPED_BUFFERS && o->mapped[i].mem; i++)
            if (o->mapped[i].mem == mem) {
                *ptr = o->mapped[i].host + offset;
                return CLATTN_OK;
            }
        forget_released(o); /* a new buffer: first the room of those let go */
        int slot = -1;
        for (int i = 0; i < MAPPED_BUFFERS && slot < 0; i++)
            if (!o->mapped[i].mem)
                slot = i;
        if (slot < 0) { /* full: the oldest goes (it is mapped again if used again) */
            clReleaseMemObject(o->mapped[0].mem);
            memmove(&o->mapped[0], &o->mapped[1], sizeof(o->mapped[0]) * (MAPPED_BUFFERS - 1));
            slot = MAPPED_BUFFERS - 1;
            o->mapped[slot].mem = NULL;
        }
        size_t bytes = 0;
        if ((err = clGetMemObjectInfo(mem, CL_MEM_SIZE, sizeof(bytes), &bytes, NULL)))
            return clattn__fail_cl(ctx, err, "querying a buffer's size for oneDNN");
        float *host = clEnqueueMapBuffer(ctx->queue, mem, CL_TRUE, CL_MAP_READ | CL_MAP_WRITE, 0,
                                         bytes, 0, NULL, NULL, &err);
        if (err != CL_SUCCESS)
            return clattn__fail_cl(ctx, err, "mapping a buffer of %zu bytes for oneDNN", bytes);
        if ((err = clEnqueueUnmapMemObject(ctx->queue, mem, host, 0, NULL, NULL)) ||
            (err = clFinish(ctx->queue)))
            return clattn__fail_cl(ctx, err, "unmapping a buffer for oneDNN");
        clRetainMemObject(mem);
        o->mapped[slot].mem = mem;
        o->mapped[slot].host = host;
        *ptr = host + offset;
        return CLATTN_OK;
    }
    return map_range(ctx, mem, offset, floats, flags, ptr);
}

/* Undoes map: nothing where the device maps in place. */
static clattn_status unmap(clattn_context *ctx, const clattn_onednn *o, cl_mem mem, float *ptr,
                           clattn_status status)
{
    return o->maps_in_place ? status : unmap_range(ctx, mem, ptr, status);
}

/* Sets OpenMP's thread count for oneDNN's next parallel region: the device's compute units (the
 * cores PoCL would use), whatever the process's OpenMP default is. */
static void set_threads(const clattn_onednn *o)
{
    if (D(omp_get_max_threads)() != o->threads)
        D(omp_set_num_threads)(o->threads);
}

/* ---- weights ---- */

/* ---- int8's per-row passes, vectorised ----
 * GCC's vector extensions, 8 lanes: on any x86-64 they compile to pairs of SSE2 instructions;
 * on x86-64 the functions are also cloned for AVX2 and AVX-512 (target_clones: chosen once, by
 * the CPU, at load). Every lane computes exactly the scalar formula (no FMA: the library is built
 * as ISO C, so GCC does not contract a·b + c), so a row's results are the same bytes whatever
 * the clone, the lane or the batch it sits in. */
typedef float f32x8 __attribute__((vector_size(32)));
typedef int32_t i32x8 __attribute__((vector_size(32)));
typedef int8_t i8x32 __attribute__((vector_size(32)));
typedef int8_t i8x8 __attribute__((vector_size(8)));

#if defined(__x86_64__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define ROW_PASS __attribute__((target_clones("avx512f", "avx2", "default")))
#endif
#endif
#ifndef ROW_PASS
#define ROW_PASS
#endif

/* Macros, not functions: a function taking or returning 32-byte vectors has a different ABI
 * with and without AVX (-Wpsabi). LOAD8 reads 8 lanes from any alignment. */
#define LOAD8(v, p) memcpy(&(v), (p), sizeof(v))
/* Lane-wise a where mask is all ones, else b (C has no vector ?:); i32x8 operands. */
#define SELECT8(mask, a, b) (((mask) & (a)) | (~(mask) & (b)))

/* One element of quantize_row: to nearest, halves away from zero; |r| <= 127 (clamped anyway). */
static inline int8_t quantize_one(float x, float inverse)
{
    float r = fminf(fmaxf(x * inverse, -127.0f), 127.0f); /* an outlier's may not fit an int */
    int v = (int)(r >= 0 ? r + 0.5f : r - 0.5f);
    return (int8_t)(v > 127 ? 127 : v < -127 ? -127 : v);
}

/* The largest |x| of x[0 .. count) not above limit; *above receives how many are above it. */
ROW_PASS static float max_within(const float *x, size_t count, float limit, size_t *above)
{
    const f32x8 limit8 = (f32x8){0} + limit;
    const i32x8 magnitude = (i32x8){0} + 0x7fffffff;
    f32x8 max8 = {0};
    i32x8 above8 = {0};
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        f32x8 a;
        LOAD8(a, x + i);
        a = (f32x8)((i32x8)a & magnitude); /* |x| */
        max8 = (f32x8)SELECT8((a > max8) & (a <= limit8), (i32x8)a, (i32x8)max8);
        above8 -= a > limit8; /* true lanes are -1 */
    }
    float max = 0; /* the maximum is exact: any order of comparisons gives the same */
    *above = 0;
    for (int l = 0; l < 8; l++) {
        max = max8[l] > max ? max8[l] : max;
        *above += (size_t)above8[l];
    }
    for (; i < count; i++) {
        max = fabsf(x[i]) > max && fabsf(x[i]) <= limit ? fabsf(x[i]) : max;
        *above += fabsf(x[i]) > limit;
    }
    return max;
}

/* Quantises x[0 .. count) symmetrically to int8: q = round(x·(1 / scale)) with scale = max / 127
 * (1 where max is 0); returns the scale. Elements above max come out clamped to ±127 (the caller
 * replaces them). Per row, so a row's bytes depend on it alone. */
ROW_PASS static float quantize_row(const float *x, size_t count, int8_t *q, float max)
{
    size_t i;
    float scale = max > 0 ? max / 127.0f : 1.0f, inverse = 1.0f / scale;
    const i32x8 sign = (i32x8){0} + (int32_t)0x80000000u, top = (i32x8){0} + 127;
    const f32x8 half = (f32x8){0} + 0.5f;
    for (i = 0; i + 8 <= count; i += 8) {
        f32x8 r;
        LOAD8(r, x + i);
        r *= inverse;
        /* ±0.5 with r's sign (-0.0 → -0.5: still truncates to 0, as the scalar + 0.5 does) */
        f32x8 away = (f32x8)(((i32x8)r & sign) | (i32x8)half);
        i32x8 v = __builtin_convertvector(r + away, i32x8); /* truncates, as (int) does */
        v = SELECT8(v > top, top, v);
        v = SELECT8(v < -top, -top, v);
        /* the low byte of each lane (|v| <= 127): one byte shuffle, where GCC's
         * __builtin_convertvector to 8 bytes extracts lane by lane (__builtin_shufflevector:
         * GCC >= 12 and clang have it) */
        i8x8 b = __builtin_shufflevector((i8x32)v, (i8x32)v, 0, 4, 8, 12, 16, 20, 24, 28);
        memcpy(q + i, &b, 8);
    }
    for (; i < count; i++)
        q[i] = quantize_one(x[i], inverse);
    return scale;
}

/* ---- the outliers of int8 and bf16 ----
 * Per-token scales fail where a few input channels are far larger than the rest: MPNet's hidden
 * states have such channels, and one element at 50× the others leaves them a handful of int8
 * levels (all-mpnet-base-v2's embeddings: worst cosine 0.970 against float32 over 1000 texts).
 * bf16 takes the same outliers out, for its rounded weights times them (see add_outliers_row);
 * what follows describes int8's use.
 * So each row's outliers, the elements above OUTLIER_RMS_MULTIPLE times the row's root mean
 * square, are taken out of the int8 product (quantised as 0, and the row's scale made from the
 * others) and added back in float32: C[i, j] += x[i, c]·(scale[j]·q[j, c]) for each outlier c,
 * with the weight's own int8 column, in ascending c. As LLM.int8()'s decomposition, but chosen
 * per row, not per column across the batch, so a row's bytes still depend on that row alone.
 * At most OUTLIERS_PER_ROW: a row with more doubles its limit until it has no more (one
 * all-mpnet-base-v2 row had 17 at 8×; its rows average about one). The multiple, 8, came from
 * a simulation in PyTorch of this scheme on all-mpnet-base-v2's and all-MiniLM-L6-v2's worst
 * texts: 6×, 8×, 10×, 12×, 16× gave worst cosines 0.9919, 0.9951, 0.9926, 0.9868, 0.9934 for
 * MPNet (0.972 without), 8× and 10× 0.9977 and 0.9980 for MiniLM (0.9928 without). */
#define OUTLIER_RMS_MULTIPLE 8.0f
#define OUTLIERS_PER_ROW 32

/* OUTLIER_RMS_MULTIPLE times x[0 .. count)'s root mean square: the first limit above which its
 * elements are outliers. Infinity (no outliers) for a row with a NaN or an infinity, or whose
 * squares overflow. */
ROW_PASS static float outlier_limit(const float *x, size_t count)
{
    f32x8 sum8 = {0};
    size_t i = 0;
    for (; i + 8 <= count; i += 8) {
        f32x8 a;
        LOAD8(a, x + i);
        sum8 += a * a;
    }
    float sum = 0; /* lanes in a fixed order, then the tail: the same bytes whatever the clone */
    for (int l = 0; l < 8; l++)
        sum += sum8[l];
    for (; i < count; i++)
        sum += x[i] * x[i];
    float limit = OUTLIER_RMS_MULTIPLE * sqrtf(sum / (float)count);
    return limit < INFINITY ? limit : INFINITY; /* NaN too */
}

/* Records x's elements above `limit` (columns ascending) in columns[] and values[]. Eight at a
 * time, looking into the lanes only where one is above. */
ROW_PASS static void take_outliers(const float *x, size_t count, float limit, uint32_t *columns,
                                   float *values)
{
    const i32x8 magnitude = (i32x8){0} + 0x7fffffff;
    const f32x8 limit8 = (f32x8){0} + limit;
    size_t taken = 0, i = 0;
    for (; i + 8 <= count; i += 8) {
        f32x8 a;
        LOAD8(a, x + i);
        i32x8 above = (f32x8)((i32x8)a & magnitude) > limit8;
        uint64_t any[4];
        memcpy(any, &above, sizeof(any));
        if (!(any[0] | any[1] | any[2] | any[3]))
            continue;
        for (size_t c = i; c < i + 8; c++)
            if (fabsf(x[c]) > limit) {
                columns[taken] = (uint32_t)c;
                values[taken++] = x[c];
            }
    }
    for (size_t c = i; c < count; c++)
        if (fabsf(x[c]) > limit) {
            columns[taken] = (uint32_t)c;
            values[taken++] = x[c];
        }
}

/* Row x's outliers: their count (at most OUTLIERS_PER_ROW), columns and values; *max receives the
 * largest |x| of the others. */
static size_t row_outliers(const float *x, size_t count, float *max, uint32_t *columns,
                           float *values)
{
    size_t outliers;
    float limit = outlier_limit(x, count);
    *max = max_within(x, count, limit, &outliers);
    while (outliers > OUTLIERS_PER_ROW) { /* squares underflowed to 0: limit 0 */
        limit = limit > 0 ? 2 * limit : FLT_TRUE_MIN;
        *max = max_within(x, count, limit, &outliers);
    }
    if (outliers)
        take_outliers(x, count, limit, columns, values);
    return outliers;
}

/* W [n, k] with row stride ldb as oneDNN's weights: K x N with strides (1, ldb). */
static dnnl_status_t plain_weights_md(dnnl_memory_desc_t *md, size_t n, size_t k, size_t ldb)
{
    return D(dnnl_memory_desc_init_by_strides)(md, 2, (dnnl_dims_t){(dnnl_dim_t)k, (dnnl_dim_t)n},
                                            dnnl_f32, (dnnl_dims_t){1, (dnnl_dim_t)ldb});
}

/* The weight layout oneDNN chooses for its matmul at this (n, k): asked of a primitive for 512
 * rows; it depends on the CPU's instruction set, n and k, not on the row count (brgemm's blocks
 * of 16 rows of K by 64 columns of N on AVX-512), and every primitive is then made for it. */
static clattn_status preferred_layout(clattn_context *ctx, clattn_onednn *o, size_t n, size_t k,
                                      dnnl_data_type_t type, dnnl_memory_desc_t *out)
{
    clattn_status status = CLATTN_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_desc_t src, weights, dst;
    dnnl_matmul_desc_t desc;
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&src, 2, (dnnl_dims_t){512, (dnnl_dim_t)k}, type,
                                          dnnl_ab),
             "describing A");
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&weights, 2,
                                             (dnnl_dims_t){(dnnl_dim_t)k, (dnnl_dim_t)n}, type,
                                             dnnl_format_tag_any),
             "describing W");
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&dst, 2, (dnnl_dims_t){512, (dnnl_dim_t)n},
                                             type == dnnl_s8 ? dnnl_s32 : dnnl_f32,
                                          dnnl_ab),
             "describing C");
    DNNL_TRY(D(dnnl_matmul_desc_init)(&desc, &src, &weights, NULL, &dst), "describing a matmul");
    DNNL_TRY(D(dnnl_primitive_desc_create)(&pd, &desc, NULL, o->engine, NULL),
             "choosing a matmul");
    *out = *D(dnnl_primitive_desc_query_md)(pd, dnnl_query_weights_md, 0);
done:
    if (pd)
        D(dnnl_primitive_desc_destroy)(pd);
    return status;
}

/* Copies `from` (at from_ptr) into `to` (at to_ptr) through a reorder primitive. */
static clattn_status reorder(clattn_context *ctx, clattn_onednn *o, const dnnl_memory_desc_t *from,
                             void *from_ptr, const dnnl_memory_desc_t *to, void *to_ptr)
{
    clattn_status status = CLATTN_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_t prim = NULL;
    dnnl_memory_t src = NULL, dst = NULL;
    DNNL_TRY(D(dnnl_reorder_primitive_desc_create)(&pd, from, o->engine, to, o->engine, NULL),
             "choosing a weight reorder");
    DNNL_TRY(D(dnnl_primitive_create)(&prim, pd), "creating a weight reorder");
    DNNL_TRY(D(dnnl_memory_create)(&src, from, o->engine, from_ptr), "wrapping a weight");
    DNNL_TRY(D(dnnl_memory_create)(&dst, to, o->engine, to_ptr), "wrapping a weight");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}};
    set_threads(o);
    DNNL_TRY(D(dnnl_primitive_execute)(prim, o->stream, 2, args), "reordering a weight");
    DNNL_TRY(D(dnnl_stream_wait)(o->stream), "reordering a weight");
done:
    if (src)
        D(dnnl_memory_destroy)(src);
    if (dst)
        D(dnnl_memory_destroy)(dst);
    if (prim)
        D(dnnl_primitive_destroy)(prim);
    if (pd)
        D(dnnl_primitive_desc_destroy)(pd);
    return status;
}

clattn_status clattn__onednn_weight_create(clattn_context *ctx, size_t n, size_t k, cl_mem b,
                                           size_t b_offset, size_t ldb,
                                           clattn_onednn_weight **out)
{
    *out = NULL;
    clattn_onednn *o;
    clattn_status status = state(ctx, &o);
    if (status != CLATTN_OK)
        return status;
    clattn_onednn_weight *w = calloc(1, sizeof(*w));
    if (!w)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for a oneDNN weight [%zu, %zu]", n, k);
    w->n = n;
    w->k = k;
    w->type = ctx->precision == CLATTN_PRECISION_BF16   ? dnnl_bf16
              : ctx->precision == CLATTN_PRECISION_INT8 ? dnnl_s8
                                                        : dnnl_f32;
    int8_t *q = NULL;
    float *plain = NULL;
    dnnl_memory_desc_t from;
    if ((status = preferred_layout(ctx, o, n, k, w->type, &w->md)))
        goto done;
    DNNL_TRY(D(dnnl_memory_create)(&w->mem, &w->md, o->engine, DNNL_MEMORY_ALLOCATE),
             "allocating a reordered weight");
    DNNL_TRY(plain_weights_md(&from, n, k, ldb), "describing a weight");
    clFinish(ctx->queue);
    if ((status = map_range(ctx, b, b_offset, (n - 1) * ldb + k, CL_MAP_READ, &plain)))
        goto done;
    void *to;
    DNNL_TRY(D(dnnl_memory_get_data_handle)(w->mem, &to), "reading a weight's handle");
    if (w->type == dnnl_s8) {
        /* per output channel: q[j, l] = round(W[j, l] / scales[j]), scales[j] = max |W[j, :]| /
         * 127; into a plain int8 K x N (strides 1, k), then into oneDNN's layout */
        w->scales = malloc(n * sizeof(float));
        w->transposed = malloc(n * k);
        q = malloc(n * k);
        if (!w->scales || !w->transposed || !q) {
            status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                  "out of host memory quantising a weight [%zu, %zu]", n, k);
            goto done;
        }
        for (size_t j = 0; j < n; j++)
        {
            size_t above;
            const float *row = plain + j * ldb;
            w->scales[j] = quantize_row(row, k, q + j * k, max_within(row, k, INFINITY, &above));
        }
        for (size_t l = 0; l < k; l++)
            for (size_t j = 0; j < n; j++)
                w->transposed[l * n + j] = q[j * k + l];
        DNNL_TRY(D(dnnl_memory_desc_init_by_strides)(&from, 2,
                                                     (dnnl_dims_t){(dnnl_dim_t)k, (dnnl_dim_t)n},
                                                     dnnl_s8, (dnnl_dims_t){1, (dnnl_dim_t)k}),
                 "describing a quantised weight");
        status = reorder(ctx, o, &from, q, &w->md, to);
    } else {
        if (w->type == dnnl_bf16) {
            w->columns = malloc(n * k * sizeof(float));
            if (!w->columns) {
                status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                      "out of host memory for a weight's columns [%zu, %zu]", k,
                                      n);
                goto done;
            }
            for (size_t l = 0; l < k; l++)
                for (size_t j = 0; j < n; j++)
                    w->columns[l * n + j] = plain[j * ldb + l];
        }
        status = reorder(ctx, o, &from, plain, &w->md, to);
    }
done:
    free(q);
    status = unmap_range(ctx, b, plain, status);
    if (status != CLATTN_OK)
        clattn__onednn_weight_release(&w);
    *out = w;
    return status;
}

clattn_status clattn__onednn_weight_unpack(clattn_context *ctx, const clattn_onednn_weight *w,
                                           cl_mem dst)
{
    clattn_onednn *o;
    clattn_status status = state(ctx, &o);
    if (status != CLATTN_OK)
        return status;
    float *plain = NULL;
    dnnl_memory_desc_t to;
    void *from;
    DNNL_TRY(plain_weights_md(&to, w->n, w->k, w->k), "describing a weight");
    DNNL_TRY(D(dnnl_memory_get_data_handle)(w->mem, &from), "reading a weight's handle");
    clFinish(ctx->queue);
    if ((status = map_range(ctx, dst, 0, w->n * w->k, CL_MAP_WRITE, &plain)))
        goto done;
    status = reorder(ctx, o, &w->md, from, &to, plain);
    if (status == CLATTN_OK && w->type == dnnl_s8) /* the quantised values, scaled back */
        for (size_t j = 0; j < w->n; j++)
            for (size_t l = 0; l < w->k; l++)
                plain[j * w->k + l] *= w->scales[j];
done:
    return unmap_range(ctx, dst, plain, status);
}

void clattn__onednn_weight_release(clattn_onednn_weight **pw)
{
    clattn_onednn_weight *w = *pw;
    if (!w)
        return;
    if (w->mem)
        D(dnnl_memory_destroy)(w->mem);
    free(w->scales);
    free(w->transposed);
    free(w->columns);
    free(w);
    *pw = NULL;
}

/* ---- the product ---- */

bool clattn__onednn_fuses(const clattn_onednn_weight *w, int act)
{
    (void)w;
    /* int8 scales its products back itself (dequantize), applies ReLU there and GELU through
     * oneDNN's eltwise primitive (vectorised; PoCL's kernel calls a scalar erf per element) */
    return act == CLATTN_ACT_RELU || act == CLATTN_ACT_GELU || act == CLATTN_ACT_GELU_TANH;
}

static bool same_key(const matmul_key *a, const matmul_key *b)
{
    return a->m == b->m && a->n == b->n && a->k == b->k && a->type == b->type &&
           a->bias == b->bias && a->act == b->act;
}

/* The matmul primitive for `key` reading W in `weights`' layout: kept, or made now. */
static clattn_status primitive(clattn_context *ctx, clattn_onednn *o, const matmul_key *key,
                               const dnnl_memory_desc_t *weights, dnnl_primitive_t *out)
{
    matmul_entry *slot = &o->entries[0];
    o->calls++;
    for (int i = 0; i < PRIMITIVES; i++) {
        matmul_entry *e = &o->entries[i];
        if (e->primitive && same_key(&e->key, key) &&
            D(dnnl_memory_desc_equal)(&e->weights, weights)) {
            e->used = o->calls;
            *out = e->primitive;
            return CLATTN_OK;
        }
        if (!e->primitive ? slot->primitive != NULL : (slot->primitive && e->used < slot->used))
            slot = e; /* a free entry, else the least recently used */
    }
    entry_clear(slot);
    clattn_status status = CLATTN_OK;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_post_ops_t post_ops = NULL;
    dnnl_memory_desc_t src, bias, dst;
    dnnl_matmul_desc_t desc;
    dnnl_dim_t m = (dnnl_dim_t)key->m, n = (dnnl_dim_t)key->n, k = (dnnl_dim_t)key->k;
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&src, 2, (dnnl_dims_t){m, k}, key->type, dnnl_ab),
             "describing A");
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&dst, 2, (dnnl_dims_t){m, n},
                                             key->type == dnnl_s8 ? dnnl_s32 : dnnl_f32, dnnl_ab),
             "describing C");
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&bias, 2, (dnnl_dims_t){1, n}, dnnl_f32, dnnl_ab),
             "describing the bias");
    DNNL_TRY(D(dnnl_matmul_desc_init)(&desc, &src, weights, key->bias ? &bias : NULL, &dst),
             "describing a matmul");
    DNNL_TRY(D(dnnl_primitive_attr_create)(&attr), "creating attributes");
    if (key->act != CLATTN_ACT_NONE) {
        dnnl_alg_kind_t alg = key->act == CLATTN_ACT_RELU ? dnnl_eltwise_relu
                              : key->act == CLATTN_ACT_GELU ? dnnl_eltwise_gelu_erf
                                                            : dnnl_eltwise_gelu_tanh;
        DNNL_TRY(D(dnnl_post_ops_create)(&post_ops), "creating post-ops");
        DNNL_TRY(D(dnnl_post_ops_append_eltwise)(post_ops, 1.0f, alg, 0.0f, 0.0f),
                 "adding the activation");
        DNNL_TRY(D(dnnl_primitive_attr_set_post_ops)(attr, post_ops), "setting post-ops");
    }
    DNNL_TRY(D(dnnl_primitive_desc_create)(&pd, &desc, attr, o->engine, NULL), "choosing a matmul");
    const char *impl = "";
    D(dnnl_primitive_desc_query)(pd, dnnl_query_impl_info_str, 0, &impl);
    if (impl && strncmp(impl, "ref", 3) == 0 && !o->warned_ref) {
        o->warned_ref = true;
        clattn__log(ctx, CLATTN_LOG_WARNING,
                    "oneDNN runs a GEMM (m=%zu n=%zu k=%zu) with its slow reference matmul "
                    "(\"%s\"); the library's CPU GEMM (CLATTN_TUNE=gemm_kernel=1) may be faster",
                    key->m, key->n, key->k, impl);
    }
    DNNL_TRY(D(dnnl_primitive_create)(&slot->primitive, pd), "creating a matmul");
    slot->key = *key;
    slot->weights = *weights;
    slot->used = o->calls;
    *out = slot->primitive;
done:
    if (pd)
        D(dnnl_primitive_desc_destroy)(pd);
    if (post_ops)
        D(dnnl_post_ops_destroy)(post_ops);
    if (attr)
        D(dnnl_primitive_attr_destroy)(attr);
    if (status != CLATTN_OK)
        entry_clear(slot);
    return status;
}

/* Applies GELU (act: CLATTN_ACT_GELU, erf, or CLATTN_ACT_GELU_TANH) in place to `count` dense
 * floats at x through oneDNN's eltwise primitive: the float32 matmul's post-op algorithm, each
 * element on its own. */
static clattn_status eltwise_gelu(clattn_context *ctx, clattn_onednn *o, int act, float *x,
                                  size_t count)
{
    clattn_status status = CLATTN_OK;
    eltwise_entry *slot = &o->eltwises[0], *found = NULL;
    for (int i = 0; i < ELTWISES && !found; i++) {
        eltwise_entry *e = &o->eltwises[i];
        if (e->primitive && e->count == count && e->act == act)
            found = e;
        else if (!e->primitive ? slot->primitive != NULL
                               : (slot->primitive && e->used < slot->used))
            slot = e; /* a free entry, else the least recently used */
    }
    dnnl_primitive_desc_t pd = NULL;
    dnnl_memory_t mem = NULL;
    dnnl_memory_desc_t md;
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&md, 1, (dnnl_dims_t){(dnnl_dim_t)count}, dnnl_f32,
                                             dnnl_a),
             "describing the activation's data");
    if (!found) {
        if (slot->primitive)
            D(dnnl_primitive_destroy)(slot->primitive);
        memset(slot, 0, sizeof(*slot));
        dnnl_eltwise_desc_t desc;
        DNNL_TRY(D(dnnl_eltwise_forward_desc_init)(&desc, dnnl_forward_inference,
                                                   act == CLATTN_ACT_GELU ? dnnl_eltwise_gelu_erf
                                                                          : dnnl_eltwise_gelu_tanh,
                                                   &md, 0.0f, 0.0f),
                 "describing the activation");
        DNNL_TRY(D(dnnl_primitive_desc_create)(&pd, &desc, NULL, o->engine, NULL),
                 "choosing the activation");
        DNNL_TRY(D(dnnl_primitive_create)(&slot->primitive, pd), "creating the activation");
        slot->count = count;
        slot->act = act;
        found = slot;
    }
    found->used = ++o->calls;
    DNNL_TRY(D(dnnl_memory_create)(&mem, &md, o->engine, x), "wrapping the activation's data");
    dnnl_exec_arg_t args[2] = {{DNNL_ARG_SRC, mem}, {DNNL_ARG_DST, mem}};
    set_threads(o);
    DNNL_TRY(D(dnnl_primitive_execute)(found->primitive, o->stream, 2, args), "the activation");
    DNNL_TRY(D(dnnl_stream_wait)(o->stream), "the activation");
done:
    if (mem)
        D(dnnl_memory_destroy)(mem);
    if (pd)
        D(dnnl_primitive_desc_destroy)(pd);
    return status;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

/* o->dense with room for `floats` floats. */
static clattn_status dense_scratch(clattn_context *ctx, clattn_onednn *o, size_t floats)
{
    if (floats <= o->dense_floats)
        return CLATTN_OK;
    free(o->dense);
    o->dense_floats = 0;
    size_t bytes = (floats * sizeof(float) + 63) / 64 * 64;
    o->dense = aligned_alloc(64, bytes);
    if (!o->dense)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory for oneDNN's scratch of %zu floats", floats);
    o->dense_floats = floats;
    return CLATTN_OK;
}

/* Copies `rows` rows of `cols` floats between row strides. */
static void copy_rows(float *to, size_t ld_to, const float *from, size_t ld_from, size_t rows,
                      size_t cols)
{
    for (size_t i = 0; i < rows; i++)
        memcpy(to + i * ld_to, from + i * ld_from, cols * sizeof(float));
}

/* One row of dequantize: to[j] = from[j]·(row_scale·col_scales[j]), plus each outlier's
 * x·(col_scales[j]·q[j, c]) (q's column c is transposed's row c) in ascending c, plus bias[j]
 * (bias may be NULL), then ReLU when `relu`. Each step rounds to float as written (no FMA: ISO C),
 * so a row without outliers has the bytes of the one expression product·scale + bias. */
ROW_PASS static void dequantize_row(float *to, const int32_t *from, size_t cols, float row_scale,
                                    const float *col_scales, const int8_t *transposed,
                                    size_t outliers, const uint32_t *columns,
                                    const float *values, const float *bias, bool relu)
{
    size_t j = 0;
    for (; j + 8 <= cols; j += 8) {
        i32x8 product;
        f32x8 col_scale, v;
        LOAD8(product, from + j);
        LOAD8(col_scale, col_scales + j);
        v = __builtin_convertvector(product, f32x8) * (row_scale * col_scale);
        memcpy(to + j, &v, sizeof(v));
    }
    for (; j < cols; j++)
        to[j] = (float)from[j] * (row_scale * col_scales[j]);
    for (size_t o = 0; o < outliers; o++) {
        const int8_t *w = transposed + (size_t)columns[o] * cols;
        float x = values[o];
        for (j = 0; j + 8 <= cols; j += 8) {
            i8x8 q;
            f32x8 col_scale, v;
            LOAD8(q, w + j);
            LOAD8(col_scale, col_scales + j);
            LOAD8(v, to + j);
            v += x * (col_scale * __builtin_convertvector(q, f32x8));
            memcpy(to + j, &v, sizeof(v));
        }
        for (; j < cols; j++)
            to[j] += x * (col_scales[j] * (float)w[j]);
    }
    if (!bias && !relu)
        return;
    for (j = 0; j + 8 <= cols; j += 8) {
        f32x8 v;
        LOAD8(v, to + j);
        if (bias) {
            f32x8 b;
            LOAD8(b, bias + j);
            v += b;
        }
        if (relu)
            v = (f32x8)SELECT8(v > 0, (i32x8)v, (i32x8){0});
        memcpy(to + j, &v, sizeof(v));
    }
    for (; j < cols; j++) {
        float v = bias ? to[j] + bias[j] : to[j];
        to[j] = relu && !(v > 0) ? 0.0f : v;
    }
}

/* C[i, j] = acc[i, j]·row_scales[i]·col_scales[j] (+ row i's outliers' products) + bias[j],
 * then ReLU when `relu`, from the int32 products acc [rows, cols] into C (row stride ldc);
 * outliers[i] is row i's count, its columns and values OUTLIERS_PER_ROW apart. */
ROW_PASS static void dequantize(float *c, size_t ldc, const int32_t *acc, size_t rows, size_t cols,
                                const float *row_scales, const float *col_scales,
                                const float *bias, bool relu, const int8_t *transposed,
                                const uint32_t *outliers, const uint32_t *columns,
                                const float *values)
{
    for (size_t i = 0; i < rows; i++)
        dequantize_row(c + i * ldc, acc + i * cols, cols, row_scales[i], col_scales, transposed,
                       outliers[i], columns + i * OUTLIERS_PER_ROW, values + i * OUTLIERS_PER_ROW,
                       bias, relu);
}

/* One float's bits rounded to bfloat16, to nearest even (NaN kept a NaN, made quiet). */
static inline uint16_t bf16_one(uint32_t u)
{
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

typedef uint32_t u32x8 __attribute__((vector_size(32)));
typedef uint16_t u16x16 __attribute__((vector_size(32)));
typedef uint16_t u16x8 __attribute__((vector_size(16)));

/* Rounds `rows` rows of `cols` floats (row stride ld_from) to bfloat16 as bf16_one, into `to`
 * (dense, row stride cols). */
ROW_PASS static void to_bf16_rows(void *to, const float *from, size_t ld_from, size_t rows,
                                  size_t cols)
{
    uint16_t *out = to;
    const u32x8 magnitude = (u32x8){0} + 0x7fffffffu, infinity = (u32x8){0} + 0x7f800000u;
    for (size_t i = 0; i < rows; i++) {
        const float *x = from + i * ld_from;
        uint16_t *y = out + i * cols;
        size_t j = 0;
        for (; j + 8 <= cols; j += 8) {
            u32x8 u;
            LOAD8(u, x + j);
            u32x8 nan = (u32x8)((u & magnitude) > infinity);
            u32x8 r = SELECT8(nan, (u >> 16) | 0x40u, (u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
            /* the low halves */
            u16x8 h = __builtin_shufflevector((u16x16)r, (u16x16)r, 0, 2, 4, 6, 8, 10, 12, 14);
            memcpy(y + j, &h, 16);
        }
        for (; j < cols; j++) {
            uint32_t u;
            memcpy(&u, &x[j], sizeof(u));
            y[j] = bf16_one(u);
        }
    }
}

/* bf16's outliers back into C's row `to` [cols]: to[j] += x·W[j, c] for each (ascending c, W's
 * column c is columns' row c, float32), then ReLU (on every row) when `relu`. */
ROW_PASS static void add_outliers_row(float *to, size_t cols, const float *columns,
                                      size_t outliers, const uint32_t *at, const float *values,
                                      bool relu)
{
    size_t j;
    for (size_t o = 0; o < outliers; o++) {
        const float *w = columns + (size_t)at[o] * cols;
        float x = values[o];
        for (j = 0; j + 8 <= cols; j += 8) {
            f32x8 v, c;
            LOAD8(v, to + j);
            LOAD8(c, w + j);
            v += x * c;
            memcpy(to + j, &v, sizeof(v));
        }
        for (; j < cols; j++)
            to[j] += x * w[j];
    }
    if (!relu)
        return;
    for (j = 0; j + 8 <= cols; j += 8) {
        f32x8 v;
        LOAD8(v, to + j);
        v = (f32x8)SELECT8(v > 0, (i32x8)v, (i32x8){0});
        memcpy(to + j, &v, sizeof(v));
    }
    for (; j < cols; j++)
        to[j] = to[j] > 0 ? to[j] : 0.0f;
}

/* One of the passes over the rows on OpenMP's threads: int8's quantisation of A or its scaling
 * back of the products, bf16's rounding of A or its outliers' products. */
typedef enum row_pass_kind {
    PASS_QUANTIZE,
    PASS_DEQUANTIZE,
    PASS_TO_BF16,
    PASS_BF16_OUTLIERS
} row_pass_kind;

typedef struct row_pass {
    row_pass_kind kind;
    size_t m, n, k;
    const float *from; /* quantize, to bf16: A, row stride ld_from */
    size_t ld_from;
    void *q;           /* quantize: int8 [m, k]; to bf16: bfloat16 [m, k] */
    float *row_scales; /* [m] */
    float *c;          /* dequantize, bf16 outliers: C, row stride ldc */
    size_t ldc;
    const int32_t *acc;       /* dequantize: [m, n] */
    const float *col_scales;  /* [n] */
    const float *bias;        /* [n] or NULL */
    bool relu;                /* dequantize, bf16 outliers: ReLU after the bias */
    /* The outliers (see outlier_limit): per row their count [m], and OUTLIERS_PER_ROW slots
     * of columns and values [m, OUTLIERS_PER_ROW]; written by quantize and to bf16, read by
     * dequantize and bf16 outliers */
    uint32_t *outliers;
    uint32_t *outlier_columns;
    float *outlier_values;
    const int8_t *transposed; /* dequantize: the weight's q transposed [k, n] */
    const float *columns;     /* bf16 outliers: the weight transposed [k, n] */
} row_pass;

/* The rows of OpenMP thread omp_get_thread_num() out of omp_get_num_threads(): each row's result
 * is its own, whichever thread computes it. */
static void row_pass_rows(void *data)
{
    const row_pass *p = data;
    size_t t = (size_t)D(omp_get_thread_num)(), nt = (size_t)D(omp_get_num_threads)();
    size_t r0 = p->m * t / nt, r1 = p->m * (t + 1) / nt;
    if (p->kind == PASS_TO_BF16) {
        to_bf16_rows((uint16_t *)p->q + r0 * p->k, p->from + r0 * p->ld_from, p->ld_from,
                     r1 - r0, p->k);
        for (size_t i = r0; i < r1; i++) {
            uint32_t *at = p->outlier_columns + i * OUTLIERS_PER_ROW;
            float max;
            size_t outliers = row_outliers(p->from + i * p->ld_from, p->k, &max, at,
                                           p->outlier_values + i * OUTLIERS_PER_ROW);
            p->outliers[i] = (uint32_t)outliers;
            for (size_t o = 0; o < outliers; o++)
                ((uint16_t *)p->q)[i * p->k + at[o]] = 0;
        }
    } else if (p->kind == PASS_QUANTIZE) {
        for (size_t i = r0; i < r1; i++) {
            const float *x = p->from + i * p->ld_from;
            int8_t *q = (int8_t *)p->q + i * p->k;
            uint32_t *at = p->outlier_columns + i * OUTLIERS_PER_ROW;
            float max;
            size_t outliers = row_outliers(x, p->k, &max, at,
                                           p->outlier_values + i * OUTLIERS_PER_ROW);
            p->row_scales[i] = quantize_row(x, p->k, q, max);
            p->outliers[i] = (uint32_t)outliers;
            for (size_t o = 0; o < outliers; o++)
                q[at[o]] = 0;
        }
    } else if (p->kind == PASS_BF16_OUTLIERS) {
        for (size_t i = r0; i < r1; i++)
            add_outliers_row(p->c + i * p->ldc, p->n, p->columns, p->outliers[i],
                             p->outlier_columns + i * OUTLIERS_PER_ROW,
                             p->outlier_values + i * OUTLIERS_PER_ROW, p->relu);
    } else
        dequantize(p->c + r0 * p->ldc, p->ldc, p->acc + r0 * p->n, r1 - r0, p->n,
                   p->row_scales + r0, p->col_scales, p->bias, p->relu, p->transposed,
                   p->outliers + r0, p->outlier_columns + r0 * OUTLIERS_PER_ROW,
                   p->outlier_values + r0 * OUTLIERS_PER_ROW);
}

static void run_pass(const clattn_onednn *o, row_pass *p)
{
    D(GOMP_parallel)(row_pass_rows, p, (unsigned)o->threads, 0);
}

clattn_status clattn__onednn_run(clattn_context *ctx, size_t m, cl_mem a, size_t a_offset,
                                 size_t lda, const clattn_onednn_weight *w, cl_mem bias,
                                 size_t bias_offset, int act, cl_mem c, size_t c_offset,
                                 size_t ldc, double *ms)
{
    *ms = 0;
    size_t n = w->n, k = w->k;
    if (m == 0 || n == 0 || k == 0)
        return CLATTN_OK;
    clattn_onednn *o;
    clattn_status status = state(ctx, &o);
    if (status != CLATTN_OK)
        return status;
    /* oneDNN 2.6's brgemm matmul takes dense A and C only (with a row stride it would fall back
     * to its reference matmul, or, for weights in the plain layout, to its jit GEMM): strided ones
     * (a gated feed-forward's halves) go through a dense copy, O(m·(k + n)) beside the product's
     * O(m·n·k), and every row is still summed by the same kernel. */
    /* With bfloat16 weights A goes in as bfloat16 too (oneDNN 2.6 has no f32 x bf16 matmul):
     * rounded into the scratch, per element, so still the same bytes whatever the batch. Each
     * row's outliers (as int8's) go in as 0, and their products are added afterwards in float32
     * with the float32 weights: bf16's rounding of a weight times an outlier was what cost
     * all-mpnet-base-v2 most. So the activation is not fused for bf16: ReLU comes with the
     * outliers' pass, GELU by oneDNN's eltwise primitive, as int8's. */
    /* int8: A quantised per row (dynamic, per token) into the scratch with its scales, the
     * product into an int32 scratch, then scaled back with the weight's per-channel scales and
     * the bias here, ReLU with them, GELU by oneDNN's eltwise primitive after (oneDNN 2.6 takes
     * no per-row runtime scales). */
    bool bf16 = w->type == dnnl_bf16, int8 = w->type == dnnl_s8;
    bool dense_a = lda == k && !bf16 && !int8, dense_c = ldc == n && !int8;
    /* int8's and bf16's part: row scales [m] (int8), outlier counts [m], outlier columns and
     * values [m, OUTLIERS_PER_ROW] each, then the int8 or bfloat16 rows [m, k] */
    size_t outlier_floats = 2 * m + 2 * m * OUTLIERS_PER_ROW;
    size_t a_floats = dense_a ? 0
                      : bf16  ? outlier_floats + (m * k + 1) / 2
                      : int8  ? outlier_floats + (m * k + 3) / 4
                              : m * k;
    a_floats = (a_floats + 15) / 16 * 16; /* C's part 64-byte aligned */
    if (!dense_a || !dense_c)
        if ((status = dense_scratch(ctx, o, a_floats + (dense_c ? 0 : m * n))))
            return status;
    matmul_key key = {m, n, k, w->type, bias != NULL && !int8,
                      !int8 && !bf16 && clattn__onednn_fuses(w, act) ? act : CLATTN_ACT_NONE};
    dnnl_primitive_t prim = NULL;
    if ((status = primitive(ctx, o, &key, &w->md, &prim)))
        return status;

    float *pa = NULL, *pc = NULL, *pbias = NULL;
    dnnl_memory_t ma = NULL, mc = NULL, mbias = NULL;
    cl_int err = clFinish(ctx->queue);
    /* timed from here: the wait above is the time of the kernels queued before (their events
     * count it in the profile) */
    double start = now_ms();
    if (err != CL_SUCCESS) {
        status = clattn__fail_cl(ctx, err, "finishing the queue before a oneDNN GEMM");
        goto done;
    }
    if (o->maps_in_place && ++o->gemms_since_forget >= FORGET_EVERY)
        forget_released(o);
    if ((status = map(ctx, o, a, a_offset, (m - 1) * lda + k, CL_MAP_READ, &pa)) ||
        (status = map(ctx, o, c, c_offset, (m - 1) * ldc + n, CL_MAP_WRITE, &pc)) ||
        (bias && (status = map(ctx, o, bias, bias_offset, n, CL_MAP_READ, &pbias))))
        goto done;
    void *src_ptr = pa;
    float *dst_ptr = pc;
    float *row_scales = NULL; /* int8: A[i, :] ≈ row_scales[i]·q[i, :] + its outliers */
    uint32_t *outliers = NULL, *outlier_columns = NULL;
    float *outlier_values = NULL;
    if (bf16 || int8) {
        row_scales = o->dense;
        outliers = (uint32_t *)(o->dense + m);
        outlier_columns = (uint32_t *)(o->dense + 2 * m);
        outlier_values = o->dense + 2 * m + m * OUTLIERS_PER_ROW;
        src_ptr = o->dense + outlier_floats;
    }
    if (bf16) {
        row_pass pass = {.kind = PASS_TO_BF16, .m = m, .k = k, .from = pa, .ld_from = lda,
                          .q = src_ptr, .outliers = outliers, .outlier_columns = outlier_columns,
                          .outlier_values = outlier_values};
        run_pass(o, &pass);
    } else if (int8) {
        row_pass pass = {.kind = PASS_QUANTIZE, .m = m, .k = k, .from = pa, .ld_from = lda,
                          .q = src_ptr, .row_scales = row_scales, .outliers = outliers,
                          .outlier_columns = outlier_columns, .outlier_values = outlier_values};
        run_pass(o, &pass);
    } else if (!dense_a) {
        src_ptr = o->dense;
        copy_rows(o->dense, k, pa, lda, m, k);
    }
    if (!dense_c)
        dst_ptr = o->dense + a_floats;
    dnnl_memory_desc_t src, dst, bias_md;
    dnnl_dim_t dm = (dnnl_dim_t)m, dn = (dnnl_dim_t)n, dk = (dnnl_dim_t)k;
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&src, 2, (dnnl_dims_t){dm, dk}, w->type, dnnl_ab),
             "describing A");
    DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&dst, 2, (dnnl_dims_t){dm, dn},
                                             int8 ? dnnl_s32 : dnnl_f32, dnnl_ab),
             "describing C");
    DNNL_TRY(D(dnnl_memory_create)(&ma, &src, o->engine, src_ptr), "wrapping A");
    DNNL_TRY(D(dnnl_memory_create)(&mc, &dst, o->engine, dst_ptr), "wrapping C");
    dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, ma}, {DNNL_ARG_WEIGHTS, w->mem}, {DNNL_ARG_DST, mc}};
    int nargs = 3;
    if (bias && !int8) {
        DNNL_TRY(D(dnnl_memory_desc_init_by_tag)(&bias_md, 2, (dnnl_dims_t){1, dn}, dnnl_f32,
                                                 dnnl_ab),
                 "describing the bias");
        DNNL_TRY(D(dnnl_memory_create)(&mbias, &bias_md, o->engine, pbias), "wrapping the bias");
        args[nargs++] = (dnnl_exec_arg_t){DNNL_ARG_BIAS, mbias};
    }
    set_threads(o);
    DNNL_TRY(D(dnnl_primitive_execute)(prim, o->stream, nargs, args), "a matmul");
    DNNL_TRY(D(dnnl_stream_wait)(o->stream), "a matmul");
    if (int8) {
        /* scaled back into C, or, for GELU into a strided C, into the products' own scratch
         * (float over int32, row by row) so that the activation runs on dense rows */
        bool gelu = act == CLATTN_ACT_GELU || act == CLATTN_ACT_GELU_TANH;
        bool via_scratch = gelu && ldc != n;
        float *scaled = via_scratch ? dst_ptr : pc;
        row_pass pass = {.kind = PASS_DEQUANTIZE, .m = m, .n = n, .c = scaled,
                          .ldc = via_scratch ? n : ldc, .acc = (const int32_t *)dst_ptr,
                          .row_scales = row_scales, .col_scales = w->scales, .bias = pbias,
                          .relu = act == CLATTN_ACT_RELU, .outliers = outliers,
                          .outlier_columns = outlier_columns, .outlier_values = outlier_values,
                          .transposed = w->transposed};
        run_pass(o, &pass);
        if (gelu && (status = eltwise_gelu(ctx, o, act, scaled, m * n)))
            goto done;
        if (via_scratch)
            copy_rows(pc, ldc, scaled, n, m, n);
    } else if (bf16) {
        /* the outliers and ReLU on C's rows (dense: C itself or the scratch), GELU on them all */
        bool gelu = act == CLATTN_ACT_GELU || act == CLATTN_ACT_GELU_TANH;
        row_pass pass = {.kind = PASS_BF16_OUTLIERS, .m = m, .n = n, .c = dst_ptr, .ldc = n,
                          .relu = act == CLATTN_ACT_RELU, .outliers = outliers,
                          .outlier_columns = outlier_columns, .outlier_values = outlier_values,
                          .columns = w->columns};
        run_pass(o, &pass);
        if (gelu && (status = eltwise_gelu(ctx, o, act, dst_ptr, m * n)))
            goto done;
        if (!dense_c)
            copy_rows(pc, ldc, dst_ptr, n, m, n);
    } else if (!dense_c) {
        copy_rows(pc, ldc, dst_ptr, n, m, n);
    }
done:
    if (ma)
        D(dnnl_memory_destroy)(ma);
    if (mc)
        D(dnnl_memory_destroy)(mc);
    if (mbias)
        D(dnnl_memory_destroy)(mbias);
    status = unmap(ctx, o, a, pa, status);
    status = unmap(ctx, o, c, pc, status);
    status = unmap(ctx, o, bias, pbias, status);
    *ms = now_ms() - start;
    return status;
}
