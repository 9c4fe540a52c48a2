/* Choosing the next token: penalties, temperature, top-k, top-p, min-p and the draw
 * (sampling.h gives the rules and their order). */
#include "sampling.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A token and its score, for sorting the candidates of top-p. */
typedef struct scored_token {
    double score;
    int32_t id;
} scored_token;

/* Top-p's bins: 16 per binary octave of probability, from the top ([0.5, 1] is bins 0-15)
 * down to the subnormals (all in the last bin). */
enum { top_p_bins_per_octave = 16, top_p_bins = 1023 * top_p_bins_per_octave };

struct clattn_sampling_workspace {
    size_t vocab_size;
    double *scores;   /* [vocab_size]: the scores as the steps change them; -inf: removed */
    double *weights;  /* [vocab_size]: exp(score - max) */
    uint32_t *counts; /* [vocab_size], zero between calls: in_context_bit | generated count */
    scored_token *candidates; /* grows to the largest candidate set seen */
    size_t candidates_capacity;
    double *bin_mass; /* [top_p_bins]: top-p's probability mass per bin */
    uint16_t *bins;   /* [vocab_size]: each token's top-p bin */
    double *heap;     /* top-k's min-heap, grows to k */
    size_t heap_capacity;
};

static const uint32_t in_context_bit = 0x80000000u;
static const uint32_t count_mask = 0x7fffffffu;

/* The probability mass top-p's bins keep as a margin: a bin removed or kept whole has a
 * cumulative probability at least this far from 1 - p, far more than the sums' rounding, so
 * the decision does not depend on the order the sums take. */
static const double top_p_margin = 1e-7;

clattn_sampling_config clattn__sampling_config_default(void)
{
    clattn_sampling_config c = {
        .temperature = 0.0,
        .top_k = 0,
        .top_p = 1.0,
        .min_p = 0.0,
        .repetition_penalty = 1.0,
        .presence_penalty = 0.0,
        .frequency_penalty = 0.0,
        .seed = 0,
    };
    return c;
}

clattn_status clattn__sampling_config_check(const clattn_sampling_config *c, const char *function)
{
    CLATTN_CHECK_ARG(NULL, function, c != NULL, "no sampling configuration");
    CLATTN_CHECK_ARG(NULL, function, isfinite(c->temperature) && c->temperature >= 0.0,
                     "temperature %g is not a finite number >= 0 (0: greedy)", c->temperature);
    CLATTN_CHECK_ARG(NULL, function, c->top_k >= 0, "top_k %d is negative (0: off)",
                     (int)c->top_k);
    CLATTN_CHECK_ARG(NULL, function, c->top_p >= 0.0 && c->top_p <= 1.0,
                     "top_p %g is not in [0, 1] (1: off)", c->top_p);
    CLATTN_CHECK_ARG(NULL, function, c->min_p >= 0.0 && c->min_p <= 1.0,
                     "min_p %g is not in [0, 1] (0: off)", c->min_p);
    CLATTN_CHECK_ARG(NULL, function,
                     isfinite(c->repetition_penalty) && c->repetition_penalty > 0.0,
                     "repetition_penalty %g is not a finite number > 0 (1: off)",
                     c->repetition_penalty);
    CLATTN_CHECK_ARG(NULL, function, isfinite(c->presence_penalty),
                     "presence_penalty %g is not finite (0: off)", c->presence_penalty);
    CLATTN_CHECK_ARG(NULL, function, isfinite(c->frequency_penalty),
                     "frequency_penalty %g is not finite (0: off)", c->frequency_penalty);
    return CLATTN_OK;
}

clattn_status clattn__sampler_init(clattn_sampler *sampler, const clattn_sampling_config *config,
                                   uint64_t sequence)
{
    CLATTN_CHECK_ARG(NULL, __func__, sampler != NULL, "no sampler");
    clattn_status st = clattn__sampling_config_check(config, __func__);
    if (st != CLATTN_OK)
        return st;
    sampler->config = *config;
    clattn__sampling_random_init(&sampler->random, config->seed, sequence);
    return CLATTN_OK;
}

