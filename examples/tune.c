/*
 * tune: finds the fastest kernel variants and CLBlast GEMM parameters for this device and the
 * shapes you give, and stores them in the per-user tuning cache that context creation applies
 * (see clattn_tuning in clattn/context.h).
 *
 * It times candidates inside a real encoder layer (--config PRESET or --model FILE, at
 * --batch x --seq) by the wall-clock time of the whole layer: the GEMM path (the library's CPU
 * GEMM, or CLBlast with each Xgemm parameter set), then the fused attention
 * variants (micro-tiled, plain unstaged, __local-staged) by the time of the attention kernel,
 * and prints the device's defaults beside what it found.
 */
#include <clattn/clattn.h>

#include "cli.h"

#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
    const char *device, *preset, *model;
    size_t batch, seq;
    unsigned repeat;
    bool quick, dry_run;
    int precision; /* clattn_precision (--precision) */
} options;

/* CLBlast's Xgemm parameters, in the order of the candidates below. */
#define XGEMM_PARAMETERS 16
static const char *const xgemm_names[XGEMM_PARAMETERS] = {
    "GEMMK", "MWG", "NWG", "KWG", "MDIMC", "NDIMC", "MDIMA", "NDIMB",
    "KWI",   "VWM", "VWN", "STRM", "STRN", "SA", "SB", "KREG"};

/* Xgemm candidates, all satisfying CLBlast's constraints; the first is the built-in default for
 * PoCL's CPUs, the fifth the one CLBlast's own tuner found on such a CPU. */
static const size_t xgemm_candidates[][XGEMM_PARAMETERS] = {
    {0, 128, 128, 64, 16, 16, 16, 16, 4, 8, 8, 0, 0, 1, 1, 1},
    {0, 128, 64, 64, 16, 16, 16, 16, 4, 8, 4, 0, 0, 1, 1, 1},
    {0, 128, 128, 64, 16, 16, 16, 16, 2, 8, 8, 0, 0, 1, 1, 1},
    {0, 128, 64, 128, 16, 16, 16, 16, 2, 8, 4, 0, 0, 1, 1, 1},
    {0, 64, 64, 32, 8, 16, 8, 16, 2, 4, 2, 0, 0, 1, 1, 1},
    {0, 128, 64, 32, 16, 16, 16, 16, 2, 8, 4, 0, 0, 1, 1, 1},
    {0, 128, 128, 32, 16, 16, 16, 16, 2, 8, 8, 0, 0, 1, 1, 1},
    {0, 128, 64, 32, 16, 8, 16, 8, 2, 8, 8, 0, 0, 1, 1, 1},
    {0, 64, 128, 32, 8, 16, 8, 16, 2, 8, 8, 0, 0, 1, 1, 1},
    {0, 128, 64, 16, 16, 16, 16, 16, 2, 8, 4, 0, 0, 1, 1, 1},
    {0, 128, 32, 32, 16, 8, 16, 8, 2, 8, 4, 0, 0, 1, 1, 1},
    {0, 64, 64, 32, 8, 8, 8, 8, 2, 8, 8, 0, 0, 1, 1, 1},
    {0, 32, 32, 32, 8, 8, 8, 8, 2, 4, 4, 0, 0, 1, 1, 1},
    {0, 64, 64, 16, 16, 16, 16, 16, 2, 4, 4, 0, 0, 1, 1, 1},
};
#define XGEMM_CANDIDATES (sizeof(xgemm_candidates) / sizeof(xgemm_candidates[0]))

