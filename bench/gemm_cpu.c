/*
 * The CPU GEMM (src/runtime/gemm_cpu.c, cl/gemm_cpu.cl): correctness against a double-precision reference
 * on odd shapes and every epilogue, then throughput on the encoder's projection shapes next to
 * CLBlast (the library's default path) and, when libopenblas.so.0 loads, OpenBLAS's cblas_sgemm.
 *
 * usage: gemm_cpu [--reps R] [--check-only] [--no-clblast] [--no-openblas] [--m M]...
 *                 [--variant vw=16,nv=2,mr=12,kc=256,mb=2]... [--peak G]
 *
 * Each --variant adds a column: the kernel built with those parameters (the others from the
 * device), timed interleaved with the default one, CLBlast and OpenBLAS.
 *
 * Uses the first OpenCL device, or the platform whose name contains $CLATTN_BENCH_PLATFORM.
 * Throughput is in G multiply-adds/s (best of R runs after one warm-up) and % of --peak (default
 * 160 = the 2-core AVX-512 Xeon's fp32 peak). $CLATTN_GEMM_CPU overrides the kernel's parameters.
 */
#include "runtime/gemm_cpu.h"

#include <clblast_c.h>
#include <dlfcn.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* CPU seconds (user + system) of the whole process: on a shared machine the wall clock counts
 * other jobs' time slices too, CPU time only ours. */
static double cpu_now(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6 + ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec * 1e-6;
}

/* Best wall time and best CPU time of one measured call. */
typedef struct timing {
    double wall, cpu;
} timing;

static void timing_add(timing *t, double wall, double cpu)
{
    if (wall < t->wall)
        t->wall = wall;
    if (cpu < t->cpu)
        t->cpu = cpu;
}

static unsigned long long rng = 88172645463325252ull;
static float frand(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 11) * (1.0 / 9007199254740992.0)) * 2.0f - 1.0f;
}