clattn_status clattn__sampling_workspace_create(size_t vocab_size,
                                                clattn_sampling_workspace **out)
{
    CLATTN_CHECK_ARG(NULL, __func__, out != NULL, "no output");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, __func__, vocab_size > 0 && vocab_size <= (size_t)INT32_MAX,
                     "vocabulary size %zu is not in [1, %d]", vocab_size, INT32_MAX);
    clattn_sampling_workspace *w = calloc(1, sizeof(*w));
    if (w) {
        w->vocab_size = vocab_size;
        w->scores = malloc(vocab_size * sizeof(*w->scores));
        w->weights = malloc(vocab_size * sizeof(*w->weights));
        w->bin_mass = malloc(top_p_bins * sizeof(*w->bin_mass));
        w->bins = malloc(vocab_size * sizeof(*w->bins));
        w->counts = calloc(vocab_size, sizeof(*w->counts));
    }
    if (!w || !w->scores || !w->weights || !w->bin_mass || !w->bins || !w->counts) {
        clattn__sampling_workspace_destroy(w);
        return clattn__fail_in(__func__, "sampling", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "no memory for a vocabulary of %zu", vocab_size);
    }
    *out = w;
    return CLATTN_OK;
}

void clattn__sampling_workspace_destroy(clattn_sampling_workspace *w)
{
    if (!w)
        return;
    free(w->scores);
    free(w->weights);
    free(w->bin_mass);
    free(w->bins);
    free(w->counts);
    free(w->candidates);
    free(w->heap);
    free(w);
}

/* ---- the steps ---- */

/* Copies the logits into w->scores, checking them and the history. */
static clattn_status load_scores(clattn_sampling_workspace *w, const float *logits,
                                 const clattn_token_history *h, const char *function)
{
    CLATTN_CHECK_ARG(NULL, function, w != NULL && logits != NULL, "no workspace or logits");
    bool any_finite = false;
    for (size_t i = 0; i < w->vocab_size; i++) {
        CLATTN_CHECK_ARG(NULL, function, !isnan(logits[i]) && logits[i] != INFINITY,
                         "logit %zu is %g (NaN or +inf)", i, (double)logits[i]);
        any_finite |= isfinite(logits[i]) != 0;
        w->scores[i] = (double)logits[i];
    }
    CLATTN_CHECK_ARG(NULL, function, any_finite, "every logit of the %zu is -inf",
                     w->vocab_size);
    if (h) {
        CLATTN_CHECK_ARG(NULL, function, h->count == 0 || h->ids != NULL, "no history ids");
        CLATTN_CHECK_ARG(NULL, function, h->prompt_count <= h->count,
                         "history's prompt_count %zu exceeds its count %zu", h->prompt_count,
                         h->count);
        for (size_t i = 0; i < h->count; i++)
            CLATTN_CHECK_ARG(NULL, function,
                             h->ids[i] >= 0 && (size_t)h->ids[i] < w->vocab_size,
                             "history token %zu is %d, outside the vocabulary of %zu", i,
                             (int)h->ids[i], w->vocab_size);
    }
    return CLATTN_OK;
}

/* Steps 1 and 2: the repetition penalty over the context, presence and frequency over the
 * generated tokens. w->counts is zero again on return. */
