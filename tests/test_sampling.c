/* Sampling and stopping (src/llm/sampling.h, src/llm/stop.h): the distributions against
 * transformers' processors (tests/golden/sampling, tools/gen_sampling_golden.py), greedy's ties,
 * the per-sequence generator (reproducible, independent of other sequences, frequencies within
 * a chi-square bound), top-p on a large vocabulary against a plain full sort, and stop strings
 * over streamed pieces. Host only: no device. */
#include "common/test_util.h"
#include "llm/sampling.h"
#include "llm/stop.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden (meson passes it with c_args)"
#endif

/* ---- helpers ---- */

static clattn_sampler make_sampler(const clattn_sampling_config *c, uint64_t sequence)
{
    clattn_sampler s;
    assert_int_equal(clattn__sampler_init(&s, c, sequence), CLATTN_OK);
    return s;
}

static clattn_sampling_workspace *make_workspace(size_t vocab)
{
    clattn_sampling_workspace *w = NULL;
    assert_int_equal(clattn__sampling_workspace_create(vocab, &w), CLATTN_OK);
    return w;
}

static clattn_npy_array *read_npy(const char *folder, const char *name, bool integers)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", folder, name);
    clattn_npy_array *a = NULL;
    clattn_status st = integers ? clattn_npy_read_i64(&a, path) : clattn_npy_read_f32(&a, path);
    if (st != CLATTN_OK)
        fail_msg("cannot read %s: %s", path, clattn_last_error(NULL));
    return a;
}

/* ---- against transformers ---- */

static void check_golden_size(int vocab)
{
    char folder[4096], path[4200];
    snprintf(folder, sizeof(folder), "%s/sampling/V%d", GOLDEN_DIR, vocab);
    snprintf(path, sizeof(path), "%s/meta.json", folder);
    json_error_t jerr;
    json_t *meta = json_load_file(path, 0, &jerr);
    if (!meta)
        fail_msg("%s: %s", path, jerr.text);
    size_t rows = (size_t)json_integer_value(json_object_get(meta, "rows"));
    size_t prompt_count = (size_t)json_integer_value(json_object_get(meta, "prompt_count"));
    assert_int_equal(json_integer_value(json_object_get(meta, "vocab_size")), vocab);
    clattn_npy_array *logits = read_npy(folder, "logits.npy", false);
    clattn_npy_array *history = read_npy(folder, "history.npy", true);
    assert_int_equal(logits->shape[0], rows);
    assert_int_equal(logits->shape[1], (size_t)vocab);
    size_t length = history->shape[1];
    int32_t *ids = malloc(length * sizeof(*ids));
    double *probs = malloc((size_t)vocab * sizeof(*probs));
    assert_non_null(ids);
    assert_non_null(probs);
    clattn_sampling_workspace *w = make_workspace((size_t)vocab);

    json_t *settings = json_object_get(meta, "settings");
    assert_true(json_array_size(settings) >= 10);
    size_t index;
    json_t *s;
    json_array_foreach(settings, index, s) {
        const char *name = json_string_value(json_object_get(s, "name"));
        clattn_sampling_config c = clattn__sampling_config_default();
        c.temperature = json_number_value(json_object_get(s, "temperature"));
        c.top_k = (int32_t)json_integer_value(json_object_get(s, "top_k"));
        c.top_p = json_number_value(json_object_get(s, "top_p"));
        c.min_p = json_number_value(json_object_get(s, "min_p"));
        c.repetition_penalty = json_number_value(json_object_get(s, "repetition_penalty"));
        c.presence_penalty = json_number_value(json_object_get(s, "presence_penalty"));
        c.frequency_penalty = json_number_value(json_object_get(s, "frequency_penalty"));
        clattn_sampler sampler = make_sampler(&c, 0);
        char file[256];
        snprintf(file, sizeof(file), "probs_%s.npy", name);
        clattn_npy_array *want = read_npy(folder, file, false);
        snprintf(file, sizeof(file), "kept_%s.npy", name);
        clattn_npy_array *kept = read_npy(folder, file, true);
        for (size_t r = 0; r < rows; r++) {
            for (size_t i = 0; i < length; i++)
                ids[i] = (int32_t)history->i64[r * length + i];
            clattn_token_history h = {ids, length, prompt_count};
            assert_int_equal(clattn__sampler_distribution(&sampler, w,
                                                          logits->f32 + r * (size_t)vocab, &h,
                                                          probs),
                             CLATTN_OK);
            for (int i = 0; i < vocab; i++) {
                double expected = want->f32[r * (size_t)vocab + (size_t)i];
                bool expected_kept = kept->i64[r * (size_t)vocab + (size_t)i] != 0;
                if ((probs[i] > 0.0) != expected_kept || fabs(probs[i] - expected) > 1e-6)
                    fail_msg("V%d %s row %zu token %d: %.9g, transformers %.9g (%s)", vocab,
                             name, r, i, probs[i], expected,
                             expected_kept ? "kept" : "removed");
            }
            /* The token drawn or chosen is one transformers keeps. */
            int32_t token = -1;
            assert_int_equal(clattn__sampler_next(&sampler, w, logits->f32 + r * (size_t)vocab,
                                                  &h, &token),
                             CLATTN_OK);
            assert_true(token >= 0 && token < vocab);
            assert_true(kept->i64[r * (size_t)vocab + (size_t)token] != 0);
        }
        clattn_npy_array_destroy(&want);
        clattn_npy_array_destroy(&kept);
    }
    clattn__sampling_workspace_destroy(w);
    free(ids);
    free(probs);
    clattn_npy_array_destroy(&logits);
    clattn_npy_array_destroy(&history);
    json_decref(meta);
}

