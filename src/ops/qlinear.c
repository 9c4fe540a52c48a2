/* Linear layers on quantised weights: the program, weight upload, and the two paths' launches. */
#include "qlinear.h"

#include "base/kernels.h"
#include "formats/gguf.h"
#include "runtime/buffers.h"
#include "runtime/context_internal.h"
#include "runtime/env_tuning.h"
#include "runtime/host_cpu.h"
#include "runtime/launch.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern const clattn_embedded_source clattn__qlinear_sources[];

/* The types with kernels: ggml's number, the kernels' suffix, the block. */
typedef struct qtype {
    uint32_t type;
    const char *name;
    size_t block_elements, block_bytes;
} qtype;

static const qtype qtypes[] = {
    {CLATTN_GGML_F32, "f32", 16, 64},       {CLATTN_GGML_F16, "f16", 16, 32},
    {CLATTN_GGML_BF16, "bf16", 16, 32},     {CLATTN_GGML_Q4_0, "q4_0", 32, 18},
    {CLATTN_GGML_Q4_1, "q4_1", 32, 20},     {CLATTN_GGML_Q5_0, "q5_0", 32, 22},
    {CLATTN_GGML_Q5_1, "q5_1", 32, 24},     {CLATTN_GGML_Q8_0, "q8_0", 32, 34},
    {CLATTN_GGML_Q4_K, "q4_k", 256, 144},   {CLATTN_GGML_Q5_K, "q5_k", 256, 176},
    {CLATTN_GGML_Q6_K, "q6_k", 256, 210},
};
#define QTYPE_COUNT (sizeof(qtypes) / sizeof(qtypes[0]))

/* The kinds of kernel per type, in the order of their names' middle parts. */
enum { KIND_MV, KIND_MM, KIND_SWIGLU_MV, KIND_SWIGLU_MM, KIND_COUNT };
static const char *const kind_names[KIND_COUNT] = {"mv", "mm", "swiglu_mv", "swiglu_mm"};

struct clattn_qlinear_program {
    cl_program program;    /* cl/qlinear.cl */
    cl_program i8_program; /* cl/qlinear.cl's helpers and cl/qlinear_int8.cl: built when the
                            * activations are first set to CLATTN_QLINEAR_INT8 */
    char options[1536];    /* both programs' build options */
    cl_kernel kernels[QTYPE_COUNT][KIND_COUNT];    /* float32 activations */
    cl_kernel i8_kernels[QTYPE_COUNT][KIND_COUNT]; /* 8-bit activations (the block types) */
    cl_kernel staged[QTYPE_COUNT][2]; /* clattn_qlinear_{mm,swiglu_mm}_staged_<type> */
    cl_kernel quantize;                            /* clattn_qlinear_quantize */
    cl_kernel glu;                                 /* clattn_qlinear_glu */
    clattn_qlinear_activations activations;
    /* The quantised rows of x for the 8-bit kernels: room for `act_values` values; and the
     * 512-bit K-quant tiles' copy of their sums and scales (act_t, act_t_bytes: xt_wanted). */
    cl_mem act_q, act_d, act_s, act_t;
    size_t act_values, act_t_bytes;
    /* The rows the scratch holds quantised by another kernel (clattn__qlinear_prequantize):
     * calls on exactly them skip their quantisation. pre_x NULL: none. */
    cl_mem pre_x;
    size_t pre_offset, pre_ldx, pre_m, pre_k, pre_block;
    clattn_qlinear_params params;
    size_t x_cache_bytes; /* the rows of x one matrix-matrix work-item takes: a cache's share */
    size_t stage_x_bytes; /* the same on the staged path (more rows share one decoding) */
    size_t local_bytes;   /* the device's local memory (CL_DEVICE_LOCAL_MEM_SIZE) */
    size_t compute_units;
};

/* The most chunk-rows one matrix-vector work-item walks when it takes several column tiles
 * (clattn__qlinear_path). */
#define MV_ITEM_WORK 4096

/* CPUs: the tiles prefetch their weight rows this many cache lines ahead (p.prefetch_bytes; the
 * comment above derive_params says why). */
#define PREFETCH_LINES 32

/* Types of at least this many bits per weight take the wide types' tiles (mv_cols_wide,
 * mm_rows_wide × mm_cols_wide; the others mv_cols, mm_rows × mm_cols). */
#define WIDE_BITS_PER_WEIGHT_X2 13 /* 6.5 bits: Q6_K, Q8_0, F16, BF16, F32 */

static int qtype_wide(const qtype *t)
{
    return t->block_bytes * 16 >= WIDE_BITS_PER_WEIGHT_X2 * t->block_elements;
}

static unsigned mv_cols_of(const clattn_qlinear_params *p, const qtype *t)
{
    return qtype_wide(t) ? p->mv_cols_wide : p->mv_cols;
}

/* The fused SwiGLU's matrix–vector columns of a type: mv_swiglu_cols for the 32-value types
 * under 6.5 bits per weight, else half the plain tile's (its weight rows, rounded up). */
static unsigned mv_swiglu_cols_of(const clattn_qlinear_params *p, const qtype *t)
{
    if (t->block_elements == 32 && !qtype_wide(t))
        return p->mv_swiglu_cols;
    return (mv_cols_of(p, t) + 1) / 2;
}

/* The matrix–matrix tile of a type, with float32 activations. */
static unsigned mm_rows_of(const clattn_qlinear_params *p, const qtype *t)
{
    return qtype_wide(t) ? p->mm_rows_wide : p->mm_rows;
}

static unsigned mm_cols_of(const clattn_qlinear_params *p, const qtype *t)
{
    return qtype_wide(t) ? p->mm_cols_wide : p->mm_cols;
}

/* The block types (32 or 256 values a block) have 8-bit-activation kernels; F32, F16 and BF16
 * (16-value "blocks") do not. */
