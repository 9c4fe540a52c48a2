/*
 * libclattn — pretrained.h: Hugging Face BERT, MPNet, NomicBERT, JinaBERT, RoBERTa,
 * XLM-RoBERTa and ModernBERT encoders, pooling, and sentence embeddings (text in, the same
 * vectors as sentence-transformers out).
 *
 * A model folder is used as Hugging Face and sentence-transformers write it, without conversion:
 *   config.json                 model_type "bert": hidden_size, num_attention_heads,
 *                               num_hidden_layers, intermediate_size, hidden_act, layer_norm_eps,
 *                               max_position_embeddings, type_vocab_size, vocab_size,
 *                               pad_token_id (position_embedding_type, when present, "absolute");
 *                               or model_type "mpnet": the same without type_vocab_size, and
 *                               relative_attention_num_buckets (32, the only value transformers'
 *                               MPNet uses); or model_type "nomic_bert" (nomic-embed-text v1,
 *                               v1.5; GPT-2's key names): n_embd, n_head, n_layer, n_inner,
 *                               n_positions, layer_norm_epsilon, activation_function ("swiglu"
 *                               or "geglu"), vocab_size, pad_vocab_size_multiple,
 *                               type_vocab_size, rotary_emb_fraction, rotary_emb_base,
 *                               rotary_emb_interleaved, qkv_proj_bias, mlp_fc1_bias,
 *                               mlp_fc2_bias (all true or all false), and refused when set:
 *                               rotary_scaling_factor (dynamic NTK), prenorm, ... (hf_model.c's
 *                               nomic_config lists them); or JinaBERT (jina-embeddings-v2,
 *                               jinaai/jina-bert-implementation): model_type "bert" with
 *                               position_embedding_type "alibi", feed_forward_type "geglu" or
 *                               "reglu", emb_pooler null or "mean" (hidden_act is not used;
 *                               max_position_embeddings is only the longest text, no table);
 *                               or model_type "roberta" / "xlm-roberta": BERT's keys, with
 *                               pad_token_id the padding_idx positions count from (1 when
 *                               absent; at most max_position_embeddings - 2)
 *                               or model_type "modernbert" (transformers' ModernBertModel):
 *                               hidden_size, num_attention_heads, num_hidden_layers,
 *                               intermediate_size, vocab_size, and where present
 *                               max_position_embeddings (only the longest text: RoPE),
 *                               norm_eps, norm_bias, attention_bias and mlp_bias (both true or
 *                               both false), hidden_activation, global_rope_theta,
 *                               local_rope_theta (null: global_rope_theta),
 *                               global_attn_every_n_layers, local_attention; refused when set:
 *                               rope_scaling, partial_rotary_factor other than 1, head_dim
 *                               other than hidden_size / num_attention_heads (hf_model.c's
 *                               modernbert_config lists the rules)
 *   model.safetensors           BERT's tensor names, with or without a "bert." prefix; MPNet's
 *                               (embeddings.*, encoder.layer.N.attention.attn.{q,k,v,o},
 *                               attention.LayerNorm, intermediate.dense, output.dense,
 *                               output.LayerNorm, encoder.relative_attention_bias.weight), with
 *                               or without "mpnet."; NomicBERT's (embeddings.*, emb_ln,
 *                               encoder.layers.N.attn.Wqkv (q, k, v packed), attn.out_proj,
 *                               mlp.fc11 (up), mlp.fc12 (gate), mlp.fc2, norm1, norm2), with or
 *                               without "bert."; JinaBERT's (BERT's without
 *                               position_embeddings, encoder.layer.N.mlp.gated_layers.weight
 *                               [2·intermediate, hidden], mlp.wo, mlp.layernorm), with or
 *                               without "bert."; RoBERTa's and XLM-RoBERTa's are BERT's, with
 *                               or without "roberta." (task models: RobertaForMaskedLM, ...);
 *                               ModernBERT's (embeddings.tok_embeddings,
 *                               embeddings.norm, layers.N.attn_norm (none in layer 0),
 *                               layers.N.attn.Wqkv (q, k, v packed), attn.Wo, mlp_norm,
 *                               mlp.Wi [2·intermediate, hidden] (the activated half first),
 *                               mlp.Wo, final_norm), with or without "model." (a
 *                               ModernBertForMaskedLM's file); tensors inference does not use
 *                               (embeddings.position_ids, pooler.*, heads such as cls.* or
 *                               lm_head.*) are skipped
 *   tokenizer.json or vocab.txt the tokenizer (clattn/tokenizer.h): WordPiece, byte-level BPE
 *                               (RoBERTa), Unigram (XLM-RoBERTa's SentencePiece)
 *   sentence_bert_config.json   optional: max_seq_length (the texts' truncation length)
 *   modules.json                optional: a sentence_transformers.models.Normalize module turns
 *                               L2 normalisation on
 *   1_Pooling/config.json       optional: pooling_mode_mean_tokens / pooling_mode_cls_token
 *                               (masked mean when the file is absent; one must be true)
 *
 * The encoder is the library's encoder (clattn/encoder.h) with BERT's embeddings — word + token
 * type + learned position, then LayerNorm (eps from the config), no √d scaling — and post-LN
 * layers with the configured activation: "gelu" (erf), "gelu_new" / "gelu_pytorch_tanh" (tanh
 * approximation) or "relu". MPNet's embeddings are word + learned position, the positions
 * counted from padding_idx 1 over the non-padding ids (CLATTN_POSITIONAL_LEARNED_PADDED), then
 * LayerNorm; its layers add the relative position bias (relative_attention_buckets 32,
 * max_distance 128; see clattn/encoder.h). NomicBERT's (the published modeling_hf_nomic_bert.py,
 * nomic-ai/contrastors): word + token type embeddings, then LayerNorm emb_ln; post-LN layers
 * with rotary embeddings on q and k (clattn/encoder.h's rope_theta, rotary_dim,
 * rope_interleaved), a gated feed-forward act(fc12(x)) ⊙ fc11(x) (SwiGLU: silu; GeGLU: erf
 * gelu) n_inner wide rounded up to a multiple of 256, and no linear biases unless the config
 * has them. JinaBERT's (jinaai/jina-bert-implementation): word + token type embeddings, then
 * LayerNorm; post-LN layers with ALiBi's -m_h·|i - j| (alibi) and the gated feed-forward
 * layernorm(x + wo(act(g) ⊙ u)), g and u the first and second half of gated_layers' rows
 * (ffn_gated: linear1_gate = g's rows, linear1 = u's, both without bias; act erf gelu for
 * "geglu", relu for "reglu"). RoBERTa's and XLM-RoBERTa's (transformers' RobertaEmbeddings)
 * are BERT's with MPNet's positions: word + token type (row 0 unless given; type_vocab_size is
 * 1 in the published checkpoints) + learned position counted from padding_idx = pad_token_id
 * over the non-padding ids (CLATTN_POSITIONAL_LEARNED_PADDED: padding, left or right, never
 * shifts a real token's position; a padding id inside a text reads row padding_idx and is not
 * counted, as transformers does), then LayerNorm; BERT's layers. ModernBERT's (transformers'
 * modeling_modernbert.py): the token embedding, then LayerNorm embeddings.norm; pre-LN layers
 * x = x + attn(attn_norm(x)); x = x + mlp(mlp_norm(x)) whose first has no attn_norm
 * (first_norm1_identity), RoPE on q and k (half-split, all of d_k), the gated feed-forward
 * Wo(act(input) ⊙ gate) with input and gate the first and second half of Wi's rows, no linear
 * or norm biases unless the config has them, and final_norm; layer i is global (rotary base
 * global_rope_theta) when i % global_attn_every_n_layers == 0, local otherwise: keys farther
 * than local_attention // 2 from the query are ignored, rotary base local_rope_theta
 * (clattn/encoder.h's local_window, global_every, local_rope_theta). Anything else (another
 * model_type, hidden_act, activation_function, position embedding type, a NomicBERT or
 * ModernBERT option the encoder does not implement, a JinaBERT feed_forward_type or emb_pooler,
 * or the jina-bert-v2-qk-post-norm code its auto_map names) fails with
 * CLATTN_ERROR_UNSUPPORTED naming the field (an unknown model_type: 'model_type "x" is not
 * supported (supported: "bert", "mpnet", "nomic_bert", "roberta", "xlm-roberta",
 * "modernbert")'); a pad_token_id that leaves no position is CLATTN_ERROR_FORMAT; a missing or
 * malformed file, a missing tensor or a wrong shape fails with the file's name and what is
 * wrong. A tensor stored in a dtype that is not read (an integer type, for one) is named with
 * its dtype ("tensor X is I32, expected F32 (or F16, BF16)"); a num_hidden_layers other than
 * the number of layers model.safetensors holds (encoder.layer.<n>.*; NomicBERT: n_layer,
 * encoder.layers.<n>.*; ModernBERT: layers.<n>.*) is CLATTN_ERROR_FORMAT naming both.
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
 * Loads the encoder of a Hugging Face BERT, MPNet, NomicBERT, JinaBERT or ModernBERT folder
 * (config.json +
 * model.safetensors, see above) onto the context's device. Its configuration: positional LEARNED
 * (max_position_embeddings rows), type_vocab_size token types, embedding_norm, embedding_scale 1,
 * post-LN, eps layer_norm_eps; MPNet: LEARNED_PADDED with padding_idx 1, no token types, and
 * relative_attention_buckets 32 (max distance 128); NomicBERT: positional NONE with rope_theta
 * rotary_emb_base and rotary_dim d_k · rotary_emb_fraction (LEARNED from
 * embeddings.position_embeddings when rotary_emb_fraction is 0), max_positions n_positions (the
 * longest input), ffn_gated with silu or gelu, linear_no_bias without biases, eps
 * layer_norm_epsilon; JinaBERT: positional NONE, alibi 1, ffn_gated 1 with activation GELU
 * ("geglu") or RELU ("reglu"), type_vocab_size token types, and max_positions =
 * max_position_embeddings (no table: the encoder takes any length). RoBERTa and XLM-RoBERTa
 * folders load the same way: LEARNED_PADDED with padding_idx pad_token_id, type_vocab_size
 * token types (BERT's otherwise).
 * ModernBERT: positional NONE,
 * no token types, embedding_norm, norm_first with first_norm1_identity, final_norm, ffn_gated
 * with hidden_activation's function, linear_no_bias = !attention_bias, norm_no_bias =
 * !norm_bias, eps norm_eps, rope_theta global_rope_theta, local_rope_theta, local_window
 * local_attention rounded down to even, global_every global_attn_every_n_layers (at most
 * num_hidden_layers), max_positions max_position_embeddings. On error *encoder is NULL.
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
    size_t max_length;     /* tokens per text after truncation, [CLS] and [SEP] included */
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
    size_t max_length;  /* 0: the model's; else at most it, and at least 2 ([CLS] [SEP]) */
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
 * byte-level BPE and SentencePiece tokenizers, not WordPiece's); texts are tokenized, truncated to max_length tokens, sorted by length
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
 * gives them with the model's tokenizer: ids[i][0 .. lengths[i]) is text i's ids, [CLS] ... [SEP]
 * included, truncated as the caller wants. The texts are batched, padded, run, pooled and
 * normalised exactly as clattn_sentence_model_embed does (the same batching rules: sorted by
 * length, at most params->batch_size texts and params->max_batch_tokens padded tokens per batch),
 * so row i is the same bytes as clattn_sentence_model_embed gives for a text with these ids.
 * params->max_length must be 0 (the texts are already truncated); the other fields as there.
 * *tokens (may be NULL) receives the total of lengths. Nothing is written to out on error:
 *   CLATTN_ERROR_INVALID_ARGUMENT  ids or lengths NULL (count > 0), ids[i] NULL, lengths[i] 0
 *                                  ("text N: ..." counting from 1), or params->max_length not 0
 *   CLATTN_ERROR_OUT_OF_RANGE      lengths[i] above the model's max_length, or an id that is
 *                                  negative or not below its vocab_size (naming text N and the id)
 * The ids are not checked for [CLS] and [SEP]: other ids run as they are.
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
