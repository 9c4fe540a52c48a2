/* MPNet (transformers' MPNetModel, modeling_mpnet.py; sentence-transformers' all-mpnet-base-v2).
 *
 * config.json: model_type "mpnet".
 *   read      BERT's keys (bert.h) without type_vocab_size
 *   defaults  layer_norm_eps 1e-12
 *   refused   relative_attention_num_buckets other than 32 (transformers' MPNet buckets relative
 *             positions into 32, max_distance 128, whatever the config says), and BERT's
 *             refusals; max_position_embeddings below 4 (positions start at padding_idx 1 + 1)
 * Tensors: embeddings.{word,position}_embeddings, embeddings.LayerNorm,
 * encoder.relative_attention_bias (shared by the layers), encoder.layer.<n>.attention.attn.{q,k,v}
 * (packed into in_proj), attention.attn.o, attention.LayerNorm, intermediate.dense,
 * output.dense, output.LayerNorm; "mpnet." before each in a task model's file.
 * Layer configuration: BERT's, without token types, positions LEARNED_PADDED from padding_idx 1
 * (hard-coded in MPNetEmbeddings), relative_attention_buckets 32, max_distance 128. */
#include "base/errors.h"
#include "models/families/bert.h"

static const clattn_family_name fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
    {"relative_attention_bias.weight", "encoder.relative_attention_bias.weight"},
};
static const clattn_family_name layer[] = {
    {"self_attn.out_proj.weight", "attention.attn.o.weight"},
    {"self_attn.out_proj.bias", "attention.attn.o.bias"},
    {"norm1.weight", "attention.LayerNorm.weight"},
    {"norm1.bias", "attention.LayerNorm.bias"},
    {"linear1.weight", "intermediate.dense.weight"},
    {"linear1.bias", "intermediate.dense.bias"},
    {"linear2.weight", "output.dense.weight"},
    {"linear2.bias", "output.dense.bias"},
    {"norm2.weight", "output.LayerNorm.weight"},
    {"norm2.bias", "output.LayerNorm.bias"},
};

static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    static const clattn_bert_keys keys = {.token_types = false};
    clattn_status status = clattn__bert_read_keys(path, root, &keys, cfg);
    if (status)
        return status;
    json_t *v = json_object_get(root, "relative_attention_num_buckets");
    if (v && (!json_is_integer(v) || json_integer_value(v) != 32))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "relative_attention_num_buckets must be 32 (transformers' MPNet "
                               "always buckets relative positions into 32)");
    cfg->positional = CLATTN_POSITIONAL_LEARNED_PADDED;
    cfg->padding_idx = 1;
    cfg->relative_attention_buckets = 32;
    cfg->relative_attention_max_distance = 128;
    cfg->type_vocab_size = 0;
    return clattn__bert_check_positions(path, cfg);
}

static const char *const model_types[] = {"mpnet", NULL};

const clattn_family clattn__family_mpnet = {
    .name = "mpnet",
    .model_types = model_types,
    .read_config = read_config,
    .layer_count_key = "num_hidden_layers",
    .tensors =
        CLATTN_BERT_SHAPED_TENSORS("mpnet.", "attention.attn.", "q", "k", "v", fixed, layer),
};
