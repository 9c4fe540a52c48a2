/* Cross-encoders (rerankers): a *ForSequenceClassification folder (config.json's labels and
 * default activation, the encoder, the head, the tokenizer) and pairs scored in batches. */
#include "clattn/cross_encoder.h"

#include "base/errors.h"
#include "base/sizes.h"
#include "classifier_head.h"
#include "formats/file_io.h"
#include "model_folder.h"
#include "pooled_batches.h"
#include "text/tokenizer_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_cross_encoder_load";

struct clattn_cross_encoder {
    clattn_context *ctx;
    clattn_encoder *encoder;
    clattn_tokenizer *tokenizer;
    classifier_head head;
    clattn_cross_encoder_info info; /* its strings point at the fields below */
    char **labels;                  /* [num_labels] */
    char *model_type, *architecture;
    int32_t pad_id;
    embed_batch_costs batch_costs; /* max_texts and max_padded_tokens set per call */
};

/* ---- config.json ---- */

/* config.json's architecture (the first of "architectures") and model_type, copied. */
static clattn_status read_architecture(clattn_cross_encoder *m, const char *path, json_t *root)
{
    json_t *list = json_object_get(root, "architectures");
    const char *model_type = json_string_value(json_object_get(root, "model_type"));
    const char *architecture = json_string_value(json_array_get(list, 0));
    if (!architecture)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "no \"architectures\": not a sequence classification model "
                               "(supported: %s)",
                               clattn__head_architectures());
    const char *wanted = clattn__head_model_type(architecture);
    if (!wanted) {
        char names[256] = "";
        size_t i;
        json_t *v;
        json_array_foreach(list, i, v)
            snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s\"%.64s\"",
                     i ? ", " : "", json_is_string(v) ? json_string_value(v) : "?");
        const char *suffix = "ForSequenceClassification";
        size_t n = strlen(architecture), k = strlen(suffix);
        bool classifier = n > k && strcmp(architecture + n - k, suffix) == 0;
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "architectures [%s] is %s (supported: %s)", names,
                               classifier ? "a sequence classification model this library "
                                            "does not implement"
                                          : "not a sequence classification model: no "
                                            "cross-encoder head",
                               clattn__head_architectures());
    }
    if (!model_type || strcmp(model_type, wanted) != 0)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "architecture %s needs model_type \"%s\", not \"%.64s\"",
                               architecture, wanted, model_type ? model_type : "(missing)");
    m->architecture = strdup(architecture);
    m->model_type = strdup(model_type);
    if (!m->architecture || !m->model_type)
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    return CLATTN_OK;
}

/* The labels: id2label's names in id order ("0" .. "n-1" as PretrainedConfig's keys), else
 * num_labels (default 2) named LABEL_<k>, as transformers makes them. */
static clattn_status read_labels(clattn_cross_encoder *m, const char *path, json_t *root)
{
    json_t *id2label = json_object_get(root, "id2label");
    json_t *num = json_object_get(root, "num_labels");
    size_t count = 2;
    if (id2label && !json_is_null(id2label)) {
        if (!json_is_object(id2label) || json_object_size(id2label) == 0)
            return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                   "\"id2label\" must be an object of ids and names");
        count = json_object_size(id2label);
    } else if (num && !json_is_null(num)) {
        if (!json_is_integer(num) || json_integer_value(num) < 1 ||
            json_integer_value(num) > 1 << 20)
            return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                   "\"num_labels\" must be a positive integer");
        count = (size_t)json_integer_value(num);
    }
    if (!(m->labels = calloc(count, sizeof(char *))))
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    m->info.num_labels = count;
    for (size_t k = 0; k < count; k++) {
        char key[32];
        snprintf(key, sizeof(key), "%zu", k);
        json_t *name = json_is_object(id2label) ? json_object_get(id2label, key) : NULL;
        if (json_is_object(id2label) && !json_is_string(name))
            return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                   "\"id2label\" has %zu entries but %s \"%s\" (the ids must be "
                                   "\"0\" to \"%zu\", each naming its label)",
                                   count, name ? "a label that is not a string at" : "no id",
                                   key, count - 1);
        char fallback[32];
        snprintf(fallback, sizeof(fallback), "LABEL_%zu", k);
        if (!(m->labels[k] = strdup(name ? json_string_value(name) : fallback)))
            return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "%s: out of host memory", fn_load);
    }
    return CLATTN_OK;
}

