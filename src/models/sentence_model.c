/* Sentence embeddings: a sentence-transformers folder (encoder, tokenizer, pooling) and batched
 * embedding of texts. */
#include "base/errors.h"
#include "hf_model.h"
#include "model_folder.h"
#include "pooled_batches.h"
#include "text/tokenizer_internal.h"

#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn_load[] = "clattn_sentence_model_load";
static const char fn_embed[] = "clattn_sentence_model_embed";

struct clattn_sentence_model {
    clattn_context *ctx;
    clattn_encoder *encoder;
    clattn_tokenizer *tokenizer;
    clattn_sentence_model_info info;
    int32_t pad_id;
    embed_batch_costs batch_costs; /* max_texts and max_padded_tokens set per call */
    /* config_sentence_transformers.json's prompts, in the file's order */
    char **prompt_names, **prompt_texts;
    size_t prompt_count;
};

/* ---- the folder's small JSON files (model_folder.h: clattn__folder_optional_json) ---- */

/* sentence_bert_config.json's max_seq_length, when present. */
static clattn_status read_max_length(const char *dir, size_t *max_length)
{
    json_t *root;
    char path[4096];
    clattn_status status =
        clattn__folder_optional_json(fn_load, dir, "sentence_bert_config.json", path, &root);
    if (status != CLATTN_OK || !root)
        return status;
    json_t *v = json_object_get(root, "max_seq_length");
    if (v && (!json_is_integer(v) || json_integer_value(v) < 2))
        status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                 "max_seq_length must be an integer of at least 2");
    else if (v)
        *max_length = (size_t)json_integer_value(v);
    json_decref(root);
    return status;
}

/* modules.json: a Normalize module turns normalisation on; the pooling module's folder. */
static clattn_status read_modules(const char *dir, int *normalize, char *pooling_dir, size_t size)
{
    json_t *root;
    char file[4096];
    *normalize = 0;
    snprintf(pooling_dir, size, "1_Pooling");
    clattn_status status =
        clattn__folder_optional_json(fn_load, dir, "modules.json", file, &root);
    if (status != CLATTN_OK || !root)
        return status;
    if (!json_is_array(root)) {
        json_decref(root);
        return clattn__fail_in(fn_load, file, CLATTN_ERROR_FORMAT, "not a JSON array");
    }
    size_t i;
    json_t *module;
    json_array_foreach(root, i, module) {
        const char *type = json_string_value(json_object_get(module, "type"));
        const char *path = json_string_value(json_object_get(module, "path"));
        if (type && strstr(type, "Normalize"))
            *normalize = 1;
        if (type && strstr(type, "Pooling") && path && *path)
            snprintf(pooling_dir, size, "%s", path);
    }
    json_decref(root);
    return CLATTN_OK;
}

/* config_sentence_transformers.json's prompts and default_prompt_name, when present. */
static clattn_status read_prompts(clattn_sentence_model *m, const char *dir)
{
    json_t *root;
    char path[4096];
    clattn_status status = clattn__folder_optional_json(
        fn_load, dir, "config_sentence_transformers.json", path, &root);
    if (status != CLATTN_OK || !root)
        return status;
    json_t *prompts = json_object_get(root, "prompts");
    json_t *fallback = json_object_get(root, "default_prompt_name");
    if (prompts && !json_is_null(prompts) && !json_is_object(prompts))
        status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                 "\"prompts\" must be an object of names and texts");
    size_t count = json_is_object(prompts) ? json_object_size(prompts) : 0;
    if (status == CLATTN_OK && count) {
        m->prompt_names = calloc(count, sizeof(char *));
        m->prompt_texts = calloc(count, sizeof(char *));
        if (!m->prompt_names || !m->prompt_texts)
            status = clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                  "%s: out of host memory", fn_load);
    }
    const char *name;
    json_t *text;
    if (status == CLATTN_OK && count) {
        json_object_foreach(prompts, name, text) {
            if (!json_is_string(text)) {
                status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                         "prompt \"%.64s\" is not a string", name);
                break;
            }
            size_t i = m->prompt_count;
            m->prompt_names[i] = strdup(name);
            m->prompt_texts[i] = strdup(json_string_value(text));
            m->prompt_count++;
            if (!m->prompt_names[i] || !m->prompt_texts[i]) {
                status = clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                      "%s: out of host memory", fn_load);
                break;
            }
        }
    }
    if (status == CLATTN_OK && fallback && !json_is_null(fallback)) {
        const char *wanted = json_string_value(fallback);
        for (size_t i = 0; wanted && i < m->prompt_count; i++)
            if (strcmp(m->prompt_names[i], wanted) == 0)
                m->info.default_prompt_name = m->prompt_names[i];
        if (!m->info.default_prompt_name)
            status = clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                                     "default_prompt_name %s%.64s%s is not one of the prompts",
                                     wanted ? "\"" : "(not a string) ", wanted ? wanted : "",
                                     wanted ? "\"" : "");
    }
    json_decref(root);
    return status;
}

