/*
 * The models clattn-serve can serve, each as a serve_engine for the scheduler (scheduler.h):
 * a sentence-transformers embedder (rows: embeddings) and a cross-encoder (rows: raw logits). The engine borrows the model: it stays the caller's, alive while the scheduler runs.
 */
#ifndef CLATTN_SERVE_ENGINE_H
#define CLATTN_SERVE_ENGINE_H

#include "scheduler.h"

/* An engine over clattn_sentence_model_embed_ids (batch_size: embed's 32; the texts' token types
 * are not used: an embedder gets one text per row). On failure (the model's info) the library's
 * message is in clattn_last_error(NULL). */
clattn_status serve_engine_of_sentence_model(serve_engine *engine, clattn_sentence_model *model);

/* An engine over clattn_cross_encoder_score_ids: rows are the raw logits [count, num_labels]
 * (the HTTP thread applies the activation a request asks for: clattn_cross_encoder_activate);
 * normalize is not used. */
clattn_status serve_engine_of_cross_encoder(serve_engine *engine, clattn_cross_encoder *model);

#endif /* CLATTN_SERVE_ENGINE_H */