static void usage(FILE *out)
{
    fprintf(out,
            "usage: tune [--device SPEC] [--config PRESET | --model FILE] [--batch B] [--seq N]\n"
            "            [--repeat R] [--quick] [--dry-run] [--precision fp32|bf16|int8]\n"
            "  Times kernel variants and CLBlast GEMM parameters in one encoder layer of the\n"
            "  given configuration (default: base) at [B, N] (default 2 x 512) and stores the\n"
            "  fastest in the tuning cache (%s: replaced whole\n"
            "  when it is a regular file or a link to one, created when absent; a FIFO, device\n"
            "  or directory there is refused and left unchanged).\n"
            "  --repeat R  timed passes per candidate (default 3; the fastest counts)\n"
            "  --quick     fewer candidates\n"
            "  --dry-run   measure and print, store nothing\n"
            "  --precision the GEMMs' number format (clattn_precision; default fp32): bf16\n"
            "              and int8 run on oneDNN only, so their GEMM path is not searched\n",
            clattn_tuning_cache_path() ? clattn_tuning_cache_path() : "no cache path");
}

static int fail(clattn_context *ctx, const char *what)
{
    fprintf(stderr, "tune: %s: %s\n", what, clattn_last_error(ctx));
    return 1;
}

typedef struct session {
    const options *o;
    clattn_context *ctx;
    clattn_encoder *enc;
    clattn_tensor *x;
} session;

/* Runs the layer (one warm-up pass, then `repeat` timed ones) and returns the fastest pass's
 * wall-clock milliseconds (launches and waits included), or a negative value on error. Every
 * choice is judged by the whole layer: a variant's own kernel would leave out what it costs
 * elsewhere (the CPU GEMM fuses bias and activation; the attention variants pack keys and
 * values differently). Wall-clock rather than OpenCL profiling, which some implementations
 * (Mesa's rusticl) report as zero. */
static double measure(session *s)
{
    if (clattn_encoder_forward(s->enc, s->x, s->x, NULL) != CLATTN_OK ||
        clattn_context_finish(s->ctx) != CLATTN_OK)
        return -1.0;
    double best = -1.0;
    for (unsigned i = 0; i < s->o->repeat; i++) {
        double start = cli_now_s();
        if (clattn_encoder_forward(s->enc, s->x, s->x, NULL) != CLATTN_OK ||
            clattn_context_finish(s->ctx) != CLATTN_OK)
            return -1.0;
        double ms = (cli_now_s() - start) * 1e3;
        if (best < 0 || ms < best)
            best = ms;
    }
    return best;
}

/* "GEMMK=0,MWG=128,..." for clattn_context_set_gemm_parameters and the cache. */
static void xgemm_text(const size_t *values, char *text, size_t size)
{
    size_t used = 0;
    for (int i = 0; i < XGEMM_PARAMETERS && used < size; i++)
        used += (size_t)snprintf(text + used, size - used, "%s%s=%zu", i ? "," : "",
                                 xgemm_names[i], values[i]);
}

/* The GEMM path: oneDNN (gemm_kernel 2, CPU devices in builds with it), the library's CPU GEMM
 * (gemm_kernel 1), then CLBlast (gemm_kernel 0) with each Xgemm candidate, by the whole layer's
 * time (oneDNN and the CPU GEMM fuse bias and activation, which CLBlast leaves to separate
 * kernels). */
