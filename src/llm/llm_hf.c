/* A Hugging Face *ForCausalLM folder (config.json, model.safetensors) as a decoder-only model:
 * its configuration as the block spec, its tensors under the stack's names (llm_model.h). */
#include "llm_model.h"
#include "base/constants.h"
#include "formats/file_io.h"
#include "nn/rope_scaling.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

/* The stack's name of a layer's weight (after "layers.{i}.") and the folder's (after
 * "model.layers.{i}."). */
static const struct {
    const char *stack, *hf;
} layer_names[] = {
    {"self_attn.q_proj_weight", "self_attn.q_proj.weight"},
    {"self_attn.k_proj_weight", "self_attn.k_proj.weight"},
    {"self_attn.v_proj_weight", "self_attn.v_proj.weight"},
    {"self_attn.out_proj.weight", "self_attn.o_proj.weight"},
    {"self_attn.q_norm.weight", "self_attn.q_norm.weight"},
    {"self_attn.k_norm.weight", "self_attn.k_norm.weight"},
    {"linear1_gate.weight", "mlp.gate_proj.weight"},
    {"linear1.weight", "mlp.up_proj.weight"},
    {"linear2.weight", "mlp.down_proj.weight"},
    {"norm1.weight", "input_layernorm.weight"},
    {"norm2.weight", "post_attention_layernorm.weight"},
};

/* ---- config.json ---- */

typedef struct cfg_reader {
    const char *fn, *path;
    json_t *root;
} cfg_reader;

/* A positive integer key (fallback 0: required). */
static clattn_status int_key(const cfg_reader *r, const char *key, size_t fallback, size_t max,
                             size_t *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        if (!fallback)
            return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT, "missing \"%s\"", key);
        *out = fallback;
        return CLATTN_OK;
    }
    if (!json_is_integer(v) || json_integer_value(v) <= 0 ||
        (uint64_t)json_integer_value(v) > (uint64_t)max)
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT,
                               "\"%s\" must be a positive integer of at most %zu", key, max);
    *out = (size_t)json_integer_value(v);
    return CLATTN_OK;
}

static clattn_status real_key(const cfg_reader *r, const char *key, double fallback, double *out)
{
    json_t *v = json_object_get(r->root, key);
    if (!v || json_is_null(v)) {
        *out = fallback;
        return CLATTN_OK;
    }
    if (!json_is_number(v))
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT, "\"%s\" must be a number",
                               key);
    *out = json_number_value(v);
    return CLATTN_OK;
}

/* A boolean key that must be false (or absent) here: what the stack does not run. */
static clattn_status refuse_true(const cfg_reader *r, const char *key, const char *why)
{
    json_t *v = json_object_get(r->root, key);
    if (v && json_is_true(v))
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_UNSUPPORTED, "\"%s\" is true: %s",
                               key, why);
    return CLATTN_OK;
}

/* rope_scaling's number `name`: required, positive and finite. */
static clattn_status scaling_number(const cfg_reader *r, json_t *scaling, const char *type,
                                    const char *name, double *out)
{
    json_t *v = json_object_get(scaling, name);
    if (!v || !json_is_number(v) || !(json_number_value(v) > 0.0) ||
        !isfinite(json_number_value(v)))
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT,
                               "\"rope_scaling\" of type '%s' needs \"%s\", a positive number",
                               type, name);
    *out = json_number_value(v);
    return CLATTN_OK;
}

/* "rope_scaling" into the spec (its rope_theta and rotary_dim set), as transformers'
 * modeling_rope_utils reads it: null, or rope_type (or type) "default", is none; "linear"
 * (factor) and "llama3" (factor, low_freq_factor, high_freq_factor,
 * original_max_position_embeddings) scale the frequencies; any other type is refused by name. */
