/* Sequence-classification heads: one table row per architecture, their options from
 * config.json, their tensors from model.safetensors, the logits on the host
 * (classifier_head.h). */
#include "classifier_head.h"

#include "formats/safetensors_internal.h"
#include "runtime/shape.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { DENSE_W, DENSE_B, NORM_W, NORM_B, OUT_W, OUT_B, HEAD_TENSORS };

/* What config.json decides about a head: which state it reads, its activation, which optional
 * tensors it has. */
typedef struct head_options {
    clattn_pooling pooling;
    head_activation act;
    bool has[HEAD_TENSORS];
    double norm_eps;
} head_options;

/* A head's tensors under transformers' names (NULL: the architecture has no such tensor). A
 * name may come with or without the encoder's prefix ("bert."): prefixed[] says which ones
 * carry it in the task model's state_dict. */
typedef struct head_spec {
    const char *architecture;
    const char *model_type; /* the encoder's, config.json's model_type */
    const char *prefix;     /* the encoder's module name in the task model ("bert.") */
    const char *names[HEAD_TENSORS];
    bool prefixed[HEAD_TENSORS];
    const char *what; /* the dense layer and norm, for messages */
    clattn_status (*read_options)(const char *fn, const char *path, json_t *config,
                                  head_options *o);
} head_spec;

/* BERT's and RoBERTa's heads: dense + tanh on the first token, no norm. */
static clattn_status tanh_on_first_token(const char *fn, const char *path, json_t *config,
                                         head_options *o)
{
    (void)fn, (void)path, (void)config;
    o->pooling = CLATTN_POOLING_CLS;
    o->act = HEAD_TANH;
    o->has[DENSE_W] = o->has[DENSE_B] = o->has[OUT_W] = o->has[OUT_B] = true;
    return CLATTN_OK;
}

/* config.json's `key` as a boolean (`fallback` when absent or null). */
static clattn_status option_bool(const char *fn, const char *path, json_t *config,
                                 const char *key, bool fallback, bool *out)
{
    json_t *v = json_object_get(config, key);
    *out = !v || json_is_null(v) ? fallback : json_is_true(v);
    if (v && !json_is_null(v) && !json_is_boolean(v))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"%s\" must be true or false", key);
    return CLATTN_OK;
}

/* ModernBertForSequenceClassification: ModernBertPredictionHead (dense, ACT2FN, LayerNorm) on
 * the pooled state; ModernBertConfig's defaults for absent keys. */
static clattn_status modernbert_options(const char *fn, const char *path, json_t *config,
                                        head_options *o)
{
    static const struct {
        const char *name;
        head_activation act;
    } acts[] = {{"gelu", HEAD_GELU},           {"gelu_new", HEAD_GELU_TANH},
                {"gelu_pytorch_tanh", HEAD_GELU_TANH}, {"relu", HEAD_RELU},
                {"silu", HEAD_SILU},           {"swish", HEAD_SILU},
                {"tanh", HEAD_TANH}};
    json_t *pooling = json_object_get(config, "classifier_pooling");
    json_t *act = json_object_get(config, "classifier_activation");
    json_t *eps = json_object_get(config, "norm_eps");
    const char *pooling_name = pooling && !json_is_null(pooling) ? json_string_value(pooling)
                                                                  : "cls";
    const char *act_name = act && !json_is_null(act) ? json_string_value(act) : "gelu";
    if (!pooling_name || (strcmp(pooling_name, "cls") != 0 && strcmp(pooling_name, "mean") != 0))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "classifier_pooling \"%.64s\" is not supported (\"cls\", "
                               "\"mean\")",
                               pooling_name ? pooling_name : "(not a string)");
    o->pooling = pooling_name[0] == 'c' ? CLATTN_POOLING_CLS : CLATTN_POOLING_MEAN;
    size_t k = 0;
    while (act_name && k < sizeof(acts) / sizeof(acts[0]) && strcmp(acts[k].name, act_name) != 0)
        k++;
    if (!act_name || k == sizeof(acts) / sizeof(acts[0]))
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "classifier_activation \"%.64s\" is not supported (gelu, "
                               "gelu_new, gelu_pytorch_tanh, relu, silu, swish, tanh)",
                               act_name ? act_name : "(not a string)");
    o->act = acts[k].act;
    o->norm_eps = eps && !json_is_null(eps) ? json_number_value(eps) : 1e-5;
    if (eps && !json_is_null(eps) && (!json_is_number(eps) || !(o->norm_eps > 0.0)))
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "the field \"norm_eps\" must be a positive number");
    clattn_status status;
    if ((status = option_bool(fn, path, config, "classifier_bias", false, &o->has[DENSE_B])) ||
        (status = option_bool(fn, path, config, "norm_bias", false, &o->has[NORM_B])))
        return status;
    o->has[DENSE_W] = o->has[NORM_W] = o->has[OUT_W] = o->has[OUT_B] = true;
    return CLATTN_OK;
}

