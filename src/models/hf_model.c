/* Loading a Hugging Face encoder folder (config.json + model.safetensors) into an encoder: BERT,
 * MPNet, NomicBERT, JinaBERT, RoBERTa, XLM-RoBERTa and ModernBERT, each a table of tensor names
 * and a few lines of configuration. */
#include "clattn/safetensors.h"
#include "base/errors.h"
#include "formats/file_io.h"
#include "hf_model.h"
#include "runtime/shape.h"

#include <jansson.h>
#include <math.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn[] = "clattn_encoder_load_hf";

/* ---- the families: their tensor names against the encoder's ---- */

typedef struct name_pair {
    const char *ours, *theirs; /* layer names: after "layers.<n>." and "encoder.layer.<n>." */
} name_pair;

typedef struct hf_family {
    const char *model_type;
    const char *prefix;    /* the prefix of a task model's file ("bert.") */
    const char *qkv_part;  /* q/k/v: "encoder.layer.<n>.<qkv_part><name>.<weight|bias>"; NULL:
                            * the layer table names in_proj_weight / in_proj_bias (packed) */
    const char *qkv[3];
    const name_pair *fixed, *layer;
    size_t fixed_count, layer_count;
    const char *layers; /* the layers' names: "<layers><n>."; NULL: "encoder.layer." */
    /* config.json in the family's own keys (not BERT's); NULL: BERT's keys */
    clattn_status (*read_config)(const char *path, json_t *root, clattn_encoder_config *cfg);
} hf_family;

static const name_pair bert_fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
};
static const name_pair bert_layer[] = {
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
/* transformers' MPNetModel (modeling_mpnet.py): no token types; the relative position bias is
 * the encoder's, shared by the layers. */
static const name_pair mpnet_fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
    {"relative_attention_bias.weight", "encoder.relative_attention_bias.weight"},
};
static const name_pair mpnet_layer[] = {
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

/* NomicBERT (nomic-embed-text v1, v1.5): NomicBertModel of nomic-ai/contrastors'
 * src/contrastors/models/huggingface/modeling_hf_nomic_bert.py, which the checkpoints run with
 * (tools/gen_nomic_golden.py transcribes it). q, k, v come packed as attn.Wqkv [3E, E] (q, k, v
 * blocks of heads · d rows: "... (three h d)"); NomciBertGatedMLP computes
 * fc2(fc11(x) · act(fc12(x))): fc12 is the activated factor (the gate), fc11 the other ("up").
 * Linear biases only when the config asks for them; the LayerNorms have theirs. */
static const name_pair nomic_fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "emb_ln.weight"},
    {"embedding_norm.bias", "emb_ln.bias"},
};
static const name_pair nomic_layer[] = {
    {"self_attn.in_proj_weight", "attn.Wqkv.weight"},
    {"self_attn.in_proj_bias", "attn.Wqkv.bias"},
    {"self_attn.out_proj.weight", "attn.out_proj.weight"},
    {"self_attn.out_proj.bias", "attn.out_proj.bias"},
    {"norm1.weight", "norm1.weight"},
    {"norm1.bias", "norm1.bias"},
    {"linear1.weight", "mlp.fc11.weight"},
    {"linear1.bias", "mlp.fc11.bias"},
    {"linear1_gate.weight", "mlp.fc12.weight"},
    {"linear1_gate.bias", "mlp.fc12.bias"},
    {"linear2.weight", "mlp.fc2.weight"},
    {"linear2.bias", "mlp.fc2.bias"},
    {"norm2.weight", "norm2.weight"},
    {"norm2.bias", "norm2.bias"},
};
static clattn_status nomic_config(const char *path, json_t *root, clattn_encoder_config *cfg);

/* JinaBERT (jinaai/jina-bert-implementation's modeling_bert.py; jina-embeddings-v2): BERT's
 * embeddings without the position table, ALiBi, and JinaBertGLUMLP:
 * layernorm(x + wo(act(gated) * non_gated)) with gated / non_gated the first / second half of
 * the rows of gated_layers.weight [2·d_ff, d], which has no bias. A name "<tensor>|<k>" hands out
 * half k of the tensor's rows; "|zeros" a zero bias of d_ff. */
