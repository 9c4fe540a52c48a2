/*
 * The classification heads of Hugging Face *ForSequenceClassification models (classifier_head.c):
 * which architectures there are, their tensors read from model.safetensors, and the logits
 * computed on the host in double precision from each pair's pooled encoder state.
 *
 * Every supported head is one shape of computation:
 *
 *   x = pool(last hidden state)          the first token, or the mean over real tokens
 *   h = act(W_d · x + b_d)               W_d [hidden, hidden]; b_d may be absent (0)
 *   h = LayerNorm(h)                     only for heads that have one (its bias may be absent)
 *   logits = W_o · h + b_o               W_o [num_labels, hidden]
 *
 * BertForSequenceClassification: pool = [CLS], W_d = bert.pooler.dense, act = tanh,
 * W_o = classifier. RobertaForSequenceClassification and XLMRobertaForSequenceClassification
 * (RobertaClassificationHead): pool = <s>, W_d = classifier.dense, act = tanh,
 * W_o = classifier.out_proj. ModernBertForSequenceClassification: pool = config.json's
 * classifier_pooling ("cls" or "mean"), W_d = head.dense (bias when classifier_bias), act =
 * classifier_activation, LayerNorm head.norm (eps norm_eps, bias when norm_bias),
 * W_o = classifier.
 */
#ifndef CLATTN_MODELS_CLASSIFIER_HEAD_H
#define CLATTN_MODELS_CLASSIFIER_HEAD_H

#include "clattn/pretrained.h"

#include <stdbool.h>

typedef struct json_t json_t;

/* transformers' ACT2FN names that a head may use. */
typedef enum head_activation {
    HEAD_TANH,
    HEAD_GELU,      /* "gelu": the erf form */
    HEAD_GELU_TANH, /* "gelu_new", "gelu_pytorch_tanh": the tanh approximation */
    HEAD_RELU,
    HEAD_SILU,      /* "silu", "swish" */
} head_activation;

typedef struct classifier_head {
    size_t hidden, labels;
    clattn_pooling pooling; /* the state the head reads */
    head_activation act;
    float *dense_w;         /* [hidden, hidden] */
    float *dense_b;         /* [hidden]; NULL: none */
    float *norm_w;          /* [hidden]; NULL: no LayerNorm */
    float *norm_b;          /* [hidden]; NULL: a LayerNorm without bias */
    double norm_eps;
    float *out_w;           /* [labels, hidden] */
    float *out_b;           /* [labels] */
} classifier_head;

/* The model_type an architecture's encoder has ("bert" for BertForSequenceClassification), or
 * NULL when the architecture has no head here. */
const char *clattn__head_model_type(const char *architecture);

/* The supported architectures, for messages: "BertForSequenceClassification, ...". */
const char *clattn__head_architectures(void);

/* Reads the head of `architecture` (clattn__head_model_type is not NULL for it) from
 * dir/model.safetensors (only the head's tensors are read) and its options from config.json's
 * `config`. The tensors' shapes must be the ones of `hidden` and `labels`: a missing tensor is
 * CLATTN_ERROR_FORMAT naming it, a wrong shape CLATTN_ERROR_SHAPE_MISMATCH naming both shapes,
 * an option the head does not implement CLATTN_ERROR_UNSUPPORTED naming it (messages "<fn>:
 * <file>: ..."). On error *head holds nothing. */
clattn_status clattn__head_load(const char *fn, const char *dir, const char *architecture,
                                json_t *config, size_t hidden, size_t labels,
                                classifier_head *head);

/* Frees the head's arrays (accepts a zeroed head). */
void clattn__head_free(classifier_head *head);

/* logits[i·labels .. (i+1)·labels) from pooled[i·hidden .. (i+1)·hidden), for i < count: in
 * double precision, rounded to float once. False when out of host memory (nothing written). */
bool clattn__head_logits(const classifier_head *head, const float *pooled, size_t count,
                         float *logits);

#endif /* CLATTN_MODELS_CLASSIFIER_HEAD_H */
