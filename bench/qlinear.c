/*
 * Throughput of the linear layers on quantised weights (src/ops/qlinear.c) on SmolLM2-135M's
 * shapes (not a test): for each weight [n, k] in its type and each m, the median and the best
 * time of a call, the weight bytes read per second (GB/s: the decode path's figure of merit) and
 * GFLOP/s (2·m·n·k: the prompt path's).
 *
 *   build/bench/qlinear [--reps R] [--m M]... [--path auto|mv|mm] [--cold] [--type T]
 *                       [--model smollm2|qwen3]
 *
 * --model qwen3: Qwen3-0.6B's shapes in its Q4_K_M file's types instead of SmolLM2-135M's Q4_1
 * file's.
 *
 * --type T (f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, q8_0, q4_k, q5_k, q6_k): every shape in
 * type T instead of the file's types (k = 1536 and 576 are whole blocks of every type but the
 * K-quants'; those shapes take k rounded up to 256).
 *
 * --cold: each call reads a different copy of the weight, copies that together exceed 128 MiB,
 * so that the weight comes from memory as in a model's decode step (a model's weights do not
 * stay in the caches from one token to the next); without it the weight stays in the caches.
 * "cpu ms" is the process's CPU time per call (median): on a shared machine it compares kernels
 * when wall times cannot.
 *
 * "gate|up" is the LLM's stacked gate and up weight (2·1536 rows) on the plain kernels, "+swiglu"
 * the same weight on the kernels with SwiGLU in the epilogue (clattn__qlinear_swiglu: 1536
 * outputs, the glu kernel's launch saved; GFLOP/s count both weights' rows).
 *
 * CLATTN_QLINEAR="mvr=4,mvc=4,mmr=8,mmc=2,mmrw=6,mmcw=4,mvmax=32,mmi=0,mms=1,mmsr=6,mmsc=4"
 * changes the kernels' tiles (mms=0: the matrix-matrix path unstaged).
 */
#include "ops/qlinear.h"

#include "formats/gguf.h"

#include <clattn/clattn.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct shape {
    const char *what;
    uint32_t type;
    size_t n, k;
    int swiglu; /* the fused gate|up kernels: n / 2 outputs */
} shape;

static const shape smollm2_shapes[] = {
    {"q_proj/o_proj", CLATTN_GGML_Q4_1, 576, 576, 0},
    {"k_proj/v_proj", CLATTN_GGML_Q4_1, 192, 576, 0},
    {"gate/up", CLATTN_GGML_Q4_1, 1536, 576, 0},
    {"gate|up", CLATTN_GGML_Q4_1, 3072, 576, 0},
    {"gate|up+swiglu", CLATTN_GGML_Q4_1, 3072, 576, 1},
    {"down", CLATTN_GGML_Q4_1, 576, 1536, 0},
    {"output (tied)", CLATTN_GGML_Q8_0, 49152, 576, 0},
};

/* Qwen3-0.6B's shapes in the types of its Q4_K_M file (llama-quantize keeps ffn_down and
 * attn_v in Q6_K in half the layers, Q4_K in the others; the tied output in Q6_K). */
static const shape qwen3_shapes[] = {
    {"q|k", CLATTN_GGML_Q4_K, 3072, 1024, 0},
    {"q|k|v", CLATTN_GGML_Q4_K, 4096, 1024, 0},
    {"v", CLATTN_GGML_Q6_K, 1024, 1024, 0},
    {"o_proj", CLATTN_GGML_Q4_K, 1024, 2048, 0},
    {"gate|up+swiglu", CLATTN_GGML_Q4_K, 6144, 1024, 1},
    {"down", CLATTN_GGML_Q4_K, 1024, 3072, 0},
    {"down", CLATTN_GGML_Q6_K, 1024, 3072, 0},
    {"output (tied)", CLATTN_GGML_Q6_K, 151936, 1024, 0},
};

static const struct {
    const char *name;
    uint32_t type;
} type_names[] = {
    {"f32", CLATTN_GGML_F32},   {"f16", CLATTN_GGML_F16},   {"bf16", CLATTN_GGML_BF16},
    {"q4_0", CLATTN_GGML_Q4_0}, {"q4_1", CLATTN_GGML_Q4_1}, {"q5_0", CLATTN_GGML_Q5_0},
    {"q5_1", CLATTN_GGML_Q5_1}, {"q8_0", CLATTN_GGML_Q8_0}, {"q4_k", CLATTN_GGML_Q4_K},
    {"q5_k", CLATTN_GGML_Q5_K}, {"q6_k", CLATTN_GGML_Q6_K},
};
#define TYPE_COUNT (sizeof(type_names) / sizeof(type_names[0]))