static const name_pair jina_fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
    {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
};
static const name_pair jina_layer[] = {
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
/* JinaBERT's config.json says model_type "bert" (with position_embedding_type "alibi"): this
 * name is only the family's, never a config's. */
#define JINA_FAMILY "bert (JinaBERT)"

/* ModernBERT (transformers' models/modernbert/modeling_modernbert.py, ModernBertModel): the
 * token embedding and its LayerNorm (no position table: RoPE), pre-LN layers of which the first
 * has no attn_norm (nn.Identity), q, k, v packed as attn.Wqkv [3E, E] (q, k, v blocks of
 * heads · d rows: qkv.view(bs, -1, 3, heads, d)), ModernBertMLP's Wo(act(input) · gate) with
 * input, gate = Wi(x).chunk(2): the activated factor is the first half of Wi's rows
 * (linear1_gate), the other the second half (linear1), and final_norm. Biases only where the
 * config's attention_bias, mlp_bias and norm_bias ask for them. A task model's file
 * (ModernBertForMaskedLM, ...) holds the same names under "model.". */
static const name_pair modernbert_fixed[] = {
    {"embedding.weight", "embeddings.tok_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.norm.weight"},
    {"embedding_norm.bias", "embeddings.norm.bias"},
    {"norm.weight", "final_norm.weight"},
    {"norm.bias", "final_norm.bias"},
};
static const name_pair modernbert_layer[] = {
    {"self_attn.in_proj_weight", "attn.Wqkv.weight"},
    {"self_attn.in_proj_bias", "attn.Wqkv.bias"},
    {"self_attn.out_proj.weight", "attn.Wo.weight"},
    {"self_attn.out_proj.bias", "attn.Wo.bias"},
    {"norm1.weight", "attn_norm.weight"},
    {"norm1.bias", "attn_norm.bias"},
    {"linear1_gate.weight", "mlp.Wi.weight|0"},
    {"linear1.weight", "mlp.Wi.weight|1"},
    {"linear1_gate.bias", "mlp.Wi.bias|0"},
    {"linear1.bias", "mlp.Wi.bias|1"},
    {"linear2.weight", "mlp.Wo.weight"},
    {"linear2.bias", "mlp.Wo.bias"},
    {"norm2.weight", "mlp_norm.weight"},
    {"norm2.bias", "mlp_norm.bias"},
};
static clattn_status modernbert_config(const char *path, json_t *root,
                                       clattn_encoder_config *cfg);

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
static const hf_family families[] = {
    {"bert", "bert.", "attention.self.", {"query", "key", "value"}, bert_fixed, bert_layer,
     COUNT(bert_fixed), COUNT(bert_layer), NULL, NULL},
    {"mpnet", "mpnet.", "attention.attn.", {"q", "k", "v"}, mpnet_fixed, mpnet_layer,
     COUNT(mpnet_fixed), COUNT(mpnet_layer), NULL, NULL},
    {"nomic_bert", "bert.", NULL, {NULL, NULL, NULL}, nomic_fixed, nomic_layer,
     COUNT(nomic_fixed), COUNT(nomic_layer), "encoder.layers.", nomic_config},
    {JINA_FAMILY, "bert.", "attention.self.", {"query", "key", "value"}, jina_fixed, jina_layer,
     COUNT(jina_fixed), COUNT(jina_layer), NULL, NULL},
    /* RoBERTa and XLM-RoBERTa: BERT's graph and tensor names ("roberta." in task models);
     * roberta_config reads what differs (positions from padding_idx + 1). */
    {"roberta", "roberta.", "attention.self.", {"query", "key", "value"}, bert_fixed, bert_layer,
     COUNT(bert_fixed), COUNT(bert_layer), NULL, NULL},
    {"xlm-roberta", "roberta.", "attention.self.", {"query", "key", "value"}, bert_fixed,
     bert_layer, COUNT(bert_fixed), COUNT(bert_layer), NULL, NULL},
    {"modernbert", "model.", NULL, {NULL, NULL, NULL}, modernbert_fixed, modernbert_layer,
     COUNT(modernbert_fixed), COUNT(modernbert_layer), "layers.", modernbert_config},
};
#define SUPPORTED_TYPES \
    "\"bert\", \"mpnet\", \"nomic_bert\", \"roberta\", \"xlm-roberta\", \"modernbert\""

/* The family of config.json's model_type, or NULL. */
static const hf_family *family_of(const char *model_type)
{
    for (size_t i = 0; model_type && i < COUNT(families); i++)
        if (strcmp(model_type, families[i].model_type) == 0)
            return &families[i];
    return NULL;
}

/* ---- config.json ---- */

static clattn_status config_size(const char *path, json_t *root, const char *key, size_t *out)
{
    json_t *v = json_object_get(root, key);
    if (!v)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT, "the field \"%s\" is missing", key);
    if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
        json_integer_value(v) > (json_int_t)1 << 31)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be a positive integer below 2^31", key);
    *out = (size_t)json_integer_value(v);
    return CLATTN_OK;
}

static clattn_status config_activation(const char *path, json_t *root, clattn_activation *act)
{
    const char *name = json_string_value(json_object_get(root, "hidden_act"));
    if (!name)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"hidden_act\" is missing or not a string");
    if (strcmp(name, "gelu") == 0)
        *act = CLATTN_ACTIVATION_GELU;
    else if (strcmp(name, "gelu_new") == 0 || strcmp(name, "gelu_pytorch_tanh") == 0)
        *act = CLATTN_ACTIVATION_GELU_TANH;
    else if (strcmp(name, "relu") == 0)
        *act = CLATTN_ACTIVATION_RELU;
    else
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "hidden_act \"%.64s\" is not supported (gelu, gelu_new, "
                               "gelu_pytorch_tanh, relu)",
                               name);
    return CLATTN_OK;
}

/* MPNet's configuration beyond BERT's: transformers' MPNet buckets relative positions with 32
 * buckets and max_distance 128 whatever the config says, and counts positions from padding_idx
 * 1 (hard-coded in MPNetEmbeddings), so a table of another size is refused. */
static clattn_status mpnet_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    json_t *v = json_object_get(root, "relative_attention_num_buckets");
    if (v && (!json_is_integer(v) || json_integer_value(v) != 32))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "relative_attention_num_buckets must be 32 (transformers' MPNet "
                               "always buckets relative positions into 32)");
    cfg->positional = CLATTN_POSITIONAL_LEARNED_PADDED;
    cfg->padding_idx = 1;
    cfg->relative_attention_buckets = 32;
    cfg->relative_attention_max_distance = 128;
    cfg->type_vocab_size = 0;
    return CLATTN_OK;
}

/* config.json's `key` as a number: `fallback` when absent or null. */
static clattn_status config_number(const char *path, json_t *root, const char *key,
                                   double fallback, double *out)
{
    json_t *v = json_object_get(root, key);
    *out = !v || json_is_null(v) ? fallback : json_number_value(v);
    if (v && !json_is_null(v) && (!json_is_number(v) || !isfinite(*out)))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be a number", key);
    return CLATTN_OK;
}

/* config.json's `key` as a boolean: `fallback` when absent or null. */
static clattn_status config_bool(const char *path, json_t *root, const char *key, bool fallback,
                                 bool *out)
{
    json_t *v = json_object_get(root, key);
    *out = !v || json_is_null(v) ? fallback : json_is_true(v);
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be true or false", key);
    return CLATTN_OK;
}

/* The fewest positions a text needs: its [CLS] and [SEP] (or <s> and </s>). */
#define MIN_POSITIONS 2

/* A value of config.json's `key` that must be a whole number from `min` to below 2^30: refused,
 * naming the key, the value and the range, when it is not. `why` (may be "") follows the
 * range. */
static clattn_status whole_number(const char *path, const char *key, double value, double min,
                                  const char *why)
{
    if (value >= min && value < 1 << 30 && value == floor(value))
        return CLATTN_OK;
    return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                           "%s is %g: it must be a whole number from %g to 2^30%s", key, value,
                           min, why);
}

