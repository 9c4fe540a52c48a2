/*
 * libclattn — cross_encoder.h: cross-encoders (rerankers): Hugging Face *ForSequenceClassification
 * folders that score a (query, document) pair, as sentence-transformers' CrossEncoder and
 * text-embeddings-inference's /rerank and /predict score it.
 *
 * A cross-encoder reads the two texts together: the pair is tokenized with the model's template
 * (BERT: [CLS] query [SEP] document [SEP], token types 0 for "[CLS] query [SEP]" and 1 for
 * "document [SEP]"; RoBERTa, XLM-RoBERTa: <s> query </s></s> document </s>; ModernBERT: its
 * tokenizer.json's pair template, [CLS] query [SEP] document [SEP]), truncated longest-first
 * to the model's max_length (tokens are taken off the end of the longer of the two texts, as
 * Hugging Face's truncation="longest_first" does), run through the encoder, and the
 * classification head turns the state x of the first token ([CLS] or <s>), or ModernBERT's
 * pooled state, into num_labels logits:
 *
 *   BertForSequenceClassification        h = tanh(W_d · x + b_d)      (bert.pooler.dense)
 *                                        logits = W_o · h + b_o       (classifier)
 *   RobertaForSequenceClassification,    h = tanh(W_d · x + b_d)      (classifier.dense)
 *   XLMRobertaForSequenceClassification  logits = W_o · h + b_o       (classifier.out_proj)
 *   ModernBertForSequenceClassification  x = [CLS], or the mean over the real tokens
 *                                            (config.json's classifier_pooling "cls" | "mean")
 *                                        h = LayerNorm(act(W_d · x + b_d))   (head.dense,
 *                                            head.norm: eps norm_eps; b_d when classifier_bias,
 *                                            the norm's bias when norm_bias; act
 *                                            classifier_activation: gelu, gelu_new,
 *                                            gelu_pytorch_tanh, relu, silu, swish, tanh)
 *                                        logits = W_o · h + b_o       (classifier)
 *
 * The head runs on the host in double precision (hidden² + hidden·num_labels multiply-adds
 * per pair, rounded to float once at the end).
 *
 * The folder, as save_pretrained and sentence-transformers write it:
 *   config.json        "architectures": ["BertForSequenceClassification"] with "model_type"
 *                      "bert", ["RobertaForSequenceClassification"] with "roberta",
 *                      ["XLMRobertaForSequenceClassification"] with "xlm-roberta" or
 *                      ["ModernBertForSequenceClassification"] with "modernbert" (the
 *                      encoder's keys: clattn/pretrained.h); "id2label" (the
 *                      labels' names, keys "0" .. "n-1"; num_labels is its size; absent:
 *                      config.json's "num_labels", else 2 named LABEL_0, LABEL_1 as
 *                      transformers defaults); optionally sentence-transformers' default
 *                      activation: "sentence_transformers": {"activation_fn": ...} (version 4
 *                      and later) or "sbert_ce_default_activation_function" (before): see
 *                      CLATTN_SCORES_DEFAULT. "problem_type" and the dropouts only matter for
 *                      training and are ignored.
 *   model.safetensors  the encoder's tensors (under "bert." or "roberta.", or without the
 *                      prefix) and the head: BERT's [bert.]pooler.dense.weight [hidden,
 *                      hidden], .bias [hidden], classifier.weight [num_labels, hidden],
 *                      classifier.bias [num_labels]; RoBERTa's and XLM-R's
 *                      classifier.dense.weight [hidden, hidden], .bias [hidden],
 *                      classifier.out_proj.weight [num_labels, hidden], .bias [num_labels];
 *                      ModernBERT's (encoder under "model.") head.dense.weight [hidden,
 *                      hidden], .bias [hidden] (classifier_bias), head.norm.weight [hidden],
 *                      .bias [hidden] (norm_bias), classifier.weight [num_labels, hidden],
 *                      classifier.bias [num_labels]
 *   tokenizer.json or vocab.txt   the tokenizer (clattn/tokenizer.h: WordPiece, byte-level BPE,
 *                      Unigram)
 *   tokenizer_config.json   optional: "model_max_length", the truncation length when it is
 *                      below the position table (what CrossEncoder truncates to)
 *
 * Refused at load, naming the cause: CLATTN_ERROR_UNSUPPORTED for an architecture that is not a
 * supported *ForSequenceClassification (a bare BertModel or a sentence-transformers embedding
 * folder: 'architectures ["BertModel"] is not a sequence classification model: no
 * cross-encoder head (supported: BertForSequenceClassification, ...)'; another family's
 * classifier, such as DistilBertForSequenceClassification: '... is a sequence classification
 * model this library does not implement'), a folder without "architectures", an architecture
 * with another model_type, a default activation other than Sigmoid and Identity, ModernBERT's
 * classifier_pooling or classifier_activation other than those above;
 * CLATTN_ERROR_FORMAT for a missing head tensor (named, with the file) or a malformed
 * id2label; CLATTN_ERROR_SHAPE_MISMATCH for a head tensor of the wrong shape (both shapes: a
 * classifier of another num_labels than id2label's); and the encoder's and the tokenizer's own
 * errors (clattn/pretrained.h, clattn/tokenizer.h).
 *
 * Same thread-safety rule as the context: one thread at a time per context and its objects;
 * clattn_cross_encoder_encode_pair and clattn_cross_encoder_activate may be called from any
 * number of threads at once, also while one thread scores (they record their errors for the
 * calling thread only).
 */
