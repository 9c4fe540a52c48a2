/*
 * flops: the FLOP-count experiment (the paper's section 3.2.2, docs/library.md) run for real.
 *
 * A timm-style attention module (one qkv linear layer without bias, attention, output
 * projection `proj`) on an input [32, 1024, 512], three ways: one head with proj replaced by the
 * identity, 8 heads with proj, 8 heads with proj replaced by the identity. The FLOPs printed are
 * the multiply-adds the library counted while it ran (fvcore's convention), so the experiment's
 * figures — 60129542144, 68719476736, 60129542144 — come out of the device run itself. Then the
 * analytic table of parameters and FLOPs per layer for the Table 3 rows.
 */
#include <clattn/clattn.h>

#include <getopt.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct options {
    const char *device;
    size_t batch, seq, dim, heads;
    bool table_only;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: flops [--device SPEC] [--batch B] [--seq N] [--dim D] [--heads H] [--table]\n"
            "  Runs timm-style attention on [B, N, D] (default 32, 1024, 512; H = 8) three ways\n"
            "  and prints the FLOPs the library counted, then the Table 3 analytic table.\n"
            "  --table   print only the analytic table (no device run)\n");
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int fail(clattn_context *ctx, const char *what)
{
    fprintf(stderr, "flops: %s: %s\n", what, clattn_last_error(ctx));
    return 1;
}

/* a * b * c, false on overflow. */
static bool mul3(size_t a, size_t b, size_t c, size_t *out)
{
    if ((b != 0 && a > SIZE_MAX / b) || (c != 0 && a * b > SIZE_MAX / c))
        return false;
    *out = a * b * c;
    return true;
}

/* Random weights in nn.Linear's range for a host tensor of `count` floats; NULL when out of
 * memory or when the byte count overflows. */
static float *random_floats(size_t count, size_t fan_in, unsigned seed)
{
    if (count > SIZE_MAX / sizeof(float))
        return NULL;
    float *x = malloc(count * sizeof(float));
    if (!x)
        return NULL;
    unsigned long long state = seed * 0x9e3779b97f4a7c15ull + 1;
    for (size_t i = 0; i < count; i++) {
        state = state * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)(((double)(state >> 11) / 4503599627370496.0 - 1.0) / (double)fan_in);
    }
    return x;
}

/* Runs one variant and prints its counted multiply-adds, per operation, and the time. */
static int run_variant(clattn_context *ctx, const options *o, const char *label, size_t heads,
                       int proj, const clattn_tensor *x, clattn_tensor *y)
{
    size_t D = o->dim;
    clattn_mha_config cfg;
    clattn_mha_config_timm(&cfg, D, heads, 0);
    cfg.out_proj = proj;
    clattn_mha *mha = NULL;
    if (clattn_mha_create(ctx, &mha, &cfg) != CLATTN_OK)
        return fail(ctx, label);
    size_t qkv_count = 0, proj_count = 0;
    bool sizes_ok = mul3(3, D, D, &qkv_count) && mul3(1, D, D, &proj_count);
    float *qkv = sizes_ok ? random_floats(qkv_count, D, 1) : NULL;
    float *w_proj = sizes_ok ? random_floats(proj_count, D, 2) : NULL;
    float *b_proj = random_floats(D, D, 3);
    int rc = 0;
    if (!qkv || !w_proj || !b_proj) {
        fprintf(stderr, "flops: out of memory\n");
        rc = 1;
        goto done;
    }
    clattn_mha_weights w;
    memset(&w, 0, sizeof(w));
    w.in_proj_weight = (clattn_host_tensor){qkv, 2, {3 * D, D, 0, 0}};
    if (proj) {
        w.out_proj_weight = (clattn_host_tensor){w_proj, 2, {D, D, 0, 0}};
        w.out_proj_bias = (clattn_host_tensor){b_proj, 1, {D, 0, 0, 0}};
    }
    if (clattn_mha_load_weights(mha, &w) != CLATTN_OK) {
        rc = fail(ctx, label);
        goto done;
    }
    clattn_stats stats;
    double start = now_ms();
    if (clattn_stats_reset(ctx) != CLATTN_OK || clattn_mha_forward(mha, x, NULL, NULL, y, NULL) ||
        clattn_context_finish(ctx) != CLATTN_OK || clattn_stats_get(ctx, &stats) != CLATTN_OK) {
        rc = fail(ctx, label);
        goto done;
    }
    double ms = now_ms() - start;
    printf("%-36s %14llu FLOPs   %9.1f ms   %6.2f GFLOP/s\n", label,
           (unsigned long long)stats.total_macs, ms, (double)stats.total_macs * 1e-6 / ms);
    for (int op = 0; op < CLATTN_OP_COUNT; op++)
        if (stats.macs[op])
            printf("    %-32s %14llu\n", clattn_op_name((clattn_op)op),
                   (unsigned long long)stats.macs[op]);
done:
    free(qkv), free(w_proj), free(b_proj);
    clattn_mha_destroy(&mha);
    return rc;
}