static void apply_penalties(clattn_sampling_workspace *w, const clattn_sampling_config *c,
                            const clattn_token_history *h)
{
    bool repetition = c->repetition_penalty != 1.0;
    bool counted = c->presence_penalty != 0.0 || c->frequency_penalty != 0.0;
    if (!h || h->count == 0 || (!repetition && !counted))
        return;
    for (size_t i = 0; i < h->count; i++) {
        uint32_t *n = &w->counts[h->ids[i]];
        *n |= in_context_bit;
        if (i >= h->prompt_count && (*n & count_mask) != count_mask)
            (*n)++;
    }
    /* Each distinct token once, at its first occurrence. */
    for (size_t i = 0; i < h->count; i++) {
        int32_t id = h->ids[i];
        uint32_t n = w->counts[id];
        if (n == 0)
            continue; /* already done */
        double s = w->scores[id];
        if (repetition)
            s = s < 0.0 ? s * c->repetition_penalty : s / c->repetition_penalty;
        uint32_t generated = n & count_mask;
        if (counted && generated > 0)
            s -= c->frequency_penalty * (double)generated + c->presence_penalty;
        w->scores[id] = s;
        w->counts[id] = 0;
    }
}

/* The first index of the highest score. */
static int32_t argmax(const double *s, size_t n)
{
    size_t best = 0;
    for (size_t i = 1; i < n; i++)
        if (s[i] > s[best])
            best = i;
    return (int32_t)best;
}

/* exp(s - max) into e (0 for -inf), returning their sum in ascending id order. */
static double exponentials(const double *s, size_t n, double *e)
{
    double m = s[argmax(s, n)];
    double z = 0.0;
    for (size_t i = 0; i < n; i++) {
        e[i] = s[i] == -INFINITY ? 0.0 : exp(s[i] - m);
        z += e[i];
    }
    return z;
}

static void heap_sift_down(double *heap, size_t n, size_t i)
{
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && heap[l] < heap[m])
            m = l;
        if (r < n && heap[r] < heap[m])
            m = r;
        if (m == i)
            return;
        double t = heap[i];
        heap[i] = heap[m];
        heap[m] = t;
        i = m;
    }
}

/* Step 4: removes the scores below the k-th largest (a min-heap of the k largest). */
static clattn_status apply_top_k(clattn_sampling_workspace *w, size_t k)
{
    size_t n = w->vocab_size;
    if (k == 0 || k >= n)
        return CLATTN_OK;
    if (w->heap_capacity < k) {
        double *heap = realloc(w->heap, k * sizeof(*heap));
        if (!heap)
            return clattn__fail_in(__func__, "sampling", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "no memory for top_k %zu", k);
        w->heap = heap;
        w->heap_capacity = k;
    }
    double *heap = w->heap;
    memcpy(heap, w->scores, k * sizeof(*heap));
    for (size_t i = k / 2; i-- > 0;)
        heap_sift_down(heap, k, i);
    for (size_t i = k; i < n; i++) {
        if (w->scores[i] > heap[0]) {
            heap[0] = w->scores[i];
            heap_sift_down(heap, k, 0);
        }
    }
    double kth = heap[0];
    for (size_t i = 0; i < n; i++)
        if (w->scores[i] < kth)
            w->scores[i] = -INFINITY;
    return CLATTN_OK;
}

static int compare_ascending(const void *a, const void *b)
{
    const scored_token *x = a, *y = b;
    if (x->score != y->score)
        return x->score < y->score ? -1 : 1;
    return (x->id > y->id) - (x->id < y->id);
}

/* The bin of a probability q in [0, 1] for top-p (enum above), from its binary exponent and
 * the first 4 bits of its mantissa: a larger bin holds smaller probabilities, so the bin is a
 * monotone (decreasing) function of q. */
static uint16_t top_p_bin(double q)
{
    uint64_t bits;
    memcpy(&bits, &q, sizeof(bits));
    int exponent = (int)((bits >> 52) & 0x7ff); /* 1022 for [0.5, 1) */
    int mantissa = (int)((bits >> 48) & 0xf);
    if (exponent >= 1023)
        return 0;
    int bin = (1022 - exponent) * top_p_bins_per_octave + (top_p_bins_per_octave - 1 - mantissa);
    return (uint16_t)(bin < top_p_bins ? bin : top_p_bins - 1);
}