#ifndef CLATTN_CROSS_ENCODER_H
#define CLATTN_CROSS_ENCODER_H

#include "clattn/pretrained.h"
#include "clattn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct clattn_cross_encoder clattn_cross_encoder;

/*
 * What a score is, from a pair's logits z[0 .. num_labels):
 */
typedef enum clattn_score_activation {
    /* sentence-transformers' CrossEncoder.predict default: the activation config.json names
     * ("sentence_transformers"."activation_fn", else "sbert_ce_default_activation_function":
     * "torch.nn.modules.activation.Sigmoid" or "torch.nn.Sigmoid" is SIGMOID,
     * "torch.nn.modules.linear.Identity" or "torch.nn.Identity" is RAW; a name outside "torch."
     * is ignored, as CrossEncoder ignores it without trust_remote_code), else SIGMOID with one
     * label and RAW with several. info.default_activation says which. */
    CLATTN_SCORES_DEFAULT = 0,
    CLATTN_SCORES_RAW = 1,     /* the logits themselves (TEI's raw_scores: true) */
    CLATTN_SCORES_SIGMOID = 2, /* 1 / (1 + exp(-z[k])) for each label */
    CLATTN_SCORES_SOFTMAX = 3, /* exp(z[k] - max z) / sum_j exp(z[j] - max z) over the labels
                                * (1 with one label) */
} clattn_score_activation;
/* TEI's /predict and /rerank with raw_scores false are SIGMOID with one label and SOFTMAX with
 * several; sentence-transformers' predict(apply_softmax=True) is SOFTMAX with several. */

/*
 * Loads a cross-encoder folder (see above) onto the context's device: the encoder
 * (clattn_encoder_load_hf), the head, the tokenizer and the truncation length (the least of the
 * position table, the tokenizer's default length and tokenizer_config.json's
 * model_max_length). On error *model is NULL.
 */
CLATTN_API clattn_status clattn_cross_encoder_load(clattn_context *ctx,
                                                   clattn_cross_encoder **model,
                                                   const char *dir);

/* Releases the model; sets *model to NULL. Accepts NULL. */
CLATTN_API void clattn_cross_encoder_destroy(clattn_cross_encoder **model);

typedef struct clattn_cross_encoder_info {
    size_t num_labels;     /* logits per pair (1 for a reranker) */
    /* labels[k]: the name of logit k (config.json's id2label; "LABEL_k" when it has none);
     * num_labels NUL-terminated strings owned by the model */
    const char *const *labels;
    size_t max_length;     /* tokens per pair after truncation, special tokens included */
    size_t hidden_size;
    size_t num_layers;
    size_t vocab_size;     /* ids must be below it */
    size_t type_vocab_size; /* token types the model has: type ids are read, and must be below
                             * it, when it is above 1 (clattn_cross_encoder_score_ids) */
    const char *model_type;   /* config.json's model_type ("bert", "roberta", "xlm-roberta",
                               * "modernbert"); owned by the model */
    const char *architecture; /* "BertForSequenceClassification", ...; owned by the model */
    /* What CLATTN_SCORES_DEFAULT means for this model: CLATTN_SCORES_SIGMOID or _RAW. */
    clattn_score_activation default_activation;
    uint8_t reserved[60];
} clattn_cross_encoder_info;