static int qtype_int8(const qtype *t)
{
    return t->block_elements >= 32;
}

static const qtype *find_qtype(uint32_t type, size_t *index)
{
    for (size_t i = 0; i < QTYPE_COUNT; i++)
        if (qtypes[i].type == type) {
            if (index)
                *index = i;
            return &qtypes[i];
        }
    return NULL;
}

int clattn__qlinear_type_int8(uint32_t type)
{
    const qtype *t = find_qtype(type, NULL);
    return t && qtype_int8(t);
}

int clattn__qlinear_type_supported(uint32_t type, size_t *block_elements, size_t *block_bytes)
{
    const qtype *t = find_qtype(type, NULL);
    if (t && block_elements)
        *block_elements = t->block_elements;
    if (t && block_bytes)
        *block_bytes = t->block_bytes;
    return t != NULL;
}

/* Whether the 8-bit kernels may be compiled for AVX512-VNNI (cl/qlinear_int8.cl's QI_VNNI): on
 * PoCL's CPU device, whose kernels run on this process's CPU, with AVX-512 (PoCL's native float
 * width 16) and the CPU's AVX512_VNNI (CPUID leaf 7, subleaf 0, ECX bit 11). */
static bool vnni_available(const clattn_context *ctx, cl_uint native)
{
    return clattn__is_pocl_cpu(&ctx->info) && native >= 16 &&
           clattn__cpu_has(CLATTN_CPU_AVX512_VNNI);
}

/*
 * Tiles from device facts. Each tile keeps rows × cols 16-wide accumulators, one x vector and
 * cols decoded weight vectors in registers: with 32 vector registers (AVX-512, which PoCL
 * reports as a native float width of 16) the matrix–matrix tile is 6 × 4 for the types of 6.5
 * bits per weight or more (24 accumulators; decoding a weight chunk costs about five
 * operations, so more rows than columns share it) and 8 × 2 for the narrower types, whose
 * decoding costs more per value (nibbles, and the K-quants' sub-block scales) and is then
 * shared by more rows; with 16 registers 3 × 4 for all. Measured on a 2-core Intel Xeon
 * (AVX-512) through PoCL, prompts of 512 tokens, float32 activations, the model's every tile
 * 6 × 4 against 8 × 2: SmolLM2-135M Q4_1 950 against 790 ms (10 × 2 775, 12 × 2 943, 8 × 3
 * 922, 6 × 3 875), the Qwen3-0.6B-shaped Q4_K_M 3190 against 2962 ms; Q8_0 files 2–7 % slower
 * in 8 × 2. The matrix–vector path reads each weight row once for all rows of x
 * (groups of 4 rows, then single rows) and takes m up to 32. Its tiles are one column (one
 * weight row) for every type: a work-item then reads its run of weight rows as one stream in
 * memory order, which is what a CPU's prefetcher follows (a decode step's rows are short —
 * 360 bytes for a Q4_1 row of 576 — too short for four interleaved streams to train it), and
 * the kernel converts the float16 scales of four consecutive blocks in one vector operation.
 * On CPUs the tiles also prefetch their weight rows PREFETCH_LINES cache lines ahead, one
 * prefetch per line (the kernels' QL_PREFETCH_SPAN; 32 lines, 2 KiB of 64-byte lines, about
 * what one core's share of the bandwidth brings in during a memory latency, with margin): the
 * hardware prefetchers alone left the decode kernels' loads waiting on memory. Measured on a
 * 2-core Intel Xeon (AVX-512, AMX) VM through PoCL: SmolLM2-135M Q4_1 decode 63 → 95–101
 * tokens/s (1 KiB ahead 95, 2 KiB 92–101, 4 KiB 95, 512 bytes 84, one prefetch per tile step
 * instead of per line 90).
 * Measured on PoCL's CPU device (bench/qlinear.c --cold, and SmolLM2's decode steps): Q4_1 rows
 * of 576 took 0.06 ms per 576 rows in tiles of one column against 0.10 ms in tiles of four, the
 * model's decode step about 13 % less time; the Q8_0 output projection twice the CPU time in
 * tiles of four. (mv_cols_wide, for types of 6.5 bits per weight or more, stays a separate knob.)
 * The fused SwiGLU's tile reads two weight rows a column (gate and up); for Q4_0, Q4_1, Q5_0
 * and Q5_1 it takes two columns with 32 registers (mv_swiglu_cols: four rows, four chains of
 * fused multiply-adds in flight): SmolLM2-135M Q4_1's SwiGLU kernels 3.0 → 2.7 ms per decode
 * step in float32 (2.8 → 2.4 in int8) on the Xeon; the K-quants' (Q4_K: 15 % slower at m = 4
 * and 16) and the wide types' (Qwen3-shaped Q8_0: 5 % slower) keep one.
 */
