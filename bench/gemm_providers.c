/*
 * The projection GEMM C[m, n] = A[m, k]·Wᵀ + bias through each of the context's GEMM providers
 * (tuning gemm_kernel 0: CLBlast, 1: the library's CPU GEMM, 2: oneDNN where built), the way the
 * layers call them (clattn__gemm_weighted, weights packed once), interleaved, on the default
 * device (or $CLATTN_DEVICE).
 *
 * usage: gemm_providers [--reps R] [--shape MxNxK]... [--kernels 0,1,2]
 *
 * Prints GFLOP/s (2·m·n·k per product, best of R after one warm-up) by wall clock, and per
 * second of the process's CPU time (every thread's: on a shared machine the wall clock counts
 * other jobs' slices too; a CPU figure near the wall figure divided by the thread count means
 * the threads were not waiting). Default shapes: a base layer's projections at 4096 rows (B4 x
 * N1024, B32 x N128), one at 512 rows, MiniLM's at 256.
 */
#include "runtime/context_internal.h"
#include "runtime/gemm.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec * 1e-6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec * 1e-6;
}

static cl_mem buffer(clattn_context *ctx, size_t floats, unsigned seed)
{
    float *x = malloc(floats * sizeof(float));
    for (size_t i = 0; i < floats; i++)
        x[i] = (float)((i * 2654435761u + seed) % 1000) / 1000.0f - 0.5f;
    cl_int err;
    cl_mem m = clCreateBuffer(ctx->cl_ctx, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR,
                              floats * sizeof(float), x, &err);
    free(x);
    if (err != CL_SUCCESS) {
        fprintf(stderr, "clCreateBuffer: %d\n", err);
        exit(1);
    }
    return m;
}

int main(int argc, char **argv)
{
    int reps = 5, nshapes = 0, kernels[3] = {0, 1, 2}, nkernels = 3;
    size_t shapes[16][3];
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            reps = atoi(argv[++i]);
        } else if (!strcmp(argv[i], "--shape") && i + 1 < argc && nshapes < 16) {
            if (sscanf(argv[++i], "%zux%zux%zu", &shapes[nshapes][0], &shapes[nshapes][1],
                       &shapes[nshapes][2]) != 3) {
                fprintf(stderr, "--shape MxNxK\n");
                return 2;
            }
            nshapes++;
        } else if (!strcmp(argv[i], "--kernels") && i + 1 < argc) {
            nkernels = 0;
            for (char *p = argv[++i]; *p && nkernels < 3; p++)
                if (*p >= '0' && *p <= '2')
                    kernels[nkernels++] = *p - '0';
        } else {
            fprintf(stderr, "usage: gemm_providers [--reps R] [--shape MxNxK]... "
                            "[--kernels 0,1,2]\n");
            return 2;
        }
    }
    if (!nshapes) {
        static const size_t defaults[][3] = {{4096, 1536, 512}, {4096, 512, 512},
                                             {4096, 2048, 512}, {4096, 512, 2048},
                                             {512, 512, 2048},  {256, 1152, 384},
                                             {256, 1536, 384},  {256, 384, 1536}};
        nshapes = (int)(sizeof(defaults) / sizeof(defaults[0]));
        memcpy(shapes, defaults, sizeof(defaults));
    }
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK) {
        fprintf(stderr, "context: %s\n", clattn_last_error(NULL));
        return 1;
    }
    clattn_tuning tuning;
    clattn_context_get_tuning(ctx, &tuning);
    printf("device: %s (%u compute units); default gemm_kernel %d\n", ctx->info.name,
           ctx->info.compute_units, tuning.gemm_kernel);
    printf("%-16s", "m x n x k");
    for (int q = 0; q < nkernels; q++)
        printf("  kernel %d: wall / cpu GFLOP/s", kernels[q]);
    printf("\n");
    for (int s = 0; s < nshapes; s++) {
        size_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        cl_mem a = buffer(ctx, m * k, 1), b = buffer(ctx, n * k, 2), bias = buffer(ctx, n, 3),
               c = buffer(ctx, m * n, 4);
        double best_wall[3] = {1e30, 1e30, 1e30}, best_cpu[3] = {1e30, 1e30, 1e30};
        bool failed[3] = {false, false, false};
        clattn_gemm_weight w[3];
        for (int q = 0; q < nkernels; q++)
            w[q] = (clattn_gemm_weight){b, 0, n, k, k, NULL, NULL, NULL};
        for (int r = 0; r <= reps; r++)
            for (int q = 0; q < nkernels; q++) {
                if (failed[q])
                    continue;
                tuning.gemm_kernel = kernels[q];
                clattn_gemm_left left;
                if (clattn_context_set_tuning(ctx, &tuning) != CLATTN_OK) {
                    failed[q] = true;
                    continue;
                }
                clFinish(ctx->queue);
                double t0 = now(), c0 = cpu_now();
                clattn_status st = clattn__gemm_weighted(ctx, CLATTN_OP_OTHER, m, a, 0, k, &w[q],
                                                         bias, 0, 0, c, 0, n, &left);
                clFinish(ctx->queue);
                double t = now() - t0, ct = cpu_now() - c0;
                if (st != CLATTN_OK) {
                    fprintf(stderr, "kernel %d: %s\n", kernels[q], clattn_last_error(ctx));
                    failed[q] = true;
                }
                if (r > 0) { /* after the warm-up, which packs the weight */
                    best_wall[q] = t < best_wall[q] ? t : best_wall[q];
                    best_cpu[q] = ct < best_cpu[q] ? ct : best_cpu[q];
                }
            }
        char label[64];
        snprintf(label, sizeof(label), "%zux%zux%zu", m, n, k);
        printf("%-16s", label);
        double flop = 2.0 * (double)m * (double)n * (double)k;
        for (int q = 0; q < nkernels; q++)
            if (failed[q])
                printf("  %30s", "unavailable");
            else
                printf("  %14.1f / %13.1f", flop / best_wall[q] * 1e-9,
                       flop / best_cpu[q] * 1e-9);
        printf("\n");
        for (int q = 0; q < nkernels; q++)
            clattn__gemm_weight_release(&w[q]);
        clReleaseMemObject(a), clReleaseMemObject(b), clReleaseMemObject(bias);
        clReleaseMemObject(c);
    }
    clattn_context_destroy(&ctx);
    return 0;
}
