/* A GGUF file's tensors under the block stack's names, dequantised to float32 on the host: the
 * norms and biases, and the weights not kept quantised (llm_model.h). */
#include "llm_model.h"
#include "formats/ggml_dequant.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The stack's name of a layer's weight (after "layers.{i}.") and the GGUF's (after
 * "blk.{i}."). */
static const struct {
    const char *stack, *gguf;
} layer_names[] = {
    {"self_attn.q_proj_weight", "attn_q.weight"},
    {"self_attn.k_proj_weight", "attn_k.weight"},
    {"self_attn.v_proj_weight", "attn_v.weight"},
    {"self_attn.out_proj.weight", "attn_output.weight"},
    {"self_attn.q_norm.weight", "attn_q_norm.weight"},
    {"self_attn.k_norm.weight", "attn_k_norm.weight"},
    {"linear1_gate.weight", "ffn_gate.weight"},
    {"linear1.weight", "ffn_up.weight"},
    {"linear2.weight", "ffn_down.weight"},
    {"norm1.weight", "attn_norm.weight"},
    {"norm2.weight", "ffn_norm.weight"},
};

/* (llm_model.h) A name the file does not have, such as the packed in_proj_weight, makes the
 * stack ask for q, k and v apart. */
bool clattn__llm_gguf_name(const char *name, char *gguf, size_t size)
{
    if (strcmp(name, "norm.weight") == 0) {
        snprintf(gguf, size, "output_norm.weight");
        return true;
    }
    unsigned layer;
    int used = 0;
    if (sscanf(name, "layers.%u.%n", &layer, &used) != 1 || used == 0) {
        snprintf(gguf, size, "%s", name);
        return true;
    }
    for (size_t i = 0; i < sizeof(layer_names) / sizeof(layer_names[0]); i++)
        if (strcmp(name + used, layer_names[i].stack) == 0) {
            snprintf(gguf, size, "blk.%u.%s", layer, layer_names[i].gguf);
            return true;
        }
    return false;
}

/* Reads and dequantises tensor t into dst [t->elements]. */
static clattn_status read_tensor(const clattn_gguf *g, const char *fn,
                                 const clattn_gguf_tensor *t, float *dst)
{
    if (t->type == CLATTN_GGML_F32)
        return clattn__gguf_read(g, fn, t, 0, dst, (size_t)t->bytes);
    void *raw = malloc(t->bytes ? (size_t)t->bytes : 1);
    if (!raw)
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory for tensor %s", t->name.data);
    clattn_status status = clattn__gguf_read(g, fn, t, 0, raw, (size_t)t->bytes);
    if (status == CLATTN_OK && !clattn__ggml_dequantize(t->type, raw, (size_t)t->elements, dst))
        status = clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT,
                                 "tensor %s: its type %u cannot be dequantised", t->name.data,
                                 t->type);
    free(raw);
    return status;
}

/* The next slot of the ring, emptied. */
static size_t next_slot(clattn_llm_weight_source *src)
{
    size_t k = src->next;
    src->next = (src->next + 1) % (sizeof(src->data) / sizeof(src->data[0]));
    free(src->data[k]);
    src->data[k] = NULL;
    memset(&src->made[k], 0, sizeof(src->made[k]));
    return k;
}

/* Records the first failure. */
static const clattn_host_tensor *failed(clattn_llm_weight_source *src, clattn_status status)
{
    if (src->status == CLATTN_OK) {
        src->status = status;
        const char *message = clattn_last_error(NULL);
        snprintf(src->message, sizeof(src->message), "%s", message ? message : "");
    }
    return NULL;
}

/* Qwen2's "layers.{i}.self_attn.in_proj_bias": blk.{i}.attn_q.bias, attn_k.bias and attn_v.bias
 * one after the other. */
static const clattn_host_tensor *qkv_bias(clattn_llm_weight_source *src, unsigned layer)
{
    const clattn_gguf_tensor *t[3];
    static const char *const parts[3] = {"q", "k", "v"};
    size_t total = 0;
    for (int p = 0; p < 3; p++) {
        char name[64];
        snprintf(name, sizeof(name), "blk.%u.attn_%s.bias", layer, parts[p]);
        t[p] = clattn__gguf_tensor(src->g, name);
        if (!t[p])
            return NULL;
        total += (size_t)t[p]->elements;
    }
    size_t k = next_slot(src);
    src->data[k] = malloc(total * sizeof(float) + 1);
    if (!src->data[k])
        return failed(src, clattn__fail_in(src->function, src->g->path,
                                           CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                           "out of host memory for the biases of layer %u",
                                           layer));
    size_t at = 0;
    for (int p = 0; p < 3; p++) {
        clattn_status status = read_tensor(src->g, src->function, t[p], src->data[k] + at);
        if (status != CLATTN_OK)
            return failed(src, status);
        at += (size_t)t[p]->elements;
    }
    src->made[k] = (clattn_host_tensor){src->data[k], 1, {total}};
    return &src->made[k];
}