/* NomicBERT's config.json (NomicBertConfig, a GPT2Config: n_embd, n_head, n_layer, n_inner,
 * n_positions, layer_norm_epsilon, activation_function; absent optional keys take
 * NomicBertConfig's and GPT2Config's defaults). What the published NomicBertModel computes with
 * it and this encoder cannot is refused, naming the key:
 *   activation_function other than "swiglu" (silu gate) or "geglu" (erf gelu gate): "glu" and
 *     the ungated NomicBertMLP of "gelu", "gelu_new", ...
 *   prenorm true: NomicBertBlock's pre-norm path ends on the last MLP output without its
 *     residual, which no norm_first encoder computes
 *   rotary_scaling_factor other than null or 0: dynamic NTK scaling of the rotary base past
 *     max_trained_positions (NomicBertDynamicNTKRotaryEmbedding)
 *   rotary_emb_scale_base (xPos scaling), rotary_head_dim, num_heads_kv other than n_head,
 *     norm_mlp, moe_every_n_layers (nomic-embed-text-v2-moe's experts); and causal, use_rms_norm
 *     and parallel_block true, which the published code ignores but the training code behind a
 *     checkpoint would not
 *   qkv_proj_bias, mlp_fc1_bias, mlp_fc2_bias not all equal (the encoder's linear_no_bias is
 *     one switch for every linear)
 * The MLP's width is n_inner (null: int(8·n_embd / 3)) rounded up to a multiple of 256, as
 * NomciBertGatedMLP rounds it; the vocabulary is vocab_size rounded up to a multiple of
 * pad_vocab_size_multiple. rotary_emb_fraction > 0: RoPE on d_k · rotary_emb_fraction channels
 * per head (an even whole number), base rotary_emb_base, positions 0 .. N-1, and n_positions the
 * longest input (max_positions, which the sentence model reads; 0 or less: 2048, as
 * NomicBertPreTrainedModel.from_pretrained sets it); rotary_emb_fraction 0: learned positions
 * (embeddings.position_embeddings, n_positions rows). Either way an n_positions below 2 (a [CLS]
 * and a [SEP]) is refused. */
static clattn_status nomic_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    size_t hidden = 0, heads = 0, layers = 0, vocab = 0;
    double inner, positions, types, multiple, eps, fraction, base, scaling, heads_kv, moe;
    bool prenorm, interleaved, qkv_bias, fc1_bias, fc2_bias, flag;
    clattn_status status;
    if ((status = config_size(path, root, "n_embd", &hidden)) ||
        (status = config_size(path, root, "n_head", &heads)) ||
        (status = config_size(path, root, "n_layer", &layers)) ||
        (status = config_size(path, root, "vocab_size", &vocab)) ||
        (status = config_number(path, root, "n_inner", 0.0, &inner)) ||
        (status = config_number(path, root, "n_positions", 1024.0, &positions)) ||
        (status = config_number(path, root, "type_vocab_size", 2.0, &types)) ||
        (status = config_number(path, root, "pad_vocab_size_multiple", 1.0, &multiple)) ||
        (status = config_number(path, root, "layer_norm_epsilon", 1e-5, &eps)) ||
        (status = config_number(path, root, "rotary_emb_fraction", 0.0, &fraction)) ||
        (status = config_number(path, root, "rotary_emb_base", 10000.0, &base)) ||
        (status = config_number(path, root, "rotary_scaling_factor", 0.0, &scaling)) ||
        (status = config_number(path, root, "num_heads_kv", (double)heads, &heads_kv)) ||
        (status = config_number(path, root, "moe_every_n_layers", 0.0, &moe)) ||
        (status = config_bool(path, root, "prenorm", false, &prenorm)) ||
        (status = config_bool(path, root, "rotary_emb_interleaved", false, &interleaved)) ||
        (status = config_bool(path, root, "qkv_proj_bias", true, &qkv_bias)) ||
        (status = config_bool(path, root, "mlp_fc1_bias", true, &fc1_bias)) ||
        (status = config_bool(path, root, "mlp_fc2_bias", true, &fc2_bias)))
        return status;
    static const char *const unsupported_flags[] = {"causal", "use_rms_norm", "parallel_block",
                                                    "rotary_head_dim", "norm_mlp"};
    for (size_t i = 0; i < COUNT(unsupported_flags); i++) {
        if ((status = config_bool(path, root, unsupported_flags[i], false, &flag)))
            return status;
        if (flag)
            return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                   "%s true is not supported (nomic_bert)", unsupported_flags[i]);
    }
    const char *act = json_string_value(json_object_get(root, "activation_function"));
    bool swiglu = act && strcmp(act, "swiglu") == 0, geglu = act && strcmp(act, "geglu") == 0;
    json_t *scale_base = json_object_get(root, "rotary_emb_scale_base");
    double rotary = 0.0;
    if (!swiglu && !geglu)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "activation_function \"%.64s\" is not supported (nomic_bert: "
                               "swiglu, geglu)",
                               act ? act : "(missing)");
    if (prenorm)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "prenorm true is not supported (NomicBertBlock's pre-norm path "
                               "returns the last MLP output without its residual)");
    if (scaling != 0.0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "rotary_scaling_factor %g is not supported (dynamic NTK scaling "
                               "of the rotary base; null: plain rotary embeddings)",
                               scaling);
    if (scale_base && !json_is_null(scale_base))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "rotary_emb_scale_base is not supported (only null)");
    if (heads_kv != (double)heads)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "num_heads_kv %g is not supported (only n_head, %zu)", heads_kv,
                               heads);
    if (moe != 0.0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "moe_every_n_layers %g is not supported (mixture-of-experts "
                               "layers)",
                               moe);
    if (qkv_bias != fc1_bias || qkv_bias != fc2_bias)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "qkv_proj_bias (%s), mlp_fc1_bias (%s) and mlp_fc2_bias (%s) "
                               "must be all true or all false",
                               qkv_bias ? "true" : "false", fc1_bias ? "true" : "false",
                               fc2_bias ? "true" : "false");
    if (hidden % heads != 0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "n_embd %zu is not divisible by n_head %zu", hidden, heads);
    if (fraction > 0.0)
        rotary = (double)(hidden / heads) * fraction;
    if (fraction > 1.0 || rotary != floor(rotary) || fmod(rotary, 2.0) != 0.0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "rotary_emb_fraction %g rotates %g of the %zu channels of a head: "
                               "not an even whole number of at most %zu",
                               fraction, rotary, hidden / heads, hidden / heads);
    if (positions <= 0.0 && rotary > 0.0)
        positions = 2048.0; /* as NomicBertPreTrainedModel.from_pretrained sets it */
    if ((status = whole_number(path, "n_inner", inner, 0.0, " (0 or null: 8 n_embd / 3)")) ||
        (status = whole_number(path, "n_positions", positions, MIN_POSITIONS,
                               rotary > 0.0 ? " (the longest input, [CLS] and [SEP] included; "
                                              "0 or less: 2048)"
                                            : " (the position table's rows: the longest input, "
                                              "[CLS] and [SEP] included)")) ||
        (status = whole_number(path, "type_vocab_size", types, 0.0, "")) ||
        (status = whole_number(path, "pad_vocab_size_multiple", multiple, 1.0, "")))
        return status;
    if (!(eps > 0.0))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "layer_norm_epsilon must be a positive number (it is %g)", eps);
    if (!(base > 0.0 && base < 1e30))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "rotary_emb_base %g is out of range: a rotary base must be above 0 "
                               "and below 1e30",
                               base);
    size_t width = inner > 0.0 ? (size_t)inner : (size_t)(8.0 * (double)hidden / 3.0);
    clattn_encoder_config_default(cfg, hidden, heads, layers, (width + 255) / 256 * 256);
    cfg->activation = swiglu ? CLATTN_ACTIVATION_SILU : CLATTN_ACTIVATION_GELU;
    cfg->ffn_gated = 1;
    cfg->linear_no_bias = !qkv_bias;
    cfg->layer_norm_eps = (float)eps;
    cfg->vocab_size = (vocab + (size_t)multiple - 1) / (size_t)multiple * (size_t)multiple;
    cfg->type_vocab_size = (size_t)types;
    cfg->embedding_norm = 1;
    cfg->embedding_scale = 1.0f;
    cfg->max_positions = (size_t)positions;
    if (rotary > 0.0) {
        cfg->rope_theta = (float)base;
        cfg->rotary_dim = (uint32_t)rotary;
        cfg->rope_interleaved = interleaved;
    } else {
        cfg->positional = CLATTN_POSITIONAL_LEARNED;
    }
    return CLATTN_OK;
}

