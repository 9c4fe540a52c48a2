/*
 * The LLM benchmark's runner for libclattn (bench/llm/run_peers.py's --clattn-cmd; not a test):
 * llama-bench's two measurements through the public API (clattn/llm.h) on the default device.
 *
 *   build/bench/llm_bench --model FILE.gguf [--prompt-tokens N] [--gen-tokens G] [--repeat R]
 *
 * pp: one prompt of N seeded random token ids (llama-bench uses random ids too) in one
 * clattn_llm_prompt call, the last token's logits included; prints pp_tps=N/seconds.
 * tg: after a prompt of N ids (1 for llama-bench's tg128 from an empty context), G decode steps
 * of one sequence, each feeding back the greedy id of the step before (no end-of-generation
 * stop); prints tg_tps=G/seconds of the decode steps alone. With --repeat R each measurement is
 * made R times after one untimed warm-up and the median printed. Exit 1 naming the failure.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "clattn/clattn.h"

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int32_t argmax(const float *v, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (v[i] > v[best])
            best = i;
    return (int32_t)best;
}

static int fail(clattn_context *ctx, const char *what)
{
    fprintf(stderr, "llm_bench: %s: %s\n", what, clattn_last_error(ctx));
    return 1;
}

/* One run: a prompt of n_prompt ids, then n_gen decode steps; the seconds of each part. */
static int run_once(clattn_context *ctx, clattn_llm *llm, size_t vocab, const int32_t *prompt,
                    size_t n_prompt, size_t n_gen, float *logits, double *pp_s, double *tg_s)
{
    clattn_llm_cache *cache = NULL;
    size_t seq = 0;
    if (clattn_llm_cache_create(llm, 1, n_prompt + n_gen + 1, CLATTN_LLM_CACHE_FLOAT, &cache) !=
            CLATTN_OK ||
        clattn_llm_sequence_add(cache, &seq) != CLATTN_OK) {
        clattn_llm_cache_destroy(&cache);
        return fail(ctx, "cache");
    }
    double t0 = now_seconds();
    if (clattn_llm_prompt(cache, seq, prompt, n_prompt, logits) != CLATTN_OK) {
        clattn_llm_cache_destroy(&cache);
        return fail(ctx, "prompt");
    }
    double t1 = now_seconds();
    for (size_t g = 0; g < n_gen; g++) {
        int32_t id = argmax(logits, vocab);
        if (clattn_llm_decode(cache, &seq, &id, 1, logits) != CLATTN_OK) {
            clattn_llm_cache_destroy(&cache);
            return fail(ctx, "decode");
        }
    }
    double t2 = now_seconds();
    clattn_llm_cache_destroy(&cache);
    *pp_s = t1 - t0;
    *tg_s = t2 - t1;
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = NULL;
    long n_prompt = 512, n_gen = 0, repeat = 1;
    clattn_precision precision = CLATTN_PRECISION_FP32;
    for (int i = 1; i < argc; i++) {
        if (i + 1 < argc && strcmp(argv[i], "--model") == 0)
            model = argv[++i];
        else if (i + 1 < argc && strcmp(argv[i], "--prompt-tokens") == 0)
            n_prompt = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--gen-tokens") == 0)
            n_gen = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--repeat") == 0)
            repeat = strtol(argv[++i], NULL, 10);
        else if (i + 1 < argc && strcmp(argv[i], "--precision") == 0 &&
                 (strcmp(argv[i + 1], "fp32") == 0 || strcmp(argv[i + 1], "int8") == 0))
            precision = strcmp(argv[++i], "int8") == 0 ? CLATTN_PRECISION_INT8
                                                       : CLATTN_PRECISION_FP32;
        else {
            fprintf(stderr, "usage: llm_bench --model FILE.gguf [--prompt-tokens N] "
                            "[--gen-tokens G] [--repeat R] [--precision fp32|int8]\n");
            return 2;
        }
    }
    if (!model || n_prompt < 1 || n_gen < 0 || repeat < 1 || repeat > 1000) {
        fprintf(stderr, "llm_bench: --model, --prompt-tokens >= 1, --gen-tokens >= 0 and "
                        "--repeat in [1, 1000] are required\n");
        return 2;
    }
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK)
        return fail(NULL, "context");
    clattn_llm *llm = NULL;
    clattn_llm_info info;
    if (clattn_llm_load(ctx, model, &llm) != CLATTN_OK ||
        clattn_llm_set_precision(llm, precision) != CLATTN_OK ||
        clattn_llm_get_info(llm, &info) != CLATTN_OK) {
        int rc = fail(ctx, model);
        clattn_context_destroy(&ctx);
        return rc;
    }
    int32_t *prompt = malloc((size_t)n_prompt * sizeof(*prompt));
    float *logits = malloc(info.vocab_size * sizeof(*logits));
    double *pp = calloc((size_t)repeat, sizeof(*pp)), *tg = calloc((size_t)repeat, sizeof(*tg));
    int rc = 0;
    if (!prompt || !logits || !pp || !tg) {
        fprintf(stderr, "llm_bench: out of memory\n");
        rc = 1;
    }
    uint64_t state = 0x9e3779b97f4a7c15u;
    for (long i = 0; rc == 0 && i < n_prompt; i++) {
        state = state * 6364136223846793005u + 1442695040888963407u;
        prompt[i] = (int32_t)((state >> 33) % info.vocab_size);
    }
    double warm_pp, warm_tg;
    if (rc == 0)
        rc = run_once(ctx, llm, info.vocab_size, prompt, (size_t)n_prompt, (size_t)n_gen,
                      logits, &warm_pp, &warm_tg);
    for (long r = 0; rc == 0 && r < repeat; r++)
        rc = run_once(ctx, llm, info.vocab_size, prompt, (size_t)n_prompt, (size_t)n_gen,
                      logits, &pp[r], &tg[r]);
    if (rc == 0) {
        qsort(pp, (size_t)repeat, sizeof(*pp), cmp_double);
        qsort(tg, (size_t)repeat, sizeof(*tg), cmp_double);
        double pp_s = pp[repeat / 2], tg_s = tg[repeat / 2];
        printf("pp_tps=%.2f\n", (double)n_prompt / pp_s);
        if (n_gen > 0)
            printf("tg_tps=%.2f\n", (double)n_gen / tg_s);
    }
    free(prompt), free(logits), free(pp), free(tg);
    clattn_llm_destroy(&llm);
    clattn_context_destroy(&ctx);
    return rc;
}
