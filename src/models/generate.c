/* Generation from the encoder–decoder model: greedy decoding and beam search over the decoder's
 * key/value cache. */
#include "nn/decoder_internal.h"
#include "transformer_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* ---- scores ---- */

/* GNMT's length penalty ((5 + |Y|) / 6)^α: scores are divided by it. */
static double length_penalty(size_t length, double alpha)
{
    return pow((5.0 + (double)length) / 6.0, alpha);
}

/* Log-softmax of one row of logits, in double. */
static void log_softmax(const float *z, size_t V, double *out)
{
    double top = z[0], sum = 0.0;
    for (size_t v = 1; v < V; v++)
        top = z[v] > top ? z[v] : top;
    for (size_t v = 0; v < V; v++)
        sum += exp((double)z[v] - top);
    double log_sum = log(sum);
    for (size_t v = 0; v < V; v++)
        out[v] = (double)z[v] - top - log_sum;
}

/* The progress callback after `step` tokens: true to stop. */
static bool stop_after(const clattn_generate_params *params, size_t step, size_t max_new,
                       size_t sequences)
{
    return params->progress &&
           params->progress(params->progress_user_data, step, max_new, sequences) != 0;
}

/* ---- greedy decoding ---- */

static clattn_status greedy(clattn_transformer *m, const char *fn, size_t B, size_t max_new,
                            const clattn_generate_params *params, clattn_decoder_state *state,
                            int64_t *out, size_t *lengths)
{
    clattn_context *ctx = m->ctx;
    size_t E = m->info.d_model, V = m->info.tgt_vocab;
    int64_t *next = malloc(B * sizeof(int64_t));
    float *logits_host = malloc(B * V * sizeof(float));
    bool *done = calloc(B, sizeof(bool));
    double *sum = calloc(B, sizeof(double)), *logp = malloc(V * sizeof(double));
    clattn_tensor *x = NULL, *h = NULL, *logits = NULL;
    clattn_status status = CLATTN_OK;
    if (!next || !logits_host || !done || !sum || !logp)
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    if (status == CLATTN_OK &&
        !(status = clattn_tensor_create(ctx, &x, 3, (size_t[]){B, 1, E})) &&
        !(status = clattn_tensor_create(ctx, &h, 3, (size_t[]){B, 1, E})))
        status = clattn_tensor_create(ctx, &logits, 2, (size_t[]){B, V});
    for (size_t b = 0; status == CLATTN_OK && b < B; b++) {
        next[b] = m->info.bos_id;
        lengths[b] = 0;
        for (size_t t = 0; t < max_new; t++)
            out[b * max_new + t] = m->info.pad_id;
    }
    size_t alive = B;
    for (size_t t = 0; status == CLATTN_OK && t < max_new && alive > 0; t++) {
        if ((status = clattn__transformer_embed(m, fn, next, B, 1, t, x)) ||
            (status = clattn_decoder_step(state, x, h)) ||
            (status = clattn__transformer_logits(m, h, B, logits)) ||
            (status = clattn_tensor_read(logits, logits_host, B * V)))
            break;
        for (size_t b = 0; b < B; b++) {
            if (done[b]) {
                next[b] = m->info.eos_id; /* keeps the batch going; its output is not used */
                continue;
            }
            size_t best = 0;
            for (size_t v = 1; v < V; v++)
                if (logits_host[b * V + v] > logits_host[b * V + best])
                    best = v;
            out[b * max_new + t] = (int64_t)best;
            lengths[b] = t + 1;
            next[b] = (int64_t)best;
            if (params->scores) {
                log_softmax(logits_host + b * V, V, logp);
                sum[b] += logp[best];
            }
            if ((int64_t)best == m->info.eos_id) {
                done[b] = true;
                alive--;
            }
        }
        if (stop_after(params, t + 1, max_new, B))
            break;
    }
    for (size_t b = 0; status == CLATTN_OK && params->scores && b < B; b++)
        params->scores[b] = sum[b] / length_penalty(lengths[b], params->alpha);
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&h), clattn_tensor_destroy(&logits);
    free(next), free(logits_host), free(done), free(sum), free(logp);
    return status;
}

/* ---- beam search ---- */

typedef struct candidate {
    double score; /* the sum of log-probabilities */
    size_t parent; /* the hypothesis (within its sentence) it extends */
    int64_t token;
} candidate;

static int by_score(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    if (x->parent != y->parent) /* ties: the earlier hypothesis, then the lower id */
        return x->parent < y->parent ? -1 : 1;
    return (x->token > y->token) - (x->token < y->token);
}