/* JinaBERT's configuration beyond BERT's (config.json: model_type "bert", position_embedding_type
 * "alibi"): the gated feed-forward's activation from feed_forward_type (hidden_act is not used
 * there), ALiBi, no position table (max_position_embeddings only bounds the length). */
static clattn_status jina_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    const char *ff = json_string_value(json_object_get(root, "feed_forward_type"));
    json_t *pooler = json_object_get(root, "emb_pooler");
    const char *names[] = {"AutoModel", "AutoConfig"};
    for (int i = 0; i < 2; i++) {
        const char *impl =
            json_string_value(json_object_get(json_object_get(root, "auto_map"), names[i]));
        if (impl && strstr(impl, "qk-post-norm"))
            return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                   "auto_map's %s \"%.96s\": JinaBERT with LayerNorms on queries "
                                   "and keys (jina-bert-v2-qk-post-norm) is not supported",
                                   names[i], impl);
    }
    if (!ff || (strcmp(ff, "geglu") != 0 && strcmp(ff, "reglu") != 0))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "feed_forward_type \"%.64s\" is not supported for JinaBERT "
                               "(\"geglu\", \"reglu\")",
                               ff ? ff : "(missing)");
    if (pooler && !json_is_null(pooler) &&
        !(json_is_string(pooler) && strcmp(json_string_value(pooler), "mean") == 0))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "emb_pooler must be null or \"mean\" (JinaBertModel.encode's "
                               "pooling)");
    /* nn.GELU() (the erf form) or nn.ReLU() on the first half of gated_layers' rows. */
    cfg->activation = ff[0] == 'g' ? CLATTN_ACTIVATION_GELU : CLATTN_ACTIVATION_RELU;
    cfg->ffn_gated = 1;
    cfg->positional = CLATTN_POSITIONAL_NONE;
    cfg->alibi = 1;
    return CLATTN_OK;
}

/* RoBERTa's and XLM-RoBERTa's configuration beyond BERT's (transformers' RobertaEmbeddings):
 * positions counted from padding_idx + 1 over the non-padding ids
 * (create_position_ids_from_input_ids), padding_idx = pad_token_id (1 when absent, as
 * RobertaConfig's default). The token type table (type_vocab_size rows, 1 in the published
 * checkpoints) is BERT's: row 0 is added to every token. */
static clattn_status roberta_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    json_t *v = json_object_get(root, "pad_token_id");
    json_int_t pad = v ? json_integer_value(v) : 1;
    if ((v && !json_is_integer(v)) || pad < 0 || pad + 1 >= (json_int_t)cfg->max_positions)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"pad_token_id\"%s must be an integer from 0 to "
                               "max_position_embeddings - 2 (%lld): positions start at "
                               "pad_token_id + 1",
                               v ? "" : " (1 when absent)", (long long)cfg->max_positions - 2);
    cfg->positional = CLATTN_POSITIONAL_LEARNED_PADDED;
    cfg->padding_idx = (int32_t)pad;
    return CLATTN_OK;
}

/* ModernBERT's config.json (ModernBertConfig): hidden_size, num_attention_heads,
 * num_hidden_layers, intermediate_size and vocab_size, and, where absent or null,
 * ModernBertConfig's defaults for max_position_embeddings (8192), norm_eps (1e-5), norm_bias,
 * attention_bias, mlp_bias (false), hidden_activation ("gelu"), global_rope_theta (160000),
 * local_rope_theta (absent: 10000; null: global_rope_theta, as ModernBertAttention takes it),
 * global_attn_every_n_layers (3) and local_attention (128). Layer i is global when
 * i % global_attn_every_n_layers == 0; the others see local_attention // 2 keys on either side
 * (the encoder's local_window is twice that: an odd local_attention loses its last key, as in
 * transformers). What the encoder cannot compute as transformers does is refused, naming the
 * key: attention_bias and mlp_bias that differ (linear_no_bias is one switch), a
 * hidden_activation other than gelu (erf), gelu_new / gelu_pytorch_tanh, relu, silu / swish;
 * rope_scaling other than null, partial_rotary_factor other than 1 and head_dim other than
 * hidden_size / num_attention_heads (transformers' rotary code reads them; its
 * ModernBertAttention does not run with them), a rotary base below 1 or from 1e30, a
 * global_attn_every_n_layers of 0, a local_attention below 2 or a max_position_embeddings below 2
 * (a [CLS] and a [SEP]). */