static clattn_status read_rope_scaling(const cfg_reader *r, clattn_block_spec *s)
{
    json_t *scaling = json_object_get(r->root, "rope_scaling");
    if (!scaling || json_is_null(scaling))
        return CLATTN_OK;
    if (!json_is_object(scaling))
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT,
                               "\"rope_scaling\" must be an object or null");
    json_t *type_value = json_object_get(scaling, "rope_type");
    if (!type_value)
        type_value = json_object_get(scaling, "type");
    const char *type = json_string_value(type_value);
    if (!type)
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT,
                               "\"rope_scaling\" has no \"rope_type\" (or \"type\") string");
    if (strcmp(type, "default") == 0)
        return CLATTN_OK;
    bool linear = strcmp(type, "linear") == 0, llama3 = strcmp(type, "llama3") == 0;
    if (!linear && !llama3)
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_UNSUPPORTED,
                               "\"rope_scaling\" of type '%.64s' is not supported (default, "
                               "linear, llama3)", type);
    if (clattn__rope_pairs(s) > CLATTN_ROPE_MAX_PAIRS)
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_UNSUPPORTED,
                               "scaled RoPE over %zu rotary pairs is not supported (at most %d)",
                               clattn__rope_pairs(s), CLATTN_ROPE_MAX_PAIRS);
    clattn_rope_llama3 p;
    clattn_status status = scaling_number(r, scaling, type, "factor", &p.factor);
    if (status != CLATTN_OK)
        return status;
    if (linear) {
        clattn__rope_scale_linear(s, (float)p.factor);
        return CLATTN_OK;
    }
    if ((status = scaling_number(r, scaling, type, "low_freq_factor", &p.low_freq_factor)) ||
        (status = scaling_number(r, scaling, type, "high_freq_factor", &p.high_freq_factor)) ||
        (status = scaling_number(r, scaling, type, "original_max_position_embeddings",
                                 &p.original_max_position_embeddings)))
        return status;
    if (p.high_freq_factor == p.low_freq_factor)
        return clattn__fail_in(r->fn, r->path, CLATTN_ERROR_FORMAT,
                               "\"rope_scaling\": low_freq_factor and high_freq_factor are both "
                               "%g (the smoothing divides by their difference)", p.low_freq_factor);
    clattn__rope_scale_llama3(s, &p);
    return CLATTN_OK;
}

/* config.json of dir into c. */
static clattn_status read_config(const char *fn, const char *dir, clattn_llm_config *c)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    json_t *root = NULL;
    clattn_status status = clattn__read_json(fn, path, &root);
    if (status != CLATTN_OK)
        return status;
    cfg_reader r = {fn, path, root};
    memset(c, 0, sizeof(*c));
    const char *type = json_string_value(json_object_get(root, "model_type"));
    if (!type || (strcmp(type, "llama") != 0 && strcmp(type, "qwen2") != 0 &&
                  strcmp(type, "qwen3") != 0)) {
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "\"model_type\" %s%.64s%s is not supported (llama, qwen2, qwen3)",
                                 type ? "'" : "", type ? type : "(missing)", type ? "'" : "");
        goto done;
    }
    snprintf(c->arch, sizeof(c->arch), "%s", type);
    clattn_block_spec *s = &c->spec;
    size_t heads, kv, dk;
    double eps, theta;
    const char *act = json_string_value(json_object_get(root, "hidden_act"));
    if ((status = int_key(&r, "num_hidden_layers", 0, 1024, &s->num_layers)) ||
        (status = int_key(&r, "hidden_size", 0, 1 << 20, &s->d_model)) ||
        (status = int_key(&r, "intermediate_size", 0, 1 << 20, &s->d_ff)) ||
        (status = int_key(&r, "num_attention_heads", 0, 4096, &heads)) ||
        (status = int_key(&r, "num_key_value_heads", heads, 4096, &kv)) ||
        (status = int_key(&r, "head_dim", s->d_model / heads ? s->d_model / heads : 1, 1 << 20,
                          &dk)) ||
        (status = int_key(&r, "vocab_size", 0, 1 << 24, &c->vocab)) ||
        (status = int_key(&r, "max_position_embeddings", 2048, 1 << 24, &c->context_length)) ||
        (status = real_key(&r, "rms_norm_eps", 1e-6, &eps)) ||
        (status = real_key(&r, "rope_theta", 10000.0, &theta)) ||
        (status = refuse_true(&r, "attention_bias", "biases on every attention projection are "
                                                    "not supported")) ||
        (status = refuse_true(&r, "mlp_bias", "feed-forward biases are not supported")) ||
        (status = refuse_true(&r, "use_sliding_window", "sliding-window attention is not "
                                                        "supported")))
        goto done;
    if (act && strcmp(act, "silu") != 0) {
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "\"hidden_act\" '%.32s' is not supported (silu)", act);
        goto done;
    }
    if (heads % kv != 0 || !(eps > 0.0 && eps < 1.0) || !(theta > 1.0 && isfinite(theta))) {
        status = clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                                 "num_attention_heads %zu, num_key_value_heads %zu, rms_norm_eps "
                                 "%g or rope_theta %g do not fit together",
                                 heads, kv, eps, theta);
        goto done;
    }
    json_t *tie = json_object_get(root, "tie_word_embeddings");
    c->tied = tie && json_is_true(tie);
    s->norm = CLATTN_NORM_RMS;
    s->norm_first = true;
    s->final_norm = true;
    s->norm_eps = (float)eps;
    s->nhead = heads, s->kv_heads = kv, s->head_dim_qk = dk, s->head_dim_v = dk;
    s->causal = true;
    s->query_count_invariant = true;
    s->rope_theta = (float)theta;
    s->rotary_dim = (uint32_t)dk;
    s->rope_interleaved = false; /* Hugging Face's rotate_half: halves */
    s->qk_norm = strcmp(type, "qwen3") == 0;
    s->qkv_bias = strcmp(type, "qwen2") == 0;
    s->ffn_gated = true;
    s->activation = CLATTN_ACT_SILU;
    status = read_rope_scaling(&r, s);