/* The pooling folder's config.json: mean (the default when there is no such file) or CLS. */
static clattn_status read_pooling(const char *dir, const char *pooling_dir,
                                  clattn_pooling *pooling)
{
    char name[512], path[4096];
    snprintf(name, sizeof(name), "%s/config.json", pooling_dir);
    json_t *root;
    *pooling = CLATTN_POOLING_MEAN;
    clattn_status status = clattn__folder_optional_json(fn_load, dir, name, path, &root);
    if (status != CLATTN_OK || !root)
        return status;
    bool cls = json_is_true(json_object_get(root, "pooling_mode_cls_token"));
    bool without_prompt = json_is_false(json_object_get(root, "include_prompt"));
    bool mean = json_is_true(json_object_get(root, "pooling_mode_mean_tokens"));
    bool other = false; /* the modes sentence-transformers has and this library does not */
    static const char *const others[] = {"pooling_mode_max_tokens",
                                         "pooling_mode_mean_sqrt_len_tokens",
                                         "pooling_mode_weightedmean_tokens",
                                         "pooling_mode_lasttoken"};
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        other = other || json_is_true(json_object_get(root, others[i]));
    json_decref(root);
    if (without_prompt)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "\"include_prompt\": false (pooling that leaves the prompt's "
                               "tokens out) is not supported");
    if (other || (cls && mean))
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_UNSUPPORTED,
                               "only one of pooling_mode_mean_tokens and pooling_mode_cls_token "
                               "is supported (max, mean_sqrt_len, weightedmean and lasttoken "
                               "pooling are not)");
    if (!cls && !mean)
        return clattn__fail_in(fn_load, path, CLATTN_ERROR_FORMAT,
                               "no pooling mode is true (pooling_mode_mean_tokens or "
                               "pooling_mode_cls_token is needed)");
    *pooling = cls ? CLATTN_POOLING_CLS : CLATTN_POOLING_MEAN;
    return CLATTN_OK;
}