/* sentence-transformers' default activation (clattn/cross_encoder.h: CLATTN_SCORES_DEFAULT). */
static clattn_status read_default_activation(clattn_cross_encoder *m, const char *path,
                                             json_t *root)
{
    const char *key = "sentence_transformers\".\"activation_fn";
    json_t *v = json_object_get(json_object_get(root, "sentence_transformers"), "activation_fn");
    if (!v || json_is_null(v)) {
        key = "sbert_ce_default_activation_function";
        v = json_object_get(root, key);
    }
    m->info.default_activation =
        m->info.num_labels == 1 ? CLATTN_SCORES_SIGMOID : CLATTN_SCORES_RAW;
    if (!v || json_is_null(v))
        return CLATTN_OK;
    const char *name = json_string_value(v);
    if (!name)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "\"%s\" must be a string (a class name)", key);
    if (strncmp(name, "torch.", 6) != 0)
        return CLATTN_OK; /* CrossEncoder ignores it unless trust_remote_code */
    if (strcmp(name, "torch.nn.modules.activation.Sigmoid") == 0 ||
        strcmp(name, "torch.nn.Sigmoid") == 0)
        m->info.default_activation = CLATTN_SCORES_SIGMOID;
    else if (strcmp(name, "torch.nn.modules.linear.Identity") == 0 ||
             strcmp(name, "torch.nn.Identity") == 0)
        m->info.default_activation = CLATTN_SCORES_RAW;
    else
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "\"%s\" \"%.96s\" is not supported (torch.nn.Sigmoid, "
                               "torch.nn.Identity)",
                               key, name);
    return CLATTN_OK;
}

/* tokenizer_config.json's model_max_length when the file gives a whole number (transformers
 * writes 1e30, "unlimited", for tokenizers without one); 0 otherwise. */
static clattn_status read_model_max_length(const char *dir, size_t *max_length)
{
    char path[4096];
    json_t *root;
    *max_length = 0;
    clattn_status status =
        clattn__folder_optional_json(fn_load, dir, "tokenizer_config.json", path, &root);
    if (status != CLATTN_OK || !root)
        return status;
    json_t *v = json_object_get(root, "model_max_length");
    if (json_is_integer(v) && json_integer_value(v) > 0)
        *max_length = (size_t)json_integer_value(v);
    else if (v && !json_is_null(v) && !json_is_number(v))
        status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                 "\"model_max_length\" must be a number");
    json_decref(root);
    return status;
}

static clattn_status read_config(clattn_cross_encoder *m, const char *dir, json_t **root)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    clattn_status status = clattn__read_json(fn_load, path, root);
    if (status == CLATTN_OK && !json_is_object(*root))
        status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT, "not a JSON object");
    if (status == CLATTN_OK && !(status = read_architecture(m, path, *root)) &&
        !(status = read_labels(m, path, *root)))
        status = read_default_activation(m, path, *root);
    return status;
}

/* ---- loading ---- */