static int tune_gemm(session *s, clattn_tuning *tuning, char *best, size_t best_size)
{
    printf("\nGEMM path (the whole layer, fastest pass):\n");
    double best_ms = -1.0;
    clattn_tuning t = *tuning;
    static const struct {
        int kernel;
        const char *name;
    } providers[] = {{2, "oneDNN"}, {1, "the library's CPU GEMM"}};
    /* the reduced precisions run on oneDNN only (clattn_precision) */
    int searched = s->o->precision ? 1 : 2;
    for (int p = 0; p < searched; p++) {
        t.gemm_kernel = providers[p].kernel;
        if (clattn_context_set_tuning(s->ctx, &t) != CLATTN_OK) {
            printf("  %s: not available here (%s)\n", providers[p].name,
                   clattn_last_error(s->ctx));
            continue;
        }
        double ms = measure(s);
        if (ms >= 0 && (best_ms < 0 || ms < best_ms)) {
            printf("  %s: %8.1f ms  <- best so far\n", providers[p].name, ms);
            best_ms = ms;
            *tuning = t;
        } else if (ms >= 0) {
            printf("  %s: %8.1f ms\n", providers[p].name, ms);
        } else {
            printf("  %s: failed (%s)\n", providers[p].name, clattn_last_error(s->ctx));
        }
    }
    if (s->o->precision) /* oneDNN only */
        return best_ms < 0 ? fail(s->ctx, "oneDNN failed")
                           : clattn_context_set_tuning(s->ctx, tuning) == CLATTN_OK
                               ? 0
                               : fail(s->ctx, "applying");
    double ms;
    t.gemm_kernel = 0;
    if (clattn_context_set_tuning(s->ctx, &t) != CLATTN_OK)
        return fail(s->ctx, "choosing CLBlast");
    size_t count = s->o->quick ? 3 : XGEMM_CANDIDATES;
    for (size_t c = 0; c < count; c++) {
        const size_t *x = xgemm_candidates[c];
        char text[256];
        xgemm_text(x, text, sizeof(text));
        printf("  CLBlast MWG %3zu NWG %3zu KWG %2zu MDIMC %2zu NDIMC %2zu VWM %zu VWN %zu SA/SB "
               "%zu: ",
               x[1], x[2], x[3], x[4], x[5], x[9], x[10], x[13]);
        fflush(stdout);
        if (clattn_context_set_gemm_parameters(s->ctx, text) != CLATTN_OK) {
            printf("refused (%s)\n", clattn_last_error(s->ctx));
            continue;
        }
        ms = measure(s);
        if (ms < 0) {
            printf("failed (%s)\n", clattn_last_error(s->ctx));
            continue;
        }
        printf("%8.1f ms%s\n", ms, best_ms < 0 || ms < best_ms ? "  <- best so far" : "");
        if (best_ms < 0 || ms < best_ms) {
            best_ms = ms;
            *tuning = t;
            snprintf(best, best_size, "%s", text);
        }
    }
    if (best_ms < 0)
        return fail(s->ctx, "no GEMM candidate ran");
    if (best[0] && clattn_context_set_gemm_parameters(s->ctx, best) != CLATTN_OK)
        return fail(s->ctx, "applying");
    return clattn_context_set_tuning(s->ctx, tuning) == CLATTN_OK ? 0 : fail(s->ctx, "applying");
}

/* Times one attention variant; keeps it in *best when it is the fastest so far. */
static void try_attention(session *s, const clattn_tuning *t, clattn_tuning *best, double *best_ms)
{
    if (clattn_context_set_tuning(s->ctx, t) != CLATTN_OK)
        return;
    double ms = measure(s);
    if (ms < 0)
        return;
    if (!t->fused_local && !t->fused_untiled)
        printf("  micro-tiled            wg %3zu: ", t->fused_wg);
    else
        printf("  local %d qpw %zu tk %2zu wg %3zu: ", t->fused_local, t->fused_qpw, t->fused_tk,
               t->fused_wg);
    printf("%8.1f ms%s\n", ms, *best_ms < 0 || ms < *best_ms ? "  <- best so far" : "");
    if (*best_ms < 0 || ms < *best_ms) {
        *best_ms = ms;
        *best = *t;
    }
}

/* The fused attention variants: the micro-tiled kernel (fused_untiled 0) by work-group size,
 * the plain unstaged kernel (fused_untiled 1) by queries per work-item, key block and
 * work-group size, and where __local memory is on chip the staged kernel. */