done:
    json_decref(root);
    return status;
}

/* ---- the weights ---- */

/* The folder's name of a stack name (false: none, as for the packed in_proj_weight). */
static bool hf_name(const clattn_llm_hf *hf, const char *name, char *out, size_t size)
{
    if (strcmp(name, "norm.weight") == 0) {
        snprintf(out, size, "model.norm.weight");
        return true;
    }
    if (strcmp(name, "token_embd.weight") == 0) {
        snprintf(out, size, "model.embed_tokens.weight");
        return true;
    }
    if (strcmp(name, "output.weight") == 0) {
        snprintf(out, size, "lm_head.weight");
        return true;
    }
    (void)hf;
    unsigned layer;
    int used = 0;
    if (sscanf(name, "layers.%u.%n", &layer, &used) != 1 || used == 0)
        return false;
    for (size_t i = 0; i < sizeof(layer_names) / sizeof(layer_names[0]); i++)
        if (strcmp(name + used, layer_names[i].stack) == 0) {
            snprintf(out, size, "model.layers.%u.%s", layer, layer_names[i].hf);
            return true;
        }
    return false;
}

const clattn_host_tensor *clattn__llm_hf_lookup(void *user, const char *name)
{
    clattn_llm_hf *hf = user;
    unsigned layer;
    int used = 0;
    if (sscanf(name, "layers.%u.%n", &layer, &used) == 1 && used > 0 &&
        strcmp(name + used, "self_attn.in_proj_bias") == 0) {
        /* q_proj.bias, k_proj.bias, v_proj.bias one after the other. */
        const clattn_safetensors_tensor *t[3];
        static const char *const parts[3] = {"q", "k", "v"};
        size_t total = 0;
        for (int p = 0; p < 3; p++) {
            char n[96];
            snprintf(n, sizeof(n), "model.layers.%u.self_attn.%s_proj.bias", layer, parts[p]);
            t[p] = clattn_safetensors_find(hf->st, n);
            if (!t[p] || t[p]->ndim != 1)
                return NULL;
            total += t[p]->numel;
        }
        free(hf->bias);
        hf->bias = malloc(total * sizeof(float) + 1);
        if (!hf->bias)
            return NULL;
        size_t at = 0;
        for (int p = 0; p < 3; p++) {
            memcpy(hf->bias + at, t[p]->data, t[p]->numel * sizeof(float));
            at += t[p]->numel;
        }
        hf->bias_tensor = (clattn_host_tensor){hf->bias, 1, {total}};
        return &hf->bias_tensor;
    }
    char n[160];
    if (!hf_name(hf, name, n, sizeof(n)))
        return NULL;
    const clattn_safetensors_tensor *t = clattn_safetensors_find(hf->st, n);
    if (!t || t->ndim < 1 || t->ndim > 2)
        return NULL;
    clattn_host_tensor *h = &hf->made[hf->next];
    hf->next = (hf->next + 1) % (sizeof(hf->made) / sizeof(hf->made[0]));
    h->data = t->data;
    h->ndim = t->ndim;
    for (int d = 0; d < t->ndim; d++)
        h->shape[d] = t->shape[d];
    return h;
}