clattn_status clattn_cross_encoder_load(clattn_context *ctx, clattn_cross_encoder **out,
                                        const char *dir)
{
    CLATTN_CHECK_ARG(NULL, fn_load, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn_load, out, "model is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn_load, dir, "dir is NULL");
    clattn_cross_encoder *m = calloc(1, sizeof(*m));
    if (!m)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    m->ctx = ctx;
    json_t *config = NULL;
    clattn_encoder_config cfg;
    size_t model_max_length = 0;
    /* config.json first: a folder that is not a cross-encoder is refused before its weights
     * are read. */
    clattn_status status;
    if ((status = read_config(m, dir, &config)) ||
        (status = clattn_encoder_load_hf(ctx, &m->encoder, dir)) ||
        (status = clattn_encoder_get_config(m->encoder, &cfg)) ||
        (status = clattn__head_load(fn_load, dir, m->architecture, config, cfg.d_model,
                                    m->info.num_labels, &m->head)) ||
        (status = clattn_tokenizer_load(&m->tokenizer, dir)) ||
        (status = read_model_max_length(dir, &model_max_length)) ||
        (status = clattn__folder_check_tokenizer(fn_load, dir, m->tokenizer, &cfg))) {
        json_decref(config);
        clattn_cross_encoder_destroy(&m);
        /* the file errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    }
    json_decref(config);
    /* The truncation length: what CrossEncoder truncates to (the tokenizer's model_max_length),
     * within the position table and the tokenizer's own default. */
    size_t max_length = clattn__folder_position_limit(&cfg);
    size_t tokenizer_max = clattn_tokenizer_max_length(m->tokenizer);
    if (tokenizer_max < max_length)
        max_length = tokenizer_max;
    if (model_max_length && model_max_length < max_length)
        max_length = model_max_length;
    m->info.labels = (const char *const *)m->labels;
    m->info.max_length = max_length;
    m->info.hidden_size = cfg.d_model;
    m->info.num_layers = cfg.num_layers;
    m->info.vocab_size = cfg.vocab_size;
    m->info.type_vocab_size = cfg.type_vocab_size;
    m->info.model_type = m->model_type;
    m->info.architecture = m->architecture;
    m->batch_costs = clattn__pooled_batch_costs(ctx, &cfg);
    clattn_tokenizer_special special = clattn_tokenizer_special_ids(m->tokenizer);
    m->pad_id = special.pad >= 0 ? special.pad : 0;
    *out = m;
    return CLATTN_OK;
}

void clattn_cross_encoder_destroy(clattn_cross_encoder **pm)
{
    if (!pm || !*pm)
        return;
    clattn_cross_encoder *m = *pm;
    clattn_encoder_destroy(&m->encoder);
    clattn_tokenizer_destroy(&m->tokenizer);
    clattn__head_free(&m->head);
    for (size_t k = 0; m->labels && k < m->info.num_labels; k++)
        free(m->labels[k]);
    free(m->labels), free(m->model_type), free(m->architecture);
    free(m);
    *pm = NULL;
}

clattn_status clattn_cross_encoder_get_info(const clattn_cross_encoder *m,
                                            clattn_cross_encoder_info *info)
{
    static const char fn[] = "clattn_cross_encoder_get_info";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    CLATTN_CHECK_ARG(m->ctx, fn, info, "info is NULL");
    *info = m->info;
    return CLATTN_OK;
}

const clattn_tokenizer *clattn_cross_encoder_tokenizer(const clattn_cross_encoder *m)
{
    return m ? m->tokenizer : NULL;
}

void clattn_cross_encoder_params_default(clattn_cross_encoder_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->truncate = 1;
    params->activation = CLATTN_SCORES_DEFAULT;
}

/* ---- scores ---- */

static double sigmoid(double z)
{
    return 1.0 / (1.0 + exp(-z));
}

/* out = activation(logits), row by row ([count, labels]; out may be logits). */
static void apply_activation(clattn_score_activation activation, size_t labels,
                             const float *logits, size_t count, float *out)
{
    for (size_t i = 0; i < count; i++) {
        const float *z = logits + i * labels;
        float *s = out + i * labels;
        double max = -INFINITY, sum = 0.0;
        switch (activation) {
        case CLATTN_SCORES_SIGMOID:
            for (size_t k = 0; k < labels; k++)
                s[k] = (float)sigmoid(z[k]);
            break;
        case CLATTN_SCORES_SOFTMAX:
            for (size_t k = 0; k < labels; k++)
                max = z[k] > max ? z[k] : max;
            for (size_t k = 0; k < labels; k++)
                sum += exp((double)z[k] - max);
            for (size_t k = 0; k < labels; k++)
                s[k] = (float)(exp((double)z[k] - max) / sum);
            break;
        default: /* CLATTN_SCORES_RAW */
            if (s != z)
                memcpy(s, z, labels * sizeof(float));
            break;
        }
    }
}

/* The activation the call asks for, DEFAULT resolved. */
static clattn_score_activation resolved(const clattn_cross_encoder *m,
                                        clattn_score_activation activation)
{
    return activation == CLATTN_SCORES_DEFAULT ? m->info.default_activation : activation;
}

clattn_status clattn_cross_encoder_activate(const clattn_cross_encoder *m,
                                            clattn_score_activation activation,
                                            const float *logits, size_t count, float *out)
{
    static const char fn[] = "clattn_cross_encoder_activate";
    /* errors for the calling thread only: a server's threads call this at once */
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    CLATTN_CHECK_ARG(NULL, fn, logits || count == 0, "logits is NULL");
    CLATTN_CHECK_ARG(NULL, fn, out || count == 0, "out is NULL");
    CLATTN_CHECK_ARG(NULL, fn,
                     activation >= CLATTN_SCORES_DEFAULT && activation <= CLATTN_SCORES_SOFTMAX,
                     "activation is %d", (int)activation);
    apply_activation(resolved(m, activation), m->info.num_labels, logits, count, out);
    return CLATTN_OK;
}

/* The checks every scoring call makes on its common arguments: its two arrays of `count` (named
 * in messages by first_name and second_name: NULL only when count is 0), out, and *params, which
 * NULL turns into the defaults (written to *defaults). */
static clattn_status check_call(const clattn_cross_encoder *m, const char *fn, const void *first,
                                const char *first_name, const void *second,
                                const char *second_name, size_t count, const float *out,
                                const clattn_cross_encoder_params **params_in,
                                clattn_cross_encoder_params *defaults)
{
    clattn_context *ctx = m->ctx;
    if (!*params_in) {
        clattn_cross_encoder_params_default(defaults);
        *params_in = defaults;
    }
    const clattn_cross_encoder_params *params = *params_in;
    CLATTN_CHECK_ARG(ctx, fn, first || count == 0, "%s is NULL", first_name);
    CLATTN_CHECK_ARG(ctx, fn, second || count == 0, "%s is NULL", second_name);
    CLATTN_CHECK_ARG(ctx, fn, out || count == 0, "out is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_cross_encoder_params_default)");
    CLATTN_CHECK_ARG(ctx, fn,
                     params->activation >= CLATTN_SCORES_DEFAULT &&
                         params->activation <= CLATTN_SCORES_SOFTMAX,
                     "params->activation is %d", (int)params->activation);
    CLATTN_CHECK_ARG(ctx, fn, params->truncate == 0 || params->truncate == 1,
                     "params->truncate is %d (0 or 1)", params->truncate);
    return CLATTN_OK;
}

/* Runs checked pairs through the encoder and the head, then writes their scores to out. */
static clattn_status score_rows(clattn_cross_encoder *m, const char *fn, const token_rows *rows,
                                float *out, const clattn_cross_encoder_params *params)
{
    size_t count = rows->count, d = m->info.hidden_size, labels = m->info.num_labels;
    size_t pooled_bytes = 0, logits_bytes = 0;
    bool fits = clattn__mul_size(count ? count : 1, d * sizeof(float), &pooled_bytes) &&
                clattn__mul_size(count ? count : 1, labels * sizeof(float), &logits_bytes);
    float *pooled = fits ? malloc(pooled_bytes) : NULL; /* [count, d] */
    float *logits = fits ? malloc(logits_bytes) : NULL; /* [count, labels] */
    pooled_batches_params how = {
        .pad_id = m->pad_id,
        .costs = m->batch_costs,
        .pooling = m->head.pooling,
        .normalize = 0,
        .progress = params->progress,
        .progress_user_data = params->progress_user_data,
    };
    how.costs.max_texts = params->batch_size ? params->batch_size : 32;
    how.costs.max_padded_tokens = params->max_batch_tokens ? params->max_batch_tokens : 16384;
    clattn_status status = CLATTN_OK;
    if (!pooled || !logits)
        status = clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                              fn);
    if (status == CLATTN_OK)
        status = clattn__pooled_batches_run(m->ctx, m->encoder, fn, rows, &how, pooled);
    if (status == CLATTN_OK && !clattn__head_logits(&m->head, pooled, count, logits))
        status = clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                              fn);
    if (status == CLATTN_OK)
        apply_activation(resolved(m, params->activation), labels, logits, count, out);
    free(pooled), free(logits);
    return status;
}

