/*
 * libclattn — pretrained.h: Hugging Face BERT, MPNet, NomicBERT, JinaBERT, RoBERTa,
 * XLM-RoBERTa and ModernBERT encoders, pooling, and sentence embeddings (text in, the same
 * vectors as sentence-transformers out).
 *
 * A model folder is used as Hugging Face and sentence-transformers write it, without conversion:
 *   config.json                 its model_type picks the family: "bert" (JinaBERT: "bert" with
 *                               position_embedding_type "alibi"), "mpnet", "nomic_bert",
 *                               "roberta", "xlm-roberta" or "modernbert"; the family reads its
 *                               keys into the encoder's configuration
 *   model.safetensors           the family's tensor names (F32, F16 or BF16), with or without a
 *                               task model's prefix ("bert.", "mpnet.", "roberta.", "model.");
 *                               tensors inference does not use (embeddings.position_ids,
 *                               pooler.*, heads such as cls.* or lm_head.*) are skipped
 *   tokenizer.json or vocab.txt the tokenizer (clattn/tokenizer.h): WordPiece, byte-level BPE
 *                               (RoBERTa), Unigram (XLM-RoBERTa's SentencePiece)
 *   sentence_bert_config.json   optional: max_seq_length (the texts' truncation length)
 *   modules.json                optional: a sentence_transformers.models.Normalize module turns
 *                               L2 normalisation on
 *   1_Pooling/config.json       optional: pooling_mode_mean_tokens / pooling_mode_cls_token
 *                               (masked mean when the file is absent; one must be true)
 *
 * docs/model-families.md lists, per family, the config.json keys read, their defaults, the values
 * refused, the tensor names and the encoder configuration (clattn/encoder.h) they give. The
 * encoder is the library's encoder (clattn/encoder.h) with the family's embeddings (an embedding
 * LayerNorm, no √d scaling) and layers.
 *
 * Errors: another model_type (or none) is CLATTN_ERROR_UNSUPPORTED listing the supported ones
 * ('model_type "x" is not supported (supported: "bert", "mpnet", "nomic_bert", "roberta",
 * "xlm-roberta", "modernbert")'); a config value the encoder cannot compute as the family's
 * reference implementation does (a hidden_act, an activation_function, a position embedding
 * type, a NomicBERT or ModernBERT option, a JinaBERT feed_forward_type or emb_pooler, the
 * jina-bert-v2-qk-post-norm code its auto_map names, ...) is CLATTN_ERROR_UNSUPPORTED naming the
 * key; a missing or malformed key (a pad_token_id that leaves no position included) is
 * CLATTN_ERROR_FORMAT naming it; a missing or malformed file, a missing tensor or a wrong shape
 * fails with the file's name and what is wrong. A tensor stored in a dtype that is not read (an
 * integer type, for one) is named with its dtype ("tensor X is I32, expected F32 (or F16,
 * BF16)"); a number of layers in config.json (num_hidden_layers; NomicBERT: n_layer) other than
 * the number model.safetensors holds is CLATTN_ERROR_FORMAT naming both.
 *
 * Same thread-safety rule as the context: one thread at a time per context and its objects.
 */
#ifndef CLATTN_PRETRAINED_H
#define CLATTN_PRETRAINED_H

#include "clattn/encoder.h"
#include "clattn/tokenizer.h"

