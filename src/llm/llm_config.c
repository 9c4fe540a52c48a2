/* A GGUF file's metadata as the block stack's spec (llm_model.h). */
#include "llm_model.h"
#include "base/constants.h"
#include "nn/rope_scaling.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

/* The architectures this file maps, and what each adds to Llama's layer. */
typedef struct arch_traits {
    const char *name;
    bool adjacent_pairs; /* llama.cpp's converter permuted q and k: rotate adjacent pairs */
    bool qkv_bias;       /* biases on q, k, v (Qwen2) */
    bool qk_norm;        /* per-head q/k RMSNorm (Qwen3) */
} arch_traits;

static const arch_traits archs[] = {
    {"llama", true, false, false},
    {"qwen2", false, true, false},
    {"qwen3", false, false, true},
};

/* Limits that keep a hostile file's sizes from allocating absurdly before a tensor is read. */
enum { MAX_LAYERS = 1024, MAX_HEADS = 4096 };
#define MAX_WIDTH ((uint64_t)1 << 20)

typedef struct reader {
    const clattn_gguf *g;
    const char *fn;
    const char *arch;
} reader;

static void key_of(const reader *r, const char *what, char *key, size_t size)
{
    snprintf(key, size, "%s.%s", r->arch, what);
}

/* A format error of the file, "<function>: <path>: <detail>". */
#define FORMAT_ERROR(r, ...) clattn__fail_in((r)->fn, (r)->g->path, CLATTN_ERROR_FORMAT, __VA_ARGS__)

/* "<arch>.<what>": a positive integer at most `max` (fallback 0: required). */
static clattn_status size_key(const reader *r, const char *what, uint64_t fallback, uint64_t max,
                              size_t *out)
{
    char key[128];
    key_of(r, what, key, sizeof(key));
    uint64_t v;
    clattn_status status = fallback ? clattn__gguf_get_u64_or(r->g, r->fn, key, fallback, &v)
                                    : clattn__gguf_get_u64(r->g, r->fn, key, &v);
    if (status != CLATTN_OK)
        return status;
    if (v == 0 || v > max)
        return FORMAT_ERROR(r, "'%s' is %llu, outside the sizes this library runs",
                    key, (unsigned long long)v);
    *out = (size_t)v;
    return CLATTN_OK;
}

/* Refuses what the metadata asks for that the stack does not run, naming the key. */
static clattn_status refuse_unimplemented(const reader *r)
{
    char key[128];
    const clattn_gguf_string *type;
    key_of(r, "rope.scaling.type", key, sizeof(key));
    clattn_status status = clattn__gguf_get_string(r->g, r->fn, key, true, &type);
    if (status != CLATTN_OK)
        return status;
    if (type && strcmp(type->data, "none") != 0 && strcmp(type->data, "linear") != 0)
        return clattn__fail_in(r->fn, r->g->path, CLATTN_ERROR_UNSUPPORTED,
                               "'%s' is '%.64s': this RoPE scaling is not supported (none, "
                               "linear, Llama 3.1's rope_freqs.weight)", key, type->data);
    key_of(r, "attention.sliding_window", key, sizeof(key));
    if (clattn__gguf_find(r->g, key))
        return clattn__fail_in(r->fn, r->g->path, CLATTN_ERROR_UNSUPPORTED,
                               "'%s': sliding-window attention is not supported for %s files",
                               key, r->arch);
    uint64_t experts = 0;
    key_of(r, "expert_count", key, sizeof(key));
    if ((status = clattn__gguf_get_u64_or(r->g, r->fn, key, 0, &experts)))
        return status;
    if (experts > 0)
        return clattn__fail_in(r->fn, r->g->path, CLATTN_ERROR_UNSUPPORTED,
                               "'%s' is %llu: mixtures of experts are not supported", key,
                               (unsigned long long)experts);
    /* llama.cpp's converter writes a pooling type (1 mean, 2 CLS, 3 last token, 4 rank) for
     * embedding and reranking models only: their outputs are pooled, not next-token logits. */
    uint64_t pooling = 0;
    key_of(r, "pooling_type", key, sizeof(key));
    if ((status = clattn__gguf_get_u64_or(r->g, r->fn, key, 0, &pooling)))
        return status;
    if (pooling != 0)
        return clattn__fail_in(r->fn, r->g->path, CLATTN_ERROR_UNSUPPORTED,
                               "'%s' is %llu: an embedding or reranking model (its outputs "
                               "pooled), not a language model: not supported yet", key,
                               (unsigned long long)pooling);
    return CLATTN_OK;
}

