/*
 * Rows of token ids run through an encoder in batches and pooled on the device: what sentence
 * embeddings (sentence_model.c) and cross-encoders (cross_encoder.c) share.
 *
 * The rows are sorted by length (stable: input order among equal lengths) and cut into batches
 * of neighbours where embed_batches.h's plan puts the boundaries; each batch is right-padded to
 * its longest row with pad_id under a key-padding mask, run through the encoder, pooled
 * (clattn__pool: mean or CLS, optionally L2-normalised) and read back, and each row's vector
 * lands at its own place in the output. The device buffers (the mask, the hidden states, the
 * pooled rows) are made once per run, for its largest batch, and every batch uses views of
 * them; the ids go to the encoder as int32. Batch invariance (clattn/context.h) makes a row's bytes
 * the same in whatever batch it runs, so the cuts change speed, never results.
 */
#ifndef CLATTN_MODELS_POOLED_BATCHES_H
#define CLATTN_MODELS_POOLED_BATCHES_H

#include "clattn/pretrained.h"
#include "embed_batches.h"

/* The rows to run; nothing is checked here (the public entries check ids and lengths). */
typedef struct token_rows {
    const int32_t *const *ids;      /* row i: ids[i][0 .. lengths[i]) */
    const int32_t *const *type_ids; /* token types, as ids; NULL: type 0 for every token */
    const size_t *lengths;          /* each at least 1 */
    size_t count;
} token_rows;

typedef struct pooled_batches_params {
    int32_t pad_id;          /* the id at padded positions (masked out; any valid id) */
    embed_batch_costs costs; /* the plan's numbers, max_texts and max_padded_tokens included */
    clattn_pooling pooling;
    int normalize;           /* 1: L2-normalise each pooled row */
    clattn_progress_callback progress; /* may be NULL: called after each batch */
    void *progress_user_data;
} pooled_batches_params;

/* The plan's numbers for an encoder of configuration cfg on ctx's device (embed_batch_overhead
 * and attention_width); max_texts and max_padded_tokens are 0, for each call to set. */
embed_batch_costs clattn__pooled_batch_costs(clattn_context *ctx,
                                             const clattn_encoder_config *cfg);

/*
 * Runs the rows through `encoder` and writes row i's pooled vector to out[i·d .. (i+1)·d) (out:
 * [rows->count, d], d the encoder's d_model). `fn` names the public function in messages. On
 * error out may hold some rows.
 */
clattn_status clattn__pooled_batches_run(clattn_context *ctx, clattn_encoder *encoder,
                                         const char *fn, const token_rows *rows,
                                         const pooled_batches_params *params, float *out);

#endif /* CLATTN_MODELS_POOLED_BATCHES_H */