static int run_experiment(const options *o)
{
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = o->device;
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, &params) != CLATTN_OK)
        return fail(NULL, "creating the context");
    clattn_device_info info;
    clattn_context_device_info(ctx, &info);
    printf("device: %s (%s)\n", info.name, info.platform_name);
    printf("timm-style attention, input [%zu, %zu, %zu], qkv without bias; FLOPs = multiply-adds "
           "counted while running (fvcore convention)\n\n",
           o->batch, o->seq, o->dim);
    size_t shape[3] = {o->batch, o->seq, o->dim}, n;
    if (!mul3(o->batch, o->seq, o->dim, &n) || n > SIZE_MAX / sizeof(float) ||
        n * sizeof(float) > info.max_alloc_bytes) {
        fprintf(stderr, "flops: the input [%zu, %zu, %zu] is too large for the device (%llu bytes "
                "at most in one buffer)\n", o->batch, o->seq, o->dim,
                (unsigned long long)info.max_alloc_bytes);
        clattn_context_destroy(&ctx);
        return 1;
    }
    clattn_tensor *x = NULL, *y = NULL;
    float *input = random_floats(n, 1, 4);
    int rc = 0;
    if (!input || clattn_tensor_create(ctx, &x, 3, shape) != CLATTN_OK ||
        clattn_tensor_create(ctx, &y, 3, shape) != CLATTN_OK ||
        clattn_tensor_write(x, input, n) != CLATTN_OK) {
        rc = fail(ctx, "preparing the input");
    } else {
        char multi[64], multi_id[64];
        snprintf(multi, sizeof(multi), "multi-head (%zu heads) with W^O", o->heads);
        snprintf(multi_id, sizeof(multi_id), "multi-head (%zu heads) without W^O", o->heads);
        if ((rc = run_variant(ctx, o, "single head without W^O", 1, 0, x, y)) == 0 &&
            (rc = run_variant(ctx, o, multi, o->heads, 1, x, y)) == 0)
            rc = run_variant(ctx, o, multi_id, o->heads, 0, x, y);
        printf("\nThe only difference between one head and %zu heads without W^O is how Q, K, V "
               "are split: the work is the same. W^O adds B*N*D*D = %llu.\n\n",
               o->heads, (unsigned long long)o->batch * o->seq * o->dim * o->dim);
    }
    free(input);
    clattn_tensor_destroy(&x);
    clattn_tensor_destroy(&y);
    clattn_context_destroy(&ctx);
    return rc;
}

/* Table 3's parameter counts (millions; 0: the paper lists none for the row). */
static unsigned paper_params_millions(const char *row)
{
    static const struct {
        const char *row;
        unsigned millions;
    } paper[] = {{"base", 65},   {"big", 213},     {"B-dk16", 58},   {"B-dk32", 60},
                 {"C-N2", 36},   {"C-N4", 50},     {"C-N8", 80},     {"C-d256", 28},
                 {"C-d1024", 168}, {"C-ff1024", 53}, {"C-ff4096", 90}};
    for (size_t i = 0; i < sizeof(paper) / sizeof(paper[0]); i++)
        if (strcmp(paper[i].row, row) == 0)
            return paper[i].millions;
    return 0;
}

static void print_table(void)
{
    printf("Table 3 rows: parameters of the encoder stack, of the whole encoder-decoder model\n"
           "(vocabulary 37000, one embedding shared by source, target and output projection)\n"
           "beside the paper's count, and FLOPs of one encoder layer on 1024 tokens\n");
    printf("%-9s %3s %7s %6s %4s %5s %5s %12s %12s %6s %16s\n", "row", "N", "d_model", "d_ff",
           "h", "d_k", "d_v", "enc params", "model params", "paper", "FLOPs per layer");
    const char *const *names = clattn_encoder_preset_names();
    for (size_t i = 0; names[i]; i++) {
        clattn_encoder_config c;
        uint64_t params, model_params, macs[CLATTN_OP_COUNT], total = 0;
        clattn_encoder_preset(names[i], &c);
        clattn_encoder_count_params(&c, &params);
        clattn_transformer_count_params(&c, 37000, &model_params);
        c.num_layers = 1;
        clattn_encoder_count_macs(&c, 1, 1024, macs);
        for (int op = 0; op < CLATTN_OP_COUNT; op++)
            total += macs[op];
        clattn_encoder_preset(names[i], &c);
        char paper[16] = "-";
        if (paper_params_millions(names[i]))
            snprintf(paper, sizeof(paper), "%uM", paper_params_millions(names[i]));
        printf("%-9s %3zu %7zu %6zu %4zu %5zu %5zu %12llu %11.1fM %6s %16llu\n", names[i],
               c.num_layers, c.d_model, c.dim_feedforward, c.nhead, c.head_dim_qk, c.head_dim_v,
               (unsigned long long)params, (double)model_params / 1e6, paper,
               (unsigned long long)total);
    }
    printf("(enc params: the encoder layers only; model params: encoder and decoder layers, their\n"
           "final norms and the shared embedding)\n");
}

static int parse_size(const char *text, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (!text[0] || text[0] == '-' || *end || v == 0 || v > (1ull << 30))
        return 0;
    *out = (size_t)v;
    return 1;
}

int main(int argc, char **argv)
{
    options o = {NULL, 32, 1024, 512, 8, false};
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'}, {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 'n'},    {"dim", required_argument, NULL, 'D'},
        {"heads", required_argument, NULL, 'H'},  {"table", no_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        size_t *target = c == 'b' ? &o.batch : c == 'n' ? &o.seq : c == 'D' ? &o.dim : &o.heads;
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'b':
        case 'n':
        case 'D':
        case 'H':
            if (!parse_size(optarg, target)) {
                fprintf(stderr, "flops: %s needs a positive integer, not '%s'\n",
                        argv[optind - 1], optarg);
                return 2;
            }
            break;
        case 't': o.table_only = true; break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "flops: bad option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc || o.dim % o.heads != 0) {
        fprintf(stderr, "flops: %s\n", optind < argc ? "unexpected argument"
                                                      : "--dim must be divisible by --heads");
        return 2;
    }
    int rc = o.table_only ? 0 : run_experiment(&o);
    if (rc == 0)
        print_table();
    return rc;
}