#define CHECK_CL(call)                                                                      \
    do {                                                                                    \
        cl_int check_err = (call);                                                          \
        if (check_err != CL_SUCCESS) {                                                      \
            fprintf(stderr, "%s:%d: %s failed: %d\n", __FILE__, __LINE__, #call, check_err); \
            exit(1);                                                                        \
        }                                                                                   \
    } while (0)

static cl_context ctx;
static cl_device_id dev;
static cl_command_queue queue;
static clattn_gemm_cpu *gemm;

static cl_mem buffer(size_t floats, const float *init)
{
    cl_int err;
    cl_mem m = clCreateBuffer(ctx, CL_MEM_READ_WRITE | (init ? CL_MEM_COPY_HOST_PTR : 0),
                              (floats ? floats : 1) * sizeof(float), (void *)init, &err);
    CHECK_CL(err);
    return m;
}

static void die_status(clattn_status s, const char *what)
{
    if (s != CLATTN_OK) {
        fprintf(stderr, "%s failed (%d): %s\n", what, (int)s, clattn__gemm_cpu_error(gemm));
        exit(1);
    }
}

/* One correctness case: returns 1 when within tolerance. */
static int check_case(size_t m, size_t n, size_t k, size_t pad, int use_bias, float beta,
                      clattn_gemm_cpu_act act)
{
    size_t lda = k + pad, ldb = k + 2 * pad, ldc = n + pad, boff = pad, aoff = 3 * pad,
           coff = pad;
    size_t a_len = aoff + m * lda, b_len = boff + n * ldb, c_len = coff + m * ldc;
    float *A = malloc(a_len * sizeof(float)), *B = malloc(b_len * sizeof(float)),
          *C = malloc(c_len * sizeof(float)), *bias = malloc((n + 1) * sizeof(float)),
          *out = malloc(c_len * sizeof(float));
    for (size_t i = 0; i < a_len; i++)
        A[i] = frand();
    for (size_t i = 0; i < b_len; i++)
        B[i] = frand();
    for (size_t i = 0; i < c_len; i++)
        C[i] = frand();
    for (size_t i = 0; i < n + 1; i++)
        bias[i] = frand();
    cl_mem dA = buffer(a_len, A), dB = buffer(b_len, B), dC = buffer(c_len, C),
           dbias = buffer(n + 1, bias), packed;
    die_status(clattn__gemm_cpu_pack_b(gemm, queue, n, k, dB, boff, ldb, &packed, NULL), "pack");
    die_status(clattn__gemm_cpu_run(gemm, queue, m, n, k, dA, aoff, lda, packed,
                                    use_bias ? dbias : NULL, 1, beta, dC, coff, ldc, act, NULL),
               "run");
    CHECK_CL(clEnqueueReadBuffer(queue, dC, CL_TRUE, 0, c_len * sizeof(float), out, 0, NULL, NULL));
    double max_abs = 0, max_rel = 0;
    int ok = 1;
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            double s = 0, mag = 0;
            for (size_t l = 0; l < k; l++) {
                double p = (double)A[aoff + i * lda + l] * B[boff + j * ldb + l];
                s += p;
                mag += fabs(p);
            }
            if (use_bias)
                s += bias[1 + j];
            if (beta != 0.0f)
                s += (double)beta * C[coff + i * ldc + j];
            if (act == CLATTN_GEMM_CPU_ACT_RELU)
                s = s > 0 ? s : 0;
            else if (act == CLATTN_GEMM_CPU_ACT_GELU)
                s = 0.5 * s * (1.0 + erf(s / sqrt(2.0)));
            double got = out[coff + i * ldc + j], d = fabs(got - s);
            double tol = 1e-6 * (mag + 2) * 4 + 1e-5;
            if (d > max_abs)
                max_abs = d;
            if (d / (fabs(s) + 1e-3) > max_rel)
                max_rel = d / (fabs(s) + 1e-3);
            if (!(d <= tol))
                ok = 0;
        }
    /* nothing outside the m × n window of C changed */
    for (size_t i = 0; i < c_len; i++) {
        size_t r = (i - coff) / ldc, col = (i - coff) % ldc;
        if ((i < coff || r >= m || col >= n) && out[i] != C[i])
            ok = 0;
    }
    printf("  %5zu x %5zu x %5zu pad %zu bias %d beta %4.1f act %d: max abs %.2e max rel %.2e %s\n",
           m, n, k, pad, use_bias, beta, (int)act, max_abs, max_rel, ok ? "ok" : "FAIL");
    clReleaseMemObject(dA);
    clReleaseMemObject(dB);
    clReleaseMemObject(dC);
    clReleaseMemObject(dbias);
    clReleaseMemObject(packed);
    free(A);
    free(B);
    free(C);
    free(bias);
    free(out);
    return ok;
}

/* "G/s (% of peak) | G per CPU-second" */
static void format_rate(char *out, size_t size, int have, double macs, timing t, double peak,
                        unsigned cores)
{
    if (!have) {
        snprintf(out, size, "- | -");
        return;
    }
    double wall = macs / t.wall * 1e-9, cpu = macs / t.cpu * 1e-9;
    snprintf(out, size, wall < 1 ? "%.3f (%.1f %%) | %.3f (%.1f %%)" : "%.1f (%.0f %%) | %.1f (%.0f %%)",
             wall, wall / peak * 100, cpu, cpu / (peak / cores) * 100);
}

#define MAX_VARIANTS 8

/* "vw=16,nv=2,mr=12,kc=256,mb=2,pa=1": fields left out (or 0) come from the device. */
static clattn_gemm_cpu_params parse_params(const char *text)
{
    clattn_gemm_cpu_params p = {0};
    char key[8];
    unsigned value;
    int used;
    while (sscanf(text, " %7[a-z] = %u%n", key, &value, &used) == 2) {
        unsigned *field = strcmp(key, "vw") == 0   ? &p.vw
                          : strcmp(key, "nv") == 0 ? &p.nv
                          : strcmp(key, "mr") == 0 ? &p.mr
                          : strcmp(key, "kc") == 0 ? &p.kc
                          : strcmp(key, "mb") == 0 ? &p.mb
                          : strcmp(key, "pa") == 0 ? &p.pack_a
                                                   : NULL;
        if (field)
            *field = value;
        text += used;
        while (*text == ',' || *text == ' ')
            text++;
    }
    return p;
}