/* Whether the model reads token types: only with more than one (BERT's two). RoBERTa's and
 * XLM-R's one type and ModernBERT's none are what Hugging Face's tokenizers for them give the
 * model: no token_type_ids (model_input_names leaves them out), so type 0 everywhere. */
static bool reads_token_types(const clattn_cross_encoder *m)
{
    return m->info.type_vocab_size > 1;
}

/* Every pair's ids and types against the model (before anything runs, so that nothing is
 * written to out on error); *total receives the total of lengths. */
static clattn_status check_pairs(const clattn_cross_encoder *m, const char *fn,
                                 const int32_t *const *ids, const int32_t *const *type_ids,
                                 const size_t *lengths, size_t count, size_t *total)
{
    clattn_context *ctx = m->ctx;
    size_t types = m->info.type_vocab_size;
    if (!reads_token_types(m))
        type_ids = NULL; /* not read */
    *total = 0;
    for (size_t i = 0; i < count; i++) {
        CLATTN_CHECK_ARG(ctx, fn, ids[i], "pair %zu (ids[%zu]) is NULL", i + 1, i);
        CLATTN_CHECK_ARG(ctx, fn, !type_ids || type_ids[i], "pair %zu (type_ids[%zu]) is NULL",
                         i + 1, i);
        CLATTN_CHECK_ARG(ctx, fn, lengths[i] > 0, "pair %zu (lengths[%zu]) has no ids", i + 1, i);
        if (lengths[i] > m->info.max_length)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: pair %zu has %zu ids, more than the model's max_length %zu",
                                fn, i + 1, lengths[i], m->info.max_length);
        for (size_t j = 0; j < lengths[i]; j++) {
            if (ids[i][j] < 0 || (size_t)ids[i][j] >= m->info.vocab_size)
                return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                    "%s: pair %zu: id %" PRId32 " (ids[%zu][%zu]) is outside "
                                    "the vocabulary (0 to %zu)", fn, i + 1, ids[i][j], i, j,
                                    m->info.vocab_size - 1);
            if (type_ids && (type_ids[i][j] < 0 || (size_t)type_ids[i][j] >= types))
                return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                    "%s: pair %zu: token type %" PRId32 " (type_ids[%zu][%zu]) "
                                    "is outside the model's token types (0 to %zu)",
                                    fn, i + 1, type_ids[i][j], i, j, types - 1);
        }
        *total += lengths[i];
    }
    return CLATTN_OK;
}