static void test_golden_v5(void **state)
{
    (void)state;
    check_golden_size(5);
}

static void test_golden_v16(void **state)
{
    (void)state;
    check_golden_size(16);
}

static void test_golden_v64(void **state)
{
    (void)state;
    check_golden_size(64);
}

static void test_golden_v256(void **state)
{
    (void)state;
    check_golden_size(256);
}

/* ---- greedy ---- */

static void test_greedy_ties_lowest_id(void **state)
{
    (void)state;
    const float logits[8] = {-INFINITY, 1.0f, 3.0f, 2.0f, 3.0f, -1.0f, 3.0f, 0.0f};
    clattn_sampling_config c = clattn__sampling_config_default();
    clattn_sampler s = make_sampler(&c, 0);
    clattn_sampling_workspace *w = make_workspace(8);
    int32_t token = -1;
    assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token), CLATTN_OK);
    assert_int_equal(token, 2);
    /* Penalised 2 (3 / 2 = 1.5) leaves 4 and 6 tied: 4. */
    c.repetition_penalty = 2.0;
    s = make_sampler(&c, 0);
    const int32_t ids[2] = {2, 2};
    clattn_token_history h = {ids, 2, 1};
    assert_int_equal(clattn__sampler_next(&s, w, logits, &h, &token), CLATTN_OK);
    assert_int_equal(token, 4);
    /* Greedy draws nothing: the stream is where it started. */
    assert_int_equal(s.random.draws, 0);
    clattn__sampling_workspace_destroy(w);
}

/* ---- the generator ---- */

enum { stream_vocab = 64, stream_tokens = 200 };

/* stream_tokens tokens of one sequence, the logits of step t from a fixed seed t. */
static void draw_stream(clattn_sampler *s, clattn_sampling_workspace *w, int step_offset,
                        int32_t *tokens)
{
    float logits[stream_vocab];
    for (int t = 0; t < stream_tokens; t++) {
        test_fill_uniform(logits, stream_vocab, 1000u + (uint64_t)(t + step_offset), -2.0f,
                          2.0f);
        assert_int_equal(clattn__sampler_next(s, w, logits, NULL, &tokens[t]), CLATTN_OK);
    }
}

