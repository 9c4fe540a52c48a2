/*
 * Choosing the next token from a decoder's logits: greedy, or sampling after penalties,
 * temperature, top-k, top-p and min-p, with a random generator per sequence.
 *
 * The order and the rules are transformers' generate() (4.57), so that the distribution drawn
 * from equals the softmax of the scores its LogitsProcessorList leaves on the same logits:
 *
 *   1. repetition_penalty r (RepetitionPenaltyLogitsProcessor): each token that occurs in the
 *      context (prompt and generated tokens), once however often it occurs: a score below 0 is
 *      multiplied by r, any other divided by r.
 *   2. presence_penalty a, frequency_penalty f (OpenAI's; not in transformers): score -= a·[c > 0]
 *      + f·c, where c counts the token among the generated tokens only (not the prompt), as
 *      OpenAI defines them and vLLM applies them (llama.cpp counts the last N tokens instead).
 *   3. temperature T: 0 is greedy: the token of the highest score after 1 and 2, the lowest id
 *      among equal ones (torch.argmax's first maximum); steps 4-6 and the generator are not
 *      used. Otherwise scores /= T (TemperatureLogitsWarper).
 *   4. top_k k (TopKLogitsWarper): removes the scores below the k-th largest (counted with
 *      repetitions), so ties with the k-th are kept and more than k tokens may remain.
 *   5. top_p p (TopPLogitsWarper): the tokens in ascending order of score, ties by ascending id
 *      (torch.sort's order where it is stable: up to 16 values, and always with stable=True;
 *      above that transformers' choice among ties straddling the boundary is unspecified);
 *      those whose cumulative probability is <= 1 - p are removed, the last (highest) one
 *      never. A token whose cumulative probability equals 1 - p exactly is removed.
 *   6. min_p m (MinPLogitsWarper): removes tokens whose probability is below m times the
 *      highest probability.
 *
 * Probabilities are computed in double from the float logits, as a softmax: exp(s - max) over
 * their sum in ascending id order. A token is drawn by inverse CDF: u uniform in [0, 1) from
 * the sequence's generator (sampling_random.h), the first token in ascending id order whose
 * cumulative weight exceeds u times the total; one draw per sampled token, so the same seed,
 * sequence key and inputs give the same tokens run after run (and on any machine whose C
 * library's exp() gives the same doubles), whatever other sequences are sampled meanwhile.
 * The tokens are not torch.multinomial's for the same seed: only the distributions are equal.
 */
#ifndef CLATTN_LLM_SAMPLING_H
#define CLATTN_LLM_SAMPLING_H

#include <stddef.h>
#include <stdint.h>

#include "base/errors.h"
#include "sampling_random.h"

/* What the sampler does; the defaults (clattn__sampling_config_default) turn each step off and
 * choose greedily. */
typedef struct clattn_sampling_config {
    double temperature;        /* >= 0; 0: greedy */
    int32_t top_k;             /* >= 0; 0: off */
    double top_p;              /* in [0, 1]; 1: off */
    double min_p;              /* in [0, 1]; 0: off */
    double repetition_penalty; /* > 0; 1: off */
    double presence_penalty;   /* finite; 0: off */
    double frequency_penalty;  /* finite; 0: off */
    uint64_t seed;
} clattn_sampling_config;

/* Greedy, every step off, seed 0. */
clattn_sampling_config clattn__sampling_config_default(void);

/* CLATTN_ERROR_INVALID_ARGUMENT naming the field and its range when a value is out of it
 * (recorded as "<function>: invalid argument: ..."). */
clattn_status clattn__sampling_config_check(const clattn_sampling_config *config,
                                            const char *function);

/* One sequence's sampler: its configuration and its random stream. A plain value: no memory to
 * release. */
typedef struct clattn_sampler {
    clattn_sampling_config config;
    clattn_sampling_random random;
} clattn_sampler;

/* Checks `config` and starts the stream of (config->seed, sequence); `sequence` is any key the
 * caller gives its sequences (0 for a single one). */
clattn_status clattn__sampler_init(clattn_sampler *sampler, const clattn_sampling_config *config,
                                   uint64_t sequence);

/* Memory the sampling of one vocabulary needs, reused from token to token and by every
 * sequence (about 22 bytes per vocabulary entry and 128 KiB; not to be used by two threads at
 * once). */
typedef struct clattn_sampling_workspace clattn_sampling_workspace;

clattn_status clattn__sampling_workspace_create(size_t vocab_size,
                                                clattn_sampling_workspace **out);
void clattn__sampling_workspace_destroy(clattn_sampling_workspace *workspace);

/* A sequence's tokens so far: `count` ids, of which the first `prompt_count` are the prompt
 * and the rest were generated. */
typedef struct clattn_token_history {
    const int32_t *ids;
    size_t count;
    size_t prompt_count;
} clattn_token_history;

/* The next token of a sequence from the logits of its last position (`workspace`'s vocabulary
 * size of them): greedy, or one draw from the sampler's stream. Logits may be -inf (never
 * chosen) but not NaN or +inf, and one must be finite; history ids must lie in the vocabulary;
 * `history` may be NULL (no tokens). Errors are CLATTN_ERROR_INVALID_ARGUMENT naming the
 * position. */
clattn_status clattn__sampler_next(clattn_sampler *sampler, clattn_sampling_workspace *workspace,
                                   const float *logits, const clattn_token_history *history,
                                   int32_t *token);

/* The distribution clattn__sampler_next draws from, written to probabilities[vocab_size]
 * (exact zeros for removed tokens; greedy: 1 at the chosen token). Draws nothing. */
clattn_status clattn__sampler_distribution(const clattn_sampler *sampler,
                                           clattn_sampling_workspace *workspace,
                                           const float *logits,
                                           const clattn_token_history *history,
                                           double *probabilities);

#endif /* CLATTN_LLM_SAMPLING_H */
