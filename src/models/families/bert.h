/* BERT's config.json keys and tensor names, which the families built on BERT share: MPNet,
 * RoBERTa and XLM-RoBERTa, JinaBERT (bert.c). */
#ifndef CLATTN_FAMILY_BERT_H
#define CLATTN_FAMILY_BERT_H

#include "models/families/family.h"

/* What a family built on BERT's keys reads of them. */
typedef struct clattn_bert_keys {
    bool token_types;  /* type_vocab_size is read (MPNet has no token types: 0) */
    bool alibi;        /* position_embedding_type is "alibi" (JinaBERT): not refused */
    bool original_ffn; /* a feed_forward_type other than "original" is refused (BERT) */
} clattn_bert_keys;

/* BERT's keys into *cfg: hidden_size, num_attention_heads, num_hidden_layers, intermediate_size,
 * max_position_embeddings, type_vocab_size (keys->token_types), vocab_size, hidden_act ("gelu",
 * "gelu_new" / "gelu_pytorch_tanh", "relu"), layer_norm_eps (1e-12 when absent); learned
 * positions, embedding_norm, post-LN. position_embedding_type other than "absolute" (and
 * "alibi" with keys->alibi) is refused, so is feed_forward_type with keys->original_ffn. */
clattn_status clattn__bert_read_keys(const char *path, json_t *root, const clattn_bert_keys *keys,
                                     clattn_encoder_config *cfg);
/* max_position_embeddings against the fewest positions a text needs, counted after the
 * padding_idx + 1 rows before the first position where positions are LEARNED_PADDED; run after
 * the family has set its positions. */
clattn_status clattn__bert_check_positions(const char *path, const clattn_encoder_config *cfg);

/* BERT's tensor names (RoBERTa's and XLM-RoBERTa's are the same). */
extern const clattn_family_name clattn__bert_fixed[5];
extern const clattn_family_name clattn__bert_layer[10];

/* The clattn_family_tensors of a family laid out as BERT: `prefix_` before every name in a task
 * model's file, layer n's tensors under "encoder.layer.<n>.", its q, k and v in separate tensors
 * "<qkv_part_><q_|k_|v_>.<weight|bias>", the other tensors named by the arrays fixed_ and
 * layer_. */
#define CLATTN_BERT_SHAPED_TENSORS(prefix_, qkv_part_, q_, k_, v_, fixed_, layer_)          \
    {.prefix = (prefix_), .layers = "encoder.layer.", .qkv_part = (qkv_part_),              \
     .qkv = {(q_), (k_), (v_)}, .fixed = (fixed_),                                           \
     .fixed_count = CLATTN_FAMILY_COUNT_OF(fixed_), .layer = (layer_),                       \
     .layer_count = CLATTN_FAMILY_COUNT_OF(layer_)}
/* The same with BERT's q, k and v: "attention.self.{query,key,value}". */
#define CLATTN_BERT_TENSORS(prefix_, fixed_, layer_)                                         \
    CLATTN_BERT_SHAPED_TENSORS(prefix_, "attention.self.", "query", "key", "value", fixed_,  \
                               layer_)

#endif /* CLATTN_FAMILY_BERT_H */