static clattn_status modernbert_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    size_t hidden = 0, heads = 0, layers = 0, inter = 0, vocab = 0;
    double positions, eps, global_theta, local_theta, every, window, partial, head_dim;
    bool norm_bias, attention_bias, mlp_bias;
    clattn_status status;
    if ((status = config_size(path, root, "hidden_size", &hidden)) ||
        (status = config_size(path, root, "num_attention_heads", &heads)) ||
        (status = config_size(path, root, "num_hidden_layers", &layers)) ||
        (status = config_size(path, root, "intermediate_size", &inter)) ||
        (status = config_size(path, root, "vocab_size", &vocab)) ||
        (status = config_number(path, root, "max_position_embeddings", 8192.0, &positions)) ||
        (status = config_number(path, root, "norm_eps", 1e-5, &eps)) ||
        (status = config_number(path, root, "global_rope_theta", 160000.0, &global_theta)) ||
        /* absent: ModernBertConfig's 10000; null: the global base */
        (status = config_number(path, root, "local_rope_theta",
                                json_object_get(root, "local_rope_theta") ? global_theta
                                                                          : 10000.0,
                                &local_theta)) ||
        (status = config_number(path, root, "global_attn_every_n_layers", 3.0, &every)) ||
        (status = config_number(path, root, "local_attention", 128.0, &window)) ||
        (status = config_number(path, root, "partial_rotary_factor", 1.0, &partial)) ||
        (status = config_number(path, root, "head_dim", 0.0, &head_dim)) ||
        (status = config_bool(path, root, "norm_bias", false, &norm_bias)) ||
        (status = config_bool(path, root, "attention_bias", false, &attention_bias)) ||
        (status = config_bool(path, root, "mlp_bias", false, &mlp_bias)))
        return status;
    if (hidden % heads != 0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "hidden_size %zu is not divisible by num_attention_heads %zu",
                               hidden, heads);
    const char *act = json_string_value(json_object_get(root, "hidden_activation"));
    json_t *act_value = json_object_get(root, "hidden_activation");
    clattn_activation activation;
    if (!act_value || json_is_null(act_value) || (act && strcmp(act, "gelu") == 0))
        activation = CLATTN_ACTIVATION_GELU;
    else if (act && (strcmp(act, "gelu_new") == 0 || strcmp(act, "gelu_pytorch_tanh") == 0))
        activation = CLATTN_ACTIVATION_GELU_TANH;
    else if (act && strcmp(act, "relu") == 0)
        activation = CLATTN_ACTIVATION_RELU;
    else if (act && (strcmp(act, "silu") == 0 || strcmp(act, "swish") == 0))
        activation = CLATTN_ACTIVATION_SILU;
    else
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "hidden_activation \"%.64s\" is not supported (modernbert: gelu, "
                               "gelu_new, gelu_pytorch_tanh, relu, silu, swish)",
                               act ? act : "(not a string)");
    json_t *scaling = json_object_get(root, "rope_scaling");
    if (scaling && !json_is_null(scaling))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "rope_scaling is not supported (only null: plain rotary "
                               "embeddings)");
    if (partial != 1.0)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "partial_rotary_factor %g is not supported (only 1)", partial);
    if (head_dim != 0.0 && head_dim != (double)(hidden / heads))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "head_dim %g is not supported (only hidden_size / "
                               "num_attention_heads = %zu)",
                               head_dim, hidden / heads);
    if (attention_bias != mlp_bias)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "attention_bias (%s) and mlp_bias (%s) must be both true or both "
                               "false",
                               attention_bias ? "true" : "false", mlp_bias ? "true" : "false");
    /* (a null local_rope_theta is the global one: refused as global_rope_theta first) */
    const char *theta_keys[2] = {"global_rope_theta", "local_rope_theta"};
    double thetas[2] = {global_theta, local_theta};
    for (int i = 0; i < 2; i++)
        if (!(thetas[i] >= 1.0 && thetas[i] < 1e30))
            return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                   "%s %g is out of range: a rotary base must be at least 1 and "
                                   "below 1e30",
                                   theta_keys[i], thetas[i]);
    if (!(every >= 1.0 && every < 1 << 30 && every == floor(every)))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "global_attn_every_n_layers must be a whole number of at least 1 "
                               "(it is %g)",
                               every);
    if (!(window >= 2.0 && window < 1 << 30 && window == floor(window)))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "local_attention must be a whole number of at least 2 (it is %g)",
                               window);
    if ((status = whole_number(path, "max_position_embeddings", positions, MIN_POSITIONS,
                               " (the longest input, [CLS] and [SEP] included)")))
        return status;
    if (!(eps > 0.0))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "norm_eps must be a positive number (it is %g)", eps);
    clattn_encoder_config_default(cfg, hidden, heads, layers, inter);
    cfg->activation = activation;
    cfg->norm_first = 1;
    cfg->first_norm1_identity = 1;
    cfg->final_norm = 1;
    cfg->layer_norm_eps = (float)eps;
    cfg->vocab_size = vocab;
    cfg->embedding_norm = 1;
    cfg->embedding_scale = 1.0f;
    cfg->positional = CLATTN_POSITIONAL_NONE;
    cfg->max_positions = (size_t)positions;
    cfg->ffn_gated = 1;
    cfg->linear_no_bias = !attention_bias;
    cfg->norm_no_bias = !norm_bias;
    cfg->rope_theta = (float)global_theta;
    cfg->local_rope_theta = (float)local_theta;
    cfg->local_window = 2 * ((uint32_t)window / 2);
    /* Beyond the last layer only layer 0 is global: the same layers as every = num_layers. */
    cfg->global_every = (uint16_t)(every < (double)layers ? (size_t)every
                                   : layers < UINT16_MAX ? layers : UINT16_MAX);
    return CLATTN_OK;
}

clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *cfg,
                                     const char **family_type)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    json_t *root;
    clattn_status status = clattn__read_json(fn, path, &root);
    if (status != CLATTN_OK)
        return status;
    if (!json_is_object(root)) {
        json_decref(root);
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT, "not a JSON object");
    }
    const char *model_type = json_string_value(json_object_get(root, "model_type"));
    const char *position_type =
        json_string_value(json_object_get(root, "position_embedding_type"));
    json_t *eps = json_object_get(root, "layer_norm_eps");
    size_t hidden = 0, heads = 0, layers = 0, inter = 0, positions = 0, types = 0, vocab = 0;
    clattn_activation act = CLATTN_ACTIVATION_GELU;
    const hf_family *family = family_of(model_type);
    bool bert = family && strcmp(family->model_type, "bert") == 0;
    bool roberta = family && (strcmp(family->model_type, "roberta") == 0 ||
                              strcmp(family->model_type, "xlm-roberta") == 0);
    bool jina = bert && position_type && strcmp(position_type, "alibi") == 0;
    if (jina || (family && strcmp(family->model_type, JINA_FAMILY) == 0))
        family = jina ? family_of(JINA_FAMILY) : NULL;
    const char *ff = json_string_value(json_object_get(root, "feed_forward_type"));
    if (family && family->read_config) { /* a family with config keys of its own */
        status = family->read_config(path, root, cfg);
        if (status == CLATTN_OK && family_type)
            *family_type = family->model_type;
        json_decref(root);
        return status;
    }
    if (!family)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "model_type \"%.64s\" is not supported (supported: "
                                 SUPPORTED_TYPES ")",
                                 model_type ? model_type : "(missing)");
    else if (position_type && strcmp(position_type, "absolute") != 0 && !jina)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "position_embedding_type \"%.64s\" is not supported "
                                 "(\"absolute\", or \"alibi\" for JinaBERT)",
                                 position_type);
    else if (bert && !jina && ff && strcmp(ff, "original") != 0)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "feed_forward_type \"%.64s\" is supported only with "
                                 "position_embedding_type \"alibi\" (JinaBERT)",
                                 ff);
    else if (eps && (!json_is_number(eps) || !(json_number_value(eps) > 0.0) ||
                     !isfinite(json_number_value(eps))))
        status = clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                                 "the field \"layer_norm_eps\" must be a positive number");
    if (status == CLATTN_OK &&
        !(status = config_size(path, root, "hidden_size", &hidden)) &&
        !(status = config_size(path, root, "num_attention_heads", &heads)) &&
        !(status = config_size(path, root, "num_hidden_layers", &layers)) &&
        !(status = config_size(path, root, "intermediate_size", &inter)) &&
        !(status = config_size(path, root, "max_position_embeddings", &positions)) &&
        (!(bert || roberta) ||
         !(status = config_size(path, root, "type_vocab_size", &types))) &&
        !(status = config_size(path, root, "vocab_size", &vocab)))
        status = config_activation(path, root, &act);
    if (status == CLATTN_OK && hidden % heads != 0)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                                 "hidden_size %zu is not divisible by num_attention_heads %zu",
                                 hidden, heads);
    if (status == CLATTN_OK) {
        clattn_encoder_config_default(cfg, hidden, heads, layers, inter);
        cfg->activation = act;
        cfg->layer_norm_eps = eps ? (float)json_number_value(eps) : 1e-12f;
        cfg->positional = CLATTN_POSITIONAL_LEARNED;
        cfg->max_positions = positions;
        cfg->type_vocab_size = types;
        cfg->vocab_size = vocab;
        cfg->embedding_norm = 1;
        cfg->embedding_scale = 1.0f;
        if (jina)
            status = jina_config(path, root, cfg);
        else if (roberta)
            status = roberta_config(path, root, cfg);
        else if (!bert)
            status = mpnet_config(path, root, cfg);
        /* RoBERTa's and MPNet's positions begin at padding_idx + 1 */
        size_t first = cfg->positional == CLATTN_POSITIONAL_LEARNED_PADDED
                           ? (size_t)cfg->padding_idx + 1
                           : 0;
        if (status == CLATTN_OK && positions < first + MIN_POSITIONS)
            status = clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                                     "max_position_embeddings is %zu: it must be at least %zu "
                                     "(the longest input, [CLS] and [SEP] included%s)",
                                     positions, first + MIN_POSITIONS,
                                     first ? ", after the padding_idx + 1 rows before the first "
                                             "position"
                                           : "");
        if (family_type)
            *family_type = family->model_type;
    }
    json_decref(root);
    return status;
}

/* ---- model.safetensors under the encoder's names ---- */

/* The lookup's state: the file, its name prefix, and the packed q/k/v tensors it builds. */
typedef struct hf_lookup {
    clattn_safetensors *st;   /* its layers' floats are freed as the encoder copies them */
    size_t released_below;    /* the file's layers below this one have been freed */
    const hf_family *family;
    const char *prefix; /* "" or the family's prefix ("bert.") */
    clattn_host_tensor packed[2]; /* in_proj_weight, in_proj_bias of the layer asked last */
    float *packed_data[2];
    clattn_host_tensor views[4];  /* the last tensors handed out (the encoder copies each) */
    size_t next_view;
    size_t d_ff;  /* the configuration's: the rows of a half ("|k") and of "|zeros" */
    float *zeros; /* "|zeros": d_ff zeros */
} hf_lookup;

static const clattn_host_tensor *find(hf_lookup *l, const char *hf_name)
{
    char name[256];
    snprintf(name, sizeof(name), "%s%s", l->prefix, hf_name);
    const clattn_safetensors_tensor *t = clattn_safetensors_find(l->st, name);
    if (!t || !t->data)
        return NULL;
    /* The file's tensor seen as a host tensor (the encoder copies it before asking again; a rank
     * above CLATTN_MAX_DIMS keeps its ndim and fails the shape check). */
    clattn_host_tensor *view = &l->views[l->next_view++ % 4];
    memset(view, 0, sizeof(*view));
    view->data = t->data;
    view->ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < CLATTN_MAX_DIMS; d++)
        view->shape[d] = t->shape[d];
    return view;
}

/* A name "<tensor>|<k>": half k of the tensor's rows, a view into the file's row-major data (a
 * tensor that does not have 2·d_ff rows is handed out whole, for the shape check to name);
 * "|zeros": d_ff zeros. */
static const clattn_host_tensor *find_part(hf_lookup *l, const char *hf_name)
{
    const char *bar = strchr(hf_name, '|');
    if (strcmp(bar, "|zeros") == 0) {
        if (!l->zeros && !(l->zeros = calloc(l->d_ff + 1, sizeof(float))))
            return NULL;
        clattn_host_tensor *view = &l->views[l->next_view++ % 4];
        memset(view, 0, sizeof(*view));
        view->data = l->zeros;
        view->ndim = 1;
        view->shape[0] = l->d_ff;
        return view;
    }
    char name[256];
    snprintf(name, sizeof(name), "%.*s", (int)(bar - hf_name), hf_name);
    clattn_host_tensor *view = (clattn_host_tensor *)find(l, name);
    size_t half = (size_t)(bar[1] - '0');
    if (view && (view->ndim == 1 || view->ndim == 2) && view->shape[0] == 2 * l->d_ff &&
        half < 2) { /* rows of a weight [2·d_ff, d], or elements of a bias [2·d_ff] */
        view->data += half * l->d_ff * (view->ndim == 2 ? view->shape[1] : 1);
        view->shape[0] = l->d_ff;
    }
    return view;
}