static void test_same_seed_same_tokens(void **state)
{
    (void)state;
    clattn_sampling_config c = clattn__sampling_config_default();
    c.temperature = 1.0;
    c.seed = 42;
    clattn_sampling_workspace *w = make_workspace(stream_vocab);
    int32_t a[stream_tokens], b[stream_tokens], other_seed[stream_tokens],
        other_sequence[stream_tokens];
    clattn_sampler s = make_sampler(&c, 0);
    draw_stream(&s, w, 0, a);
    s = make_sampler(&c, 0);
    draw_stream(&s, w, 0, b);
    assert_memory_equal(a, b, sizeof(a));
    c.seed = 43;
    s = make_sampler(&c, 0);
    draw_stream(&s, w, 0, other_seed);
    c.seed = 42;
    s = make_sampler(&c, 1);
    draw_stream(&s, w, 0, other_sequence);
    int differ_seed = 0, differ_sequence = 0;
    for (int t = 0; t < stream_tokens; t++) {
        differ_seed += a[t] != other_seed[t];
        differ_sequence += a[t] != other_sequence[t];
    }
    /* Unrelated streams over 64 tokens agree about 1 time in 20 at most. */
    assert_true(differ_seed > stream_tokens / 2);
    assert_true(differ_sequence > stream_tokens / 2);
    clattn__sampling_workspace_destroy(w);
}

static void test_sequences_independent(void **state)
{
    (void)state;
    clattn_sampling_config c = clattn__sampling_config_default();
    c.temperature = 0.9;
    c.top_k = 20;
    c.top_p = 0.95;
    c.seed = 7;
    clattn_sampling_workspace *w = make_workspace(stream_vocab);
    int32_t alone0[stream_tokens], alone1[stream_tokens];
    clattn_sampler s0 = make_sampler(&c, 0), s1 = make_sampler(&c, 1);
    draw_stream(&s0, w, 0, alone0);
    draw_stream(&s1, w, 5000, alone1);
    /* Interleaved, sometimes two of one before the other's, on one shared workspace. */
    s0 = make_sampler(&c, 0);
    s1 = make_sampler(&c, 1);
    float logits[stream_vocab];
    int t0 = 0, t1 = 0, turn = 0;
    while (t0 < stream_tokens || t1 < stream_tokens) {
        bool first = (turn++ % 3) != 1;
        if ((first && t0 < stream_tokens) || t1 == stream_tokens) {
            int32_t token;
            test_fill_uniform(logits, stream_vocab, 1000u + (uint64_t)t0, -2.0f, 2.0f);
            assert_int_equal(clattn__sampler_next(&s0, w, logits, NULL, &token), CLATTN_OK);
            assert_int_equal(token, alone0[t0]);
            t0++;
        } else {
            int32_t token;
            test_fill_uniform(logits, stream_vocab, 1000u + (uint64_t)(t1 + 5000), -2.0f,
                              2.0f);
            assert_int_equal(clattn__sampler_next(&s1, w, logits, NULL, &token), CLATTN_OK);
            assert_int_equal(token, alone1[t1]);
            t1++;
        }
    }
    clattn__sampling_workspace_destroy(w);
}

/* Draw frequencies of one distribution against its probabilities: Pearson's chi-square with
 * 7 degrees of freedom below 24.32 (its 0.1 % quantile). The seed fixes the draws, so this
 * cannot flake; a biased draw (a shifted CDF, a skipped token) exceeds it by far. */
static void test_draw_frequencies(void **state)
{
    (void)state;
    enum { vocab = 8, draws = 40000 };
    const float logits[vocab] = {0.0f, 1.0f, -1.0f, 2.0f, 0.5f, -2.0f, 1.5f, 0.25f};
    double p[vocab], z = 0.0;
    for (int i = 0; i < vocab; i++)
        z += exp((double)logits[i]);
    for (int i = 0; i < vocab; i++)
        p[i] = exp((double)logits[i]) / z;
    clattn_sampling_config c = clattn__sampling_config_default();
    c.temperature = 1.0;
    c.seed = 2024;
    clattn_sampler s = make_sampler(&c, 3);
    clattn_sampling_workspace *w = make_workspace(vocab);
    long counts[vocab] = {0};
    for (int d = 0; d < draws; d++) {
        int32_t token;
        assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token), CLATTN_OK);
        counts[token]++;
    }
    double chi2 = 0.0;
    for (int i = 0; i < vocab; i++) {
        double expected = p[i] * draws;
        chi2 += (counts[i] - expected) * (counts[i] - expected) / expected;
    }
    if (!(chi2 < 24.32))
        fail_msg("chi-square %.2f over %d draws", chi2, draws);
    clattn__sampling_workspace_destroy(w);
}