static clattn_qlinear_params derive_params(const clattn_context *ctx)
{
    cl_device_id device = ctx->device;
    cl_uint native = 0, line = 0;
    cl_device_type type = 0;
    clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT, sizeof(native), &native, NULL);
    clGetDeviceInfo(device, CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE, sizeof(line), &line, NULL);
    clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof(type), &type, NULL);
    clattn_qlinear_params p;
    p.mv_rows = 4;
    p.mv_cols = 1;
    p.mv_cols_wide = 1;
    p.mv_swiglu_cols = native >= 16 ? 2 : 1;
    p.mm_rows = native >= 16 ? 8 : 3;
    p.mm_cols = native >= 16 ? 2 : 4;
    p.mm_rows_wide = native >= 16 ? 6 : 3;
    p.mm_cols_wide = 4;
    p.mv_max_m = 32;
    p.mm_item_rows = 0;
    p.mv_items = 0;
    /* The 8-bit activations' matrix–matrix tile (cl/qlinear_int8.cl's QI_MM_R × QI_MM_C): each
     * (row, column) pair keeps two 8-lane accumulators (integer and float). 8 × 2 with 32 vector
     * registers (bench/qlinear --model qwen3 --m 512 --int8: the fastest of 4×2, 2×4, 6×2, 4×4,
     * 8×1, 8×2, 8×3, 12×2, 16×1 and 3×3 on most shapes), 4 × 2 with 16. */
    p.mm8_rows = native >= 16 ? 8 : 4;
    p.mm8_cols = 2;
    /* The staged matrix-matrix path (cl/qlinear.cl's clattn_qlinear_mm_staged_<type>): where
     * local memory is ordinary cached memory, a work-item's weight rows decoded once into it
     * and read back as floats by all its row tiles cost less than decoding them in every tile
     * (512-token prompts on a 2-core Xeon through PoCL: the Qwen3-shaped Q4_K_M 165 -> 260
     * tokens/s, SmolLM2 Q4_1 670 -> 1100); a GPU's local memory is scarce and shared by the
     * work-items of a compute unit, so CPU devices only (Mesa's rusticl reports CL_GLOBAL for
     * its GPUs too). Its tile, the same for every type (the inner loop reads
     * floats whatever the type), is 6 x 4 with 32 registers (4 x 6, 5 x 4, 4 x 5: within the
     * noise; 8 x 3, 4 x 4: slower), 3 x 4 with 16. */
    cl_device_local_mem_type local_type = CL_LOCAL;
    clGetDeviceInfo(device, CL_DEVICE_LOCAL_MEM_TYPE, sizeof(local_type), &local_type, NULL);
    p.mm_stage = local_type == CL_GLOBAL && (type & CL_DEVICE_TYPE_CPU);
    p.mms_rows = native >= 16 ? 6 : 3;
    p.mms_cols = 4;
    p.line_bytes = line >= 16 && line <= 4096 ? line : 64;
    p.prefetch_bytes = (type & CL_DEVICE_TYPE_CPU) ? PREFETCH_LINES * p.line_bytes : 0;
    p.vnni = vnni_available(ctx, native);
    return p;
}

/* CLATTN_QLINEAR="mvr=4,mvc=1,mvcw=1,mvsc=2,mvi=0,mmr=8,mmc=2,mmrw=6,mmcw=4,mvmax=32,mmi=0,
 * mm8r=8,mm8c=2,pf=2048,vnni=1,mms=1,mmsr=6,mmsc=4" (runtime/env_tuning.h: a pair it cannot read
 * is an error naming it). */
static clattn_status env_override(clattn_qlinear_params *p, char *error, size_t error_size)
{
    const clattn_env_tuning_key keys[] = {
        {"mvr", &p->mv_rows, 1, 16},          {"mvc", &p->mv_cols, 1, 16},
        {"mvcw", &p->mv_cols_wide, 1, 16},    {"mvi", &p->mv_items, 0, UINT_MAX},
        {"mvsc", &p->mv_swiglu_cols, 1, 16},
        {"mmr", &p->mm_rows, 1, 16},          {"mmc", &p->mm_cols, 1, 16},
        {"mmrw", &p->mm_rows_wide, 1, 16},    {"mmcw", &p->mm_cols_wide, 1, 16},
        {"mvmax", &p->mv_max_m, 0, UINT_MAX}, {"mmi", &p->mm_item_rows, 0, UINT_MAX},
        {"mm8r", &p->mm8_rows, 1, 16},        {"mm8c", &p->mm8_cols, 1, 16},
        {"pf", &p->prefetch_bytes, 0, 1u << 20}, {"vnni", &p->vnni, 0, 1},
        {"mms", &p->mm_stage, 0, 1},          {"mmsr", &p->mms_rows, 1, 16},
        {"mmsc", &p->mms_cols, 1, 16},
    };
    return clattn__env_tuning_read("CLATTN_QLINEAR", keys, sizeof(keys) / sizeof(keys[0]), error,
                                   error_size);
}

/* The local memory a staged matrix-matrix work-item takes: its weight rows (two per output
 * column with SwiGLU) decoded to floats. */
static size_t stage_bytes(size_t k, size_t cols, bool swiglu)
{
    return (swiglu ? 2 * cols : cols) * k * sizeof(float);
}

bool clattn__qlinear_mm_staged(const clattn_qlinear_program *prog, size_t k, bool swiglu)
{
    const clattn_qlinear_params *p = &prog->params;
    size_t cols = swiglu ? (p->mms_cols + 1) / 2 : p->mms_cols;
    return p->mm_stage && stage_bytes(k, cols, swiglu) <= prog->local_bytes;
}

/* The 8-bit rows' scratch released (none held after; the rows it held are forgotten). */
static void release_scratch(clattn_qlinear_program *prog)
{
    cl_mem act[4] = {prog->act_q, prog->act_d, prog->act_s, prog->act_t};
    for (size_t i = 0; i < 4; i++)
        if (act[i])
            clReleaseMemObject(act[i]);
    prog->act_q = prog->act_d = prog->act_s = prog->act_t = NULL;
    prog->act_values = prog->act_t_bytes = 0;
    prog->pre_x = NULL;
}

void clattn__qlinear_program_release(clattn_qlinear_program *prog)
{
    if (!prog)
        return;
    for (size_t i = 0; i < QTYPE_COUNT; i++)
        for (size_t kind = 0; kind < KIND_COUNT; kind++) {
            if (prog->kernels[i][kind])
                clReleaseKernel(prog->kernels[i][kind]);
            if (prog->i8_kernels[i][kind])
                clReleaseKernel(prog->i8_kernels[i][kind]);
        }
    for (size_t i = 0; i < QTYPE_COUNT; i++)
        for (size_t j = 0; j < 2; j++)
            if (prog->staged[i][j])
                clReleaseKernel(prog->staged[i][j]);
    if (prog->quantize)
        clReleaseKernel(prog->quantize);
    if (prog->glu)
        clReleaseKernel(prog->glu);
    release_scratch(prog);
    if (prog->program)
        clReleaseProgram(prog->program);
    if (prog->i8_program)
        clReleaseProgram(prog->i8_program);
    free(prog);
}