static const char *type_name(uint32_t type)
{
    for (size_t i = 0; i < TYPE_COUNT; i++)
        if (type_names[i].type == type)
            return type_names[i].name;
    return "?";
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* CPU time of the whole process (every thread of the OpenCL runtime): on a shared machine it
 * counts only the time this process ran, so it compares kernels when wall times cannot. */
static double cpu_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random blocks whose float16 scales (the first two bytes of each block, the next two for
 * Q4_1/Q5_1/Q4_K/Q5_K; bytes 208-209 of Q6_K) are finite: 0x2000 | random low bits is a small
 * normal float16. */
static void random_blocks(unsigned char *b, size_t size, size_t block_bytes, uint64_t seed)
{
    for (size_t i = 0; i < size; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = (unsigned char)(seed >> 56);
    }
    for (size_t off = 0; off + block_bytes <= size; off += block_bytes) {
        b[off + 1] = (unsigned char)(0x20 | (b[off + 1] & 0x8f));
        if (block_bytes == 20 || block_bytes == 24 || block_bytes == 144 || block_bytes == 176)
            b[off + 3] = (unsigned char)(0x20 | (b[off + 3] & 0x8f));
        if (block_bytes == 210)
            b[off + 209] = (unsigned char)(0x20 | (b[off + 209] & 0x8f));
    }
}

int main(int argc, char **argv)
{
    int reps = 20, cold = 0, force_type = -1, qwen3 = 0, int8 = 0;
    size_t ms[16] = {1, 512};
    size_t m_count = 2, m_given = 0;
    clattn_qlinear_path path = CLATTN_QLINEAR_AUTO;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--m") == 0 && i + 1 < argc && m_given < 16)
            ms[m_given++] = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--cold") == 0)
            cold = 1;
        else if (strcmp(argv[i], "--int8") == 0)
            int8 = 1;
        else if (strcmp(argv[i], "--type") == 0 && i + 1 < argc) {
            i++;
            for (size_t t = 0; t < TYPE_COUNT; t++)
                if (strcmp(argv[i], type_names[t].name) == 0)
                    force_type = (int)type_names[t].type;
            if (force_type < 0) {
                fprintf(stderr, "qlinear: unknown type %s\n", argv[i]);
                return 2;
            }
        }
        else if (strcmp(argv[i], "--model") == 0 && i + 1 < argc &&
                 (strcmp(argv[i + 1], "smollm2") == 0 || strcmp(argv[i + 1], "qwen3") == 0)) {
            qwen3 = strcmp(argv[++i], "qwen3") == 0;
        } else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) {
            i++;
            path = strcmp(argv[i], "mv") == 0   ? CLATTN_QLINEAR_MV
                   : strcmp(argv[i], "mm") == 0 ? CLATTN_QLINEAR_MM
                                                : CLATTN_QLINEAR_AUTO;
        } else {
            fprintf(stderr, "usage: %s [--reps R] [--m M]... [--path auto|mv|mm] [--cold] [--type T] [--model smollm2|qwen3] [--int8]\n",
                    argv[0]);
            return 2;
        }
    }
    if (m_given)
        m_count = m_given;
    if (reps < 1)
        reps = 1;
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK) {
        fprintf(stderr, "qlinear: %s\n", clattn_last_error(NULL));
        return 1;
    }
    clattn_qlinear_program *prog;
    if (clattn__qlinear_program_create(ctx, &prog) != CLATTN_OK) {
        fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
        return 1;
    }
    if (int8 && clattn__qlinear_set_activations(ctx, prog, CLATTN_QLINEAR_INT8) != CLATTN_OK) {
        fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
        return 1;
    }
    clattn_qlinear_params p = clattn__qlinear_params(prog);
    char items[16] = "auto";
    if (p.mv_items)
        snprintf(items, sizeof(items), "%u", p.mv_items);
    printf("# tiles: mv %ux%u (%u columns for types of 6.5 bits or more; work-items %s; SwiGLU "
           "%u columns for Q4_0..Q5_1), mm %ux%u (%ux%u for types of 6.5 bits or more; 8-bit "
           "activations %ux%u), mv up to m %u; %d repetitions, medians%s%s\n",
           p.mv_rows, p.mv_cols, p.mv_cols_wide, items, p.mv_swiglu_cols, p.mm_rows, p.mm_cols,
           p.mm_rows_wide, p.mm_cols_wide, p.mm8_rows, p.mm8_cols, p.mv_max_m, reps,
           cold ? ", weights from memory (--cold)" : "",
           int8 ? "; 8-bit activations (--int8: the times include quantising x)" : "");
    printf("%-14s %-5s %6s %6s %5s %9s %8s %9s %9s %8s %9s %9s\n", "weight", "type", "n", "k", "m",
           "ms", "GB/s", "GFLOP/s", "best ms", "GB/s", "GFLOP/s", "cpu ms");
    cl_context cl = clattn_context_cl_context(ctx);
    cl_command_queue q = clattn_context_queue(ctx);
    int status = 0;
    const shape *shapes = qwen3 ? qwen3_shapes : smollm2_shapes;
    size_t shape_count = qwen3 ? sizeof(qwen3_shapes) / sizeof(qwen3_shapes[0])
                               : sizeof(smollm2_shapes) / sizeof(smollm2_shapes[0]);
    for (size_t s = 0; s < shape_count && !status; s++) {
        shape forced = shapes[s];
        size_t be, bb;
        if (force_type >= 0) {
            forced.type = (uint32_t)force_type;
            clattn__qlinear_type_supported(forced.type, &be, &bb);
            forced.k = (forced.k + be - 1) / be * be;
        }
        const shape *sh = &forced;
        clattn__qlinear_type_supported(sh->type, &be, &bb);
        size_t bytes = sh->n * (sh->k / be) * bb;
        unsigned char *raw = malloc(bytes);
        random_blocks(raw, bytes, bb, 42 + s);
        size_t copies = cold ? ((size_t)128 << 20) / bytes + 1 : 1;
        clattn_qweight *w = calloc(copies, sizeof(*w));
        for (size_t c = 0; c < copies; c++)
            if (clattn__qweight_upload(ctx, sh->type, sh->n, sh->k, raw, bytes, &w[c]) !=
                CLATTN_OK) {
                fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
                return 1;
            }
        free(raw);
        size_t next = 0;
        for (size_t mi = 0; mi < m_count; mi++) {
            size_t m = ms[mi];
            cl_int err;
            float *xh = malloc(m * sh->k * sizeof(float));
            for (size_t i = 0; i < m * sh->k; i++)
                xh[i] = (float)((i * 2654435761u) % 2001) / 1000.0f - 1.0f;
            cl_mem x = clCreateBuffer(cl, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR,
                                      m * sh->k * sizeof(float), xh, &err);
            cl_mem y = clCreateBuffer(cl, CL_MEM_READ_WRITE, m * sh->n * sizeof(float), NULL, &err);
            free(xh);
            double *t = malloc((size_t)reps * sizeof(double));
            double *tc = malloc((size_t)reps * sizeof(double));
            for (int r = -2; r < reps && !status; r++) { /* two warm-up calls */
                double t0 = now_ms(), c0 = cpu_ms();
                const clattn_qweight *wc = &w[next++ % copies];
                clattn_status st =
                    sh->swiglu ? clattn__qlinear_swiglu_path(ctx, prog, CLATTN_OP_OTHER, path, m,
                                                             x, 0, sh->k, wc, y, 0, sh->n / 2)
                               : clattn__qlinear_path(ctx, prog, CLATTN_OP_OTHER, path, m, x, 0,
                                                      sh->k, wc, y, 0, sh->n);
                if (st != CLATTN_OK) {
                    fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
                    status = 1;
                }
                clFinish(q);
                if (r >= 0) {
                    t[r] = now_ms() - t0;
                    tc[r] = cpu_ms() - c0;
                }
            }
            qsort(t, (size_t)reps, sizeof(double), cmp_double);
            qsort(tc, (size_t)reps, sizeof(double), cmp_double);
            double med = t[reps / 2], best = t[0], flop = 2.0 * (double)m * sh->n * sh->k;
            printf("%-14s %-5s %6zu %6zu %5zu %9.3f %8.2f %9.2f %9.3f %8.2f %9.2f %9.3f\n", sh->what,
                   type_name(sh->type), sh->n, sh->k, m, med,
                   (double)bytes / med / 1e6, flop / med / 1e6, best, (double)bytes / best / 1e6,
                   flop / best / 1e6, tc[reps / 2]);
            free(t);
            free(tc);
            clReleaseMemObject(x);
            clReleaseMemObject(y);
        }
        for (size_t c = 0; c < copies; c++)
            clattn__qweight_release(&w[c]);
        free(w);
    }
    /* The device's own streaming rate under the same conditions: a 64 MiB buffer copy (bytes
     * read per second, as the GB/s above). */
    {
        size_t bytes = (size_t)64 << 20;
        cl_int err;
        cl_mem a = clCreateBuffer(cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
        cl_mem b = clCreateBuffer(cl, CL_MEM_READ_WRITE, bytes, NULL, &err);
        unsigned char zero = 0;
        clEnqueueFillBuffer(q, a, &zero, 1, 0, bytes, 0, NULL, NULL);
        clEnqueueFillBuffer(q, b, &zero, 1, 0, bytes, 0, NULL, NULL);
        clFinish(q);
        double *t = malloc((size_t)reps * sizeof(double));
        for (int r = -2; r < reps; r++) {
            double t0 = now_ms();
            clEnqueueCopyBuffer(q, a, b, 0, 0, bytes, 0, NULL, NULL);
            clFinish(q);
            if (r >= 0)
                t[r] = now_ms() - t0;
        }
        qsort(t, (size_t)reps, sizeof(double), cmp_double);
        printf("# 64 MiB buffer copy: %.2f GB/s read (median), %.2f GB/s (best)\n",
               (double)bytes / t[reps / 2] / 1e6, (double)bytes / t[0] / 1e6);
        free(t);
        clReleaseMemObject(a);
        clReleaseMemObject(b);
    }
    clattn__qlinear_program_release(prog);
    clattn_context_destroy(&ctx);
    return status;
}