/* ---- top-p on a large vocabulary ---- */

typedef struct ref_token {
    double score;
    int id;
} ref_token;

static int ref_ascending(const void *a, const void *b)
{
    const ref_token *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return x->id - y->id;
}

/* Top-p as TopPLogitsWarper states it, with a full sort: the kept set. */
static void ref_top_p(const float *logits, size_t n, double top_p, bool *kept)
{
    ref_token *t = malloc(n * sizeof(*t));
    assert_non_null(t);
    double m = -INFINITY, z = 0.0;
    for (size_t i = 0; i < n; i++)
        m = fmax(m, (double)logits[i]);
    for (size_t i = 0; i < n; i++) {
        t[i] = (ref_token){logits[i], (int)i};
        z += exp((double)logits[i] - m);
    }
    qsort(t, n, sizeof(*t), ref_ascending);
    double cumulative = 0.0;
    for (size_t j = 0; j < n; j++) {
        cumulative += exp(t[j].score - m) / z;
        kept[t[j].id] = !(cumulative <= 1.0 - top_p) || j + 1 == n;
    }
    free(t);
}

static void test_top_p_large_vocabulary(void **state)
{
    (void)state;
    enum { vocab = 50000 };
    float *logits = malloc(vocab * sizeof(*logits));
    double *probs = malloc(vocab * sizeof(*probs));
    bool *kept = malloc(vocab * sizeof(*kept));
    assert_non_null(logits);
    assert_non_null(probs);
    assert_non_null(kept);
    clattn_sampling_workspace *w = make_workspace(vocab);
    const double top_ps[] = {0.1, 0.5, 0.9, 0.99, 0.999999};
    const float spreads[] = {1.0f, 8.0f, 30.0f};
    for (size_t a = 0; a < sizeof(spreads) / sizeof(spreads[0]); a++) {
        test_fill_uniform(logits, vocab, 77u + a, -spreads[a], spreads[a]);
        for (size_t b = 0; b < sizeof(top_ps) / sizeof(top_ps[0]); b++) {
            clattn_sampling_config c = clattn__sampling_config_default();
            c.temperature = 1.0;
            c.top_p = top_ps[b];
            clattn_sampler s = make_sampler(&c, 0);
            assert_int_equal(clattn__sampler_distribution(&s, w, logits, NULL, probs),
                             CLATTN_OK);
            ref_top_p(logits, vocab, top_ps[b], kept);
            size_t n_kept = 0;
            for (size_t i = 0; i < vocab; i++) {
                n_kept += kept[i];
                if ((probs[i] > 0.0) != kept[i])
                    fail_msg("spread %g top_p %g token %zu: ours %s, the full sort's %s",
                             (double)spreads[a], top_ps[b], i, probs[i] > 0.0 ? "kept" : "not",
                             kept[i] ? "kept" : "not");
            }
            assert_true(n_kept >= 1);
        }
    }
    clattn__sampling_workspace_destroy(w);
    free(logits);
    free(probs);
    free(kept);
}

/* ---- bad input ---- */