/* Concatenates query, key and value (weights [E, E] each, or biases [E]) into one packed tensor
 * [3E, E] / [3E], as the attention layer's in_proj_weight / in_proj_bias. */
static const clattn_host_tensor *pack_qkv(hf_lookup *l, size_t layer, const char *what, int slot)
{
    const clattn_safetensors_tensor *parts[3];
    for (int i = 0; i < 3; i++) {
        char name[256];
        snprintf(name, sizeof(name), "%sencoder.layer.%zu.%s%s.%s", l->prefix, layer,
                 l->family->qkv_part, l->family->qkv[i], what);
        parts[i] = clattn_safetensors_find(l->st, name);
        if (!parts[i] || !parts[i]->data)
            return NULL; /* reported as the packed tensor missing; the message names it */
    }
    for (int i = 1; i < 3; i++)
        if (parts[i]->ndim != parts[0]->ndim || parts[i]->numel != parts[0]->numel ||
            (parts[0]->ndim >= 1 && parts[i]->shape[0] != parts[0]->shape[0]))
            return NULL;
    if (parts[0]->ndim < 1 || parts[0]->ndim > 2)
        return NULL;
    size_t n = parts[0]->numel;
    free(l->packed_data[slot]);
    l->packed_data[slot] = malloc(3 * n * sizeof(float) + 1);
    if (!l->packed_data[slot])
        return NULL;
    for (int i = 0; i < 3; i++)
        memcpy(l->packed_data[slot] + (size_t)i * n, parts[i]->data, n * sizeof(float));
    clattn_host_tensor *t = &l->packed[slot];
    memset(t, 0, sizeof(*t));
    t->data = l->packed_data[slot];
    t->ndim = parts[0]->ndim;
    t->shape[0] = 3 * parts[0]->shape[0];
    if (t->ndim == 2)
        t->shape[1] = parts[0]->shape[1];
    return t;
}

/* The family's names (without the file's prefix) of one of the encoder's tensors: one, or three
 * for in_proj_weight / in_proj_bias (query, key, value, packed by pack_qkv); 0 for a name the
 * family has no tensor for. *packed_layer and *what say which packed tensor. */
static int family_names(const hf_family *f, const char *ours, char bert[3][256],
                        size_t *packed_layer, const char **what)
{
    for (size_t i = 0; i < f->fixed_count; i++)
        if (strcmp(ours, f->fixed[i].ours) == 0) {
            snprintf(bert[0], sizeof(bert[0]), "%s", f->fixed[i].theirs);
            return 1;
        }
    size_t layer;
    int used = 0;
    if (sscanf(ours, "layers.%zu.%n", &layer, &used) != 1 || used == 0)
        return 0;
    const char *rest = ours + used;
    if (f->qkv_part && (strcmp(rest, "self_attn.in_proj_weight") == 0 ||
                        strcmp(rest, "self_attn.in_proj_bias") == 0)) {
        *packed_layer = layer;
        *what = strcmp(rest, "self_attn.in_proj_weight") == 0 ? "weight" : "bias";
        for (int i = 0; i < 3; i++)
            snprintf(bert[i], sizeof(bert[i]), "encoder.layer.%zu.%s%s.%s", layer, f->qkv_part,
                     f->qkv[i], *what);
        return 3;
    }
    for (size_t i = 0; i < f->layer_count; i++)
        if (strcmp(rest, f->layer[i].ours) == 0) {
            snprintf(bert[0], sizeof(bert[0]), "%s%zu.%s", f->layers ? f->layers : "encoder.layer.",
                     layer, f->layer[i].theirs);
            return 1;
        }
    return 0;
}

/* The layer number of a tensor name in the file ("...layer.<n>." or "...layers.<n>."). */
static bool file_layer_of(const char *name, size_t *layer)
{
    for (const char *p = strstr(name, "layer"); p; p = strstr(p + 1, "layer")) {
        const char *q = p + 5 + (p[5] == 's');
        size_t n = 0, digits = 0;
        if (*q++ != '.')
            continue;
        for (; *q >= '0' && *q <= '9' && digits < 9; q++, digits++)
            n = 10 * n + (size_t)(*q - '0');
        if (digits > 0 && *q == '.') {
            *layer = n;
            return true;
        }
    }
    return false;
}

/* Frees the floats of the file's layer tensors below `layer` (SIZE_MAX: all of them). The
 * encoder asks for its layers in order, then the rest, and copies each tensor to the device
 * before asking for the next: a large model is never held twice in host memory. */
static void release_layers_below(hf_lookup *l, size_t layer)
{
    if (layer <= l->released_below)
        return;
    bool freed = false;
    for (size_t i = 0; i < l->st->tensor_count; i++) {
        clattn_safetensors_tensor *t = &l->st->tensors[i];
        size_t n;
        if (t->data && file_layer_of(t->name, &n) && n < layer) {
            free(t->data);
            t->data = NULL;
            freed = true;
        }
    }
    l->released_below = layer;
#ifdef __GLIBC__
    if (freed) /* glibc keeps freed chunks below its mmap threshold: hand them back */
        malloc_trim(0);
#endif
}

/* Maps the encoder's PyTorch names onto the family's. */
static const clattn_host_tensor *lookup(void *user, const char *name)
{
    hf_lookup *l = user;
    size_t asked_layer;
    release_layers_below(l, sscanf(name, "layers.%zu.", &asked_layer) == 1 ? asked_layer
                                                                           : SIZE_MAX);
    char bert[3][256];
    size_t layer = 0;
    const char *what = NULL;
    int count = family_names(l->family, name, bert, &layer, &what);
    if (count == 3)
        return pack_qkv(l, layer, what, strcmp(what, "weight") == 0 ? 0 : 1);
    if (count == 1 && strchr(bert[0], '|'))
        return find_part(l, bert[0]);
    return count == 1 ? find(l, bert[0]) : NULL;
}

/* The dtype of a tensor the file holds in a dtype that is not read (left out), or NULL. */
static const char *left_out_dtype(const clattn_safetensors *st, const char *name)
{
    for (size_t i = 0; i < st->left_out_count; i++)
        if (strcmp(st->left_out[i].name, name) == 0)
            return st->left_out[i].dtype;
    return NULL;
}

/* What to add to the message about the encoder's tensor `ours` that the lookup did not give: its
 * name in the file, or, when the file holds it in a dtype that is not read, that dtype. Writes
 * into message (whole) or extra (appended). */