clattn_status clattn_sentence_model_load(clattn_context *ctx, clattn_sentence_model **out,
                                         const char *dir)
{
    CLATTN_CHECK_ARG(NULL, fn_load, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn_load, out, "model is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn_load, dir, "dir is NULL");
    clattn_sentence_model *m = calloc(1, sizeof(*m));
    if (!m)
        return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn_load);
    m->ctx = ctx;
    clattn_encoder_config cfg;
    char pooling_dir[256];
    size_t max_length = 0;
    clattn_status status;
    if ((status = clattn_encoder_load_hf(ctx, &m->encoder, dir)) ||
        (status = clattn_encoder_get_config(m->encoder, &cfg)) ||
        (status = clattn_tokenizer_load(&m->tokenizer, dir)) ||
        (status = read_max_length(dir, &max_length)) ||
        (status = read_modules(dir, &m->info.normalize, pooling_dir, sizeof(pooling_dir))) ||
        (status = read_pooling(dir, pooling_dir, &m->info.pooling)) ||
        (status = read_prompts(m, dir)) ||
        (status = clattn__folder_check_tokenizer(fn_load, dir, m->tokenizer, &cfg))) {
        clattn_sentence_model_destroy(&m);
        /* the file errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    }
    size_t positions = clattn__folder_position_limit(&cfg);
    if (max_length == 0 || max_length > positions)
        max_length = positions;
    m->info.hidden_size = cfg.d_model;
    m->info.max_length = max_length;
    m->info.num_layers = cfg.num_layers;
    m->info.vocab_size = cfg.vocab_size;
    m->batch_costs = clattn__pooled_batch_costs(ctx, &cfg);
    clattn_tokenizer_special special = clattn_tokenizer_special_ids(m->tokenizer);
    m->pad_id = special.pad >= 0 ? special.pad : 0;
    *out = m;
    return CLATTN_OK;
}

void clattn_sentence_model_destroy(clattn_sentence_model **pm)
{
    if (!pm || !*pm)
        return;
    clattn_sentence_model *m = *pm;
    clattn_encoder_destroy(&m->encoder);
    clattn_tokenizer_destroy(&m->tokenizer);
    for (size_t i = 0; i < m->prompt_count; i++)
        free(m->prompt_names[i]), free(m->prompt_texts[i]);
    free(m->prompt_names), free(m->prompt_texts);
    free(m);
    *pm = NULL;
}

clattn_status clattn_sentence_model_get_info(const clattn_sentence_model *m,
                                             clattn_sentence_model_info *info)
{
    static const char fn[] = "clattn_sentence_model_get_info";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    CLATTN_CHECK_ARG(m->ctx, fn, info, "info is NULL");
    *info = m->info;
    return CLATTN_OK;
}

const char *clattn_sentence_model_prompt(const clattn_sentence_model *m, const char *name)
{
    for (size_t i = 0; m && name && i < m->prompt_count; i++)
        if (strcmp(m->prompt_names[i], name) == 0)
            return m->prompt_texts[i];
    return NULL;
}

const char *clattn_sentence_model_prompt_name(const clattn_sentence_model *m, size_t i)
{
    return m && i < m->prompt_count ? m->prompt_names[i] : NULL;
}

const clattn_tokenizer *clattn_sentence_model_tokenizer(const clattn_sentence_model *m)
{
    return m ? m->tokenizer : NULL;
}

void clattn_embed_params_default(clattn_embed_params *params)
{
    if (!params)
        return;
    memset(params, 0, sizeof(*params));
    params->pooling = -1;
    params->normalize = -1;
}

/* ---- embedding ---- */

/* Every text's ids: tokenized here (clattn_sentence_model_embed) or given by the caller
 * (clattn_sentence_model_embed_ids). Both run through embed_tokenized. */
typedef struct tokenized {
    const int32_t **ids; /* text i: ids[i][0 .. n[i]) */
    size_t *n;
    size_t total;        /* real tokens of all texts */
    int32_t *storage;    /* the ids tokenize_all wrote, one text after another (NULL otherwise) */
} tokenized;

static void tokenized_free(tokenized *t)
{
    free((void *)t->ids), free(t->n), free(t->storage);
    memset(t, 0, sizeof(*t));
}

/* The per-text arrays for `count` texts (at least one element each, for count 0). */
static clattn_status tokenized_alloc(clattn_sentence_model *m, const char *fn, size_t count,
                                     tokenized *t)
{
    memset(t, 0, sizeof(*t));
    size_t slots = count ? count : 1;
    t->ids = calloc(slots, sizeof(*t->ids));
    t->n = calloc(slots, sizeof(size_t));
    if (!t->ids || !t->n)
        return clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                            fn);
    return CLATTN_OK;
}

/* Text i with the prompt before it (sentence-transformers concatenates the strings): texts[i]
 * itself when there is no prompt, else in *scratch (grown as needed). NULL: out of memory. */
static const char *prompted_text(const char *prompt, size_t prompt_len, const char *text,
                                 size_t *len, char **scratch, size_t *capacity)
{
    if (prompt_len == 0)
        return text;
    if (prompt_len + *len > *capacity) {
        size_t grown = prompt_len + *len + 64;
        char *bigger = realloc(*scratch, grown);
        if (!bigger)
            return NULL;
        *scratch = bigger, *capacity = grown;
    }
    memcpy(*scratch, prompt, prompt_len);
    if (*len)
        memcpy(*scratch + prompt_len, text, *len);
    *len += prompt_len;
    return *scratch;
}

/* One text's ids as sentence-transformers tokenizes it, appended to *out: stripped of the
 * whitespace at both ends as Python's str.strip() strips it (sentence-transformers'
 * Transformer.tokenize does; it changes no id for BERT's normaliser, which drops that whitespace
 * itself, but byte-level BPE and Metaspace would make tokens of it). An error's message counts
 * its byte offsets from the start of the text as given. The text is tokenized once. */
static clattn_status encode_text(const clattn_sentence_model *m, const char *text, size_t len,
                                 size_t max_length, clattn_tokens *out)
{
    /* Named as before in messages: "clattn_tokenizer_encode: invalid argument: the text ..." */
    static const char tokenizer_fn[] = "clattn_tokenizer_encode";
    CLATTN_CHECK_ARG(NULL, tokenizer_fn, text || len == 0, "text is NULL but length is %zu", len);
    return clattn__encode_with_template(m->tokenizer, tokenizer_fn, text, len, NULL, 0,
                                        max_length, CLATTN_ENCODE_STRIP, out);
}

clattn_status clattn_sentence_model_encode(const clattn_sentence_model *m, const char *text,
                                          size_t length, size_t max_length, int32_t *ids,
                                          size_t capacity, size_t *count)
{
    static const char fn[] = "clattn_tokenizer_encode"; /* as the messages were */
    if (!m)
        return clattn__fail(NULL, CLATTN_ERROR_INVALID_ARGUMENT,
                            "clattn_sentence_model_encode: invalid argument: model is NULL");
    CLATTN_CHECK_ARG(NULL, fn, count, "count is NULL");
    CLATTN_CHECK_ARG(NULL, fn, ids || capacity == 0, "ids is NULL but capacity is %zu",
                     capacity);
    clattn_tokens encoding = {0};
    clattn_status status = encode_text(m, text, length, max_length, &encoding);
    if (status != CLATTN_OK)
        return status;
    *count = encoding.count;
    if (capacity != 0 && capacity < encoding.count)
        status = clattn__fail_arg(NULL, "clattn_tokenizer_encode",
                                  "ids has room for %zu ids but the encoding has %zu", capacity,
                                  encoding.count);
    else if (capacity != 0 && encoding.count)
        memcpy(ids, encoding.ids, encoding.count * sizeof(*ids));
    clattn_tokens_free(&encoding);
    return status;
}

/* Every text (after the prompt) tokenized once, its ids appended to one growing array. */
static clattn_status tokenize_all(clattn_sentence_model *m, const char *const *texts,
                                  const size_t *lengths, size_t count, size_t max_length,
                                  const char *prompt, tokenized *t)
{
    clattn_status status = tokenized_alloc(m, fn_embed, count, t);
    if (status != CLATTN_OK)
        return status;
    size_t prompt_len = prompt ? strlen(prompt) : 0, capacity = 0;
    char *scratch = NULL;
    clattn_tokens all = {0};
    for (size_t i = 0; status == CLATTN_OK && i < count; i++) {
        size_t len = lengths ? lengths[i] : strlen(texts[i]);
        const char *text = prompted_text(prompt, prompt_len, texts[i], &len, &scratch, &capacity);
        if (!text) {
            status = clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                  "%s: out of host memory", fn_embed);
            break;
        }
        size_t start = all.count;
        status = encode_text(m, text, len, max_length, &all);
        if (status != CLATTN_OK)
            status = clattn__fail(m->ctx, status, "%s: text %zu: %s", fn_embed, i + 1,
                                  clattn_last_error(NULL));
        t->n[i] = all.count - start;
        t->total += t->n[i];
    }
    free(scratch);
    free(all.type_ids); /* a single text's type ids are the template's: not passed on */
    t->storage = all.ids;
    if (status == CLATTN_OK && !t->storage && !(t->storage = malloc(sizeof(int32_t))))
        status = clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory",
                              fn_embed);
    /* The arrays are where they stay now. */
    for (size_t i = 0, at = 0; status == CLATTN_OK && i < count; at += t->n[i], i++)
        t->ids[i] = t->storage + at;
    return status;
}