/* Checked pairs through the encoder and the head (score_rows). */
static clattn_status score_checked(clattn_cross_encoder *m, const char *fn,
                                   const int32_t *const *ids, const int32_t *const *type_ids,
                                   const size_t *lengths, size_t count, float *out,
                                   const clattn_cross_encoder_params *params, size_t *tokens)
{
    size_t total = 0;
    clattn_status status = check_pairs(m, fn, ids, type_ids, lengths, count, &total);
    if (status != CLATTN_OK)
        return status;
    token_rows rows = {ids, reads_token_types(m) ? type_ids : NULL, lengths, count};
    status = score_rows(m, fn, &rows, out, params);
    if (status == CLATTN_OK && tokens)
        *tokens = total;
    return status;
}

clattn_status clattn_cross_encoder_score_ids(clattn_cross_encoder *m, const int32_t *const *ids,
                                             const int32_t *const *type_ids,
                                             const size_t *lengths, size_t count, float *out,
                                             const clattn_cross_encoder_params *params,
                                             size_t *tokens)
{
    static const char fn[] = "clattn_cross_encoder_score_ids";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_cross_encoder_params defaults;
    clattn_status status =
        check_call(m, fn, ids, "ids", lengths, "lengths", count, out, &params, &defaults);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, fn, params->max_length == 0,
                     "params->max_length is %zu (must be 0: the pairs are already tokenized "
                     "and truncated)", params->max_length);
    return score_checked(m, fn, ids, type_ids, lengths, count, out, params, tokens);
}