static void explain_missing(const hf_lookup *l, const char *ours, char *message, size_t size,
                            char *extra, size_t extra_size)
{
    char bert[3][256];
    size_t layer = 0;
    const char *what = NULL;
    int count = family_names(l->family, ours, bert, &layer, &what);
    char *bar = count == 1 ? strchr(bert[0], '|') : NULL;
    if (bar && strcmp(bar, "|zeros") == 0)
        return;
    if (bar)
        *bar = '\0'; /* rows of the tensor before it */
    for (int i = 0; i < count; i++) {
        char full[272];
        snprintf(full, sizeof(full), "%.8s%.255s", l->prefix, bert[i]);
        const char *dtype = left_out_dtype(l->st, full);
        if (dtype) {
            snprintf(message, size, "tensor %s is %.16s, expected F32 (or F16, BF16)", full,
                     dtype);
            return;
        }
    }
    if (count == 3)
        snprintf(extra, extra_size, " (in this file: %sencoder.layer.%zu.%s{%s,%s,%s}.%s)",
                 l->prefix, layer, l->family->qkv_part, l->family->qkv[0], l->family->qkv[1],
                 l->family->qkv[2], what);
    else if (bar)
        snprintf(extra, extra_size, " (in this file: rows %zu to %zu of %s%s)",
                 bar[1] == '0' ? (size_t)0 : l->d_ff, bar[1] == '0' ? l->d_ff - 1 : 2 * l->d_ff - 1,
                 l->prefix, bert[0]);
    else if (count == 1)
        snprintf(extra, extra_size, " (in this file: %s%s)", l->prefix, bert[0]);
}

/* config.json's num_hidden_layers against the layers the file's tensor names hold. */
static clattn_status check_layer_count(const hf_lookup *l, const char *path, size_t num_layers)
{
    const clattn_safetensors *st = l->st;
    size_t n = st->tensor_count + st->left_out_count, found = 0;
    size_t *numbers = malloc((n ? n : 1) * sizeof(*numbers));
    if (!numbers)
        return clattn__fail_in(fn, path, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "out of host memory");
    char prefix[64];
    snprintf(prefix, sizeof(prefix), "%s%s", l->prefix,
             l->family->layers ? l->family->layers : "encoder.layer.");
    for (size_t i = 0; i < n; i++) {
        const char *name = i < st->tensor_count ? st->tensors[i].name
                                                : st->left_out[i - st->tensor_count].name;
        found += clattn__layer_number(name, prefix, &numbers[found]);
    }
    char held[160];
    bool exact = clattn__layers_are(numbers, found, num_layers, held, sizeof(held));
    free(numbers);
    if (exact)
        return CLATTN_OK;
    return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                           "config.json's %s is %zu but the file holds %s (%s<n>.*)",
                           strcmp(l->family->model_type, "nomic_bert") == 0 ? "n_layer"
                                                                             : "num_hidden_layers",
                           num_layers,
                           held, prefix);
}

clattn_status clattn__hf_load_weights(clattn_encoder *enc, const char *dir,
                                      const char *model_type)
{
    const hf_family *family = family_of(model_type);
    if (!family)
        return clattn__fail_in(fn, dir, CLATTN_ERROR_UNSUPPORTED,
                               "model_type \"%.64s\" is not supported (supported: "
                               SUPPORTED_TYPES ")", model_type ? model_type : "(missing)");
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    clattn_status status = clattn_safetensors_read_floats(&st, path);
    if (status != CLATTN_OK)
        return status;
    hf_lookup l;
    memset(&l, 0, sizeof(l));
    l.st = st;
    l.family = family;
    l.prefix = "";
    /* The file of a task model holds the names under the family's prefix: told by where the
     * token embedding is. */
    const char *embedding = "embeddings.word_embeddings.weight";
    for (size_t i = 0; i < family->fixed_count; i++)
        if (strcmp(family->fixed[i].ours, "embedding.weight") == 0)
            embedding = family->fixed[i].theirs;
    char prefixed[128];
    snprintf(prefixed, sizeof(prefixed), "%s%s", family->prefix, embedding);
    if (!clattn_safetensors_find(st, embedding) && clattn_safetensors_find(st, prefixed))
        l.prefix = family->prefix;
    clattn_encoder_config cfg = {0};
    status = clattn_encoder_get_config(enc, &cfg);
    l.d_ff = cfg.dim_feedforward;
    if (!status && !(status = check_layer_count(&l, path, cfg.num_layers)) &&
        (status = clattn_encoder_load_weights(enc, lookup, &l)) != CLATTN_OK) {
        /* Name the file and, for a missing tensor, its name in the file or its dtype. */
        char message[1024], extra[400] = "";
        snprintf(message, sizeof(message), "%s", clattn_last_error(NULL));
        const char *missing = strstr(message, "missing tensor ");
        const char *shape = strstr(message, " has shape "), *start = shape;
        while (shape && start > message && start[-1] != ' ')
            start--; /* "<function>: <name> has shape ..." */
        if (missing || shape) {
            char ours[256];
            snprintf(ours, sizeof(ours), "%.*s",
                     missing ? 255 : (int)(shape - start),
                     missing ? missing + strlen("missing tensor ") : start);
            ours[strcspn(ours, " ")] = '\0'; /* the name ends the message or a space does */
            explain_missing(&l, ours, message, sizeof(message), extra, sizeof(extra));
        }
        status = clattn__fail_in(fn, path, status, "%s%s", message, extra);
    }
    free(l.packed_data[0]);
    free(l.packed_data[1]);
    free(l.zeros);
    clattn_safetensors_destroy(&st);
#ifdef __GLIBC__
    malloc_trim(0); /* the file's floats, freed: back to the system */
#endif
    return status;
}

clattn_status clattn_encoder_load_hf(clattn_context *ctx, clattn_encoder **out, const char *dir)
{
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, out, "encoder is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, dir, "dir is NULL");
    clattn_encoder_config cfg;
    clattn_encoder *enc = NULL;
    const char *model_type = NULL;
    clattn_status status = clattn__hf_read_config(dir, &cfg, &model_type);
    if (status == CLATTN_OK && (status = clattn_encoder_create(ctx, &enc, &cfg)) == CLATTN_OK &&
        (status = clattn__hf_load_weights(enc, dir, model_type)) != CLATTN_OK)
        clattn_encoder_destroy(&enc);
    if (status != CLATTN_OK) /* the file errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    *out = enc;
    return status;
}