/*
 * Beam search over the state's B·k sequences (sentence b's hypotheses are rows b·k .. b·k+k-1).
 * Each step t (t + 1 tokens generated after it), per sentence still searching:
 *   1. every alive hypothesis extended by eos is a finished candidate with the score
 *      (sum of log-probabilities) / length_penalty(t + 1); it replaces the sentence's best
 *      finished hypothesis only when strictly greater (alive hypotheses in order);
 *   2. the k best extensions by any other token, by the sum of log-probabilities (ties: the
 *      earlier hypothesis, then the lower id), stay alive;
 *   3. the sentence stops when no alive hypothesis can still beat its best finished one (log-
 *      probabilities are <= 0 and the penalty grows, so sum / length_penalty(max_new) bounds
 *      what an alive hypothesis can still reach), or after max_new tokens.
 * The result is the best finished hypothesis, eos included.
 */
static clattn_status beam_search(clattn_transformer *m, const char *fn, size_t B, size_t k,
                                 size_t max_new, const clattn_generate_params *params,
                                 clattn_decoder_state *state, int64_t *out, size_t *lengths)
{
    double alpha = params->alpha;
    clattn_context *ctx = m->ctx;
    size_t E = m->info.d_model, V = m->info.tgt_vocab, rows = B * k;
    int64_t eos = m->info.eos_id;
    double *score = malloc(rows * sizeof(double)), *logp = malloc(V * sizeof(double));
    int64_t *hist = malloc(rows * max_new * sizeof(int64_t));     /* [rows, max_new] tokens */
    int64_t *hist_next = malloc(rows * max_new * sizeof(int64_t));
    int64_t *next = malloc(rows * sizeof(int64_t));
    size_t *parents = malloc(rows * sizeof(size_t));
    double *next_score = malloc(rows * sizeof(double));
    float *logits_host = malloc(rows * V * sizeof(float));
    candidate *cand = malloc(k * V * sizeof(candidate));
    double *best_score = malloc(B * sizeof(double)); /* per sentence: the best finished one */
    bool *searching = malloc(B * sizeof(bool));
    clattn_tensor *x = NULL, *h = NULL, *logits = NULL;
    clattn_status status = CLATTN_OK;
    if (!score || !logp || !hist || !hist_next || !next || !parents || !next_score ||
        !logits_host || !cand || !best_score || !searching)
        status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    if (status == CLATTN_OK &&
        !(status = clattn_tensor_create(ctx, &x, 3, (size_t[]){rows, 1, E})) &&
        !(status = clattn_tensor_create(ctx, &h, 3, (size_t[]){rows, 1, E})))
        status = clattn_tensor_create(ctx, &logits, 2, (size_t[]){rows, V});
    for (size_t r = 0; status == CLATTN_OK && r < rows; r++) {
        next[r] = m->info.bos_id;
        score[r] = r % k == 0 ? 0.0 : -INFINITY; /* one hypothesis per sentence at first */
    }
    for (size_t b = 0; status == CLATTN_OK && b < B; b++) {
        best_score[b] = -INFINITY;
        searching[b] = true;
        lengths[b] = 0;
        for (size_t i = 0; i < max_new; i++)
            out[b * max_new + i] = m->info.pad_id;
    }
    double final_penalty = length_penalty(max_new, alpha);
    size_t still_searching = B;
    for (size_t t = 0; status == CLATTN_OK && t < max_new && still_searching > 0; t++) {
        if ((status = clattn__transformer_embed(m, fn, next, rows, 1, t, x)) ||
            (status = clattn_decoder_step(state, x, h)) ||
            (status = clattn__transformer_logits(m, h, rows, logits)) ||
            (status = clattn_tensor_read(logits, logits_host, rows * V)))
            break;
        double penalty = length_penalty(t + 1, alpha);
        for (size_t b = 0; b < B; b++) {
            size_t n = 0;
            for (size_t j = 0; searching[b] && j < k; j++) {
                size_t r = b * k + j;
                if (score[r] == -INFINITY)
                    continue;
                log_softmax(logits_host + r * V, V, logp);
                double finished = (score[r] + logp[eos]) / penalty;
                if (finished > best_score[b]) {
                    best_score[b] = finished;
                    memcpy(out + b * max_new, hist + r * max_new, t * sizeof(int64_t));
                    out[b * max_new + t] = eos;
                    lengths[b] = t + 1;
                }
                for (size_t v = 0; v < V; v++)
                    if ((int64_t)v != eos)
                        cand[n++] = (candidate){score[r] + logp[v], j, (int64_t)v};
            }
            qsort(cand, n, sizeof(*cand), by_score);
            double best_alive = -INFINITY;
            size_t alive = 0;
            for (; alive < k && alive < n; alive++) {
                size_t r = b * k + alive, parent = b * k + cand[alive].parent;
                parents[r] = parent;
                next[r] = cand[alive].token;
                next_score[r] = cand[alive].score;
                best_alive = cand[alive].score > best_alive ? cand[alive].score : best_alive;
                memcpy(hist_next + r * max_new, hist + parent * max_new, t * sizeof(int64_t));
                hist_next[r * max_new + t] = cand[alive].token;
            }
            for (; alive < k; alive++) { /* a stopped sentence, or fewer extensions than k */
                size_t r = b * k + alive;
                parents[r] = r;
                next[r] = eos; /* keeps the batch going; its output is not used */
                next_score[r] = -INFINITY;
            }
            if (searching[b] &&
                (t + 1 == max_new || best_score[b] >= best_alive / final_penalty)) {
                searching[b] = false;
                still_searching--;
            }
        }
        memcpy(score, next_score, rows * sizeof(double));
        int64_t *swap = hist;
        hist = hist_next, hist_next = swap;
        if (stop_after(params, t + 1, max_new, rows))
            break;
        if (still_searching > 0)
            status = clattn__decoder_state_reorder(state, parents);
    }
    for (size_t b = 0; status == CLATTN_OK && params->scores && b < B; b++)
        params->scores[b] = best_score[b];
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&h), clattn_tensor_destroy(&logits);
    free(score), free(logp), free(hist), free(hist_next), free(next), free(parents);
    free(next_score), free(logits_host), free(cand), free(best_score), free(searching);
    return status;
}