static int tune_attention(session *s, clattn_tuning *best)
{
    printf("\nfused attention variants (the whole layer, fastest pass):\n");
    clattn_device_info info;
    clattn_context_device_info(s->ctx, &info);
    static const size_t qpws[] = {1, 2, 4, 8}, tks[] = {4, 8, 16}, wgs[] = {1, 4, 8, 16, 32, 64};
    static const size_t local_tks[] = {16, 32, 64}, local_wgs[] = {32, 64, 128, 256};
    double best_ms = -1.0;
    const clattn_tuning start = *best;
    for (size_t c = 0; c < 6; c++) {
        clattn_tuning t = start;
        t.fused_local = 0;
        t.fused_untiled = 0;
        t.fused_wg = wgs[c];
        if (t.fused_wg <= info.max_work_group_size && !(s->o->quick && c % 2 == 1))
            try_attention(s, &t, best, &best_ms);
    }
    /* Staging through __local memory only costs where it is global memory (CPUs). */
    for (int local = 0; local <= (info.local_mem_is_global ? 0 : 1); local++) {
        size_t nq = local ? 1 : (s->o->quick ? 2 : 4), nt = 3, nw = local ? 4 : 6;
        for (size_t a = 0; a < nq; a++)
            for (size_t b = 0; b < nt; b++)
                for (size_t c = 0; c < nw; c++) {
                    clattn_tuning t = start;
                    t.fused_local = local;
                    t.fused_untiled = 1;
                    t.fused_qpw = local ? 1 : qpws[s->o->quick ? a + 2 : a];
                    t.fused_tk = local ? local_tks[b] : tks[b];
                    t.fused_wg = local ? local_wgs[c] : wgs[c];
                    if (t.fused_wg <= info.max_work_group_size && !(s->o->quick && c % 2 == 1))
                        try_attention(s, &t, best, &best_ms);
                }
    }
    if (best_ms < 0)
        return fail(s->ctx, "no attention variant ran");
    return clattn_context_set_tuning(s->ctx, best) == CLATTN_OK ? 0 : fail(s->ctx, "applying");
}

/* The cache is only ever replaced when it is a regular file (or a link to one) or does not
 * exist yet (cli_may_write; the library refuses anything else too): said before the timing
 * rather than after it, as a usage error (exit 2), as the other programs refuse such an
 * --output. */
static bool cache_replaceable(void)
{
    const char *path = clattn_tuning_cache_path();
    char problem[256];
    if (!path) {
        fprintf(stderr, "tune: no tuning cache path: set CLATTN_TUNING_CACHE, XDG_CACHE_HOME or "
                        "HOME (or use --dry-run)\n");
        return false;
    }
    if (!cli_may_write(path, problem, sizeof(problem))) {
        fprintf(stderr, "tune: the tuning cache %s is not a regular file: it names %s; it is "
                        "never replaced (left unchanged): set CLATTN_TUNING_CACHE to a file's "
                        "path (or use --dry-run)\n", path, problem);
        return false;
    }
    return true;
}