static void test_bad_input(void **state)
{
    (void)state;
    clattn_sampling_config c = clattn__sampling_config_default();
    clattn_sampler s;
    c.top_p = 1.5;
    assert_int_equal(clattn__sampler_init(&s, &c, 0), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "top_p"));
    c = clattn__sampling_config_default();
    c.temperature = -1.0;
    assert_int_equal(clattn__sampler_init(&s, &c, 0), CLATTN_ERROR_INVALID_ARGUMENT);
    c = clattn__sampling_config_default();
    c.repetition_penalty = 0.0;
    assert_int_equal(clattn__sampler_init(&s, &c, 0), CLATTN_ERROR_INVALID_ARGUMENT);
    c = clattn__sampling_config_default();
    c.top_k = -1;
    assert_int_equal(clattn__sampler_init(&s, &c, 0), CLATTN_ERROR_INVALID_ARGUMENT);
    c = clattn__sampling_config_default();
    c.min_p = NAN;
    assert_int_equal(clattn__sampler_init(&s, &c, 0), CLATTN_ERROR_INVALID_ARGUMENT);
    c = clattn__sampling_config_default();
    c.temperature = 1.0;
    s = make_sampler(&c, 0);
    clattn_sampling_workspace *w = make_workspace(4);
    int32_t token;
    float logits[4] = {0.0f, NAN, 1.0f, 2.0f};
    assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "logit 1"));
    logits[1] = INFINITY;
    assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    for (int i = 0; i < 4; i++)
        logits[i] = -INFINITY;
    assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    logits[2] = 0.0f;
    const int32_t ids[3] = {0, 4, 1};
    clattn_token_history h = {ids, 3, 1};
    assert_int_equal(clattn__sampler_next(&s, w, logits, &h, &token),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "history token 1"));
    h.ids = ids;
    h.count = 1;
    h.prompt_count = 2;
    assert_int_equal(clattn__sampler_next(&s, w, logits, &h, &token),
                     CLATTN_ERROR_INVALID_ARGUMENT);
    /* With only one finite logit that one is drawn. */
    assert_int_equal(clattn__sampler_next(&s, w, logits, NULL, &token), CLATTN_OK);
    assert_int_equal(token, 2);
    clattn__sampling_workspace_destroy(w);
    assert_int_equal(clattn__sampling_workspace_create(0, &w), CLATTN_ERROR_INVALID_ARGUMENT);
}

/* ---- stop strings ---- */

static clattn_stop *make_stop(const char *const *strings, size_t count)
{
    clattn_stop_rules rules = {.stop_strings = strings, .stop_count = count};
    clattn_stop *st = NULL;
    assert_int_equal(clattn__stop_create(&rules, &st), CLATTN_OK);
    return st;
}

/* The output so far, grown by each emitted chunk. */
typedef struct shown_text {
    char bytes[512];
    size_t length;
} shown_text;

static void show(shown_text *shown, const char *text, size_t n)
{
    assert_true(shown->length + n < sizeof(shown->bytes));
    memcpy(shown->bytes + shown->length, text, n);
    shown->length += n;
}

/* Whether s[0..n) is whole UTF-8 characters (a plain decoder, independent of stop.c's). */
static bool whole_utf8(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t i = 0;
    while (i < n) {
        size_t k = s[i] < 0x80 ? 1 : (s[i] >> 5) == 6 ? 2 : (s[i] >> 4) == 14 ? 3
                 : (s[i] >> 3) == 30 ? 4 : 0;
        if (k == 0 || i + k > n)
            return false;
        for (size_t j = 1; j < k; j++)
            if ((s[i + j] >> 6) != 2)
                return false;
        i += k;
    }
    return true;
}

/* Feeds `text` cut at `cuts` (ascending positions) and checks: every chunk whole UTF-8, the
 * output at every moment a prefix of `expected`, the end `expected` with `reason`. */