/* The file's RoPE scaling into the spec (its rope_theta and rotary_dim set): "<arch>.rope.
 * scaling.type" "linear" with "<arch>.rope.scaling.factor" (positions divided by it), and
 * Llama 3.1's tensor rope_freqs.weight, float32 [rotary pairs], by which llama.cpp divides each
 * pair's frequency (convert_hf_to_gguf.py writes it from rope_scaling "llama3"). */
static clattn_status read_rope_scaling(const reader *r, clattn_block_spec *s)
{
    char key[128];
    const clattn_gguf_string *type;
    key_of(r, "rope.scaling.type", key, sizeof(key));
    clattn_status status = clattn__gguf_get_string(r->g, r->fn, key, true, &type);
    if (status != CLATTN_OK)
        return status;
    size_t pairs = clattn__rope_pairs(s);
    const clattn_gguf_tensor *t = clattn__gguf_tensor(r->g, "rope_freqs.weight");
    bool linear = type && strcmp(type->data, "linear") == 0;
    if ((t || linear) && pairs > CLATTN_ROPE_MAX_PAIRS)
        return clattn__fail_in(r->fn, r->g->path, CLATTN_ERROR_UNSUPPORTED,
                               "scaled RoPE over %zu rotary pairs is not supported (at most %d)",
                               pairs, CLATTN_ROPE_MAX_PAIRS);
    if (t) {
        if (t->type != CLATTN_GGML_F32 || t->n_dims != 1 || t->ne[0] != pairs)
            return FORMAT_ERROR(r, "tensor rope_freqs.weight must be float32 [%zu] (one factor "
                                   "per rotary pair), not type %u with %u dimensions, ne[0] "
                                   "%llu", pairs, t->type, t->n_dims,
                                (unsigned long long)t->ne[0]);
        float factors[CLATTN_ROPE_MAX_PAIRS];
        if ((status = clattn__gguf_read(r->g, r->fn, t, 0, factors, pairs * sizeof(float))))
            return status;
        for (size_t k = 0; k < pairs; k++)
            if (!(factors[k] > 0.0f) || !isfinite(factors[k]))
                return FORMAT_ERROR(r, "tensor rope_freqs.weight: factor %zu is %g, not a "
                                       "positive number", k, (double)factors[k]);
        clattn__rope_scale_divide(s, factors);
    }
    if (linear) {
        double factor;
        key_of(r, "rope.scaling.factor", key, sizeof(key));
        if (!clattn__gguf_find(r->g, key))
            return FORMAT_ERROR(r, "missing '%s' (rope.scaling.type is linear)", key);
        if ((status = clattn__gguf_get_f64_or(r->g, r->fn, key, 0.0, &factor)))
            return status;
        if (!(factor > 0.0 && factor < 1e6))
            return FORMAT_ERROR(r, "'%s' is %g: a linear RoPE scaling factor must be positive",
                                key, factor);
        clattn__rope_scale_linear(s, (float)factor);
    }
    return CLATTN_OK;
}

