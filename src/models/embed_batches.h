/*
 * How a sentence model splits texts into batches (clattn_sentence_model_embed and _embed_ids).
 *
 * The texts are sorted by length; a batch is a run of consecutive sorted texts, right-padded to
 * its longest. Padding is work the device does for nothing, and so is each batch's fixed cost
 * (kernel launches, a device that a small batch leaves idle). The plan chooses the batch
 * boundaries that minimise the modelled cost of all batches:
 *
 *   cost(batch of c texts, longest L) = overhead + max(c·L, overhead) · (1 + L / attention_width)
 *
 * c·L is the padded tokens, each costing its projections and feed-forward (constant) plus its
 * attention (growing with L: a token's scores and weighted values cost 4·L·d_model FLOPs
 * against 2·(4·d_model² + 2·d_model·d_ff) for its projections, so attention_width is
 * 2·d_model + d_ff). `overhead`, in padded tokens, stands for a batch's fixed cost and for the
 * tokens the device needs to be busy: it is derived from device facts (embed_batch_overhead).
 * A batch also holds at most max_texts texts and max_padded_tokens padded tokens (memory).
 *
 * The plan depends only on the lengths and these numbers, and batch invariance
 * (clattn/context.h) makes every text's row the same bytes whatever batch it lands in, so the
 * plan changes speed, never results.
 */
#ifndef CLATTN_MODELS_EMBED_BATCHES_H
#define CLATTN_MODELS_EMBED_BATCHES_H

#include <clattn/context.h>

#include <stddef.h>

typedef struct embed_batch_costs {
    double overhead;          /* a batch's fixed cost, in padded tokens */
    double attention_width;   /* 2·d_model + d_ff */
    size_t max_texts;         /* texts per batch at most (at least 1) */
    size_t max_padded_tokens; /* padded tokens per batch at most; a text longer than this
                               * still gets a batch of its own */
} embed_batch_costs;

/* The per-batch overhead for a device, in padded tokens: 4 per compute unit on a CPU (a core's
 * share of a small GEMM, and launch costs of about a millisecond per batch on PoCL), 64 per
 * compute unit elsewhere (a GPU's multiprocessor needs that many rows to be busy). */
double embed_batch_overhead(const clattn_device_info *device);

/* Plans the batches of `count` texts whose lengths, sorted ascending, are sorted_lengths[0 ..
 * count). Writes into ends[] the index one past each batch's last text (ends[k - 1] == count)
 * and returns the number of batches k (0 when count is 0). ends must hold count elements.
 * Returns (size_t)-1 when out of host memory (nothing useful in ends then). */
size_t embed_batches_plan(const size_t *sorted_lengths, size_t count,
                          const embed_batch_costs *costs, size_t *ends);

#endif /* CLATTN_MODELS_EMBED_BATCHES_H */
