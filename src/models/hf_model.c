/* Loading a Hugging Face BERT folder (config.json + model.safetensors) into an encoder. */
#include "clattn/safetensors.h"
#include "base/errors.h"
#include "formats/file_io.h"
#include "hf_model.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn[] = "clattn_encoder_load_hf";

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

clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *cfg)
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
    if (!model_type || strcmp(model_type, "bert") != 0)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "model_type \"%.64s\" is not supported (only \"bert\")",
                                 model_type ? model_type : "(missing)");
    else if (position_type && strcmp(position_type, "absolute") != 0)
        status = clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                                 "position_embedding_type \"%.64s\" is not supported (only "
                                 "\"absolute\")",
                                 position_type);
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
        !(status = config_size(path, root, "type_vocab_size", &types)) &&
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
    }
    json_decref(root);
    return status;
}

/* ---- model.safetensors under the encoder's names ---- */

/* The lookup's state: the file, its name prefix, and the packed q/k/v tensors it builds. */
typedef struct hf_lookup {
    const clattn_safetensors *st;
    const char *prefix; /* "" or "bert." */
    clattn_host_tensor packed[2]; /* in_proj_weight, in_proj_bias of the layer asked last */
    float *packed_data[2];
    clattn_host_tensor views[4];  /* the last tensors handed out (the encoder copies each) */
    size_t next_view;
} hf_lookup;

static const clattn_host_tensor *find(hf_lookup *l, const char *hf_name)
{
    char name[256];
    snprintf(name, sizeof(name), "%s%s", l->prefix, hf_name);
    const clattn_safetensors_tensor *t = clattn_safetensors_find(l->st, name);
    if (!t)
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

/* Concatenates query, key and value (weights [E, E] each, or biases [E]) into one packed tensor
 * [3E, E] / [3E], as the attention layer's in_proj_weight / in_proj_bias. */
static const clattn_host_tensor *pack_qkv(hf_lookup *l, size_t layer, const char *what, int slot)
{
    const clattn_safetensors_tensor *parts[3];
    static const char *const names[3] = {"query", "key", "value"};
    for (int i = 0; i < 3; i++) {
        char name[256];
        snprintf(name, sizeof(name), "%sencoder.layer.%zu.attention.self.%s.%s", l->prefix, layer,
                 names[i], what);
        parts[i] = clattn_safetensors_find(l->st, name);
        if (!parts[i])
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

/* Maps the encoder's PyTorch names onto BERT's. */
static const clattn_host_tensor *lookup(void *user, const char *name)
{
    hf_lookup *l = user;
    static const struct {
        const char *ours, *bert;
    } fixed[] = {
        {"embedding.weight", "embeddings.word_embeddings.weight"},
        {"pos_embedding.weight", "embeddings.position_embeddings.weight"},
        {"token_type_embedding.weight", "embeddings.token_type_embeddings.weight"},
        {"embedding_norm.weight", "embeddings.LayerNorm.weight"},
        {"embedding_norm.bias", "embeddings.LayerNorm.bias"},
    };
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++)
        if (strcmp(name, fixed[i].ours) == 0)
            return find(l, fixed[i].bert);
    static const struct {
        const char *ours, *bert;
    } per_layer[] = {
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
    size_t layer;
    int used = 0;
    if (sscanf(name, "layers.%zu.%n", &layer, &used) != 1 || used == 0)
        return NULL;
    const char *rest = name + used;
    if (strcmp(rest, "self_attn.in_proj_weight") == 0)
        return pack_qkv(l, layer, "weight", 0);
    if (strcmp(rest, "self_attn.in_proj_bias") == 0)
        return pack_qkv(l, layer, "bias", 1);
    for (size_t i = 0; i < sizeof(per_layer) / sizeof(per_layer[0]); i++)
        if (strcmp(rest, per_layer[i].ours) == 0) {
            char bert[256];
            snprintf(bert, sizeof(bert), "encoder.layer.%zu.%s", layer, per_layer[i].bert);
            return find(l, bert);
        }
    return NULL;
}

/* BERT's name of one of our tensors, for messages about a tensor the file lacks. */
static void bert_name(const char *ours, char *out, size_t size)
{
    size_t layer;
    int used = 0;
    snprintf(out, size, "%s", ours);
    if (sscanf(ours, "layers.%zu.%n", &layer, &used) == 1 && used > 0 && strstr(ours, "in_proj"))
        snprintf(out, size, "encoder.layer.%zu.attention.self.{query,key,value}.%s", layer,
                 strstr(ours, "weight") ? "weight" : "bias");
    else if (strcmp(ours, "embedding.weight") == 0)
        snprintf(out, size, "embeddings.word_embeddings.weight");
}

clattn_status clattn__hf_load_weights(clattn_encoder *enc, const char *dir)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    clattn_status status = clattn_safetensors_read_floats(&st, path);
    if (status != CLATTN_OK)
        return status;
    hf_lookup l;
    memset(&l, 0, sizeof(l));
    l.st = st;
    l.prefix = "";
    if (!clattn_safetensors_find(st, "embeddings.word_embeddings.weight") &&
        clattn_safetensors_find(st, "bert.embeddings.word_embeddings.weight"))
        l.prefix = "bert.";
    status = clattn_encoder_load_weights(enc, lookup, &l);
    if (status != CLATTN_OK) {
        /* Name the file and, for a missing tensor, its name in the file. */
        char message[1024], name[256], extra[320] = "";
        snprintf(message, sizeof(message), "%s", clattn_last_error(NULL));
        const char *missing = strstr(message, "missing tensor ");
        if (missing) {
            bert_name(missing + strlen("missing tensor "), name, sizeof(name));
            snprintf(extra, sizeof(extra), " (in this file: %s%s)", l.prefix, name);
        }
        status = clattn__fail_in(fn, path, status, "%s%s", message, extra);
    }
    free(l.packed_data[0]);
    free(l.packed_data[1]);
    clattn_safetensors_destroy(&st);
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
    clattn_status status = clattn__hf_read_config(dir, &cfg);
    if (status == CLATTN_OK && (status = clattn_encoder_create(ctx, &enc, &cfg)) == CLATTN_OK &&
        (status = clattn__hf_load_weights(enc, dir)) != CLATTN_OK)
        clattn_encoder_destroy(&enc);
    if (status != CLATTN_OK) /* the file errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    *out = enc;
    return status;
}