clattn_status clattn__llm_config_read(const char *fn, const clattn_gguf *g, clattn_llm_config *c)
{
    memset(c, 0, sizeof(*c));
    const clattn_gguf_string *arch_name;
    clattn_status status = clattn__gguf_get_string(g, fn, "general.architecture", false,
                                                   &arch_name);
    if (status != CLATTN_OK)
        return status;
    const arch_traits *t = NULL;
    for (size_t i = 0; i < sizeof(archs) / sizeof(archs[0]); i++)
        if (strlen(archs[i].name) == arch_name->len && strcmp(archs[i].name, arch_name->data) == 0)
            t = &archs[i];
    if (!t)
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_UNSUPPORTED,
                               "general.architecture '%.64s' is not supported (llama, qwen2, "
                               "qwen3)",
                               arch_name->data);
    snprintf(c->arch, sizeof(c->arch), "%s", t->name);
    reader r = {g, fn, c->arch};
    if ((status = refuse_unimplemented(&r)))
        return status;

    clattn_block_spec *s = &c->spec;
    size_t heads, kv_heads, dk, dv, rot;
    if ((status = size_key(&r, "block_count", 0, MAX_LAYERS, &s->num_layers)) ||
        (status = size_key(&r, "embedding_length", 0, MAX_WIDTH, &s->d_model)) ||
        (status = size_key(&r, "feed_forward_length", 0, MAX_WIDTH, &s->d_ff)) ||
        (status = size_key(&r, "attention.head_count", 0, MAX_HEADS, &heads)) ||
        (status = size_key(&r, "attention.head_count_kv", heads, MAX_HEADS, &kv_heads)) ||
        (status = size_key(&r, "context_length", 0, (uint64_t)1 << 24, &c->context_length)))
        return status;
    char key[128];
    key_of(&r, "attention.key_length", key, sizeof(key));
    if (s->d_model % heads != 0 && !clattn__gguf_find(g, key))
        return FORMAT_ERROR(&r,
                    "'%s' is missing and embedding_length is not a multiple of %llu heads", key,
                    (unsigned long long)heads);
    if ((status = size_key(&r, "attention.key_length", s->d_model / heads ? s->d_model / heads : 1,
                           MAX_WIDTH, &dk)) ||
        (status = size_key(&r, "attention.value_length", dk, MAX_WIDTH, &dv)) ||
        (status = size_key(&r, "rope.dimension_count", dk, MAX_WIDTH, &rot)))
        return status;
    key_of(&r, "attention.head_count_kv", key, sizeof(key));
    if (heads % kv_heads != 0)
        return FORMAT_ERROR(&r,
                    "'%s' is %llu: the query heads are not a multiple of it", key,
                    (unsigned long long)kv_heads);
    key_of(&r, "rope.dimension_count", key, sizeof(key));
    if (rot > dk || rot % 2 != 0)
        return FORMAT_ERROR(&r, "'%s' is %llu: it must be even and at most the key "
                    "width", key, (unsigned long long)rot);
    double eps, theta;
    key_of(&r, "attention.layer_norm_rms_epsilon", key, sizeof(key));
    if (!clattn__gguf_find(g, key))
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT, "missing '%s'", key);
    if ((status = clattn__gguf_get_f64_or(g, fn, key, 0.0, &eps)))
        return status;
    key_of(&r, "rope.freq_base", key, sizeof(key));
    if ((status = clattn__gguf_get_f64_or(g, fn, key, 10000.0, &theta)))
        return status;
    if (!(eps > 0.0 && eps < 1.0) || !(theta > 1.0 && isfinite(theta)))
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT,
                               "RMSNorm eps %g or RoPE base %g is out of range", eps, theta);

    /* The vocabulary: the token embedding's rows (ne = {d_model, vocab}). */
    const clattn_gguf_tensor *emb = clattn__gguf_tensor(g, "token_embd.weight");
    if (!emb)
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT, "missing tensor "
                               "token_embd.weight");
    if (emb->n_dims != 2 || emb->ne[0] != s->d_model || emb->ne[1] == 0 ||
        emb->ne[1] > ((uint64_t)1 << 24))
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT,
                               "tensor token_embd.weight has ne {%llu, %llu}, not {%zu, vocab}",
                               (unsigned long long)emb->ne[0], (unsigned long long)emb->ne[1],
                               s->d_model);
    c->vocab = (size_t)emb->ne[1];
    c->tied = clattn__gguf_tensor(g, "output.weight") == NULL;

    s->norm = CLATTN_NORM_RMS;
    s->norm_first = true;
    s->final_norm = true;
    s->norm_eps = (float)eps;
    s->nhead = heads, s->kv_heads = kv_heads, s->head_dim_qk = dk, s->head_dim_v = dv;
    s->causal = true;
    s->query_count_invariant = true;
    s->rope_theta = (float)theta;
    s->rotary_dim = (uint32_t)rot;
    s->rope_interleaved = t->adjacent_pairs;
    s->qk_norm = t->qk_norm;
    s->ffn_gated = true;
    s->activation = CLATTN_ACT_SILU;
    s->linear_bias = false;
    s->qkv_bias = t->qkv_bias;
    return read_rope_scaling(&r, s);
}