CLATTN_API clattn_status clattn_cross_encoder_get_info(const clattn_cross_encoder *model,
                                                       clattn_cross_encoder_info *info);

/* The model's tokenizer (owned by the model). */
CLATTN_API const clattn_tokenizer *clattn_cross_encoder_tokenizer(
    const clattn_cross_encoder *model);

/*
 * A pair's ids and token types exactly as clattn_cross_encoder_score tokenizes it (see there:
 * both texts stripped, the model's pair template, longest-first truncation), for a server that
 * tokenizes in its own threads and scores with clattn_cross_encoder_score_ids: the scores are
 * then the same bytes as clattn_cross_encoder_score's. max_length: 0 for the model's
 * max_length, SIZE_MAX for no truncation (*count may then exceed the model's max_length, which
 * clattn_cross_encoder_score_ids refuses: TEI's truncate false), else at most the model's.
 * ids, type_ids (may be NULL), capacity, *count and the errors as clattn_tokenizer_encode_pair
 * (clattn/tokenizer.h; its messages call the query text_a and the document text_b, their byte
 * offsets counted in the texts as given); model NULL is CLATTN_ERROR_INVALID_ARGUMENT. Errors
 * are recorded for the calling thread only (clattn_last_error(NULL)), not in the context.
 * Thread-safe: any number of threads may tokenize with one model at once, also while another
 * thread scores.
 */
CLATTN_API clattn_status clattn_cross_encoder_encode_pair(const clattn_cross_encoder *model,
                                                          const char *query,
                                                          size_t query_length,
                                                          const char *document,
                                                          size_t document_length,
                                                          size_t max_length, int32_t *ids,
                                                          int32_t *type_ids, size_t capacity,
                                                          size_t *count);

typedef struct clattn_cross_encoder_params {
    /* clattn_cross_encoder_score: tokens per pair at most; 0: the model's max_length; else at
     * most it. clattn_cross_encoder_score_ids: must be 0 (the pairs are already truncated). */
    size_t max_length;
    /* clattn_cross_encoder_score: 1 (the default): a pair longer than max_length is truncated
     * longest-first; 0: it is an error instead (CLATTN_ERROR_OUT_OF_RANGE naming the pair and
     * its length: TEI's truncate false). Ignored by clattn_cross_encoder_score_ids. */
    int truncate;
    size_t batch_size;       /* pairs per batch at most; 0: 32 */
    size_t max_batch_tokens; /* padded tokens per batch at most (bounds memory); 0: 16384 */
    clattn_score_activation activation; /* default CLATTN_SCORES_DEFAULT */
    clattn_progress_callback progress;  /* may be NULL: called after each batch */
    void *progress_user_data;
    uint8_t reserved[64]; /* must be zero */
} clattn_cross_encoder_params;

/* Fills params with the defaults: max_length 0, truncate 1, batch_size 0, max_batch_tokens 0,
 * activation CLATTN_SCORES_DEFAULT, no progress callback, reserved zero. */
CLATTN_API void clattn_cross_encoder_params_default(clattn_cross_encoder_params *params);