clattn_qlinear_params clattn__qlinear_params(const clattn_qlinear_program *prog)
{
    return prog->params;
}

const char *clattn__qlinear_build_options(const clattn_qlinear_program *prog)
{
    return prog->options;
}

/* clattn_qlinear_<prefix><kind>_<type> of `program` into *out. */
static clattn_status create_kernel(clattn_context *ctx, const char *fn, cl_program program,
                                   const char *prefix, const char *kind, const qtype *t,
                                   cl_kernel *out)
{
    char name[48];
    cl_int err;
    snprintf(name, sizeof(name), "clattn_qlinear_%s%s_%s", prefix, kind, t->name);
    *out = clCreateKernel(program, name, &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err, "%s: clCreateKernel(%s) failed", fn, name);
    return CLATTN_OK;
}

clattn_status clattn__qlinear_program_create(clattn_context *ctx, clattn_qlinear_program **out)
{
    static const char fn[] = "clattn__qlinear_program_create";
    *out = NULL;
    clattn_qlinear_program *prog = calloc(1, sizeof(*prog));
    if (!prog)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    /* A quarter of the device's global memory cache (CPUs report their L2 or last-level
     * cache), between 32 KiB and 256 KiB. */
    cl_ulong cache = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_GLOBAL_MEM_CACHE_SIZE, sizeof(cache),
                    &cache, NULL);
    cache /= 4;
    prog->x_cache_bytes = cache < 32768 ? 32768 : cache > 262144 ? 262144 : (size_t)cache;
    /* The staged path's work-items take more rows (each decoding of a weight row serves them
     * all): up to 1 MiB of x (the Xeon above: 96 or 256 rows per work-item at k = 1024 were
     * slower than 1 MiB's 174, 512 rows 45 % slower). */
    prog->stage_x_bytes = cache < 32768 ? 32768 : cache > 1048576 ? 1048576 : (size_t)cache;
    cl_ulong local_bytes = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_LOCAL_MEM_SIZE, sizeof(local_bytes),
                    &local_bytes, NULL);
    prog->local_bytes = (size_t)local_bytes;
    cl_uint units = 0;
    clGetDeviceInfo(clattn_context_device(ctx), CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(units), &units,
                    NULL);
    prog->compute_units = units ? units : 1;
    prog->params = derive_params(ctx);
    const unsigned vnni_ok = prog->params.vnni;
    char env_error[256];
    if (env_override(&prog->params, env_error, sizeof(env_error)) != CLATTN_OK) {
        clattn__qlinear_program_release(prog);
        return clattn__fail_arg(ctx, fn, "%s", env_error);
    }
    const clattn_qlinear_params *p = &prog->params;
    if (p->vnni && !vnni_ok) {
        clattn__qlinear_program_release(prog);
        return clattn__fail_arg(ctx, fn,
                                "vnni=1 (CLATTN_QLINEAR) needs PoCL's CPU device with AVX-512 on a "
                                "CPU with AVX512_VNNI; %s has not",
                                ctx->info.name);
    }
    /* Every tile is within 1..16: the defaults are, and env_override's keys refuse others. */
    char *options = prog->options;
    const size_t size = sizeof(prog->options);
    int used = snprintf(options, size,
                        "-cl-std=CL1.2 -DQL_MV_R=%u -DQL_MV_C=%u -DQI_MM_R=%u -DQI_MM_C=%u "
                        "-DQL_PREFETCH=%u -DQL_LINE=%u -DQL_MMS_R=%u -DQL_MMS_C=%u%s",
                        p->mv_rows, p->mv_cols, p->mm8_rows, p->mm8_cols, p->prefetch_bytes,
                        p->line_bytes, p->mms_rows, p->mms_cols, p->vnni ? " -DQI_VNNI" : "");
    for (size_t i = 0; i < QTYPE_COUNT && used > 0 && (size_t)used < size; i++)
        used += snprintf(options + used, size - (size_t)used,
                         " -DQL_MV_C_%s=%u -DQL_MV_SC_%s=%u -DQL_MM_R_%s=%u -DQL_MM_C_%s=%u",
                         qtypes[i].name, mv_cols_of(p, &qtypes[i]), qtypes[i].name,
                         mv_swiglu_cols_of(p, &qtypes[i]), qtypes[i].name,
                         mm_rows_of(p, &qtypes[i]), qtypes[i].name, mm_cols_of(p, &qtypes[i]));
    /* (At most about 1,000 characters with tiles of 1..16: they fit.) */
    const char *source = (const char *)clattn__qlinear_sources[0].data;
    size_t length = clattn__qlinear_sources[0].size;
    clattn_status status =
        clattn__program_build(ctx, &source, &length, 1, options, &prog->program);
    for (size_t i = 0; status == CLATTN_OK && i < QTYPE_COUNT; i++)
        for (size_t kind = 0; status == CLATTN_OK && kind < KIND_COUNT; kind++)
            status = create_kernel(ctx, fn, prog->program, "", kind_names[kind], &qtypes[i],
                                   &prog->kernels[i][kind]);
    for (size_t i = 0; status == CLATTN_OK && i < QTYPE_COUNT; i++)
        for (size_t j = 0; status == CLATTN_OK && j < 2; j++)
            status = create_kernel(ctx, fn, prog->program, "", j ? "swiglu_mm_staged" : "mm_staged",
                                   &qtypes[i], &prog->staged[i][j]);
    if (status == CLATTN_OK) {
        cl_int err;
        prog->glu = clCreateKernel(prog->program, "clattn_qlinear_glu", &err);
        if (err != CL_SUCCESS)
            status = clattn__fail_cl(ctx, err, "%s: clCreateKernel(clattn_qlinear_glu) failed", fn);
    }
    if (status != CLATTN_OK) {
        clattn__qlinear_program_release(prog);
        return status;
    }
    *out = prog;
    return CLATTN_OK;
}

