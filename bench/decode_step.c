/*
 * decode_step: the time of one incremental decoding step (clattn_decoder_step, one new token)
 * against the length of the key/value cache, with split-key attention (flash-decoding) as the
 * tuning chooses it (auto), forced (always) and off (never). Prints one JSON object.
 *
 * usage: decode_step [--lengths 256,1024,4096,16384] [--batch B] [--dim E] [--heads H]
 *                    [--kv-heads K] [--ff F] [--layers L] [--memory S] [--repeat R] [--half-cache]
 *
 * The decoder: a seeded random nn.TransformerDecoder of L post-LN layers (default the paper's
 * base: E 512, 8 heads, d_ff 2048, 6 layers), memory of S = 64 tokens. The cache is filled up to
 * each length with prompt steps of up to 512 tokens (not timed); then, for each mode, one warm-up
 * step and R timed steps (each step appends its token: the cache grows by R + 1 per mode).
 * --kv-heads: grouped-query attention (clattn_decoder_config.num_kv_heads); --half-cache: keys
 * and values cached as half floats (clattn_decoder_state_params.half_cache).
 * Output: {"device", "batch", "dim", "heads", "kv_heads", "half_cache", "layers", "memory", "repeat",
 *          "rows": [{"length", "auto_ms", "always_ms", "never_ms"}]}, times the
 * median of R steps, each including clFinish.
 */
#include <clattn/clattn.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_LENGTHS 32
#define PROMPT_CHUNK 512

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

/* A [B, n, E] tensor of seeded values in [-1, 1). */
static clattn_tensor *random_tensor(clattn_context *ctx, size_t B, size_t n, size_t E,
                                    unsigned long long seed)
{
    clattn_tensor *t = NULL;
    if (clattn_tensor_create(ctx, &t, 3, (size_t[]){B, n, E}) != CLATTN_OK)
        return NULL;
    size_t count = B * n * E;
    float *x = malloc(count * sizeof(float));
    if (!x) {
        clattn_tensor_destroy(&t);
        return NULL;
    }
    for (size_t i = 0; i < count; i++) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        x[i] = (float)((double)(seed >> 11) / 4503599627370496.0 - 1.0);
    }
    clattn_status status = clattn_tensor_write(t, x, count);
    free(x);
    if (status != CLATTN_OK)
        clattn_tensor_destroy(&t);
    return t;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "decode_step: %s\nusage: decode_step [--lengths L1,L2,...] [--batch B] [--dim E] "
            "[--heads H] [--kv-heads K] [--ff F] [--layers L] [--memory S] [--repeat R] "
            "[--half-cache]\n",
            why);
    return 2;
}

static int parse_size(const char *text, size_t *out)
{
    char *end;
    unsigned long long v = strtoull(text, &end, 10);
    if (end == text || *end || text[0] == '-' || v == 0)
        return 0;
    *out = (size_t)v;
    return 1;
}

typedef struct options {
    size_t lengths[MAX_LENGTHS], n_lengths;
    size_t B, E, H, KV, F, L, S, R;
    int half_cache;
} options;

static int parse(int argc, char **argv, options *o)
{
    static const size_t default_lengths[] = {256, 1024, 2048, 4096, 8192, 16384};
    *o = (options){.B = 1, .E = 512, .H = 8, .KV = 0, .F = 2048, .L = 6, .S = 64, .R = 5};
    memcpy(o->lengths, default_lengths, sizeof(default_lengths));
    o->n_lengths = sizeof(default_lengths) / sizeof(default_lengths[0]);
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i], *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(name, "--half-cache")) {
            o->half_cache = 1;
            continue;
        }
        size_t *target = !strcmp(name, "--batch")    ? &o->B
                         : !strcmp(name, "--dim")    ? &o->E
                         : !strcmp(name, "--heads")  ? &o->H
                         : !strcmp(name, "--kv-heads") ? &o->KV
                         : !strcmp(name, "--ff")     ? &o->F
                         : !strcmp(name, "--layers") ? &o->L
                         : !strcmp(name, "--memory") ? &o->S
                         : !strcmp(name, "--repeat") ? &o->R
                                                     : NULL;
        if (!value)
            return usage("an option without its value"), 0;
        if (target) {
            if (!parse_size(value, target))
                return usage("sizes must be positive integers"), 0;
        } else if (!strcmp(name, "--lengths")) {
            o->n_lengths = 0;
            char copy[512];
            snprintf(copy, sizeof(copy), "%s", value);
            for (char *save = NULL, *tok = strtok_r(copy, ",", &save); tok;
                 tok = strtok_r(NULL, ",", &save))
                if (o->n_lengths == MAX_LENGTHS || !parse_size(tok, &o->lengths[o->n_lengths++]))
                    return usage("--lengths: up to 32 positive integers"), 0;
            for (size_t k = 1; k < o->n_lengths; k++)
                if (o->lengths[k] <= o->lengths[k - 1])
                    return usage("--lengths must increase"), 0;
        } else {
            return usage("unknown option"), 0;
        }
        i++;
    }
    return 1;
}