static const head_spec specs[] = {
    /* BertForSequenceClassification: BertModel's pooler (dense + tanh on [CLS]), dropout, then
     * the classifier. */
    {"BertForSequenceClassification", "bert", "bert.",
     {"pooler.dense.weight", "pooler.dense.bias", NULL, NULL, "classifier.weight",
      "classifier.bias"},
     {true, true, false, false, false, false}, "BertModel's pooler", tanh_on_first_token},
    /* RobertaForSequenceClassification and XLMRobertaForSequenceClassification (a copy of it):
     * no pooler; RobertaClassificationHead: dense + tanh on <s>, dropout, out_proj. */
    {"RobertaForSequenceClassification", "roberta", "roberta.",
     {"classifier.dense.weight", "classifier.dense.bias", NULL, NULL,
      "classifier.out_proj.weight", "classifier.out_proj.bias"},
     {false, false, false, false, false, false}, "RobertaClassificationHead",
     tanh_on_first_token},
    {"XLMRobertaForSequenceClassification", "xlm-roberta", "roberta.",
     {"classifier.dense.weight", "classifier.dense.bias", NULL, NULL,
      "classifier.out_proj.weight", "classifier.out_proj.bias"},
     {false, false, false, false, false, false}, "XLMRobertaClassificationHead",
     tanh_on_first_token},
    /* ModernBertForSequenceClassification: pooled state (classifier_pooling), head (dense, act,
     * norm), dropout, classifier. */
    {"ModernBertForSequenceClassification", "modernbert", "model.",
     {"head.dense.weight", "head.dense.bias", "head.norm.weight", "head.norm.bias",
      "classifier.weight", "classifier.bias"},
     {false, false, false, false, false, false}, "ModernBertPredictionHead",
     modernbert_options},
};
#define SPEC_COUNT (sizeof(specs) / sizeof(specs[0]))

static const head_spec *spec_of(const char *architecture)
{
    for (size_t i = 0; architecture && i < SPEC_COUNT; i++)
        if (strcmp(specs[i].architecture, architecture) == 0)
            return &specs[i];
    return NULL;
}

const char *clattn__head_model_type(const char *architecture)
{
    const head_spec *s = spec_of(architecture);
    return s ? s->model_type : NULL;
}

const char *clattn__head_architectures(void)
{
    return "BertForSequenceClassification, RobertaForSequenceClassification, "
           "XLMRobertaForSequenceClassification, ModernBertForSequenceClassification";
}

void clattn__head_free(classifier_head *head)
{
    free(head->dense_w), free(head->dense_b), free(head->norm_w), free(head->norm_b);
    free(head->out_w), free(head->out_b);
    memset(head, 0, sizeof(*head));
}

/* The file's tensor for head tensor k: under the prefix first, then without it. */
static const clattn_safetensors_tensor *find(const clattn_safetensors *st, const head_spec *s,
                                             int k, char *name, size_t size)
{
    snprintf(name, size, "%s%s", s->prefixed[k] ? s->prefix : "", s->names[k]);
    const clattn_safetensors_tensor *t = clattn_safetensors_find(st, name);
    if (!t && s->prefixed[k]) {
        t = clattn_safetensors_find(st, s->names[k]);
        if (t)
            snprintf(name, size, "%s", s->names[k]);
    }
    return t;
}

/* Moves head tensor k's floats into *dst after checking its shape ([rows, hidden], or [rows]
 * when hidden is 0). */
static clattn_status take(const char *fn, const char *path, clattn_safetensors *st,
                          const head_spec *s, int k, size_t rows, size_t hidden, float **dst)
{
    char name[256];
    const clattn_safetensors_tensor *t = find(st, s, k, name, sizeof(name));
    if (!t) {
        for (size_t i = 0; i < st->left_out_count; i++)
            if (strcmp(st->left_out[i].name, name) == 0 ||
                strcmp(st->left_out[i].name, s->names[k]) == 0)
                return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                                       "tensor %s is %s, expected F32 (or F16, BF16)",
                                       st->left_out[i].name, st->left_out[i].dtype);
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT, "missing tensor %s (%s's %s)",
                               name, s->architecture, k < OUT_W ? s->what : "classifier");
    }
    size_t want[2] = {rows, hidden};
    int ndim = hidden ? 2 : 1;
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    if (!same) {
        char got[128], expected[128];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        clattn__format_shape(expected, sizeof(expected), ndim, want);
        return clattn__fail_in(fn, path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "tensor %s has shape %s but must be %s (%s)", name, got, expected,
                               k >= OUT_W ? "num_labels from config.json's id2label, "
                                            "hidden_size"
                                          : "hidden_size");
    }
    /* The tensor's floats change hands: st no longer frees them. */
    clattn_safetensors_tensor *owned = (clattn_safetensors_tensor *)t;
    *dst = owned->data;
    owned->data = NULL;
    return CLATTN_OK;
}