/* Sums e[] in ascending id order. */
static double sum_weights(const double *e, size_t n)
{
    double z = 0.0;
    for (size_t i = 0; i < n; i++)
        z += e[i];
    return z;
}

/* Removes token i: its score to -inf, its weight to 0. */
static void remove_token(clattn_sampling_workspace *w, size_t i)
{
    w->scores[i] = -INFINITY;
    w->weights[i] = 0.0;
}

/* Step 5: top-p, on the weights e = exp(score - max) and their sum z. Sorting every token
 * would cost more than the rest of sampling; the probabilities are binned instead (top_p_bin),
 * and cumulated bin by bin from the smallest: a bin whose cumulative probability stays
 * top_p_margin below 1 - p is removed whole, one whose lower bins already exceed 1 - p by the
 * margin is kept whole (whatever order the sums take, so rounding cannot move them), and only
 * the bins in between, where the cut falls, are sorted and cumulated token by token on top of
 * the mass below them. Returns the new sum of weights. */
static clattn_status apply_top_p(clattn_sampling_workspace *w, double top_p, double *z)
{
    size_t n = w->vocab_size;
    double *e = w->weights, *mass = w->bin_mass;
    double limit = 1.0 - top_p;
    uint16_t *bins = w->bins;
    double inverse_z = 1.0 / *z; /* the bins' masses need no exact division: the margin */
    memset(mass, 0, top_p_bins * sizeof(*mass));
    for (size_t i = 0; i < n; i++) {
        if (e[i] != 0.0) {
            double q = e[i] * inverse_z;
            bins[i] = top_p_bin(q);
            mass[bins[i]] += q;
        }
    }
    /* From the smallest probabilities up (the last bin first): the bins from first_sorted on
     * are removed whole, those before last_sorted kept whole; `below` is the mass of the bins
     * from b on. */
    double below = 0.0;
    size_t b = top_p_bins;
    while (b > 0 && below + mass[b - 1] <= limit - top_p_margin) {
        below += mass[b - 1];
        b--;
    }
    size_t first_sorted = b; /* bins [last_sorted, first_sorted) are sorted token by token */
    double sorted_below = below;
    while (b > 0 && !(below > limit + top_p_margin)) {
        below += mass[b - 1];
        b--;
    }
    size_t last_sorted = b;
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i] != 0.0)
            count += bins[i] >= last_sorted && bins[i] < first_sorted;
    }
    if (w->candidates_capacity < count) {
        scored_token *grown = realloc(w->candidates, count * sizeof(*grown));
        if (!grown)
            return clattn__fail_in(__func__, "sampling", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "no memory for %zu top-p candidates", count);
        w->candidates = grown;
        w->candidates_capacity = count;
    }
    scored_token *c = w->candidates;
    size_t m = 0;
    bool kept_whole = false;
    for (size_t i = 0; i < n; i++) {
        if (e[i] == 0.0) {
            remove_token(w, i); /* cumulative probability <= the smallest bins' <= 1 - p */
            continue;
        }
        if (bins[i] >= first_sorted)
            remove_token(w, i);
        else if (bins[i] >= last_sorted)
            c[m++] = (scored_token){w->scores[i], (int32_t)i};
        else
            kept_whole = true;
    }
    qsort(c, m, sizeof(*c), compare_ascending);
    double cumulative = sorted_below;
    for (size_t j = 0; j < m; j++) {
        cumulative += e[c[j].id] / *z;
        /* The highest token is always kept (min_tokens_to_keep = 1). */
        if (cumulative <= limit && (kept_whole || j + 1 < m))
            remove_token(w, (size_t)c[j].id);
    }
    *z = sum_weights(e, n);
    return CLATTN_OK;
}