#ifdef __cplusplus
extern "C" {
#endif

/*
 * Loads the encoder of a Hugging Face BERT, MPNet, NomicBERT, JinaBERT, RoBERTa, XLM-RoBERTa or
 * ModernBERT folder (config.json + model.safetensors, see above) onto the context's device, with
 * the configuration its family gives (docs/model-families.md; clattn_encoder_get_config tells
 * it). On error *encoder is NULL.
 */
CLATTN_API clattn_status clattn_encoder_load_hf(clattn_context *ctx, clattn_encoder **encoder,
                                                const char *dir);

/* ---- pooling ---- */

typedef enum clattn_pooling {
    CLATTN_POOLING_MEAN = 0, /* mean over the tokens that are not padding (sentence-transformers'
                              * default) */
    CLATTN_POOLING_CLS = 1,  /* the first token ([CLS]) */
} clattn_pooling;

/*
 * out[b, :] = pooled x[b, :, :], then, with `normalize`, divided by max(‖out[b, :]‖₂, 1e-12)
 * (torch.nn.functional.normalize).
 *
 *   x:            [B, N, d]  contiguous
 *   padding_mask: [B, N]     contiguous, nonzero = padding (a key-padding mask); NULL: none.
 *                            A row with no real token pools to zeros.
 *   out:          [B, d]     contiguous
 */
CLATTN_API clattn_status clattn_pool(clattn_context *ctx, const clattn_tensor *x,
                                     const clattn_tensor *padding_mask, clattn_pooling pooling,
                                     int normalize, clattn_tensor *out);

/* ---- sentence embeddings ---- */

typedef struct clattn_sentence_model clattn_sentence_model;

/*
 * Loads a sentence-transformers folder: the encoder (clattn_encoder_load_hf), the tokenizer, the
 * truncation length (sentence_bert_config.json's max_seq_length, else max_position_embeddings;
 * at most max_position_embeddings - 2 for MPNet, whose positions start at 2, and
 * max_position_embeddings - pad_token_id - 1 for RoBERTa and XLM-RoBERTa (512 of their 514);
 * NomicBERT: at most n_positions),
 * the pooling and normalisation. The pooling comes from the Pooling module's config.json (mean
 * when the folder has none): pooling_mode_mean_tokens or pooling_mode_cls_token must be true;
 * none true is CLATTN_ERROR_FORMAT, another mode (max, mean_sqrt_len, weightedmean, lasttoken)
 * or both CLATTN_ERROR_UNSUPPORTED, naming the file. The folder's small JSON files are read only
 * when they are regular files (a FIFO or a device is CLATTN_ERROR_IO, never waited on). On error
 * *model is NULL.
 */
CLATTN_API clattn_status clattn_sentence_model_load(clattn_context *ctx,
                                                    clattn_sentence_model **model,
                                                    const char *dir);

/* Releases the model; sets *model to NULL. Accepts NULL. */
CLATTN_API void clattn_sentence_model_destroy(clattn_sentence_model **model);

typedef struct clattn_sentence_model_info {
    size_t hidden_size;    /* width of each embedding */
    size_t max_length;     /* tokens per text after truncation, the tokenizer's special tokens
                            * included ([CLS] and [SEP] for BERT) */
    size_t num_layers;
    size_t vocab_size;
    clattn_pooling pooling;
    int normalize;         /* 1: L2-normalised embeddings */
    /* config_sentence_transformers.json's default_prompt_name: the prompt that
     * clattn_sentence_model_embed puts before every text unless told otherwise; NULL: none.
     * Owned by the model. */
    const char *default_prompt_name;
    uint8_t reserved[56];
} clattn_sentence_model_info;

CLATTN_API clattn_status clattn_sentence_model_get_info(const clattn_sentence_model *model,
                                                        clattn_sentence_model_info *info);

/*
 * Prompts, as sentence-transformers has them (config_sentence_transformers.json: "prompts", an
 * object of names and texts such as {"query": "query: ", "passage": "passage: "}, and
 * "default_prompt_name"). A prompt is text put before every text to embed: it is tokenized with
 * it, counts toward its max_length and is pooled over (a Pooling module with "include_prompt":
 * false, which leaves it out, is refused at load as CLATTN_ERROR_UNSUPPORTED).
 *
 * clattn_sentence_model_prompt: the text of the prompt called `name`, NULL when the model has
 * none of that name. clattn_sentence_model_prompt_name: the name of prompt i (0, 1, ... in the
 * file's order), NULL past the last. Both strings are owned by the model.
 */
CLATTN_API const char *clattn_sentence_model_prompt(const clattn_sentence_model *model,
                                                    const char *name);
CLATTN_API const char *clattn_sentence_model_prompt_name(const clattn_sentence_model *model,
                                                         size_t i);

/* The model's tokenizer (owned by the model). */
CLATTN_API const clattn_tokenizer *clattn_sentence_model_tokenizer(
    const clattn_sentence_model *model);

/*
 * One text's ids exactly as clattn_sentence_model_embed tokenizes it, for a caller that tokenizes
 * in its own threads and embeds with clattn_sentence_model_embed_ids (a server): the text
 * stripped of the whitespace at both ends (Python's str.strip()), then the model's tokenizer
 * (clattn_tokenizer_encode: max_length, ids, capacity, *count and the errors as there, byte
 * offsets counted in the text as given). No prompt is added: put clattn_sentence_model_prompt's
 * text before the text first, as embed does. Errors are recorded for the calling thread only
 * (clattn_last_error(NULL)); model NULL is CLATTN_ERROR_INVALID_ARGUMENT. Thread-safe: any
 * number of threads may encode with one model at once, also while another embeds.
 */
CLATTN_API clattn_status clattn_sentence_model_encode(const clattn_sentence_model *model,
                                                      const char *text, size_t length,
                                                      size_t max_length, int32_t *ids,
                                                      size_t capacity, size_t *count);

/* Called after each batch with the texts done so far and the total. */
typedef void (*clattn_progress_callback)(void *user_data, size_t done, size_t total);

typedef struct clattn_embed_params {
    size_t max_length;  /* 0: the model's; else at most it, and at least the special tokens of
                         * the tokenizer's single template (clattn_tokenizer_special_count
                         * with CLATTN_TEMPLATE_SINGLE: 2, [CLS] [SEP], for BERT) */
    size_t batch_size;  /* texts per batch; 0: 32 */
    size_t max_batch_tokens; /* padded tokens per batch at most (bounds memory); 0: 16384 */
    int pooling;        /* -1: the model's; else a clattn_pooling */
    int normalize;      /* -1: the model's; 0 or 1 */
    clattn_progress_callback progress;
    void *progress_user_data;
    /* The prompt put before every text (sentence-transformers' encode(prompt=..., prompt_name=
     * ...)): `prompt` is the text itself ("" for none), `prompt_name` one of the model's
     * prompts (clattn_sentence_model_prompt); at most one of the two. Both NULL: the model's
     * default prompt (info.default_prompt_name), if it has one. clattn_sentence_model_embed_ids
     * takes neither and applies no default: its ids are the whole input. */
    const char *prompt;
    const char *prompt_name;
    uint8_t reserved[48]; /* must be zero */
} clattn_embed_params;

CLATTN_API void clattn_embed_params_default(clattn_embed_params *params);

/*
 * Embeds `count` UTF-8 texts into out [count, hidden_size] (row i = text i, whatever the
 * batching). lengths[i] is the byte length of texts[i]; lengths NULL: the texts are
 * NUL-terminated. The prompt (params->prompt or prompt_name, else the model's default prompt)
 * is put before each text, and the whole is stripped of whitespace at both ends as Python's
 * str.strip() strips it (sentence-transformers does so before tokenizing: it changes the ids of
 * byte-level BPE and SentencePiece tokenizers, not WordPiece's); texts are tokenized, truncated
 * to max_length tokens, sorted by length
 * and cut into batches of neighbours where padding and per-batch costs are least (right padding,
 * a key-padding mask per batch; the cuts change speed, never a row's bytes) and run through the
 * encoder, then pooled on the device. *tokens (may be NULL) receives the number of real tokens
 * processed. Invalid UTF-8 in a text is CLATTN_ERROR_INVALID_ARGUMENT naming it, counting from 1
 * ("text 1: ..." for texts[0]; see clattn/tokenizer.h); so are both prompt and prompt_name set,
 * and a prompt_name the model does not have (naming those it has); nothing is written to out
 * then.
 */
CLATTN_API clattn_status clattn_sentence_model_embed(clattn_sentence_model *model,
                                                     const char *const *texts,
                                                     const size_t *lengths, size_t count,
                                                     float *out, const clattn_embed_params *params,
                                                     size_t *tokens);

/*
 * The same as clattn_sentence_model_embed for texts already tokenized, as clattn_tokenizer_encode
 * gives them with the model's tokenizer: ids[i][0 .. lengths[i]) is text i's ids, the single
 * template's special tokens included ([CLS] ... [SEP] for BERT), truncated as the caller wants.
 * The texts are batched, padded, run, pooled and normalised exactly as
 * clattn_sentence_model_embed does (the same batching rules: sorted by length, at most
 * params->batch_size texts and params->max_batch_tokens padded tokens per batch), so row i is
 * the same bytes as clattn_sentence_model_embed gives for a text with these ids.
 * params->max_length must be 0 (the texts are already truncated); the other fields as there.
 * *tokens (may be NULL) receives the total of lengths. Nothing is written to out on error:
 *   CLATTN_ERROR_INVALID_ARGUMENT  ids or lengths NULL (count > 0), ids[i] NULL, lengths[i] 0
 *                                  ("text N: ..." counting from 1), or params->max_length not 0
 *   CLATTN_ERROR_OUT_OF_RANGE      lengths[i] above the model's max_length, or an id that is
 *                                  negative or not below its vocab_size (naming text N and the id)
 * The ids are not checked for the template's special tokens: other ids run as they are.
 */
CLATTN_API clattn_status clattn_sentence_model_embed_ids(clattn_sentence_model *model,
                                                         const int32_t *const *ids,
                                                         const size_t *lengths, size_t count,
                                                         float *out,
                                                         const clattn_embed_params *params,
                                                         size_t *tokens);

#ifdef __cplusplus
}
#endif

#endif /* CLATTN_PRETRAINED_H */