/*
 * Scores `count` (query, document) pairs: out[i·num_labels .. (i+1)·num_labels) = the scores
 * of pair i (out: [count, num_labels]), whatever the batching. queries[i] and documents[i] are
 * UTF-8, query_lengths[i] and document_lengths[i] their byte lengths (a lengths array NULL: the
 * texts are NUL-terminated). To rerank documents for one query, pass the same query pointer
 * for every i (it is tokenized once per pair).
 *
 * Each text is first stripped of the whitespace at its ends (Python's str.strip(), as
 * sentence-transformers' CrossEncoder stripped both texts before its tokenizer up to its version
 * 3; from version 4 it gives them to the tokenizer as they are, so a text with whitespace at an
 * end can score differently there; with WordPiece stripping changes nothing, with byte-level BPE
 * and SentencePiece the spaces would be tokens), then the
 * pair is tokenized with the model's template (clattn_tokenizer_encode_pair) and truncated
 * longest-first to max_length (see params); the pairs are sorted by length and cut into
 * batches of neighbours (at most params->batch_size pairs and params->max_batch_tokens padded tokens each; right padding and a
 * key-padding mask), run through the encoder; the head and the activation (params->activation)
 * give the scores. A pair's scores do not depend on the pairs it is batched with: the same pair
 * gives the same bytes alone, in any batch, and through clattn_cross_encoder_score_ids with the
 * same ids. *tokens (may be NULL) receives the number of real tokens run.
 *
 * Nothing is written to out on these errors:
 *   CLATTN_ERROR_INVALID_ARGUMENT  model, out (count > 0), queries or documents NULL; a text
 *                                  NULL with a length other than 0 ("pair N: the document
 *                                  (documents[N-1]) is NULL", counting from 1);
 *                                  params->reserved not zero, params->activation or
 *                                  params->truncate out of range; invalid UTF-8 in a text, or a
 *                                  max_length below the template's special tokens ("pair N: "
 *                                  and clattn_tokenizer_encode_pair's message, which calls the
 *                                  query text_a and the document text_b)
 *   CLATTN_ERROR_OUT_OF_RANGE      params->truncate 0 and pair N longer than max_length ("pair
 *                                  N has T tokens, more than max_length M")
 *   CLATTN_ERROR_FORMAT, _UNSUPPORTED  a pair template the tokenizer cannot apply
 *                                  (clattn/tokenizer.h)
 * and the device's errors (the context's message).
 */
CLATTN_API clattn_status clattn_cross_encoder_score(clattn_cross_encoder *model,
                                                    const char *const *queries,
                                                    const size_t *query_lengths,
                                                    const char *const *documents,
                                                    const size_t *document_lengths, size_t count,
                                                    float *out,
                                                    const clattn_cross_encoder_params *params,
                                                    size_t *tokens);

/*
 * The same for pairs already tokenized (a server tokenizes in its own threads and batches
 * pairs from many requests): ids[i][0 .. lengths[i]) are pair i's ids with its special tokens,
 * as clattn_tokenizer_encode_pair gives them, and type_ids[i][0 .. lengths[i]) its token types
 * (type_ids NULL: every token has type 0). Token types are read only by a model with more than
 * one (info.type_vocab_size > 1: BERT's two); for the others (RoBERTa's and XLM-R's one,
 * ModernBERT's none) type_ids is ignored and every token has type 0, as Hugging Face's
 * tokenizers for them give the model no token_type_ids. Scores, batching and batch invariance as
 * clattn_cross_encoder_score: row i is the same bytes as clattn_cross_encoder_score gives for a
 * pair that tokenizes to these ids and types. params->max_length must be 0; params->truncate is
 * not used. *tokens (may be NULL) receives the total of lengths. Nothing is written to out on
 * error:
 *   CLATTN_ERROR_INVALID_ARGUMENT  model, ids, lengths or out NULL (count > 0), ids[i] NULL,
 *                                  type_ids[i] NULL when type_ids is not, lengths[i] 0 ("pair
 *                                  N: ..." counting from 1), params->max_length not 0, and the
 *                                  params errors of clattn_cross_encoder_score
 *   CLATTN_ERROR_OUT_OF_RANGE      lengths[i] above the model's max_length, an id negative or
 *                                  not below vocab_size, a type id (when read) negative or not
 *                                  below type_vocab_size; the message names the pair, the
 *                                  position and the value
 * The ids are not checked for the special tokens: other ids run as they are.
 */
CLATTN_API clattn_status clattn_cross_encoder_score_ids(clattn_cross_encoder *model,
                                                        const int32_t *const *ids,
                                                        const int32_t *const *type_ids,
                                                        const size_t *lengths, size_t count,
                                                        float *out,
                                                        const clattn_cross_encoder_params *params,
                                                        size_t *tokens);

/*
 * Scores from logits (out [count, num_labels] of a call with CLATTN_SCORES_RAW) with another
 * activation, exactly as the scoring calls compute them (the same bytes): a server scores a
 * batch of pairs from many requests once, raw, then gives each request the scores it asked
 * for. out may be logits itself. CLATTN_ERROR_INVALID_ARGUMENT: model NULL, logits or out NULL
 * (count > 0), activation out of range (recorded for the calling thread only:
 * clattn_last_error(NULL)).
 */
CLATTN_API clattn_status clattn_cross_encoder_activate(const clattn_cross_encoder *model,
                                                       clattn_score_activation activation,
                                                       const float *logits, size_t count,
                                                       float *out);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_CROSS_ENCODER_H */
