/*
 * clattn_bench: times one libclattn operation on one shape and prints one JSON object.
 * Driven by bench/run.py (one process per measurement, so that peak memory is per measurement).
 *
 * usage: clattn_bench WHAT --batch B --seq N [--dim E] [--heads H] [--ff F] [--layers L]
 *                     [--repeat R] [--window W]
 *   WHAT: attention-fused | attention-unfused   scaled dot-product attention core, q/k/v
 *                                               [B, H, N, E/H] (scores + softmax + weights·V);
 *                                               --window W: a sliding window of width W
 *         mha                                   nn.MultiheadAttention forward (self-attention)
 *         encoder-layer                         base-style post-LN encoder layers (relu);
 *                                               --layers L stacks L of them (default 1)
 * Output: {"what", "batch", "seq", "dim", "heads", "ms_median", "ms_min", "macs",
 *          "gflops" (multiply-adds per second / 1e9; the full N² products, also with a window),
 *          "peak_rss_mib", "workspace_mib" (the context's workspace after the run), "layers",
 *          "device", "setup_ms", "window"}
 */
#include <clattn/clattn.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int compare(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int die(clattn_context *ctx, const char *what)
{
    fprintf(stderr, "clattn_bench: %s: %s\n", what, clattn_last_error(ctx));
    return 1;
}

static clattn_tensor *random_tensor(clattn_context *ctx, int ndim, const size_t *shape,
                                    unsigned seed)
{
    clattn_tensor *t = NULL;
    if (clattn_tensor_create(ctx, &t, ndim, shape) != CLATTN_OK)
        return NULL;
    size_t n = clattn_tensor_numel(t);
    float *x = malloc(n * sizeof(float));
    if (!x) {
        clattn_tensor_destroy(&t);
        return NULL;
    }
    unsigned long long s = seed * 2654435761ull + 1;
    for (size_t i = 0; i < n; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(s >> 11) / 4503599627370496.0 - 1.0);
    }
    clattn_status st = clattn_tensor_write(t, x, n);
    free(x);
    if (st != CLATTN_OK)
        clattn_tensor_destroy(&t);
    return t;
}

typedef struct bench {
    clattn_context *ctx;
    const char *what;
    size_t B, N, E, H, F, L, window;
    clattn_tensor *q, *k, *v, *o, *x, *y, *w;
    clattn_mha *mha;
    clattn_encoder *enc;
    clattn_attention_path path;
} bench;

static clattn_status step(bench *b)
{
    if (b->q) {
        clattn_sdpa_params p;
        clattn_sdpa_params_default(&p);
        p.path = b->path;
        p.window = b->window;
        return clattn_sdpa(b->ctx, b->q, b->k, b->v, b->o, &p);
    }
    if (b->mha)
        return clattn_mha_forward(b->mha, b->x, NULL, NULL, b->y, NULL);
    return clattn_encoder_forward(b->enc, b->x, b->y, NULL);
}

static int setup(bench *b)
{
    size_t d = b->E / b->H;
    size_t head_shape[4] = {b->B, b->H, b->N, d}, seq_shape[3] = {b->B, b->N, b->E};
    if (strncmp(b->what, "attention-", 10) == 0) {
        b->path = strcmp(b->what, "attention-fused") == 0 ? CLATTN_PATH_FUSED : CLATTN_PATH_UNFUSED;
        if (!(b->q = random_tensor(b->ctx, 4, head_shape, 1)) ||
            !(b->k = random_tensor(b->ctx, 4, head_shape, 2)) ||
            !(b->v = random_tensor(b->ctx, 4, head_shape, 3)) ||
            clattn_tensor_create(b->ctx, &b->o, 4, head_shape) != CLATTN_OK)
            return die(b->ctx, "tensors");
        return 0;
    }
    if (!(b->x = random_tensor(b->ctx, 3, seq_shape, 4)) ||
        clattn_tensor_create(b->ctx, &b->y, 3, seq_shape) != CLATTN_OK)
        return die(b->ctx, "tensors");
    if (strcmp(b->what, "mha") == 0) {
        clattn_mha_config mc;
        clattn_mha_config_default(&mc, b->E, b->H);
        if (clattn_mha_create(b->ctx, &b->mha, &mc) != CLATTN_OK)
            return die(b->ctx, "mha");
        size_t E = b->E;
        float *w = calloc(4 * E * E + 4 * E, sizeof(float));
        if (!w)
            return die(b->ctx, "memory");
        for (size_t i = 0; i < 4 * E * E; i++)
            w[i] = (float)((int)(i * 2654435761u % 2001) - 1000) / (1000.0f * sqrtf((float)E));
        clattn_mha_weights mw;
        memset(&mw, 0, sizeof(mw));
        mw.in_proj_weight = (clattn_host_tensor){w, 2, {3 * E, E, 0, 0}};
        mw.out_proj_weight = (clattn_host_tensor){w + 3 * E * E, 2, {E, E, 0, 0}};
        mw.in_proj_bias = (clattn_host_tensor){w + 4 * E * E, 1, {3 * E, 0, 0, 0}};
        mw.out_proj_bias = (clattn_host_tensor){w + 4 * E * E, 1, {E, 0, 0, 0}};
        clattn_status st = clattn_mha_load_weights(b->mha, &mw);
        free(w);
        return st == CLATTN_OK ? 0 : die(b->ctx, "mha weights");
    }
    if (strcmp(b->what, "encoder-layer") == 0) {
        clattn_encoder_config cfg;
        clattn_encoder_config_default(&cfg, b->E, b->H, b->L, b->F);
        if (clattn_encoder_create(b->ctx, &b->enc, &cfg) != CLATTN_OK ||
            clattn_encoder_init_random(b->enc, 1) != CLATTN_OK)
            return die(b->ctx, "encoder");
        return 0;
    }
    fprintf(stderr, "clattn_bench: unknown WHAT '%s'\n", b->what);
    return 2;
}