/* Appends tokens up to `length` in prompt steps (not timed). */
static clattn_status fill(clattn_context *ctx, clattn_decoder_state *st, const options *o,
                          size_t length)
{
    clattn_status status = CLATTN_OK;
    while (status == CLATTN_OK && clattn_decoder_state_length(st) < length) {
        size_t n = length - clattn_decoder_state_length(st);
        n = n < PROMPT_CHUNK ? n : PROMPT_CHUNK;
        clattn_tensor *x = random_tensor(ctx, o->B, n, o->E, 1000 + length);
        clattn_tensor *y = NULL;
        if (!x || clattn_tensor_create(ctx, &y, 3, (size_t[]){o->B, n, o->E}) != CLATTN_OK)
            status = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        else
            status = clattn_decoder_step(st, x, y);
        clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
    }
    return status == CLATTN_OK ? clattn_context_finish(ctx) : status;
}

/* Median time of R one-token steps after a warm-up, under split_keys `mode`. */
static clattn_status time_steps(clattn_context *ctx, clattn_decoder_state *st, const options *o,
                                int mode, clattn_tensor *x, clattn_tensor *y, double *ms)
{
    clattn_tuning tuning;
    clattn_status status = clattn_context_get_tuning(ctx, &tuning);
    tuning.split_keys = mode;
    if (status == CLATTN_OK)
        status = clattn_context_set_tuning(ctx, &tuning);
    double *times = malloc(o->R * sizeof(double));
    if (!times)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    for (size_t r = 0; status == CLATTN_OK && r <= o->R; r++) {
        double t0 = now_ms();
        status = clattn_decoder_step(st, x, y);
        if (status == CLATTN_OK)
            status = clattn_context_finish(ctx);
        if (r > 0) /* r == 0: the warm-up (and the program build after a tuning change) */
            times[r - 1] = now_ms() - t0;
    }
    if (status == CLATTN_OK) {
        qsort(times, o->R, sizeof(double), compare);
        *ms = times[o->R / 2];
    }
    free(times);
    return status;
}

int main(int argc, char **argv)
{
    options o;
    if (!parse(argc, argv, &o))
        return 2;
    if (o.E % o.H != 0)
        return usage("--dim must be a multiple of --heads");
    clattn_context *ctx = NULL;
    clattn_decoder *dec = NULL;
    clattn_decoder_state *st = NULL;
    clattn_tensor *memory = NULL, *x = NULL, *y = NULL;
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, o.E, o.H, o.L, o.F);
    cfg.num_kv_heads = o.KV;
    size_t capacity = o.lengths[o.n_lengths - 1] + 3 * (o.R + 1);
    clattn_status status = clattn_context_create(&ctx, NULL);
    if (status == CLATTN_OK)
        status = clattn_decoder_create(ctx, &dec, &cfg);
    if (status == CLATTN_OK)
        status = clattn_decoder_init_random(dec, 1);
    clattn_decoder_state_params sp;
    clattn_decoder_state_params_default(&sp, o.B, capacity);
    sp.half_cache = o.half_cache;
    if (status == CLATTN_OK)
        status = clattn_decoder_state_create_with(dec, &st, &sp);
    if (status == CLATTN_OK && (!(memory = random_tensor(ctx, o.B, o.S, o.E, 7)) ||
                                !(x = random_tensor(ctx, o.B, 1, o.E, 8)) ||
                                clattn_tensor_create(ctx, &y, 3, (size_t[]){o.B, 1, o.E})))
        status = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (status == CLATTN_OK)
        status = clattn_decoder_state_set_memory(st, memory, NULL);
    clattn_device_info info;
    if (status == CLATTN_OK)
        status = clattn_context_device_info(ctx, &info);
    if (status == CLATTN_OK)
        printf("{\"device\": \"%s\", \"batch\": %zu, \"dim\": %zu, \"heads\": %zu, "
               "\"kv_heads\": %zu, \"half_cache\": %s, \"layers\": %zu, \"memory\": %zu, "
               "\"repeat\": %zu, \"rows\": [",
               info.name, o.B, o.E, o.H, o.KV ? o.KV : o.H, o.half_cache ? "true" : "false", o.L,
               o.S, o.R);
    static const int modes[3] = {CLATTN_SPLIT_KEYS_AUTO, CLATTN_SPLIT_KEYS_ALWAYS,
                                 CLATTN_SPLIT_KEYS_NEVER};
    for (size_t k = 0; status == CLATTN_OK && k < o.n_lengths; k++) {
        double ms[3] = {0};
        status = fill(ctx, st, &o, o.lengths[k]);
        for (int m = 0; status == CLATTN_OK && m < 3; m++)
            status = time_steps(ctx, st, &o, modes[m], x, y, &ms[m]);
        if (status == CLATTN_OK) {
            printf("%s\n  {\"length\": %zu, \"auto_ms\": %.3f, \"always_ms\": %.3f, "
                   "\"never_ms\": %.3f}",
                   k ? "," : "", o.lengths[k], ms[0], ms[1], ms[2]);
            fflush(stdout);
        }
    }
    if (status == CLATTN_OK)
        printf("\n]}\n");
    else
        fprintf(stderr, "decode_step: %s\n", ctx ? clattn_last_error(ctx) : "no context");
    clattn_tensor_destroy(&memory), clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
    clattn_decoder_state_destroy(&st);
    clattn_decoder_destroy(&dec);
    clattn_context_destroy(&ctx);
    return status == CLATTN_OK ? 0 : 1;
}