/* Every tensor the configuration needs, by the folder's name, with its shape. */
static clattn_status check_tensors(const char *fn, const char *path, const clattn_llm_hf *hf,
                                   const clattn_llm_config *c)
{
    const clattn_block_spec *s = &c->spec;
    size_t d = s->d_model, q = s->nhead * s->head_dim_qk, k = s->kv_heads * s->head_dim_qk,
           ff = s->d_ff;
    struct {
        const char *name;
        size_t rows, cols;
        bool needed;
    } want[] = {
        {"self_attn.q_proj.weight", q, d, true},  {"self_attn.k_proj.weight", k, d, true},
        {"self_attn.v_proj.weight", k, d, true},  {"self_attn.o_proj.weight", d, q, true},
        {"mlp.gate_proj.weight", ff, d, true},    {"mlp.up_proj.weight", ff, d, true},
        {"mlp.down_proj.weight", d, ff, true},    {"input_layernorm.weight", d, 0, true},
        {"post_attention_layernorm.weight", d, 0, true},
        {"self_attn.q_proj.bias", q, 0, s->qkv_bias}, {"self_attn.k_proj.bias", k, 0, s->qkv_bias},
        {"self_attn.v_proj.bias", k, 0, s->qkv_bias},
        {"self_attn.q_norm.weight", s->head_dim_qk, 0, s->qk_norm},
        {"self_attn.k_norm.weight", s->head_dim_qk, 0, s->qk_norm},
    };
    size_t layers = s->num_layers, per = sizeof(want) / sizeof(want[0]);
    for (size_t i = 0; i <= layers; i++)
        for (size_t w = 0; w < (i < layers ? per : 3); w++) {
            char name[160];
            size_t rows, cols;
            if (i < layers) {
                if (!want[w].needed)
                    continue;
                snprintf(name, sizeof(name), "model.layers.%zu.%s", i, want[w].name);
                rows = want[w].rows, cols = want[w].cols;
            } else { /* the embedding, the final norm, the output projection */
                static const char *const top[3] = {"model.embed_tokens.weight",
                                                   "model.norm.weight", "lm_head.weight"};
                if (w == 2 && c->tied)
                    continue;
                snprintf(name, sizeof(name), "%s", top[w]);
                rows = w == 1 ? d : c->vocab, cols = w == 1 ? 0 : d;
            }
            const clattn_safetensors_tensor *t = clattn_safetensors_find(hf->st, name);
            if (!t)
                return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT, "missing tensor %s", name);
            if (t->ndim != (cols ? 2 : 1) || t->shape[0] != rows || (cols && t->shape[1] != cols))
                return clattn__fail_in(fn, path, CLATTN_ERROR_SHAPE_MISMATCH,
                                       "tensor %s has shape [%zu%s%zu] but config.json asks for "
                                       "[%zu%s%zu]",
                                       name, t->shape[0], t->ndim > 1 ? ", " : "",
                                       t->ndim > 1 ? t->shape[1] : (size_t)0, rows,
                                       cols ? ", " : "", cols);
        }
    return CLATTN_OK;
}

clattn_status clattn__llm_hf_open(const char *fn, const char *dir, clattn_llm_config *c,
                                  clattn_llm_hf *hf)
{
    memset(hf, 0, sizeof(*hf));
    clattn_status status = read_config(fn, dir, c);
    if (status != CLATTN_OK)
        return status;
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    if ((status = clattn_safetensors_read_floats(&hf->st, path)))
        return status;
    /* A checkpoint saved with tied embeddings may omit lm_head.weight or hold a copy. */
    status = check_tensors(fn, path, hf, c);
    if (status != CLATTN_OK)
        clattn__llm_hf_close(hf);
    return status;
}

void clattn__llm_hf_close(clattn_llm_hf *hf)
{
    clattn_safetensors_destroy(&hf->st);
    free(hf->bias);
    hf->bias = NULL;
}