clattn_status clattn__qweight_upload(clattn_context *ctx, uint32_t type, size_t n, size_t k,
                                     const void *bytes, size_t size, clattn_qweight *w)
{
    static const char fn[] = "clattn__qweight_upload";
    memset(w, 0, sizeof(*w));
    const qtype *t = find_qtype(type, NULL);
    CLATTN_CHECK_ARG(ctx, fn, t, "ggml type %u has no quantised-linear kernels", (unsigned)type);
    CLATTN_CHECK_ARG(ctx, fn, n > 0 && k > 0 && k % t->block_elements == 0,
                     "a %s weight [n %zu, k %zu] needs n > 0 and k a positive multiple of %zu",
                     t->name, n, k, t->block_elements);
    CLATTN_CHECK_ARG(ctx, fn, n <= UINT32_MAX && k <= UINT32_MAX, "[n %zu, k %zu] is too large",
                     n, k);
    size_t row_bytes = k / t->block_elements * t->block_bytes, total = 0;
    CLATTN_CHECK_ARG(ctx, fn, clattn__mul_size(n, row_bytes, &total) && size == total,
                     "a %s weight [n %zu, k %zu] is %zu × %zu bytes, not %zu", t->name, n, k, n,
                     row_bytes, size);
    CLATTN_CHECK_ARG(ctx, fn, bytes, "bytes is NULL");
    char what[32];
    snprintf(what, sizeof(what), "a %s weight", t->name);
    cl_mem mem = NULL;
    clattn_status status = clattn__buffer_create(ctx, total, &mem, what);
    if (status == CLATTN_OK)
        status = clattn__write_bytes(ctx, mem, 0, bytes, total, "%s: uploading a %s weight", fn,
                                     t->name);
    if (status != CLATTN_OK) {
        clattn__release_mem(&mem);
        return status;
    }
    *w = (clattn_qweight){mem, type, n, k, row_bytes};
    return CLATTN_OK;
}

void clattn__qweight_release(clattn_qweight *w)
{
    if (w->blocks)
        clReleaseMemObject(w->blocks);
    memset(w, 0, sizeof(*w));
}

/* The 8-bit program: cl/qlinear.cl's helpers (QL_HELPERS_ONLY), cl/act_quant.cl, then
 * cl/qlinear_int8.cl. */
static clattn_status build_i8(clattn_context *ctx, clattn_qlinear_program *prog)
{
    static const char fn[] = "clattn__qlinear_set_activations";
    char options[sizeof(prog->options) + 32];
    snprintf(options, sizeof(options), "%s -DQL_HELPERS_ONLY", prog->options);
    const char *sources[3];
    size_t lengths[3];
    for (size_t i = 0; i < 3; i++) {
        sources[i] = (const char *)clattn__qlinear_sources[i].data;
        lengths[i] = clattn__qlinear_sources[i].size;
    }
    cl_program program;
    clattn_status status = clattn__program_build(ctx, sources, lengths, 3, options, &program);
    if (status != CLATTN_OK)
        return status;
    cl_kernel kernels[QTYPE_COUNT][KIND_COUNT] = {{NULL}}, quantize = NULL;
    for (size_t i = 0; status == CLATTN_OK && i < QTYPE_COUNT; i++)
        for (size_t kind = 0; status == CLATTN_OK && qtype_int8(&qtypes[i]) && kind < KIND_COUNT;
             kind++)
            status = create_kernel(ctx, fn, program, "i8_", kind_names[kind], &qtypes[i],
                                   &kernels[i][kind]);
    if (status == CLATTN_OK) {
        cl_int err;
        quantize = clCreateKernel(program, "clattn_qlinear_quantize", &err);
        if (err != CL_SUCCESS)
            status = clattn__fail_cl(ctx, err,
                                     "%s: clCreateKernel(clattn_qlinear_quantize) failed", fn);
    }
    if (status != CLATTN_OK) {
        for (size_t i = 0; i < QTYPE_COUNT; i++)
            for (size_t kind = 0; kind < KIND_COUNT; kind++)
                if (kernels[i][kind])
                    clReleaseKernel(kernels[i][kind]);
        clReleaseProgram(program);
        return status;
    }
    prog->i8_program = program;
    memcpy(prog->i8_kernels, kernels, sizeof(kernels));
    prog->quantize = quantize;
    return CLATTN_OK;
}

clattn_status clattn__qlinear_set_activations(clattn_context *ctx, clattn_qlinear_program *prog,
                                              clattn_qlinear_activations activations)
{
    CLATTN_CHECK_ARG(ctx, "clattn__qlinear_set_activations",
                     activations == CLATTN_QLINEAR_FLOAT || activations == CLATTN_QLINEAR_INT8,
                     "activations %d is not a clattn_qlinear_activations", (int)activations);
    if (activations == CLATTN_QLINEAR_INT8 && !prog->i8_program) {
        clattn_status status = build_i8(ctx, prog);
        if (status != CLATTN_OK)
            return status;
    }
    prog->activations = activations;
    prog->pre_x = NULL;
    return CLATTN_OK;
}

clattn_qlinear_activations clattn__qlinear_activations(const clattn_qlinear_program *prog)
{
    return prog->activations;
}

/* The program's scratch for quantised rows, grown to hold `values` int8 values (a float scale
 * per 32 values at most, a short sum per 16). */
