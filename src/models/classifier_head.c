/* Sequence-classification heads: one table row per architecture, their tensors read from
 * model.safetensors, the logits on the host (classifier_head.h). */
#include "classifier_head.h"

#include "formats/safetensors_internal.h"
#include "runtime/shape.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A head's tensors under transformers' names. A name may come with or without the encoder's
 * prefix ("bert."): prefixed[] says which ones carry it in the task model's state_dict. */
typedef struct head_spec {
    const char *architecture;
    const char *model_type; /* the encoder's, config.json's model_type */
    const char *prefix;     /* the encoder's module name in the task model ("bert.") */
    clattn_pooling pooling;
    head_activation act;
    /* dense weight, dense bias, out weight, out bias */
    const char *names[4];
    bool prefixed[4];
    const char *what; /* the dense layer, for messages */
} head_spec;

enum { DENSE_W, DENSE_B, OUT_W, OUT_B, HEAD_TENSORS };

static const head_spec specs[] = {
    /* BertForSequenceClassification: BertModel's pooler (dense + tanh on [CLS]), dropout, then
     * the classifier. */
    {"BertForSequenceClassification", "bert", "bert.", CLATTN_POOLING_CLS, HEAD_TANH,
     {"pooler.dense.weight", "pooler.dense.bias", "classifier.weight", "classifier.bias"},
     {true, true, false, false}, "BertModel's pooler"},
    /* RobertaForSequenceClassification and XLMRobertaForSequenceClassification (a copy of it):
     * no pooler; RobertaClassificationHead: dense + tanh on <s>, dropout, out_proj. */
    {"RobertaForSequenceClassification", "roberta", "roberta.", CLATTN_POOLING_CLS, HEAD_TANH,
     {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
      "classifier.out_proj.bias"},
     {false, false, false, false}, "RobertaClassificationHead"},
    {"XLMRobertaForSequenceClassification", "xlm-roberta", "roberta.", CLATTN_POOLING_CLS,
     HEAD_TANH,
     {"classifier.dense.weight", "classifier.dense.bias", "classifier.out_proj.weight",
      "classifier.out_proj.bias"},
     {false, false, false, false}, "XLMRobertaClassificationHead"},
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
           "XLMRobertaForSequenceClassification";
}

void clattn__head_free(classifier_head *head)
{
    free(head->dense_w), free(head->dense_b), free(head->out_w), free(head->out_b);
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

/* Moves tensor k's floats into *dst after checking its shape. */
static clattn_status take(const char *fn, const char *path, clattn_safetensors *st,
                          const head_spec *s, int k, int ndim, const size_t *want, float **dst)
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
        return clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT,
                               "missing tensor %s (%s's %s)", name, s->architecture,
                               k < OUT_W ? s->what : "classifier");
    }
    bool same = t->ndim == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = t->shape[d] == want[d];
    if (!same) {
        char got[128], expected[128];
        clattn__format_shape(got, sizeof(got), t->ndim, t->shape);
        clattn__format_shape(expected, sizeof(expected), ndim, want);
        return clattn__fail_in(fn, path, CLATTN_ERROR_SHAPE_MISMATCH,
                               "tensor %s has shape %s but must be %s ([%s] for %s)", name, got,
                               expected, ndim == 1 ? "out" : "out, in",
                               k >= OUT_W ? "num_labels from config.json's id2label and "
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
    (void)config; /* no supported head has options yet */
    memset(head, 0, sizeof(*head));
    const head_spec *s = spec_of(architecture);
    if (!s)
        return clattn__fail_in(fn, dir, CLATTN_ERROR_UNSUPPORTED,
                               "architecture \"%.64s\" has no classification head here "
                               "(supported: %s)",
                               architecture ? architecture : "(none)",
                               clattn__head_architectures());
    char path[4096];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    /* Every spelling of every tensor: with and without the prefix. */
    char spelled[2 * HEAD_TENSORS][256];
    const char *names[2 * HEAD_TENSORS];
    size_t count = 0;
    for (int k = 0; k < HEAD_TENSORS; k++) {
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
    clattn_status status = clattn__safetensors_read_named(fn, &st, path, names, count);
    if (status != CLATTN_OK)
        return status;
    head->hidden = hidden;
    head->labels = labels;
    head->pooling = s->pooling;
    head->act = s->act;
    if (!(status = take(fn, path, st, s, DENSE_W, 2, (size_t[]){hidden, hidden},
                        &head->dense_w)) &&
        !(status = take(fn, path, st, s, DENSE_B, 1, (size_t[]){hidden}, &head->dense_b)) &&
        !(status = take(fn, path, st, s, OUT_W, 2, (size_t[]){labels, hidden}, &head->out_w)))
        status = take(fn, path, st, s, OUT_B, 1, (size_t[]){labels}, &head->out_b);
    clattn_safetensors_destroy(&st);
    if (status != CLATTN_OK)
        clattn__head_free(head);
    return status;
}

static double activate(head_activation act, double x)
{
    switch (act) {
    case HEAD_TANH: return tanh(x);
    }
    return x;
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
            double sum = head->dense_b[r];
            for (size_t c = 0; c < e; c++)
                sum += (double)w[c] * (double)x[c];
            h[r] = activate(head->act, sum);
        }
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