clattn_status clattn_transformer_generate(clattn_transformer *m, const int64_t *src, size_t B,
                                          size_t S, const uint8_t *src_padding,
                                          const clattn_generate_params *params, int64_t *out,
                                          size_t *lengths)
{
    static const char fn[] = "clattn_transformer_generate";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_generate_params defaults;
    if (!params) {
        clattn_generate_params_default(&defaults);
        params = &defaults;
    }
    clattn_status status = clattn__transformer_check_src(m, fn, src, B, S);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, fn, out, "out is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_generate_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, isfinite(params->alpha) && params->alpha >= 0.0f,
                     "params->alpha must be finite and not negative");
    CLATTN_CHECK_ARG(ctx, fn, params->half_cache == 0 || params->half_cache == 1,
                     "params->half_cache is %d (0 or 1)", params->half_cache);
    size_t max_new = params->max_new ? params->max_new : S + 50;
    size_t *own_lengths = NULL;
    if (!lengths && !(lengths = own_lengths = malloc(B * sizeof(size_t))))
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    /* Beam search runs B·k sequences: the memory and its mask repeated k times. */
    size_t k = params->beam > 1 ? params->beam : 1, rows;
    CLATTN_CHECK_ARG(ctx, fn, clattn__mul_size(B, k, &rows) && rows <= (1u << 20),
                     "batch %zu x beam %zu is too large", B, k);
    int64_t *src_rows = (int64_t *)src;
    uint8_t *pad_rows = (uint8_t *)src_padding;
    if (k > 1) {
        src_rows = malloc(rows * S * sizeof(int64_t));
        pad_rows = src_padding ? malloc(rows * S) : NULL;
        if (!src_rows || (src_padding && !pad_rows)) {
            free(src_rows), free(pad_rows), free(own_lengths);
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                                fn);
        }
        for (size_t r = 0; r < rows; r++) {
            memcpy(src_rows + r * S, src + (r / k) * S, S * sizeof(int64_t));
            if (pad_rows)
                memcpy(pad_rows + r * S, src_padding + (r / k) * S, S);
        }
    }
    clattn_tensor *memory = NULL, *mask = NULL;
    clattn_decoder_state *state = NULL;
    clattn_decoder_state_params state_params;
    clattn_decoder_state_params_default(&state_params, rows, max_new);
    state_params.half_cache = params->half_cache;
    if (!(status = clattn__transformer_encode(m, fn, src_rows, rows, S, pad_rows, &memory,
                                              &mask)) &&
        !(status = clattn_decoder_state_create_with(m->decoder, &state, &state_params)) &&
        !(status = clattn_decoder_state_set_memory(state, memory, mask)))
        status = k > 1 ? beam_search(m, fn, B, k, max_new, params, state, out, lengths)
                       : greedy(m, fn, B, max_new, params, state, out, lengths);
    if (k > 1)
        free(src_rows), free(pad_rows);
    clattn_decoder_state_destroy(&state);
    clattn_tensor_destroy(&memory), clattn_tensor_destroy(&mask);
    free(own_lengths);
    return status;
}