static uint64_t macs_of(const bench *b)
{
    uint64_t B = b->B, N = b->N, E = b->E, H = b->H, F = b->F, d = E / H;
    uint64_t attention = 2 * B * H * N * N * d;
    if (b->q)
        return attention;
    uint64_t mha = B * N * E * 3 * E + attention + B * N * E * E;
    return b->mha ? mha : (mha + 2 * B * N * E * F) * b->L;
}

int main(int argc, char **argv)
{
    bench b;
    memset(&b, 0, sizeof(b));
    b.E = 512, b.H = 8, b.F = 2048, b.B = 1, b.N = 128, b.L = 1;
    unsigned repeat = 3;
    if (argc < 2) {
        fprintf(stderr, "usage: clattn_bench WHAT --batch B --seq N [--dim E] [--heads H] "
                        "[--ff F] [--repeat R] [--window W]\n");
        return 2;
    }
    b.what = argv[1];
    for (int i = 2; i + 1 < argc; i += 2) {
        size_t v = (size_t)strtoull(argv[i + 1], NULL, 10);
        if (strcmp(argv[i], "--batch") == 0) b.B = v;
        else if (strcmp(argv[i], "--seq") == 0) b.N = v;
        else if (strcmp(argv[i], "--dim") == 0) b.E = v;
        else if (strcmp(argv[i], "--heads") == 0) b.H = v;
        else if (strcmp(argv[i], "--ff") == 0) b.F = v;
        else if (strcmp(argv[i], "--layers") == 0 && v > 0) b.L = v;
        else if (strcmp(argv[i], "--repeat") == 0) repeat = (unsigned)v;
        else if (strcmp(argv[i], "--window") == 0) b.window = v;
        else {
            fprintf(stderr, "clattn_bench: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    double t0 = now_ms();
    clattn_context_params params;
    clattn_context_params_default(&params);
    if (clattn_context_create(&b.ctx, &params) != CLATTN_OK)
        return die(NULL, "context");
    int rc = setup(&b);
    if (rc)
        return rc;
    double setup_ms = now_ms() - t0;
    double *times = calloc(repeat + 1, sizeof(double));
    for (unsigned i = 0; i <= repeat; i++) { /* the first is the warm-up */
        double s = now_ms();
        if (step(&b) != CLATTN_OK || clattn_context_finish(b.ctx) != CLATTN_OK)
            return die(b.ctx, b.what);
        times[i] = now_ms() - s;
    }
    qsort(times + 1, repeat, sizeof(double), compare);
    double median = repeat ? times[1 + repeat / 2] : times[0];
    double best = repeat ? times[1] : times[0];
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    clattn_device_info info;
    clattn_context_device_info(b.ctx, &info);
    uint64_t macs = macs_of(&b);
    printf("{\"what\": \"%s\", \"batch\": %zu, \"seq\": %zu, \"dim\": %zu, \"heads\": %zu, "
           "\"ms_median\": %.3f, \"ms_min\": %.3f, \"macs\": %llu, \"gflops\": %.3f, "
           "\"peak_rss_mib\": %.1f, \"workspace_mib\": %.1f, \"layers\": %zu, \"device\": \"%s\", "
           "\"setup_ms\": %.1f, \"window\": %zu}\n",
           b.what, b.B, b.N, b.E, b.H, median, best, (unsigned long long)macs,
           (double)macs * 1e-6 / median, (double)usage.ru_maxrss / 1024.0,
           (double)clattn_context_workspace_bytes(b.ctx) / (1024.0 * 1024.0), b.L, info.name,
           setup_ms, b.window);
    free(times);
    clattn_tensor_destroy(&b.q), clattn_tensor_destroy(&b.k), clattn_tensor_destroy(&b.v);
    clattn_tensor_destroy(&b.o), clattn_tensor_destroy(&b.x), clattn_tensor_destroy(&b.y);
    clattn_mha_destroy(&b.mha);
    clattn_encoder_destroy(&b.enc);
    clattn_context_destroy(&b.ctx);
    return 0;
}