/* The checks both entries make on their common arguments. */
static clattn_status check_embed_args(clattn_sentence_model *m, const char *fn, size_t count,
                                      const float *out, const clattn_embed_params *params)
{
    clattn_context *ctx = m->ctx;
    CLATTN_CHECK_ARG(ctx, fn, out || count == 0, "out is NULL");
    CLATTN_CHECK_ARG(ctx, fn, clattn__reserved_is_zero(params->reserved, sizeof(params->reserved)),
                     "params->reserved is not zero (initialise params with "
                     "clattn_embed_params_default)");
    CLATTN_CHECK_ARG(ctx, fn, params->pooling >= -1 && params->pooling <= CLATTN_POOLING_CLS,
                     "params->pooling is %d", params->pooling);
    CLATTN_CHECK_ARG(ctx, fn, params->normalize >= -1 && params->normalize <= 1,
                     "params->normalize is %d", params->normalize);
    return CLATTN_OK;
}

/* Runs the texts through the encoder in batches (pooled_batches.h: sorted by length, at most
 * params->batch_size texts and params->max_batch_tokens padded tokens each) and writes row i of
 * out for text i. Takes ownership of t. */
static clattn_status embed_tokenized(clattn_sentence_model *m, const char *fn, tokenized *t,
                                     size_t count, float *out, const clattn_embed_params *params,
                                     size_t *tokens)
{
    pooled_batches_params how = {
        .pad_id = m->pad_id,
        .costs = m->batch_costs,
        .pooling = params->pooling >= 0 ? (clattn_pooling)params->pooling : m->info.pooling,
        .normalize = params->normalize >= 0 ? params->normalize : m->info.normalize,
        .progress = params->progress,
        .progress_user_data = params->progress_user_data,
    };
    how.costs.max_texts = params->batch_size ? params->batch_size : 32;
    how.costs.max_padded_tokens = params->max_batch_tokens ? params->max_batch_tokens : 16384;
    token_rows rows = {t->ids, NULL, t->n, count};
    clattn_status status = clattn__pooled_batches_run(m->ctx, m->encoder, fn, &rows, &how, out);
    if (status == CLATTN_OK && tokens)
        *tokens = t->total;
    tokenized_free(t);
    return status;
}