static clattn_status ensure_scratch(clattn_context *ctx, const char *fn,
                                    clattn_qlinear_program *prog, size_t values)
{
    if (values <= prog->act_values)
        return CLATTN_OK;
    release_scratch(prog);
    size_t bytes[3] = {values, (values / 32 + 1) * sizeof(float),
                       (values / 16 + 1) * sizeof(cl_short)};
    cl_mem *out[3] = {&prog->act_q, &prog->act_d, &prog->act_s};
    for (size_t i = 0; i < 3; i++) {
        cl_int err;
        *out[i] = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, bytes[i], NULL,
                                 &err);
        if (err != CL_SUCCESS)
            return clattn__fail_cl(ctx, err,
                                   "%s: clCreateBuffer(%zu bytes) for 8-bit activations failed",
                                   fn, bytes[i]);
    }
    prog->act_values = values;
    return CLATTN_OK;
}

/* Whether the matrix–matrix tiles of blocks of `block` values read the copy of the rows' sums
 * and scales in groups of XT_ROWS rows (cl/act_quant.cl's qi_transpose_block): the 512-bit
 * Q4_K and Q5_K tile of 8 × 2 (cl/qlinear_int8.cl's QI_OFFSET_XT; where the device has no
 * 512-bit tile the copy is written and not read). */
#define XT_ROWS 8
#define XT_FLOATS (9 * 2 * XT_ROWS)
static bool xt_wanted(const clattn_qlinear_program *prog, size_t block)
{
    return block == 256 && prog->params.mm8_rows == XT_ROWS && prog->params.mm8_cols == 2;
}

/* The scratch for m rows of k values (blocks of `block`): ensure_scratch's, and the copy act_t
 * where xt_wanted. */
static clattn_status ensure_rows(clattn_context *ctx, const char *fn,
                                 clattn_qlinear_program *prog, size_t m, size_t k, size_t block)
{
    size_t values, t_bytes = 0;
    CLATTN_CHECK_ARG(ctx, fn,
                     clattn__mul_size(m, k, &values) &&
                         clattn__mul_size((m + XT_ROWS - 1) / XT_ROWS * (k / 256),
                                          XT_FLOATS * sizeof(float), &t_bytes),
                     "[m %zu, k %zu] is too large", m, k);
    clattn_status status = ensure_scratch(ctx, fn, prog, values);
    if (status != CLATTN_OK || !xt_wanted(prog, block) || t_bytes <= prog->act_t_bytes)
        return status;
    if (prog->act_t)
        clReleaseMemObject(prog->act_t);
    prog->act_t_bytes = 0;
    cl_int err;
    prog->act_t = clCreateBuffer(clattn_context_cl_context(ctx), CL_MEM_READ_WRITE, t_bytes, NULL,
                                 &err);
    if (err != CL_SUCCESS)
        return clattn__fail_cl(ctx, err,
                               "%s: clCreateBuffer(%zu bytes) for 8-bit activations failed", fn,
                               t_bytes);
    prog->act_t_bytes = t_bytes;
    return CLATTN_OK;
}

/* The quantised rows of x [m, k] for a type of `block` values a block (cl/qlinear_int8.cl's
 * clattn_qlinear_quantize) into the program's scratch, and into act_t where `with_t`. */
static clattn_status quantize_rows(clattn_context *ctx, const char *fn,
                                   clattn_qlinear_program *prog, clattn_op op, size_t m, size_t k,
                                   size_t block, bool with_t, cl_mem x, size_t x_offset,
                                   size_t ldx)
{
    prog->pre_x = NULL; /* the scratch is overwritten */
    clattn_status status = ensure_rows(ctx, fn, prog, m, k, block);
    if (status != CLATTN_OK)
        return status;
    cl_uint um = (cl_uint)m, uk = (cl_uint)k, ub = (cl_uint)block, ulx = (cl_uint)ldx;
    cl_ulong xo = x_offset;
    clattn_kernel_args args = {prog->quantize, 0, CL_SUCCESS};
    CLATTN_ARG(&args, um);
    CLATTN_ARG(&args, uk);
    CLATTN_ARG(&args, ub);
    CLATTN_ARG(&args, x);
    CLATTN_ARG(&args, xo);
    CLATTN_ARG(&args, ulx);
    CLATTN_ARG(&args, prog->act_q);
    CLATTN_ARG(&args, prog->act_d);
    CLATTN_ARG(&args, prog->act_s);
    clattn__arg_mem(&args, with_t ? prog->act_t : NULL);
    size_t global[2] = {k / block, m}, local[2] = {1, 1};
    return clattn__launch(ctx, &args, "qlinear_quantize", 2, global, local, op, 0);
}

/* Both kernels' launch: y [m, n] from the weight's rows (swiglu: n = w->n / 2 columns, each
 * from gate row j and up row n + j); with 8-bit activations for a block type, x's rows are
 * quantised first and the i8 kernels run on them. */