const clattn_host_tensor *clattn__llm_weight_lookup(void *user, const char *name)
{
    clattn_llm_weight_source *src = user;
    unsigned layer;
    int used = 0;
    if (sscanf(name, "layers.%u.%n", &layer, &used) == 1 && used > 0 &&
        strcmp(name + used, "self_attn.in_proj_bias") == 0)
        return qkv_bias(src, layer);
    char gname[160];
    if (!clattn__llm_gguf_name(name, gname, sizeof(gname)))
        return NULL;
    const clattn_gguf_tensor *t = clattn__gguf_tensor(src->g, gname);
    if (!t || t->n_dims < 1 || t->n_dims > 2)
        return NULL;
    size_t k = next_slot(src);
    src->data[k] = malloc((size_t)t->elements * sizeof(float) + 1);
    if (!src->data[k])
        return failed(src, clattn__fail_in(src->function, src->g->path,
                                           CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                           "out of host memory for tensor %s", gname));
    clattn_status status = read_tensor(src->g, src->function, t, src->data[k]);
    if (status != CLATTN_OK)
        return failed(src, status);
    /* ggml's ne is innermost first: ne {in, out} is PyTorch's [out, in]. */
    clattn_host_tensor *h = &src->made[k];
    h->data = src->data[k];
    h->ndim = (int)t->n_dims;
    for (uint32_t d = 0; d < t->n_dims; d++)
        h->shape[d] = (size_t)t->ne[t->n_dims - 1 - d];
    return h;
}

void clattn__llm_weight_source_free(clattn_llm_weight_source *src)
{
    for (size_t k = 0; k < sizeof(src->data) / sizeof(src->data[0]); k++) {
        free(src->data[k]);
        src->data[k] = NULL;
    }
}

/* ---- checks before loading ---- */

/* Tensor `name` exists (unless optional) with ne {ne0, ne1} (ne1 0: one dimension) and a type
 * the library runs. *present: whether it exists. */
static clattn_status check_tensor(const char *fn, const clattn_gguf *g, const char *name,
                                  size_t ne0, size_t ne1, bool optional, bool *present)
{
    const clattn_gguf_tensor *t = clattn__gguf_tensor(g, name);
    if (present)
        *present = t != NULL;
    if (!t)
        return optional ? CLATTN_OK
                        : clattn__fail_in(fn, g->path, CLATTN_ERROR_FORMAT, "missing tensor %s",
                                          name);
    const char *type_name = NULL;
    clattn__ggml_type_info(t->type, NULL, NULL, &type_name);
    if (!clattn__ggml_type_supported(t->type)) {
        if (type_name)
            return clattn__fail_in(fn, g->path, CLATTN_ERROR_UNSUPPORTED,
                                   "tensor %s has type %s, which is not supported", name,
                                   type_name);
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_UNSUPPORTED,
                               "tensor %s has type %u, which is not supported", name, t->type);
    }
    uint32_t dims = ne1 ? 2 : 1;
    if (t->n_dims != dims || t->ne[0] != ne0 || (ne1 && t->ne[1] != ne1))
        return clattn__fail_in(fn, g->path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "tensor %s has %u dimensions ne {%llu, %llu} but the metadata "
                               "asks for ne {%zu, %zu}",
                               name, t->n_dims, (unsigned long long)t->ne[0],
                               (unsigned long long)(t->n_dims > 1 ? t->ne[1] : 1), ne0,
                               ne1 ? ne1 : 1);
    return CLATTN_OK;
}

clattn_status clattn__llm_weights_check(const char *fn, const clattn_gguf *g,
                                        const clattn_llm_config *c)
{
    const clattn_block_spec *s = &c->spec;
    size_t d = s->d_model, q = s->nhead * s->head_dim_qk, k = s->kv_heads * s->head_dim_qk,
           v = s->kv_heads * s->head_dim_v, o = s->nhead * s->head_dim_v, ff = s->d_ff;
    clattn_status status;
    if ((status = check_tensor(fn, g, "token_embd.weight", d, c->vocab, false, NULL)) ||
        (status = check_tensor(fn, g, "output_norm.weight", d, 0, false, NULL)) ||
        (status = check_tensor(fn, g, "output.weight", d, c->vocab, true, NULL)))
        return status;
    for (size_t i = 0; i < s->num_layers; i++) {
        struct {
            const char *name;
            size_t ne0, ne1;
            bool needed;
        } want[] = {
            {"attn_norm.weight", d, 0, true},    {"attn_q.weight", d, q, true},
            {"attn_k.weight", d, k, true},       {"attn_v.weight", d, v, true},
            {"attn_output.weight", o, d, true},  {"ffn_norm.weight", d, 0, true},
            {"ffn_gate.weight", d, ff, true},    {"ffn_up.weight", d, ff, true},
            {"ffn_down.weight", ff, d, true},
            {"attn_q.bias", q, 0, s->qkv_bias},  {"attn_k.bias", k, 0, s->qkv_bias},
            {"attn_v.bias", v, 0, s->qkv_bias},
            {"attn_q_norm.weight", s->head_dim_qk, 0, s->qk_norm},
            {"attn_k_norm.weight", s->head_dim_qk, 0, s->qk_norm},
        };
        for (size_t w = 0; w < sizeof(want) / sizeof(want[0]); w++) {
            if (!want[w].needed)
                continue;
            char name[96];
            snprintf(name, sizeof(name), "blk.%zu.%s", i, want[w].name);
            if ((status = check_tensor(fn, g, name, want[w].ne0, want[w].ne1, false, NULL)))
                return status;
        }
    }
    return CLATTN_OK;
}
