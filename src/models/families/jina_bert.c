/* JinaBERT (jinaai/jina-bert-implementation's modeling_bert.py; jina-embeddings-v2): BERT's
 * embeddings without the position table, ALiBi, and JinaBertGLUMLP:
 * layernorm(x + wo(act(gated) * non_gated)) with gated / non_gated the first / second half of
 * the rows of gated_layers.weight [2·d_ff, d], which has no bias.
 *
 * config.json: model_type "bert" with position_embedding_type "alibi" (the family's claim: the
 * same model_type without it is BERT's).
 *   read      BERT's keys (bert.h; hidden_act must be valid but is not used),
 *             feed_forward_type ("geglu": erf gelu, "reglu": relu), emb_pooler, auto_map
 *   defaults  layer_norm_eps 1e-12
 *   refused   feed_forward_type other than "geglu" / "reglu"; emb_pooler other than null or
 *             "mean" (JinaBertModel.encode's pooling); an auto_map AutoModel / AutoConfig naming
 *             jina-bert-v2-qk-post-norm (LayerNorms on queries and keys); BERT's refusals
 * Tensors: embeddings.{word,token_type}_embeddings, embeddings.LayerNorm, encoder.layer.<n>.
 * attention.self.{query,key,value} (packed into in_proj), attention.output.dense,
 * attention.output.LayerNorm, mlp.gated_layers.weight (rows 0 .. d_ff-1: linear1_gate, the
 * rest: linear1; both biases zero), mlp.wo, mlp.layernorm; "bert." before each in a task model's
 * file.
 * Layer configuration: BERT's with positional NONE (max_position_embeddings only bounds the
 * length), alibi 1, ffn_gated 1. */
#include "base/errors.h"
#include "models/families/bert.h"

#include <string.h>

static const clattn_family_name fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
};
static const clattn_family_name layer[] = {
    {"self_attn.out_proj.weight", "attention.output.dense.weight"},
    {"self_attn.out_proj.bias", "attention.output.dense.bias"},
    {"norm1.weight", "attention.output.LayerNorm.weight"},
    {"norm1.bias", "attention.output.LayerNorm.bias"},
    {"linear1_gate.weight", "mlp.gated_layers.weight|0"},
    {"linear1.weight", "mlp.gated_layers.weight|1"},
    {"linear1_gate.bias", "|zeros"},
    {"linear1.bias", "|zeros"},
    {"linear2.weight", "mlp.wo.weight"},
    {"linear2.bias", "mlp.wo.bias"},
    {"norm2.weight", "mlp.layernorm.weight"},
    {"norm2.bias", "mlp.layernorm.bias"},
};

/* JinaBERT's config.json says model_type "bert": ALiBi tells it apart. */
static bool claims(json_t *root)
{
    const char *position_type =
        json_string_value(json_object_get(root, "position_embedding_type"));
    return position_type && strcmp(position_type, "alibi") == 0;
}

static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    static const clattn_bert_keys keys = {.token_types = true, .alibi = true};
    clattn_status status = clattn__bert_read_keys(path, root, &keys, cfg);
    if (status)
        return status;
    const char *ff = json_string_value(json_object_get(root, "feed_forward_type"));
    json_t *pooler = json_object_get(root, "emb_pooler");
    const char *names[] = {"AutoModel", "AutoConfig"};
    for (int i = 0; i < 2; i++) {
        const char *impl =
            json_string_value(json_object_get(json_object_get(root, "auto_map"), names[i]));
        if (impl && strstr(impl, "qk-post-norm"))
            return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                                   "auto_map's %s \"%.96s\": JinaBERT with LayerNorms on queries "
                                   "and keys (jina-bert-v2-qk-post-norm) is not supported",
                                   names[i], impl);
    }
    if (!ff || (strcmp(ff, "geglu") != 0 && strcmp(ff, "reglu") != 0))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "feed_forward_type \"%.64s\" is not supported for JinaBERT "
                               "(\"geglu\", \"reglu\")",
                               ff ? ff : "(missing)");
    if (pooler && !json_is_null(pooler) &&
        !(json_is_string(pooler) && strcmp(json_string_value(pooler), "mean") == 0))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "emb_pooler must be null or \"mean\" (JinaBertModel.encode's "
                               "pooling)");
    /* nn.GELU() (the erf form) or nn.ReLU() on the first half of gated_layers' rows. */
    cfg->activation = ff[0] == 'g' ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU;
    cfg->ffn_gated = 1;
    cfg->positional = CLATTN_POSITIONAL_NONE;
    cfg->alibi = 1;
    return clattn__bert_check_positions(path, cfg);
}

static const char *const model_types[] = {"bert", NULL};

const clattn_family clattn__family_jina_bert = {
    .name = "jina_bert",
    .model_types = model_types,
    .claims = claims,
    .read_config = read_config,
    .layer_count_key = "num_hidden_layers",
    .tensors = CLATTN_BERT_TENSORS("bert.", fixed, layer),
};