static clattn_status launch(clattn_context *ctx, const char *fn, clattn_qlinear_program *prog,
                            clattn_op op, bool swiglu, clattn_qlinear_path path, size_t m,
                            cl_mem x, size_t x_offset, size_t ldx, const clattn_qweight *w,
                            cl_mem y, size_t y_offset, size_t ldy)
{
    CLATTN_CHECK_ARG(ctx, fn, prog && w && w->blocks, "the program or the weight is missing");
    size_t index;
    CLATTN_CHECK_ARG(ctx, fn, find_qtype(w->type, &index), "ggml type %u has no kernels",
                     (unsigned)w->type);
    CLATTN_CHECK_ARG(ctx, fn, !swiglu || w->n % 2 == 0,
                     "a gate|up weight needs an even number of rows, not %zu", w->n);
    size_t n = swiglu ? w->n / 2 : w->n;
    CLATTN_CHECK_ARG(ctx, fn, ldx >= w->k && ldy >= n,
                     "strides ldx %zu (k %zu) and ldy %zu (n %zu) are too small", ldx, w->k, ldy,
                     n);
    CLATTN_CHECK_ARG(ctx, fn, m <= UINT32_MAX && ldx <= UINT32_MAX && ldy <= UINT32_MAX,
                     "m %zu or a stride is too large", m);
    if (m == 0)
        return CLATTN_OK;
    if (path == CLATTN_QLINEAR_AUTO)
        path = m <= prog->params.mv_max_m ? CLATTN_QLINEAR_MV : CLATTN_QLINEAR_MM;
    int mv = path == CLATTN_QLINEAR_MV;
    const qtype *t = &qtypes[index];
    bool i8 = prog->activations == CLATTN_QLINEAR_INT8 && qtype_int8(t);
    const clattn_qlinear_params *p = &prog->params;
    bool staged = !i8 && !mv && clattn__qlinear_mm_staged(prog, w->k, swiglu);
    size_t mm_rows = i8 ? p->mm8_rows : staged ? p->mms_rows : mm_rows_of(p, t);
    size_t cols = mv       ? mv_cols_of(p, t)
                  : i8     ? p->mm8_cols
                  : staged ? p->mms_cols
                           : mm_cols_of(p, t);
    if (swiglu) /* the kernels' QL_MV_SWIGLU_COLS, QL_MM_SWIGLU_COLS: two weight rows a column */
        cols = mv ? mv_swiglu_cols_of(p, t) : (cols + 1) / 2;
    size_t col_items = (n + cols - 1) / cols;
    /* The matrix-matrix path: each work-item takes whole row tiles, as many as keep its rows of
     * x within the cache budget (work-items next to each other share those rows and walk the
     * weight; each work-item reads its weight rows once for all its rows). */
    size_t tiles = (m + mm_rows - 1) / mm_rows;
    size_t x_row_bytes = i8 ? w->k : w->k * sizeof(float);
    size_t x_budget = staged ? prog->stage_x_bytes : prog->x_cache_bytes;
    size_t budget_tiles = p->mm_item_rows ? (p->mm_item_rows + mm_rows - 1) / mm_rows
                                          : x_budget / (x_row_bytes * mm_rows);
    if (budget_tiles < 1)
        budget_tiles = 1;
    size_t row_items = (tiles + budget_tiles - 1) / budget_tiles;
    cl_uint rows_per_item = (cl_uint)((tiles + row_items - 1) / row_items * mm_rows);
    /* The matrix-vector path: all rows in one work-item, up to mv_max_m of them (an m beyond
     * it, asked for explicitly, in items of mv_max_m rows). A work-item's loops must stay
     * bounded: Mesa's llvmpipe gave wrong rows from about the 250th on when one work-item
     * walked 300 rows of a Q4_K weight (it caps the loop iterations of an invocation: 65535,
     * gallivm's loop limiter, is the likely cause). */
    if (mv)
        rows_per_item = (cl_uint)(m < p->mv_max_m || p->mv_max_m == 0 ? m : p->mv_max_m);
    /* The matrix-vector path's work-items along n: each takes a contiguous run of column tiles
     * (its weight rows stream in order). Eight per compute unit, to balance the load; more where
     * a run would exceed MV_ITEM_WORK chunk-rows (16 values of one weight row × one row of x),
     * for the same bound on a work-item's loops as above. */
    if (mv) {
        size_t work = (size_t)rows_per_item * (w->k / 16), items = p->mv_items;
        if (!items) {
            items = prog->compute_units * 8;
            size_t by_work = (col_items * work + MV_ITEM_WORK - 1) / MV_ITEM_WORK;
            if (items < by_work)
                items = by_work;
        }
        if (items < col_items)
            col_items = items;
    }
    size_t global[2] = {col_items, (m + rows_per_item - 1) / rows_per_item};
    size_t local[2] = {1, 1};
    /* 8-bit activations: x's rows quantised first (one launch; none where a producer kernel
     * quantised exactly these rows already), then the i8 kernel on them. */
    bool prequantized = prog->pre_x == x && prog->pre_offset == x_offset &&
                        prog->pre_ldx == ldx && prog->pre_m == m && prog->pre_k == w->k &&
                        prog->pre_block == t->block_elements;
    bool with_t = i8 && !mv && xt_wanted(prog, t->block_elements);
    if (i8 && !prequantized) {
        clattn_status status = quantize_rows(ctx, fn, prog, op, m, w->k, t->block_elements,
                                             with_t, x, x_offset, ldx);
        if (status != CLATTN_OK)
            return status;
    }
    cl_uint um = (cl_uint)m, un = (cl_uint)n, uk = (cl_uint)w->k;
    cl_uint ulx = (cl_uint)ldx, uly = (cl_uint)ldy;
    cl_ulong xo = x_offset, yo = y_offset, rb = w->row_bytes;
    size_t kind = swiglu ? (mv ? KIND_SWIGLU_MV : KIND_SWIGLU_MM) : (mv ? KIND_MV : KIND_MM);
    cl_kernel kernel = i8       ? prog->i8_kernels[index][kind]
                       : staged ? prog->staged[index][swiglu]
                                : prog->kernels[index][kind];
    clattn_kernel_args args = {kernel, 0, CL_SUCCESS};
    CLATTN_ARG(&args, um);
    CLATTN_ARG(&args, un);
    CLATTN_ARG(&args, uk);
    if (i8) {
        CLATTN_ARG(&args, prog->act_q);
        CLATTN_ARG(&args, prog->act_d);
        CLATTN_ARG(&args, prog->act_s);
        clattn__arg_mem(&args, with_t ? prog->act_t : NULL);
    } else {
        CLATTN_ARG(&args, x);
        CLATTN_ARG(&args, xo);
        CLATTN_ARG(&args, ulx);
    }
    CLATTN_ARG(&args, w->blocks);
    CLATTN_ARG(&args, rb);
    CLATTN_ARG(&args, y);
    CLATTN_ARG(&args, yo);
    CLATTN_ARG(&args, uly);
    CLATTN_ARG(&args, rows_per_item);
    if (staged)
        clattn__arg(&args, stage_bytes(w->k, cols, swiglu), NULL);
    static const char *const names[2][KIND_COUNT] = {
        {"qlinear_mv", "qlinear_mm", "qlinear_swiglu_mv", "qlinear_swiglu_mm"},
        {"qlinear_i8_mv", "qlinear_i8_mm", "qlinear_i8_swiglu_mv", "qlinear_i8_swiglu_mm"}};
    const char *name = staged ? (swiglu ? "qlinear_swiglu_mm_staged" : "qlinear_mm_staged")
                              : names[i8][kind];
    return clattn__launch(ctx, &args, name, 2, global, local, op, (uint64_t)m * w->n * w->k);
}