static void stream_cut(const char *const *stops, size_t n_stops, const char *text,
                       const size_t *cuts, size_t n_cuts, const char *expected,
                       clattn_stop_reason reason)
{
    clattn_stop *st = make_stop(stops, n_stops);
    shown_text shown = {{0}, 0};
    size_t length = strlen(text), from = 0, expected_length = strlen(expected);
    clattn_stop_reason got = CLATTN_STOP_NONE;
    for (size_t c = 0; c <= n_cuts && got == CLATTN_STOP_NONE; c++) {
        size_t to = c < n_cuts ? cuts[c] : length;
        const char *out;
        size_t n;
        got = clattn__stop_text(st, text + from, to - from, &out, &n);
        if (!whole_utf8(out, n))
            fail_msg("'%s' cut at %zu: a chunk of broken UTF-8", text, to);
        show(&shown, out, n);
        if (shown.length > expected_length || memcmp(shown.bytes, expected, shown.length) != 0)
            fail_msg("'%s' cut before %zu: shows '%.*s', not a start of '%s'", text, to,
                     (int)shown.length, shown.bytes, expected);
        from = to;
    }
    if (got == CLATTN_STOP_NONE) {
        const char *out;
        size_t n;
        clattn__stop_flush(st, &out, &n);
        assert_true(whole_utf8(out, n));
        show(&shown, out, n);
    }
    assert_int_equal(got, reason);
    if (shown.length != expected_length || memcmp(shown.bytes, expected, shown.length) != 0)
        fail_msg("'%s': shows '%.*s', expected '%s'", text, (int)shown.length, shown.bytes,
                 expected);
    clattn__stop_destroy(st);
}

/* Every cut into two pieces, every cut into three, and byte by byte. */
static void stream_every_way(const char *const *stops, size_t n_stops, const char *text,
                             const char *expected, clattn_stop_reason reason)
{
    size_t length = strlen(text);
    for (size_t i = 0; i <= length; i++) {
        size_t one[1] = {i};
        stream_cut(stops, n_stops, text, one, 1, expected, reason);
        for (size_t j = i; j <= length; j++) {
            size_t two[2] = {i, j};
            stream_cut(stops, n_stops, text, two, 2, expected, reason);
        }
    }
    size_t bytes[256];
    assert_true(length < 256);
    for (size_t i = 0; i < length; i++)
        bytes[i] = i + 1;
    stream_cut(stops, n_stops, text, bytes, length, expected, reason);
}

static void test_stop_string_every_split(void **state)
{
    (void)state;
    const char *stops[] = {"<|stop|>"};
    stream_every_way(stops, 1, "Hello world<|stop|> more", "Hello world", CLATTN_STOP_STRING);
    /* Near misses are shown whole. */
    stream_every_way(stops, 1, "a<|sto|>b<|stop b <|", "a<|sto|>b<|stop b <|",
                     CLATTN_STOP_NONE);
    /* A near miss then the match. */
    stream_every_way(stops, 1, "x<|st<|stop|>y", "x<|st", CLATTN_STOP_STRING);
    /* Self-overlapping: "aab" after "aaab". */
    const char *aab[] = {"aab"};
    stream_every_way(aab, 1, "xaaab", "xa", CLATTN_STOP_STRING);
    /* The earliest of several wins; the stop string at the very start shows nothing. */
    const char *several[] = {"END", "\n\n", "stop"};
    stream_every_way(several, 3, "one\n\ntwo END", "one", CLATTN_STOP_STRING);
    stream_every_way(several, 3, "stopEND", "", CLATTN_STOP_STRING);
}

static void test_stop_string_utf8(void **state)
{
    (void)state;
    const char *stops[] = {"本語!", "é\xF0\x9F\x98\x80"};
    stream_every_way(stops, 2, "héllo 日本 😀 語", "héllo 日本 😀 語", CLATTN_STOP_NONE);
    stream_every_way(stops, 2, "日本語!ok", "日", CLATTN_STOP_STRING);
    stream_every_way(stops, 2, "cafè é😀 x", "cafè ", CLATTN_STOP_STRING);
    /* No stop strings: only the unfinished character is held. */
    stream_every_way(NULL, 0, "ñ😀中", "ñ😀中", CLATTN_STOP_NONE);
}

