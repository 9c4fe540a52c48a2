/* ModernBERT (transformers' models/modernbert/modeling_modernbert.py, ModernBertModel): the
 * token embedding and its LayerNorm (no position table: RoPE), pre-LN layers of which the first
 * has no attn_norm (nn.Identity), q, k, v packed as attn.Wqkv [3E, E] (q, k, v blocks of
 * heads · d rows: qkv.view(bs, -1, 3, heads, d)), ModernBertMLP's Wo(act(input) · gate) with
 * input, gate = Wi(x).chunk(2): the activated factor is the first half of Wi's rows
 * (linear1_gate), the other the second half (linear1), and final_norm. Biases only where the
 * config's attention_bias, mlp_bias and norm_bias ask for them.
 *
 * config.json: model_type "modernbert".
 *   read      hidden_size, num_attention_heads, num_hidden_layers, intermediate_size,
 *             vocab_size (required); the keys below
 *   defaults  see read_config below (ModernBertConfig's)
 *   refused   see read_config below, each naming its key
 * Tensors: embeddings.tok_embeddings, embeddings.norm, layers.<n>.attn_norm (none in layer 0),
 * attn.Wqkv, attn.Wo, mlp_norm, mlp.Wi [2·intermediate, hidden], mlp.Wo, final_norm; "model."
 * before each in a task model's file (ModernBertForMaskedLM, ...).
 * Layer configuration: norm_first with first_norm1_identity, final_norm, ffn_gated, RoPE with
 * local and global layers (local_window, global_every, local_rope_theta), linear_no_bias,
 * norm_no_bias. */
#include "base/errors.h"
#include "models/families/family.h"
#include "models/families/family_config.h"

#include <math.h>
#include <string.h>

static const clattn_family_name fixed[] = {
    {"embedding.weight", "embeddings.tok_embeddings.weight"},
    {"embedding_norm.weight", "embeddings.norm.weight"},
    {"embedding_norm.bias", "embeddings.norm.bias"},
    {"norm.weight", "final_norm.weight"},
    {"norm.bias", "final_norm.bias"},
};
static const clattn_family_name layer[] = {
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
static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    size_t hidden = 0, heads = 0, layers = 0, inter = 0, vocab = 0;
    double positions, eps, global_theta, local_theta, every, window, partial, head_dim;
    bool norm_bias, attention_bias, mlp_bias;
    clattn_status status;
    if ((status = clattn__family_size(path, root, "hidden_size", &hidden)) ||
        (status = clattn__family_size(path, root, "num_attention_heads", &heads)) ||
        (status = clattn__family_size(path, root, "num_hidden_layers", &layers)) ||
        (status = clattn__family_size(path, root, "intermediate_size", &inter)) ||
        (status = clattn__family_size(path, root, "vocab_size", &vocab)) ||
        (status =
             clattn__family_number(path, root, "max_position_embeddings", 8192.0, &positions)) ||
        (status = clattn__family_number(path, root, "norm_eps", 1e-5, &eps)) ||
        (status =
             clattn__family_number(path, root, "global_rope_theta", 160000.0, &global_theta)) ||
        /* absent: ModernBertConfig's 10000; null: the global base */
        (status = clattn__family_number(
             path, root, "local_rope_theta",
             json_object_get(root, "local_rope_theta") ? global_theta : 10000.0, &local_theta)) ||
        (status = clattn__family_number(path, root, "global_attn_every_n_layers", 3.0, &every)) ||
        (status = clattn__family_number(path, root, "local_attention", 128.0, &window)) ||
        (status = clattn__family_number(path, root, "partial_rotary_factor", 1.0, &partial)) ||
        (status = clattn__family_number(path, root, "head_dim", 0.0, &head_dim)) ||
        (status = clattn__family_bool(path, root, "norm_bias", false, &norm_bias)) ||
        (status = clattn__family_bool(path, root, "attention_bias", false, &attention_bias)) ||
        (status = clattn__family_bool(path, root, "mlp_bias", false, &mlp_bias)))
        return status;
    if (hidden % heads != 0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
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
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "hidden_activation \"%.64s\" is not supported (modernbert: gelu, "
                               "gelu_new, gelu_pytorch_tanh, relu, silu, swish)",
                               act ? act : "(not a string)");
    if ((status = clattn__family_refuse_non_null(path, root, "rope_scaling",
                                                 ": plain rotary embeddings")))
        return status;
    if (partial != 1.0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "partial_rotary_factor %g is not supported (only 1)", partial);
    if (head_dim != 0.0 && head_dim != (double)(hidden / heads))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "head_dim %g is not supported (only hidden_size / "
                               "num_attention_heads = %zu)",
                               head_dim, hidden / heads);
    if (attention_bias != mlp_bias)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "attention_bias (%s) and mlp_bias (%s) must be both true or both "
                               "false",
                               attention_bias ? "true" : "false", mlp_bias ? "true" : "false");
    /* (a null local_rope_theta is the global one: refused as global_rope_theta first) */
    const char *theta_keys[2] = {"global_rope_theta", "local_rope_theta"};
    double thetas[2] = {global_theta, local_theta};
    for (int i = 0; i < 2; i++)
        if (!(thetas[i] >= 1.0 && thetas[i] < 1e30))
            return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                                   "%s %g is out of range: a rotary base must be at least 1 and "
                                   "below 1e30",
                                   theta_keys[i], thetas[i]);
    if (!(every >= 1.0 && every < 1 << 30 && every == floor(every)))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "global_attn_every_n_layers must be a whole number of at least 1 "
                               "(it is %g)",
                               every);
    if (!(window >= 2.0 && window < 1 << 30 && window == floor(window)))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "local_attention must be a whole number of at least 2 (it is %g)",
                               window);
    if ((status = clattn__family_whole_number(path, "max_position_embeddings", positions,
                                              CLATTN_FAMILY_MIN_POSITIONS,
                                              " (the longest input, [CLS] and [SEP] included)")))
        return status;
    if (!(eps > 0.0))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
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
                                   : layers < UINT16_MAX  ? layers
                                                          : UINT16_MAX);
    return CLATTN_OK;
}
static const char *const model_types[] = {"modernbert", NULL};

const clattn_family clattn__family_modernbert = {
    .name = "modernbert",
    .model_types = model_types,
    .read_config = read_config,
    .layer_count_key = "num_hidden_layers",
    .tensors = {.prefix = "model.",
                .layers = "layers.",
                .fixed = fixed,
                .fixed_count = CLATTN_FAMILY_COUNT_OF(fixed),
                .layer = layer,
                .layer_count = CLATTN_FAMILY_COUNT_OF(layer)},
};