clattn_status clattn__qlinear_prequantize(clattn_context *ctx, clattn_qlinear_program *prog,
                                         uint32_t type, size_t m, size_t k, cl_mem x,
                                         size_t x_offset, size_t ldx, clattn_qlinear_rows *rows)
{
    static const char fn[] = "clattn__qlinear_prequantize";
    memset(rows, 0, sizeof(*rows));
    prog->pre_x = NULL;
    const qtype *t = find_qtype(type, NULL);
    if (prog->activations != CLATTN_QLINEAR_INT8 || !t || !qtype_int8(t) || m == 0)
        return CLATTN_OK;
    CLATTN_CHECK_ARG(ctx, fn, x && k % t->block_elements == 0,
                     "rows [m %zu, k %zu] for blocks of %zu", m, k, t->block_elements);
    clattn_status status = ensure_rows(ctx, fn, prog, m, k, t->block_elements);
    if (status != CLATTN_OK)
        return status;
    cl_mem xt = xt_wanted(prog, t->block_elements) ? prog->act_t : NULL;
    *rows = (clattn_qlinear_rows){prog->act_q, prog->act_d, prog->act_s, xt, t->block_elements};
    prog->pre_x = x;
    prog->pre_offset = x_offset;
    prog->pre_ldx = ldx;
    prog->pre_m = m;
    prog->pre_k = k;
    prog->pre_block = t->block_elements;
    return CLATTN_OK;
}

void clattn__qlinear_prequantized_forget(clattn_qlinear_program *prog)
{
    if (prog)
        prog->pre_x = NULL;
}

clattn_status clattn__qlinear_path(clattn_context *ctx, clattn_qlinear_program *prog,
                                   clattn_op op, clattn_qlinear_path path, size_t m, cl_mem x,
                                   size_t x_offset, size_t ldx, const clattn_qweight *w, cl_mem y,
                                   size_t y_offset, size_t ldy)
{
    return launch(ctx, "clattn__qlinear", prog, op, false, path, m, x, x_offset, ldx, w, y,
                  y_offset, ldy);
}

clattn_status clattn__qlinear_swiglu_path(clattn_context *ctx, clattn_qlinear_program *prog,
                                          clattn_op op, clattn_qlinear_path path, size_t m,
                                          cl_mem x, size_t x_offset, size_t ldx,
                                          const clattn_qweight *w, cl_mem y, size_t y_offset,
                                          size_t ldy)
{
    return launch(ctx, "clattn__qlinear_swiglu", prog, op, true, path, m, x, x_offset, ldx, w, y,
                  y_offset, ldy);
}

clattn_status clattn__qlinear_swiglu(clattn_context *ctx, clattn_qlinear_program *prog,
                                     clattn_op op, size_t m, cl_mem x, size_t x_offset, size_t ldx,
                                     const clattn_qweight *w, cl_mem y, size_t y_offset,
                                     size_t ldy)
{
    return clattn__qlinear_swiglu_path(ctx, prog, op, CLATTN_QLINEAR_AUTO, m, x, x_offset, ldx,
                                       w, y, y_offset, ldy);
}

clattn_status clattn__qlinear(clattn_context *ctx, clattn_qlinear_program *prog, clattn_op op,
                              size_t m, cl_mem x, size_t x_offset, size_t ldx,
                              const clattn_qweight *w, cl_mem y, size_t y_offset, size_t ldy)
{
    return clattn__qlinear_path(ctx, prog, op, CLATTN_QLINEAR_AUTO, m, x, x_offset, ldx, w, y,
                                y_offset, ldy);
}

clattn_status clattn__qlinear_glu(clattn_context *ctx, clattn_qlinear_program *prog, cl_mem h,
                                  size_t rows, size_t cols)
{
    static const char fn[] = "clattn__qlinear_glu";
    CLATTN_CHECK_ARG(ctx, fn, prog && h, "the program or the buffer is missing");
    CLATTN_CHECK_ARG(ctx, fn, rows <= UINT_MAX && cols <= UINT_MAX / 2,
                     "rows %zu or cols %zu beyond the kernel's 32-bit indices", rows, cols);
    if (rows == 0 || cols == 0)
        return CLATTN_OK;
    cl_uint r = (cl_uint)rows, c = (cl_uint)cols;
    clattn_kernel_args args = {prog->glu, 0, CL_SUCCESS};
    CLATTN_ARG(&args, h);
    CLATTN_ARG(&args, r);
    CLATTN_ARG(&args, c);
    size_t global[2] = {cols, (rows + 7) / 8};
    return clattn__launch(ctx, &args, "qlinear_glu", 2, global, NULL, CLATTN_OP_FEED_FORWARD, 0);
}
