/* NomicBERT (nomic-embed-text v1, v1.5): NomicBertModel of nomic-ai/contrastors'
 * src/contrastors/models/huggingface/modeling_hf_nomic_bert.py, which the checkpoints run with
 * (tools/gen_nomic_golden.py transcribes it).
 *
 * config.json: model_type "nomic_bert", GPT-2's key names (NomicBertConfig is a GPT2Config).
 *   read      n_embd, n_head, n_layer, vocab_size (required); n_inner, n_positions,
 *             type_vocab_size, pad_vocab_size_multiple, layer_norm_epsilon, activation_function,
 *             rotary_emb_fraction, rotary_emb_base, rotary_emb_interleaved, qkv_proj_bias,
 *             mlp_fc1_bias, mlp_fc2_bias
 *   defaults  (absent or null) n_inner int(8·n_embd / 3), n_positions 1024 (0 or less with
 *             rotary embeddings: 2048), type_vocab_size 2, pad_vocab_size_multiple 1,
 *             layer_norm_epsilon 1e-5, rotary_emb_fraction 0, rotary_emb_base 10000, biases true
 *   refused   see read_config below, each naming its key
 * Tensors: embeddings.{word,position,token_type}_embeddings, emb_ln, encoder.layers.<n>.
 * attn.Wqkv (q, k, v packed: blocks of heads · d rows, "... (three h d)"), attn.out_proj, norm1,
 * mlp.fc11 (the "up" factor: linear1), mlp.fc12 (the activated gate: linear1_gate), mlp.fc2,
 * norm2 (NomicBertGatedMLP computes fc2(fc11(x) · act(fc12(x)))); "bert." before each in a task
 * model's file. Linear biases only when the config asks for them; the LayerNorms have theirs.
 * Layer configuration: post-LN, embedding LayerNorm, ffn_gated (silu or erf gelu), RoPE or
 * learned positions, linear_no_bias without biases. */
#include "base/errors.h"
#include "models/families/family.h"
#include "models/families/family_config.h"

#include <math.h>
#include <string.h>

