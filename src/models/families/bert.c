/* BERT (transformers' BertModel; sentence-transformers' all-MiniLM-L6-v2 and its kind).
 *
 * config.json: model_type "bert" (position_embedding_type "alibi" is JinaBERT: jina_bert.c).
 *   read      hidden_size, num_attention_heads, num_hidden_layers, intermediate_size,
 *             max_position_embeddings, type_vocab_size, vocab_size, hidden_act
 *   defaults  layer_norm_eps 1e-12
 *   refused   position_embedding_type other than "absolute"; feed_forward_type other than
 *             "original"; hidden_act other than gelu, gelu_new, gelu_pytorch_tanh, relu; fewer
 *             than 2 positions
 * Tensors: embeddings.{word,position,token_type}_embeddings, embeddings.LayerNorm,
 * encoder.layer.<n>.attention.self.{query,key,value} (packed into in_proj), attention.output.dense,
 * attention.output.LayerNorm, intermediate.dense, output.dense, output.LayerNorm; "bert." before
 * each in a task model's file.
 * Layer configuration: learned positions, token types, embedding LayerNorm, post-LN layers. */
#include "bert.h"

#include "base/errors.h"
#include "models/families/family_config.h"

#include <math.h>
#include <string.h>

const clattn_family_name clattn__bert_fixed[5] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
};
const clattn_family_name clattn__bert_layer[10] = {
    {"self_attn.out_proj.weight", "attention.output.dense.weight"},
    {"self_attn.out_proj.bias", "attention.output.dense.bias"},
    {"norm1.weight", "attention.output.LayerNorm.weight"},
    {"norm1.bias", "attention.output.LayerNorm.bias"},
    {"linear1.weight", "intermediate.dense.weight"},
    {"linear1.bias", "intermediate.dense.bias"},
    {"linear2.weight", "output.dense.weight"},
    {"linear2.bias", "output.dense.bias"},
    {"norm2.weight", "output.LayerNorm.weight"},
    {"norm2.bias", "output.LayerNorm.bias"},
};

static clattn_status read_activation(const char *path, json_t *root, clattn_activation *act)
{
    const char *name = json_string_value(json_object_get(root, "hidden_act"));
    if (!name)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"hidden_act\" is missing or not a string");
    if (strcmp(name, "gelu") == 0)
        *act = CLATTN_ACTIVATION_GELU;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0)
        *act = CLATTN_ACTIVATION_GELU_TANH;
    else if (strcmp(name, "relu") == 0)
        *act = CLATTN_ACTIVATION_RELU;
    else
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "hidden_act \"%.64s\" is not supported (gelu, gelu_new, "
                               "gelu_pytorch_tanh, relu)",
                               name);
    return CLATTN_OK;
}

clattn_status clattn__bert_read_keys(const char *path, json_t *root, const clattn_bert_keys *keys,
                                     clattn_encoder_config *cfg)
{
    const char *position_type =
        json_string_value(json_object_get(root, "position_embedding_type"));
    const char *ff = json_string_value(json_object_get(root, "feed_forward_type"));
    json_t *eps = json_object_get(root, "layer_norm_eps");
    size_t hidden = 0, heads = 0, layers = 0, inter = 0, positions = 0, types = 0, vocab = 0;
    clattn_activation act = CLATTN_ACTIVATION_GELU;
    clattn_status status;
    if (position_type && strcmp(position_type, "absolute") != 0 && !keys->alibi)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "position_embedding_type \"%.64s\" is not supported "
                               "(\"absolute\", or \"alibi\" for JinaBERT)",
                               position_type);
    if (keys->original_ffn && ff && strcmp(ff, "original") != 0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "feed_forward_type \"%.64s\" is supported only with "
                               "position_embedding_type \"alibi\" (JinaBERT)",
                               ff);
    if (eps && (!json_is_number(eps) || !(json_number_value(eps) > 0.0) ||
                !isfinite(json_number_value(eps))))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "the field \"layer_norm_eps\" must be a positive number");
    if ((status = clattn__family_size(path, root, "hidden_size", &hidden)) ||
        (status = clattn__family_size(path, root, "num_attention_heads", &heads)) ||
        (status = clattn__family_size(path, root, "num_hidden_layers", &layers)) ||
        (status = clattn__family_size(path, root, "intermediate_size", &inter)) ||
        (status = clattn__family_size(path, root, "max_position_embeddings", &positions)) ||
        (keys->token_types &&
         (status = clattn__family_size(path, root, "type_vocab_size", &types))) ||
        (status = clattn__family_size(path, root, "vocab_size", &vocab)) ||
        (status = read_activation(path, root, &act)))
        return status;
    if (hidden % heads != 0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "hidden_size %zu is not divisible by num_attention_heads %zu",
                               hidden, heads);
    clattn_encoder_config_default(cfg, hidden, heads, layers, inter);
    cfg->activation = act;
    cfg->layer_norm_eps = eps ? (float)json_number_value(eps) : 1e-12f;
    cfg->positional = CLATTN_POSITIONAL_LEARNED;
    cfg->max_positions = positions;
    cfg->type_vocab_size = types;
    cfg->vocab_size = vocab;
    cfg->embedding_norm = 1;
    cfg->embedding_scale = 1.0f;
    return CLATTN_OK;
}

clattn_status clattn__bert_check_positions(const char *path, const clattn_encoder_config *cfg)
{
    /* RoBERTa's and MPNet's positions begin at padding_idx + 1 */
    size_t first = cfg->positional == CLATTN_POSITIONAL_LEARNED_PADDED
                       ? (size_t)cfg->padding_idx + 1
                       : 0;
    if (cfg->max_positions >= first + CLATTN_FAMILY_MIN_POSITIONS)
        return CLATTN_OK;
    return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                           "max_position_embeddings is %zu: it must be at least %zu (the longest "
                           "input, [CLS] and [SEP] included%s)",
                           cfg->max_positions, first + CLATTN_FAMILY_MIN_POSITIONS,
                           first ? ", after the padding_idx + 1 rows before the first position"
                                 : "");
}

static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    static const clattn_bert_keys keys = {.token_types = true, .original_ffn = true};
    clattn_status status = clattn__bert_read_keys(path, root, &keys, cfg);
    return status ? status : clattn__bert_check_positions(path, cfg);
}

static const char *const model_types[] = {"bert", NULL};

const clattn_family clattn__family_bert = {
    .name = "bert",
    .model_types = model_types,
    .read_config = read_config,
    .layer_count_key = "num_hidden_layers",
    .tensors = CLATTN_BERT_TENSORS("bert.", clattn__bert_fixed, clattn__bert_layer),
};