static int run(const options *o)
{
    if (!o->dry_run && !cache_replaceable())
        return 2;
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = o->device;
    params.precision = o->precision;
    session s = {o, NULL, NULL, NULL};
    int rc = 0;
    if (clattn_context_create(&s.ctx, &params) != CLATTN_OK)
        return fail(NULL, "creating the context");
    clattn_device_info info;
    clattn_context_device_info(s.ctx, &info);
    printf("device: %s (driver %s)\n", info.name, info.driver_version);
    clattn_encoder_config cfg;
    if (o->model) {
        if (clattn_encoder_load_file(s.ctx, &s.enc, o->model) != CLATTN_OK) {
            rc = fail(s.ctx, o->model);
            goto done;
        }
        clattn_encoder_get_config(s.enc, &cfg);
    } else {
        if (clattn_encoder_preset(o->preset, &cfg) != CLATTN_OK) {
            fprintf(stderr, "tune: %s\n", clattn_last_error(NULL));
            rc = 2;
            goto done;
        }
        cfg.num_layers = 1; /* every layer is the same: time one */
        if (clattn_encoder_create(s.ctx, &s.enc, &cfg) != CLATTN_OK ||
            clattn_encoder_init_random(s.enc, 1) != CLATTN_OK) {
            rc = fail(s.ctx, "creating the encoder");
            goto done;
        }
    }
    size_t shape[3] = {o->batch, o->seq, cfg.d_model};
    if (clattn_tensor_create(s.ctx, &s.x, 3, shape) != CLATTN_OK ||
        clattn_tensor_fill(s.x, 0.01f) != CLATTN_OK) {
        rc = fail(s.ctx, "creating the input");
        goto done;
    }
    printf("shape [%zu, %zu, %zu], %zu heads, d_ff %zu\n", o->batch, o->seq, cfg.d_model,
           cfg.nhead, cfg.dim_feedforward);
    clattn_tuning best, defaults;
    clattn_context_get_tuning(s.ctx, &best);
    defaults = best;
    char best_gemm[256] = "";
    double default_ms = measure(&s);
    if ((rc = tune_gemm(&s, &best, best_gemm, sizeof(best_gemm))) ||
        (rc = tune_attention(&s, &best)))
        goto done;
    double best_ms = measure(&s);
    printf("\ndefaults: gemm_kernel %d, fused untiled %d local %d qpw %zu tk %zu wg %zu: "
           "%.1f ms per layer\n",
           defaults.gemm_kernel, defaults.fused_untiled, defaults.fused_local, defaults.fused_qpw,
           defaults.fused_tk, defaults.fused_wg, default_ms);
    printf("best:     gemm_kernel %d, fused untiled %d local %d qpw %zu tk %zu wg %zu: "
           "%.1f ms per layer%s%s\n",
           best.gemm_kernel, best.fused_untiled, best.fused_local, best.fused_qpw, best.fused_tk,
           best.fused_wg, best_ms, best_gemm[0] ? "; Xgemm " : "", best_gemm);
    if (o->dry_run) {
        printf("(--dry-run: nothing stored)\n");
    } else if (clattn_tuning_cache_store(s.ctx, &best, best_gemm) != CLATTN_OK) {
        rc = fail(s.ctx, "storing the tuning");
    } else {
        printf("stored in %s; new contexts on this device use it\n", clattn_tuning_cache_path());
    }
done:
    clattn_tensor_destroy(&s.x);
    clattn_encoder_destroy(&s.enc);
    clattn_context_destroy(&s.ctx);
    return rc;
}

int main(int argc, char **argv)
{
    options o = {NULL, "base", NULL, 2, 512, 3, false, false, 0};
    static const struct option longopts[] = {
        {"device", required_argument, NULL, 'd'}, {"config", required_argument, NULL, 'c'},
        {"model", required_argument, NULL, 'm'},  {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 'n'},    {"repeat", required_argument, NULL, 'r'},
        {"quick", no_argument, NULL, 'q'},        {"dry-run", no_argument, NULL, 'y'},
        {"precision", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},         {NULL, 0, NULL, 0},
    };
    opterr = 0;
    int c;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        unsigned long long v = 0;
        char *end = NULL;
        if (c == 'b' || c == 'n' || c == 'r') {
            v = strtoull(optarg, &end, 10);
            if (*end || v == 0 || v > (1u << 24) || optarg[0] == '-') {
                fprintf(stderr, "tune: --%s needs a positive integer, not '%s'\n",
                        c == 'b' ? "batch" : c == 'n' ? "seq" : "repeat", optarg);
                return 2;
            }
        }
        switch (c) {
        case 'd': o.device = optarg; break;
        case 'c': o.preset = optarg; break;
        case 'm': o.model = optarg; break;
        case 'b': o.batch = (size_t)v; break;
        case 'n': o.seq = (size_t)v; break;
        case 'r': o.repeat = (unsigned)v; break;
        case 'q': o.quick = true; break;
        case 'y': o.dry_run = true; break;
        case 'p':
            if (!cli_parse_precision(optarg, &o.precision)) {
                fprintf(stderr, "tune: --precision is fp32, bf16 or int8, not '%s'\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default:
            fprintf(stderr, "tune: bad option '%s'\n", argv[optind - 1]);
            usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "tune: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return run(&o);
}