/* ---- pairs of texts ---- */

/* Every pair's ids and types, tokenized one after another into one growing array. */
typedef struct tokenized_pairs {
    int32_t *ids, *types; /* [total] */
    size_t total;
    size_t *start, *length; /* [count]: pair i is ids[start[i] .. start[i] + length[i]) */
    const int32_t **id_rows, **type_rows; /* [count]: pointers into ids and types */
} tokenized_pairs;

static void tokenized_pairs_free(tokenized_pairs *t)
{
    free(t->ids), free(t->types), free(t->start), free(t->length);
    free((void *)t->id_rows), free((void *)t->type_rows);
    memset(t, 0, sizeof(*t));
}

/* Pair i's texts as given. */
static void pair_texts(const char *const *queries, const size_t *query_lengths,
                       const char *const *documents, const size_t *document_lengths, size_t i,
                       const char **q, size_t *ql, const char **d, size_t *dl)
{
    *q = queries[i], *d = documents[i];
    *ql = query_lengths ? query_lengths[i] : (*q ? strlen(*q) : 0);
    *dl = document_lengths ? document_lengths[i] : (*d ? strlen(*d) : 0);
}

/* A pair's ids and types as CrossEncoder gives them to its model, appended to *out: each text
 * stripped as Python's str.strip() (sentence-transformers before version 4 strips both texts of
 * a pair), then the tokenizer's pair template; each text tokenized once. An error's message
 * counts its byte offsets from the starts of the texts as given. */
static clattn_status encode_pair(const clattn_tokenizer *tok, const char *q, size_t ql,
                                 const char *d, size_t dl, size_t max_length, clattn_tokens *out)
{
    /* Named as before in messages: "clattn_tokenizer_encode_pair: invalid argument: ..." */
    static const char tokenizer_fn[] = "clattn_tokenizer_encode_pair";
    CLATTN_CHECK_ARG(NULL, tokenizer_fn, q || ql == 0, "text_a is NULL but length_a is %zu", ql);
    CLATTN_CHECK_ARG(NULL, tokenizer_fn, d || dl == 0, "text_b is NULL but length_b is %zu", dl);
    return clattn__encode_with_template(tok, tokenizer_fn, q, ql, d ? d : "", dl, max_length,
                                        CLATTN_ENCODE_STRIP, out);
}

clattn_status clattn_cross_encoder_encode_pair(const clattn_cross_encoder *m, const char *query,
                                               size_t query_length, const char *document,
                                               size_t document_length, size_t max_length,
                                               int32_t *ids, int32_t *type_ids, size_t capacity,
                                               size_t *count)
{
    static const char fn[] = "clattn_cross_encoder_encode_pair";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    if (max_length == 0 || (max_length != SIZE_MAX && max_length > m->info.max_length))
        max_length = m->info.max_length;
    CLATTN_CHECK_ARG(NULL, "clattn_tokenizer_encode_pair", count, "count is NULL");
    CLATTN_CHECK_ARG(NULL, "clattn_tokenizer_encode_pair", ids || capacity == 0,
                     "ids is NULL but capacity is %zu", capacity);
    clattn_tokens encoding = {0};
    clattn_status status = encode_pair(m->tokenizer, query, query_length, document,
                                       document_length, max_length, &encoding);
    if (status != CLATTN_OK)
        return status;
    *count = encoding.count;
    if (capacity != 0 && capacity < encoding.count) {
        status = clattn__fail_arg(NULL, "clattn_tokenizer_encode_pair",
                                  "ids has room for %zu ids but the encoding has %zu", capacity,
                                  encoding.count);
    } else if (capacity != 0 && encoding.count) {
        memcpy(ids, encoding.ids, encoding.count * sizeof(*ids));
        if (type_ids)
            memcpy(type_ids, encoding.type_ids, encoding.count * sizeof(*type_ids));
    }
    clattn_tokens_free(&encoding);
    return status;
}