static const clattn_family_name fixed[] = {
    {"embedding.weight", "embeddings.word_embeddings.weight"},
    {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
    {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
    {"embedding_norm.weight", "emb_ln.weight"},
    {"embedding_norm.bias", "emb_ln.bias"},
};
static const clattn_family_name layer[] = {
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
static clattn_status read_config(const char *path, json_t *root, clattn_encoder_config *cfg)
{
    size_t hidden = 0, heads = 0, layers = 0, vocab = 0;
    double inner, positions, types, multiple, eps, fraction, base, scaling, heads_kv, moe;
    bool prenorm, interleaved, qkv_bias, fc1_bias, fc2_bias;
    clattn_status status;
    if ((status = clattn__family_size(path, root, "n_embd", &hidden)) ||
        (status = clattn__family_size(path, root, "n_head", &heads)) ||
        (status = clattn__family_size(path, root, "n_layer", &layers)) ||
        (status = clattn__family_size(path, root, "vocab_size", &vocab)) ||
        (status = clattn__family_number(path, root, "n_inner", 0.0, &inner)) ||
        (status = clattn__family_number(path, root, "n_positions", 1024.0, &positions)) ||
        (status = clattn__family_number(path, root, "type_vocab_size", 2.0, &types)) ||
        (status = clattn__family_number(path, root, "pad_vocab_size_multiple", 1.0, &multiple)) ||
        (status = clattn__family_number(path, root, "layer_norm_epsilon", 1e-5, &eps)) ||
        (status = clattn__family_number(path, root, "rotary_emb_fraction", 0.0, &fraction)) ||
        (status = clattn__family_number(path, root, "rotary_emb_base", 10000.0, &base)) ||
        (status = clattn__family_number(path, root, "rotary_scaling_factor", 0.0, &scaling)) ||
        (status = clattn__family_number(path, root, "num_heads_kv", (double)heads, &heads_kv)) ||
        (status = clattn__family_number(path, root, "moe_every_n_layers", 0.0, &moe)) ||
        (status = clattn__family_bool(path, root, "prenorm", false, &prenorm)) ||
        (status = clattn__family_bool(path, root, "rotary_emb_interleaved", false, &interleaved)) ||
        (status = clattn__family_bool(path, root, "qkv_proj_bias", true, &qkv_bias)) ||
        (status = clattn__family_bool(path, root, "mlp_fc1_bias", true, &fc1_bias)) ||
        (status = clattn__family_bool(path, root, "mlp_fc2_bias", true, &fc2_bias)))
        return status;
    static const char *const unsupported_flags[] = {"causal", "use_rms_norm", "parallel_block",
                                                    "rotary_head_dim", "norm_mlp"};
    if ((status = clattn__family_refuse_true(path, root, unsupported_flags,
                                             CLATTN_FAMILY_COUNT_OF(unsupported_flags),
                                             "nomic_bert")))
        return status;
    const char *act = json_string_value(json_object_get(root, "activation_function"));
    bool swiglu = act && strcmp(act, "swiglu") == 0, geglu = act && strcmp(act, "geglu") == 0;
    double rotary = 0.0;
    if (!swiglu && !geglu)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "activation_function \"%.64s\" is not supported (nomic_bert: "
                               "swiglu, geglu)",
                               act ? act : "(missing)");
    if (prenorm)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "prenorm true is not supported (NomicBertBlock's pre-norm path "
                               "returns the last MLP output without its residual)");
    if (scaling != 0.0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "rotary_scaling_factor %g is not supported (dynamic NTK scaling "
                               "of the rotary base; null: plain rotary embeddings)",
                               scaling);
    if ((status = clattn__family_refuse_non_null(path, root, "rotary_emb_scale_base", "")))
        return status;
    if (heads_kv != (double)heads)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "num_heads_kv %g is not supported (only n_head, %zu)", heads_kv,
                               heads);
    if (moe != 0.0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "moe_every_n_layers %g is not supported (mixture-of-experts "
                               "layers)",
                               moe);
    if (qkv_bias != fc1_bias || qkv_bias != fc2_bias)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "qkv_proj_bias (%s), mlp_fc1_bias (%s) and mlp_fc2_bias (%s) "
                               "must be all true or all false",
                               qkv_bias ? "true" : "false", fc1_bias ? "true" : "false",
                               fc2_bias ? "true" : "false");
    if (hidden % heads != 0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "n_embd %zu is not divisible by n_head %zu", hidden, heads);
    if (fraction > 0.0)
        rotary = (double)(hidden / heads) * fraction;
    if (fraction > 1.0 || rotary != floor(rotary) || fmod(rotary, 2.0) != 0.0)
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_UNSUPPORTED,
                               "rotary_emb_fraction %g rotates %g of the %zu channels of a head: "
                               "not an even whole number of at most %zu",
                               fraction, rotary, hidden / heads, hidden / heads);
    if (positions <= 0.0 && rotary > 0.0)
        positions = 2048.0; /* as NomicBertPreTrainedModel.from_pretrained sets it */
    if ((status = clattn__family_whole_number(path, "n_inner", inner, 0.0,
                                              " (0 or null: 8 n_embd / 3)")) ||
        (status = clattn__family_whole_number(
             path, "n_positions", positions, CLATTN_FAMILY_MIN_POSITIONS,
             rotary > 0.0 ? " (the longest input, [CLS] and [SEP] included; "
                            "0 or less: 2048)"
                          : " (the position table's rows: the longest input, "
                            "[CLS] and [SEP] included)")) ||
        (status = clattn__family_whole_number(path, "type_vocab_size", types, 0.0, "")) ||
        (status = clattn__family_whole_number(path, "pad_vocab_size_multiple", multiple, 1.0, "")))
        return status;
    if (!(eps > 0.0))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
                               "layer_norm_epsilon must be a positive number (it is %g)", eps);
    if (!(base > 0.0 && base < 1e30))
        return clattn__fail_in(CLATTN_FAMILY_FN, path, CLATTN_ERROR_FORMAT,
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
static const char *const model_types[] = {"nomic_bert", NULL};

const clattn_family clattn__family_nomic_bert = {
    .name = "nomic_bert",
    .model_types = model_types,
    .read_config = read_config,
    .layer_count_key = "n_layer",
    .tensors = {.prefix = "bert.",
                .layers = "encoder.layers.",
                .fixed = fixed,
                .fixed_count = CLATTN_FAMILY_COUNT_OF(fixed),
                .layer = layer,
                .layer_count = CLATTN_FAMILY_COUNT_OF(layer)},
};
