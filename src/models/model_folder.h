/*
 * What the folder models (sentence_model.c: sentence-transformers folders; cross_encoder.c:
 * *ForSequenceClassification folders) share in loading: the folder's optional JSON files, the
 * check that the tokenizer fits the model, and the longest input the position table takes.
 */
#ifndef CLATTN_MODELS_MODEL_FOLDER_H
#define CLATTN_MODELS_MODEL_FOLDER_H

#include "clattn/pretrained.h"

#include <jansson.h>

/* Parses dir/name (its path in path[4096]) when it exists: *root is NULL (and CLATTN_OK) when
 * nothing has that name. Anything there but a regular file is an error; a FIFO is never waited
 * on (clattn__read_json opens without blocking). `fn` names the public function in messages. */
clattn_status clattn__folder_optional_json(const char *fn, const char *dir, const char *name,
                                           char *path, json_t **root);

/* CLATTN_OK when every id of the tokenizer is in the model's vocabulary; else an error for the
 * thread that names the folder. */
clattn_status clattn__folder_check_tokenizer(const char *fn, const char *dir,
                                             const clattn_tokenizer *tokenizer,
                                             const clattn_encoder_config *cfg);

/* How many tokens the position table takes: max_positions, less padding_idx + 1 for
 * RoBERTa-style positions (they start at padding_idx + 1). */
size_t clattn__folder_position_limit(const clattn_encoder_config *cfg);

#endif /* CLATTN_MODELS_MODEL_FOLDER_H */