static clattn_status tokenize_pairs(clattn_cross_encoder *m, const char *fn,
                                    const char *const *queries, const size_t *query_lengths,
                                    const char *const *documents,
                                    const size_t *document_lengths, size_t count,
                                    size_t max_length, int truncate, tokenized_pairs *t)
{
    clattn_context *ctx = m->ctx;
    size_t slots = count ? count : 1;
    t->start = calloc(slots, sizeof(size_t));
    t->length = calloc(slots, sizeof(size_t));
    t->id_rows = calloc(slots, sizeof(*t->id_rows));
    t->type_rows = calloc(slots, sizeof(*t->type_rows));
    clattn_tokens all = {0};
    if (!t->start || !t->length || !t->id_rows || !t->type_rows ||
        !clattn__tokens_reserve(&all, 1))
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    clattn_status status = CLATTN_OK;
    for (size_t i = 0; status == CLATTN_OK && i < count; i++) {
        const char *q, *d;
        size_t ql, dl, start = all.count;
        pair_texts(queries, query_lengths, documents, document_lengths, i, &q, &ql, &d, &dl);
        /* Without truncation the whole pair is tokenized, and refused when it is too long. */
        status = encode_pair(m->tokenizer, q, ql, d, dl, truncate ? max_length : SIZE_MAX, &all);
        size_t n = all.count - start;
        if (status != CLATTN_OK)
            status = clattn__fail(ctx, status, "%s: pair %zu: %s", fn, i + 1,
                                  clattn_last_error(NULL));
        else if (!truncate && n > max_length)
            status = clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                  "%s: pair %zu has %zu tokens, more than max_length %zu (and "
                                  "params->truncate is 0)",
                                  fn, i + 1, n, max_length);
        t->start[i] = start, t->length[i] = n;
    }
    t->ids = all.ids, t->types = all.type_ids, t->total = all.count;
    for (size_t i = 0; status == CLATTN_OK && i < count; i++) /* where the arrays stay now */
        t->id_rows[i] = t->ids + t->start[i], t->type_rows[i] = t->types + t->start[i];
    return status;
}

clattn_status clattn_cross_encoder_score(clattn_cross_encoder *m, const char *const *queries,
                                         const size_t *query_lengths,
                                         const char *const *documents,
                                         const size_t *document_lengths, size_t count, float *out,
                                         const clattn_cross_encoder_params *params,
                                         size_t *tokens)
{
    static const char fn[] = "clattn_cross_encoder_score";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_cross_encoder_params defaults;
    clattn_status status = check_call(m, fn, queries, "queries", documents, "documents", count,
                                      out, &params, &defaults);
    if (status != CLATTN_OK)
        return status;
    for (size_t i = 0; i < count; i++) {
        CLATTN_CHECK_ARG(ctx, fn, queries[i] || (query_lengths && query_lengths[i] == 0),
                         "pair %zu: the query (queries[%zu]) is NULL", i + 1, i);
        CLATTN_CHECK_ARG(ctx, fn, documents[i] || (document_lengths && document_lengths[i] == 0),
                         "pair %zu: the document (documents[%zu]) is NULL", i + 1, i);
    }
    size_t max_length = m->info.max_length;
    if (params->max_length && params->max_length < max_length)
        max_length = params->max_length;
    tokenized_pairs t = {0};
    status = tokenize_pairs(m, fn, queries, query_lengths, documents, document_lengths, count,
                            max_length, params->truncate, &t);
    if (status == CLATTN_OK)
        status = score_checked(m, fn, t.id_rows, t.type_rows, t.length, count, out, params,
                               tokens);
    tokenized_pairs_free(&t);
    return status;
}