static void test_stop_held_text_released(void **state)
{
    (void)state;
    const char *stops[] = {"<|stop|>"};
    clattn_stop *st = make_stop(stops, 1);
    const char *out;
    size_t n;
    assert_int_equal(clattn__stop_text(st, "a<|st", 5, &out, &n), CLATTN_STOP_NONE);
    assert_int_equal(n, 1);
    assert_memory_equal(out, "a", 1);
    assert_int_equal(clattn__stop_text(st, "o", 1, &out, &n), CLATTN_STOP_NONE);
    assert_int_equal(n, 0); /* "<|sto" may still become "<|stop|>" */
    assert_int_equal(clattn__stop_text(st, "|>b", 3, &out, &n), CLATTN_STOP_NONE);
    assert_int_equal(n, 8);
    assert_memory_equal(out, "<|sto|>b", 8);
    assert_int_equal(clattn__stop_text(st, "c<|", 3, &out, &n), CLATTN_STOP_NONE);
    assert_int_equal(n, 1);
    assert_memory_equal(out, "c", 1);
    clattn__stop_flush(st, &out, &n);
    assert_int_equal(n, 2);
    assert_memory_equal(out, "<|", 2);
    clattn__stop_destroy(st);
}

static void test_stop_tokens(void **state)
{
    (void)state;
    const int32_t eog[2] = {2, 9};
    clattn_stop_rules rules = {.eog_ids = eog, .eog_count = 2, .max_tokens = 3};
    clattn_stop *st = NULL;
    assert_int_equal(clattn__stop_create(&rules, &st), CLATTN_OK);
    assert_int_equal(clattn__stop_token(st, 5), CLATTN_STOP_NONE);
    assert_int_equal(clattn__stop_token(st, 9), CLATTN_STOP_EOG);
    assert_int_equal(clattn__stop_token(st, 4), CLATTN_STOP_MAX_TOKENS);
    assert_int_equal(clattn__stop_token_count(st), 3);
    clattn__stop_destroy(st);
    rules.max_tokens = 2;
    assert_int_equal(clattn__stop_create(&rules, &st), CLATTN_OK);
    assert_int_equal(clattn__stop_token(st, 1), CLATTN_STOP_NONE);
    assert_int_equal(clattn__stop_token(st, 2), CLATTN_STOP_EOG); /* EOG wins over the count */
    clattn__stop_destroy(st);
    rules.max_tokens = 0;
    assert_int_equal(clattn__stop_create(&rules, &st), CLATTN_OK);
    for (int i = 0; i < 1000; i++)
        assert_int_equal(clattn__stop_token(st, 3), CLATTN_STOP_NONE);
    clattn__stop_destroy(st);

    /* Bad rules. */
    const char *empty[] = {"ok", ""};
    clattn_stop_rules bad = {.stop_strings = empty, .stop_count = 2};
    assert_int_equal(clattn__stop_create(&bad, &st), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "stop string 1"));
    const char *broken[] = {"\xC3"};
    bad.stop_strings = broken;
    bad.stop_count = 1;
    assert_int_equal(clattn__stop_create(&bad, &st), CLATTN_ERROR_INVALID_ARGUMENT);
    assert_non_null(strstr(clattn_last_error(NULL), "UTF-8"));
    const int32_t negative[1] = {-1};
    clattn_stop_rules bad_ids = {.eog_ids = negative, .eog_count = 1};
    assert_int_equal(clattn__stop_create(&bad_ids, &st), CLATTN_ERROR_INVALID_ARGUMENT);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_golden_v5),
        cmocka_unit_test(test_golden_v16),
        cmocka_unit_test(test_golden_v64),
        cmocka_unit_test(test_golden_v256),
        cmocka_unit_test(test_greedy_ties_lowest_id),
        cmocka_unit_test(test_same_seed_same_tokens),
        cmocka_unit_test(test_sequences_independent),
        cmocka_unit_test(test_draw_frequencies),
        cmocka_unit_test(test_top_p_large_vocabulary),
        cmocka_unit_test(test_bad_input),
        cmocka_unit_test(test_stop_string_every_split),
        cmocka_unit_test(test_stop_string_utf8),
        cmocka_unit_test(test_stop_held_text_released),
        cmocka_unit_test(test_stop_tokens),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