clattn_status clattn__head_load(const char *fn, const char *dir, const char *architecture,
                                json_t *config, size_t hidden, size_t labels,
                                classifier_head *head)
{
    memset(head, 0, sizeof(*head));
    const head_spec *s = spec_of(architecture);
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    if (!s)
        return clattn__fail_in(fn, path, CLATTN_ERROR_UNSUPPORTED,
                               "architecture \"%.64s\" has no classification head here "
                               "(supported: %s)",
                               architecture ? architecture : "(none)",
                               clattn__head_architectures());
    head_options o = {0};
    clattn_status status = s->read_options(fn, path, config, &o);
    if (status != CLATTN_OK)
        return status;
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    /* Every spelling of every tensor the head has: with and without the prefix. */
    char spelled[2 * HEAD_TENSORS][256];
    const char *names[2 * HEAD_TENSORS];
    size_t count = 0;
    for (int k = 0; k < HEAD_TENSORS; k++) {
        if (!o.has[k])
            continue;
        snprintf(spelled[count], sizeof(spelled[count]), "%s", s->names[k]);
        names[count] = spelled[count];
        count++;
        if (s->prefixed[k]) {
            snprintf(spelled[count], sizeof(spelled[count]), "%s%s", s->prefix, s->names[k]);
            names[count] = spelled[count];
            count++;
        }
    }
    clattn_safetensors *st = NULL;
    status = clattn__safetensors_read_named(fn, &st, path, names, count);
    if (status != CLATTN_OK)
        return status;
    head->hidden = hidden;
    head->labels = labels;
    head->pooling = o.pooling;
    head->act = o.act;
    head->norm_eps = o.norm_eps;
    /* each tensor: its rows and, for matrices, its columns (0: a vector) */
    const size_t rows[HEAD_TENSORS] = {hidden, hidden, hidden, hidden, labels, labels};
    const size_t columns[HEAD_TENSORS] = {hidden, 0, 0, 0, hidden, 0};
    float **slots[HEAD_TENSORS] = {&head->dense_w, &head->dense_b, &head->norm_w,
                                   &head->norm_b,  &head->out_w,   &head->out_b};
    for (int k = 0; k < HEAD_TENSORS && status == CLATTN_OK; k++)
        if (o.has[k])
            status = take(fn, path, st, s, k, rows[k], columns[k], slots[k]);
    clattn_safetensors_destroy(&st);
    if (status != CLATTN_OK)
        clattn__head_free(head);
    return status;
}

static double activate(head_activation act, double x)
{
    switch (act) {
    case HEAD_TANH: return tanh(x);
    case HEAD_GELU: return 0.5 * x * (1.0 + erf(x / sqrt(2.0)));
    case HEAD_GELU_TANH:
        return 0.5 * x * (1.0 + tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); /* √(2/π) */
    case HEAD_RELU: return x > 0.0 ? x : 0.0;
    case HEAD_SILU: return x / (1.0 + exp(-x));
    }
    return x;
}

/* h = LayerNorm(h) over its e values (biased variance, as torch.nn.LayerNorm). */
static void layer_norm(const classifier_head *head, double *h, size_t e)
{
    double mean = 0.0, var = 0.0;
    for (size_t c = 0; c < e; c++)
        mean += h[c];
    mean /= (double)e;
    for (size_t c = 0; c < e; c++)
        var += (h[c] - mean) * (h[c] - mean);
    var /= (double)e;
    double scale = 1.0 / sqrt(var + head->norm_eps);
    for (size_t c = 0; c < e; c++)
        h[c] = (h[c] - mean) * scale * head->norm_w[c] + (head->norm_b ? head->norm_b[c] : 0.0);
}

bool clattn__head_logits(const classifier_head *head, const float *pooled, size_t count,
                         float *logits)
{
    size_t e = head->hidden;
    double *h = malloc((e ? e : 1) * sizeof(double)); /* [hidden]: one pair's dense output */
    if (!h)
        return false;
    for (size_t i = 0; i < count; i++) {
        const float *x = pooled + i * e;
        for (size_t r = 0; r < e; r++) {
            const float *w = head->dense_w + r * e;
            double sum = head->dense_b ? head->dense_b[r] : 0.0;
            for (size_t c = 0; c < e; c++)
                sum += (double)w[c] * (double)x[c];
            h[r] = activate(head->act, sum);
        }
        if (head->norm_w)
            layer_norm(head, h, e);
        for (size_t k = 0; k < head->labels; k++) {
            const float *w = head->out_w + k * e;
            double sum = head->out_b[k];
            for (size_t c = 0; c < e; c++)
                sum += (double)w[c] * h[c];
            logits[i * head->labels + k] = (float)sum;
        }
    }
    free(h);
    return true;
}