/* Step 6: min-p, on the weights and their sum. */
static void apply_min_p(clattn_sampling_workspace *w, double min_p, double *z)
{
    size_t n = w->vocab_size;
    const double *e = w->weights;
    double threshold = min_p * (1.0 / *z); /* the top token's probability is exp(0) / z */
    for (size_t i = 0; i < n; i++)
        if (e[i] / *z < threshold)
            remove_token(w, i);
    *z = sum_weights(e, n);
}

/* Steps 1-6: w->scores, and when sampling w->weights (exp(score - max), 0 for a removed token;
 * the highest score is never removed, so the max stays that of the scores) with their sum *z
 * in ascending id order. *greedy_token is the token when the temperature is 0, else -1. */
static clattn_status process(const clattn_sampler *s, clattn_sampling_workspace *w,
                             const float *logits, const clattn_token_history *h, double *z,
                             int32_t *greedy_token, const char *function)
{
    clattn_status st = load_scores(w, logits, h, function);
    if (st != CLATTN_OK)
        return st;
    const clattn_sampling_config *c = &s->config;
    apply_penalties(w, c, h);
    *greedy_token = -1;
    if (c->temperature == 0.0) {
        *greedy_token = argmax(w->scores, w->vocab_size);
        return CLATTN_OK;
    }
    if (c->temperature != 1.0)
        for (size_t i = 0; i < w->vocab_size; i++)
            w->scores[i] /= c->temperature;
    st = apply_top_k(w, (size_t)c->top_k);
    if (st != CLATTN_OK)
        return st;
    *z = exponentials(w->scores, w->vocab_size, w->weights);
    if (c->top_p < 1.0)
        st = apply_top_p(w, c->top_p, z);
    if (st == CLATTN_OK && c->min_p > 0.0)
        apply_min_p(w, c->min_p, z);
    return st;
}

clattn_status clattn__sampler_distribution(const clattn_sampler *sampler,
                                           clattn_sampling_workspace *workspace,
                                           const float *logits,
                                           const clattn_token_history *history,
                                           double *probabilities)
{
    CLATTN_CHECK_ARG(NULL, __func__, sampler != NULL && probabilities != NULL,
                     "no sampler or output");
    CLATTN_CHECK_ARG(NULL, __func__, workspace != NULL, "no workspace");
    int32_t greedy;
    double z = 0.0;
    clattn_status st = process(sampler, workspace, logits, history, &z, &greedy, __func__);
    if (st != CLATTN_OK)
        return st;
    size_t n = workspace->vocab_size;
    if (greedy >= 0) {
        memset(probabilities, 0, n * sizeof(*probabilities));
        probabilities[greedy] = 1.0;
        return CLATTN_OK;
    }
    for (size_t i = 0; i < n; i++)
        probabilities[i] = workspace->weights[i] / z;
    return CLATTN_OK;
}

clattn_status clattn__sampler_next(clattn_sampler *sampler, clattn_sampling_workspace *workspace,
                                   const float *logits, const clattn_token_history *history,
                                   int32_t *token)
{
    CLATTN_CHECK_ARG(NULL, __func__, sampler != NULL && token != NULL && workspace != NULL,
                     "no sampler, workspace or output");
    int32_t greedy;
    double z = 0.0;
    clattn_status st = process(sampler, workspace, logits, history, &z, &greedy, __func__);
    if (st != CLATTN_OK)
        return st;
    if (greedy >= 0) {
        *token = greedy;
        return CLATTN_OK;
    }
    /* Inverse CDF in ascending id order over the unnormalised weights. */
    const double *e = workspace->weights;
    size_t n = workspace->vocab_size;
    double target = clattn__sampling_random_uniform(&sampler->random) * z;
    double cumulative = 0.0;
    size_t last = 0;
    for (size_t i = 0; i < n; i++) {
        if (e[i] == 0.0)
            continue;
        last = i;
        cumulative += e[i];
        if (cumulative > target)
            break;
    }
    *token = (int32_t)last; /* the last kept token when rounding leaves target at the total */
    return CLATTN_OK;
}