typedef void (*sgemm_fn)(int order, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);

int main(int argc, char **argv)
{
    int reps = 5, check_only = 0, use_clblast = 1, use_openblas = 1;
    double peak = 160.0;
    size_t ms[8], m_count = 0, variant_count = 0;
    const char *variants[MAX_VARIANTS];
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--reps") == 0 && i + 1 < argc)
            reps = atoi(argv[++i]);
        else if (strcmp(argv[i], "--check-only") == 0)
            check_only = 1;
        else if (strcmp(argv[i], "--no-clblast") == 0)
            use_clblast = 0;
        else if (strcmp(argv[i], "--no-openblas") == 0)
            use_openblas = 0;
        else if (strcmp(argv[i], "--peak") == 0 && i + 1 < argc)
            peak = atof(argv[++i]);
        else if (strcmp(argv[i], "--variant") == 0 && i + 1 < argc && variant_count < MAX_VARIANTS)
            variants[variant_count++] = argv[++i];
        else if (strcmp(argv[i], "--m") == 0 && i + 1 < argc && m_count < 8)
            ms[m_count++] = (size_t)atoll(argv[++i]);
        else {
            fprintf(stderr,
                    "usage: %s [--reps R] [--check-only] [--no-clblast] [--no-openblas] [--m M]... "
                    "[--variant vw=16,nv=2,mr=12,kc=0,mb=0]... [--peak G]\n",
                    argv[0]);
            return 2;
        }
    }
    if (!m_count) {
        ms[0] = 512;
        ms[1] = 4096;
        ms[2] = 16384;
        m_count = 3;
    }

    cl_platform_id platforms[8];
    cl_uint np = 0;
    CHECK_CL(clGetPlatformIDs(8, platforms, &np));
    const char *want = getenv("CLATTN_BENCH_PLATFORM");
    cl_platform_id plat = NULL;
    char pname[256] = "";
    for (cl_uint i = 0; i < np && !plat; i++) {
        clGetPlatformInfo(platforms[i], CL_PLATFORM_NAME, sizeof(pname), pname, NULL);
        if (!want || strstr(pname, want))
            plat = platforms[i];
    }
    if (!plat) {
        fprintf(stderr, "no OpenCL platform%s%s\n", want ? " matching " : "", want ? want : "");
        return 1;
    }
    CHECK_CL(clGetDeviceIDs(plat, CL_DEVICE_TYPE_ALL, 1, &dev, NULL));
    char dname[256] = "";
    clGetDeviceInfo(dev, CL_DEVICE_NAME, sizeof(dname), dname, NULL);
    cl_int err;
    ctx = clCreateContext(NULL, 1, &dev, NULL, NULL, &err);
    CHECK_CL(err);
    /* profiling on: POCL_TRACING=text then shows each kernel's time (CLBlast runs several) */
    queue = clCreateCommandQueue(ctx, dev, CL_QUEUE_PROFILING_ENABLE, &err);
    CHECK_CL(err);

    char error[1024];
    double t0 = now();
    if (clattn__gemm_cpu_create(ctx, dev, NULL, &gemm, error, sizeof(error)) != CLATTN_OK) {
        fprintf(stderr, "%s\n", error);
        return 1;
    }
    clattn_gemm_cpu_params p = clattn__gemm_cpu_params(gemm);
    printf("platform %s, device %s\nkernel: vw %u nv %u (nr %u) mr %u kc %u mb %u pack_a %u; built in %.2f s "
           "with \"%s\"\n",
           pname, dname, p.vw, p.nv, p.vw * p.nv, p.mr, p.kc, p.mb, p.pack_a, now() - t0,
           clattn__gemm_cpu_options(gemm));

    printf("correctness (double-precision reference):\n");
    static const size_t shapes[][3] = {{1, 1, 1},    {7, 13, 5},   {129, 257, 65}, {3, 33, 1},
                                       {25, 31, 300}, {64, 64, 64}, {13, 100, 17}};
    int ok = 1;
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++)
        ok &= check_case(shapes[s][0], shapes[s][1], shapes[s][2], 0, 0, 0.0f,
                         CLATTN_GEMM_CPU_ACT_NONE);
    ok &= check_case(129, 257, 65, 3, 1, 0.0f, CLATTN_GEMM_CPU_ACT_RELU);
    ok &= check_case(129, 257, 65, 1, 1, 0.5f, CLATTN_GEMM_CPU_ACT_GELU);
    ok &= check_case(37, 45, 700, 5, 0, 1.0f, CLATTN_GEMM_CPU_ACT_NONE);
    ok &= check_case(7, 13, 5, 2, 1, -1.5f, CLATTN_GEMM_CPU_ACT_RELU);
    printf("correctness: %s\n", ok ? "ok" : "FAILED");
    if (!ok || check_only) {
        clattn__gemm_cpu_release(gemm);
        return ok ? 0 : 1;
    }

    if (use_clblast && strstr(pname, "Portable Computing Language")) {
        /* The library's default path on PoCL's CPU device overrides CLBlast's Xgemm parameters
         * with these (src/runtime/tuning.c, pocl_cpu_xgemm): the same here for a fair comparison. */
        static const char *const xnames[] = {"GEMMK", "MWG", "NWG",  "KWG", "MDIMC", "NDIMC",
                                             "MDIMA", "NDIMB", "KWI", "VWM", "VWN",   "STRM",
                                             "STRN",  "SA",  "SB",   "KREG"};
        static const size_t xvalues[] = {0, 128, 128, 64, 16, 16, 16, 16, 4, 8, 8, 0, 0, 1, 1, 1};
        CLBlastStatusCode code = CLBlastOverrideParameters(dev, "Xgemm", CLBlastPrecisionSingle, 16,
                                                           (const char **)xnames, xvalues);
        printf("CLBlast: the library's Xgemm parameters for PoCL %s\n",
               code == CLBlastSuccess ? "applied" : "refused");
    }

    sgemm_fn openblas = NULL;
    if (use_openblas) {
        void *h = dlopen("libopenblas.so.0", RTLD_NOW);
        if (h) {
            void *sym = dlsym(h, "cblas_sgemm");
            memcpy(&openblas, &sym, sizeof(openblas)); /* ISO C has no object-to-function cast */
        }
        if (!openblas)
            printf("(OpenBLAS not loaded: %s)\n", dlerror());
    }

    /* The implementations, interleaved rep by rep so that all see the same machine load: our
     * kernel (the device's default parameters, then each --variant), CLBlast, OpenBLAS. */
    clattn_gemm_cpu *impl_gemm[MAX_VARIANTS + 1];
    char impl_name[MAX_VARIANTS + 3][64];
    size_t n_ours = 0;
    impl_gemm[n_ours] = gemm;
    snprintf(impl_name[n_ours++], sizeof(impl_name[0]), "ours");
    for (size_t v = 0; v < variant_count; v++) {
        clattn_gemm_cpu_params vp = parse_params(variants[v]);
        if (clattn__gemm_cpu_create(ctx, dev, &vp, &impl_gemm[n_ours], error, sizeof(error)) !=
            CLATTN_OK) {
            fprintf(stderr, "variant %s: %s\n", variants[v], error);
            return 1;
        }
        snprintf(impl_name[n_ours++], sizeof(impl_name[0]), "%s", variants[v]);
    }
    size_t n_impl = n_ours;
    int clblast_index = -1, openblas_index = -1;
    if (use_clblast) {
        clblast_index = (int)n_impl;
        snprintf(impl_name[n_impl++], sizeof(impl_name[0]), "CLBlast");
    }
    if (openblas) {
        openblas_index = (int)n_impl;
        snprintf(impl_name[n_impl++], sizeof(impl_name[0]), "OpenBLAS");
    }

    static const size_t nk[][2] = {{1536, 512}, {512, 512}, {2048, 512}, {512, 2048}};
    static const char *names[] = {"QKV", "out-proj", "linear1", "linear2"};
    cl_uint cores = 1;
    clGetDeviceInfo(dev, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof(cores), &cores, NULL);
    printf("\nthroughput, best of %d after a warm-up, implementations interleaved: G multiply-adds/s "
           "by the wall clock (%% of %.0f) | G multiply-adds per CPU-second (%% of the per-core peak "
           "%.0f; less sensitive to other jobs' time slices)\n| M | N | K | shape |",
           reps, peak, peak / cores);
    for (size_t i = 0; i < n_impl; i++)
        printf(" %s | /CPU-s |", impl_name[i]);
    printf("\n|---|---|---|---|");
    for (size_t i = 0; i < n_impl; i++)
        printf("---|---|");
    printf("\n");
    for (size_t mi = 0; mi < m_count; mi++)
        for (size_t s = 0; s < 4; s++) {
            size_t m = ms[mi], n = nk[s][0], k = nk[s][1];
            float *A = malloc(m * k * sizeof(float)), *B = malloc(n * k * sizeof(float)),
                  *C = malloc(m * n * sizeof(float));
            for (size_t i = 0; i < m * k; i++)
                A[i] = frand();
            for (size_t i = 0; i < n * k; i++)
                B[i] = frand();
            cl_mem dA = buffer(m * k, A), dB = buffer(n * k, B), dC = buffer(m * n, NULL);
            cl_mem packed[MAX_VARIANTS + 1];
            for (size_t v = 0; v < n_ours; v++) {
                gemm = impl_gemm[v];
                die_status(clattn__gemm_cpu_pack_b(gemm, queue, n, k, dB, 0, k, &packed[v], NULL),
                           "pack");
            }
            clFinish(queue);
            double macs = (double)m * n * k;
            timing best[MAX_VARIANTS + 3];
            for (size_t i = 0; i < n_impl; i++)
                best[i] = (timing){1e30, 1e30};
            for (int r = 0; r <= reps; r++)
                for (size_t i = 0; i < n_impl; i++) {
                    double t = now(), c0 = cpu_now();
                    if (i < n_ours) {
                        gemm = impl_gemm[i];
                        die_status(clattn__gemm_cpu_run(gemm, queue, m, n, k, dA, 0, k, packed[i],
                                                        NULL, 0, 0.0f, dC, 0, n,
                                                        CLATTN_GEMM_CPU_ACT_NONE, NULL),
                                   "run");
                        clFinish(queue);
                    } else if ((int)i == clblast_index) {
                        CLBlastStatusCode code = CLBlastSgemm(
                            CLBlastLayoutRowMajor, CLBlastTransposeNo, CLBlastTransposeYes, m, n, k,
                            1.0f, dA, 0, k, dB, 0, k, 0.0f, dC, 0, n, &queue, NULL);
                        if (code != CLBlastSuccess) {
                            fprintf(stderr, "CLBlastSgemm failed: %d\n", (int)code);
                            return 1;
                        }
                        clFinish(queue);
                    } else if ((int)i == openblas_index) {
                        openblas(101 /* row-major */, 111 /* A as is */, 112 /* B transposed */,
                                 (int)m, (int)n, (int)k, 1.0f, A, (int)k, B, (int)k, 0.0f, C,
                                 (int)n);
                    }
                    t = now() - t;
                    c0 = cpu_now() - c0;
                    if (r)
                        timing_add(&best[i], t, c0);
                }
            printf("| %zu | %zu | %zu | %s |", m, n, k, names[s]);
            for (size_t i = 0; i < n_impl; i++) {
                char cell[64];
                format_rate(cell, sizeof(cell), 1, macs, best[i], peak, cores);
                printf(" %s |", cell);
            }
            printf("\n");
            fflush(stdout);
            clReleaseMemObject(dA);
            clReleaseMemObject(dB);
            clReleaseMemObject(dC);
            for (size_t v = 0; v < n_ours; v++)
                clReleaseMemObject(packed[v]);
            free(A);
            free(B);
            free(C);
        }
    for (size_t v = 1; v < n_ours; v++)
        clattn__gemm_cpu_release(impl_gemm[v]);
    gemm = impl_gemm[0];
    clattn__gemm_cpu_release(gemm);
    clReleaseCommandQueue(queue);
    clReleaseContext(ctx);
    return 0;
}
