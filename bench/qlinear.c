/*
 * Throughput of the linear layers on quantised weights (src/ops/qlinear.c) on SmolLM2-135M's
 * shapes (not a test): for each weight [n, k] in its type and each m, the median and the best
 * time of a call, the weight bytes read per second (GB/s: the decode path's figure of merit) and
 * GFLOP/s (2·m·n·k: the prompt path's).
 *
 *   build/bench/qlinear [--reps R] [--m M]... [--path auto|mv|mm]
 *
 * CLATTN_QLINEAR="mvr=4,mvc=4,mmr=6,mmc=4,mvmax=32,mmi=0" changes the kernels' tiles.
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
} shape;

static const shape shapes[] = {
    {"q_proj/o_proj", CLATTN_GGML_Q4_1, 576, 576},
    {"k_proj/v_proj", CLATTN_GGML_Q4_1, 192, 576},
    {"gate/up", CLATTN_GGML_Q4_1, 1536, 576},
    {"down", CLATTN_GGML_Q4_1, 576, 1536},
    {"output (tied)", CLATTN_GGML_Q8_0, 49152, 576},
};

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Random blocks whose float16 scales (the first two bytes of each block, and the next two for
 * Q4_1) are finite: 0x2000 | random low bits is a small normal float16. */
static void random_blocks(unsigned char *b, size_t size, size_t block_bytes, uint64_t seed)
{
    for (size_t i = 0; i < size; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        b[i] = (unsigned char)(seed >> 56);
    }
    for (size_t off = 0; off + block_bytes <= size; off += block_bytes) {
        b[off + 1] = (unsigned char)(0x20 | (b[off + 1] & 0x8f));
        if (block_bytes == 20)
            b[off + 3] = (unsigned char)(0x20 | (b[off + 3] & 0x8f));
    }
}

int main(int argc, char **argv)
{
    int reps = 20;
    size_t ms[16] = {1, 512};
    size_t m_count = 2, m_given = 0;
    clattn_qlinear_path path = CLATTN_QLINEAR_AUTO;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--m") == 0 && i + 1 < argc && m_given < 16)
            ms[m_given++] = (size_t)atol(argv[++i]);
        else if (strcmp(argv[i], "--path") == 0 && i + 1 < argc) {
            i++;
            path = strcmp(argv[i], "mv") == 0   ? CLATTN_QLINEAR_MV
                   : strcmp(argv[i], "mm") == 0 ? CLATTN_QLINEAR_MM
                                                : CLATTN_QLINEAR_AUTO;
        } else {
            fprintf(stderr, "usage: %s [--reps R] [--m M]... [--path auto|mv|mm]\n", argv[0]);
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
    clattn_qlinear_params p = clattn__qlinear_params(prog);
    printf("# tiles: mv %ux%u, mm %ux%u, mv up to m %u; %d repetitions, medians\n", p.mv_rows,
           p.mv_cols, p.mm_rows, p.mm_cols, p.mv_max_m, reps);
    printf("%-14s %-5s %6s %6s %5s %9s %8s %9s %9s %8s %9s\n", "weight", "type", "n", "k", "m",
           "ms", "GB/s", "GFLOP/s", "best ms", "GB/s", "GFLOP/s");
    cl_context cl = clattn_context_cl_context(ctx);
    cl_command_queue q = clattn_context_queue(ctx);
    int status = 0;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]) && !status; s++) {
        const shape *sh = &shapes[s];
        size_t be, bb;
        clattn__qlinear_type_supported(sh->type, &be, &bb);
        size_t bytes = sh->n * (sh->k / be) * bb;
        unsigned char *raw = malloc(bytes);
        random_blocks(raw, bytes, bb, 42 + s);
        clattn_qweight w;
        if (clattn__qweight_upload(ctx, sh->type, sh->n, sh->k, raw, bytes, &w) != CLATTN_OK) {
            fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
            return 1;
        }
        free(raw);
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
            for (int r = -2; r < reps && !status; r++) { /* two warm-up calls */
                double t0 = now_ms();
                if (clattn__qlinear_path(ctx, prog, CLATTN_OP_OTHER, path, m, x, 0, sh->k, &w, y,
                                         0, sh->n) != CLATTN_OK) {
                    fprintf(stderr, "qlinear: %s\n", clattn_last_error(ctx));
                    status = 1;
                }
                clFinish(q);
                if (r >= 0)
                    t[r] = now_ms() - t0;
            }
            qsort(t, (size_t)reps, sizeof(double), cmp_double);
            double med = t[reps / 2], best = t[0], flop = 2.0 * (double)m * sh->n * sh->k;
            printf("%-14s %-5s %6zu %6zu %5zu %9.3f %8.2f %9.2f %9.3f %8.2f %9.2f\n", sh->what,
                   sh->type == CLATTN_GGML_Q8_0 ? "q8_0" : "q4_1", sh->n, sh->k, m, med,
                   (double)bytes / med / 1e6, flop / med / 1e6, best, (double)bytes / best / 1e6,
                   flop / best / 1e6);
            free(t);
            clReleaseMemObject(x);
            clReleaseMemObject(y);
        }
        clattn__qweight_release(&w);
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