/* The prompt text that params ask for (see clattn_embed_params): NULL or "" for none. */
static clattn_status resolve_prompt(clattn_sentence_model *m, const clattn_embed_params *params,
                                    const char **prompt)
{
    clattn_context *ctx = m->ctx;
    CLATTN_CHECK_ARG(ctx, fn_embed, !params->prompt || !params->prompt_name,
                     "params->prompt and params->prompt_name are both set (one at most)");
    if (params->prompt) {
        *prompt = params->prompt;
    } else if (params->prompt_name) {
        *prompt = clattn_sentence_model_prompt(m, params->prompt_name);
        if (!*prompt) {
            char names[512] = "";
            for (size_t i = 0; i < m->prompt_count; i++)
                snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s\"%s\"",
                         i ? ", " : "", m->prompt_names[i]);
            return clattn__fail(ctx, CLATTN_ERROR_INVALID_ARGUMENT,
                                "%s: params->prompt_name \"%.64s\" is not one of the model's "
                                "prompts (%s)", fn_embed, params->prompt_name,
                                m->prompt_count ? names : "it has none");
        }
    } else {
        *prompt = clattn_sentence_model_prompt(m, m->info.default_prompt_name);
    }
    return CLATTN_OK;
}

clattn_status clattn_sentence_model_embed(clattn_sentence_model *m, const char *const *texts,
                                          const size_t *lengths, size_t count, float *out,
                                          const clattn_embed_params *params, size_t *tokens)
{
    CLATTN_CHECK_ARG(NULL, fn_embed, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_embed_params defaults;
    if (!params) {
        clattn_embed_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, fn_embed, texts || count == 0, "texts is NULL");
    clattn_status status = check_embed_args(m, fn_embed, count, out, params);
    if (status != CLATTN_OK)
        return status;
    size_t specials = clattn_tokenizer_special_count(m->tokenizer, CLATTN_TEMPLATE_SINGLE);
    CLATTN_CHECK_ARG(ctx, fn_embed, params->max_length == 0 || params->max_length >= specials,
                     "params->max_length is %zu (at least the %zu special tokens of the "
                     "tokenizer's template, [CLS] and [SEP] for BERT, are needed)",
                     params->max_length, specials);
    for (size_t i = 0; i < count; i++)
        CLATTN_CHECK_ARG(ctx, fn_embed, texts[i] || (lengths && lengths[i] == 0),
                         "text %zu (texts[%zu]) is NULL", i + 1, i);
    size_t max_length = m->info.max_length;
    if (params->max_length && params->max_length < max_length)
        max_length = params->max_length;
    const char *prompt = NULL;
    if ((status = resolve_prompt(m, params, &prompt)) != CLATTN_OK)
        return status;
    tokenized t;
    status = tokenize_all(m, texts, lengths, count, max_length, prompt, &t);
    if (status != CLATTN_OK) {
        tokenized_free(&t);
        return status;
    }
    return embed_tokenized(m, fn_embed, &t, count, out, params, tokens);
}

clattn_status clattn_sentence_model_embed_ids(clattn_sentence_model *m, const int32_t *const *ids,
                                              const size_t *lengths, size_t count, float *out,
                                              const clattn_embed_params *params, size_t *tokens)
{
    static const char fn[] = "clattn_sentence_model_embed_ids";
    CLATTN_CHECK_ARG(NULL, fn, m, "model is NULL");
    clattn_context *ctx = m->ctx;
    clattn_embed_params defaults;
    if (!params) {
        clattn_embed_params_default(&defaults);
        params = &defaults;
    }
    CLATTN_CHECK_ARG(ctx, fn, ids || count == 0, "ids is NULL");
    CLATTN_CHECK_ARG(ctx, fn, lengths || count == 0, "lengths is NULL");
    clattn_status status = check_embed_args(m, fn, count, out, params);
    if (status != CLATTN_OK)
        return status;
    CLATTN_CHECK_ARG(ctx, fn, !params->prompt && !params->prompt_name,
                     "params->prompt or prompt_name is set (ids carry their prompt: put its ids "
                     "before each text's)");
    CLATTN_CHECK_ARG(ctx, fn, params->max_length == 0,
                     "params->max_length is %zu (must be 0: the texts are already tokenized and "
                     "truncated)", params->max_length);
    /* Every text is checked before anything runs, so that nothing is written to out on error. */
    for (size_t i = 0; i < count; i++) {
        CLATTN_CHECK_ARG(ctx, fn, ids[i], "text %zu (ids[%zu]) is NULL", i + 1, i);
        CLATTN_CHECK_ARG(ctx, fn, lengths[i] > 0, "text %zu (lengths[%zu]) has no ids", i + 1, i);
        if (lengths[i] > m->info.max_length)
            return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                "%s: text %zu has %zu ids, more than the model's max_length %zu",
                                fn, i + 1, lengths[i], m->info.max_length);
        for (size_t j = 0; j < lengths[i]; j++)
            if (ids[i][j] < 0 || (size_t)ids[i][j] >= m->info.vocab_size)
                return clattn__fail(ctx, CLATTN_ERROR_OUT_OF_RANGE,
                                    "%s: text %zu: id %" PRId32 " (ids[%zu][%zu]) is outside "
                                    "the vocabulary (0 to %zu)", fn, i + 1, ids[i][j], i, j,
                                    m->info.vocab_size - 1);
    }
    tokenized t;
    status = tokenized_alloc(m, fn, count, &t);
    if (status != CLATTN_OK) {
        tokenized_free(&t);
        return status;
    }
    for (size_t i = 0; i < count; i++) {
        t.ids[i] = ids[i];
        t.n[i] = lengths[i];
        t.total += lengths[i];
    }
    return embed_tokenized(m, fn, &t, count, out, params, tokens);
}
