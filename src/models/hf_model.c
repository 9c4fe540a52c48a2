/* Loading a Hugging Face encoder folder (config.json + model.safetensors) into an encoder: BERT,
 * MPNet and JinaBERT, each a table of tensor names and a few lines of configuration. */
#include "clattn/safetensors.h"
#include "base/errors.h"
#include "formats/file_io.h"
#include "hf_model.h"
#include "runtime/shape.h"

#include <jansson.h>
#include <math.h>
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
    const char *qkv_part;  /* q/k/v: "encoder.layer.<n>.<qkv_part><name>.<weight|bias>" */
    const char *qkv[3];
    const name_pair *fixed, *layer;
    size_t fixed_count, layer_count;
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

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))
static const hf_family families[] = {
    {"bert", "bert.", "attention.self.", {"query", "key", "value"}, bert_fixed, bert_layer,
     COUNT(bert_fixed), COUNT(bert_layer)},
    {"mpnet", "mpnet.", "attention.attn.", {"q", "k", "v"}, mpnet_fixed, mpnet_layer,
     COUNT(mpnet_fixed), COUNT(mpnet_layer)},
    {JINA_FAMILY, "bert.", "attention.self.", {"query", "key", "value"}, jina_fixed, jina_layer,
     COUNT(jina_fixed), COUNT(jina_layer)},
};
#define SUPPORTED_TYPES "\"bert\", \"mpnet\""

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
    bool jina = bert && position_type && strcmp(position_type, "alibi") == 0;
    if (jina || (family && strcmp(family->model_type, JINA_FAMILY) == 0))
        family = jina ? family_of(JINA_FAMILY) : NULL;
    const char *ff = json_string_value(json_object_get(root, "feed_forward_type"));
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
        (!bert || !(status = config_size(path, root, "type_vocab_size", &types))) &&
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
        else if (!bert)
            status = mpnet_config(path, root, cfg);
        if (family_type)
            *family_type = family->model_type;
    }
    json_decref(root);
    return status;
}

/* ---- model.safetensors under the encoder's names ---- */

/* The lookup's state: the file, its name prefix, and the packed q/k/v tensors it builds. */
typedef struct hf_lookup {
    const clattn_safetensors *st;
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
    if (view && view->ndim == 2 && view->shape[0] == 2 * l->d_ff && half < 2) {
        view->data += half * l->d_ff * view->shape[1];
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
    if (strcmp(rest, "self_attn.in_proj_weight") == 0 ||
        strcmp(rest, "self_attn.in_proj_bias") == 0) {
        *packed_layer = layer;
        *what = strcmp(rest, "self_attn.in_proj_weight") == 0 ? "weight" : "bias";
        for (int i = 0; i < 3; i++)
            snprintf(bert[i], sizeof(bert[i]), "encoder.layer.%zu.%s%s.%s", layer, f->qkv_part,
                     f->qkv[i], *what);
        return 3;
    }
    for (size_t i = 0; i < f->layer_count; i++)
        if (strcmp(rest, f->layer[i].ours) == 0) {
            snprintf(bert[0], sizeof(bert[0]), "encoder.layer.%zu.%s", layer, f->layer[i].theirs);
            return 1;
        }
    return 0;
}

/* Maps the encoder's PyTorch names onto the family's. */
static const clattn_host_tensor *lookup(void *user, const char *name)
{
    hf_lookup *l = user;
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
    snprintf(prefix, sizeof(prefix), "%sencoder.layer.", l->prefix);
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
                           "config.json's num_hidden_layers is %zu but the file holds %s (%s<n>.*)",
                           num_layers, held, prefix);
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
    char prefixed[64];
    snprintf(prefixed, sizeof(prefixed), "%sembeddings.word_embeddings.weight", family->prefix);
    if (!clattn_safetensors_find(st, "embeddings.word_embeddings.weight") &&
        clattn_safetensors_find(st, prefixed))
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
