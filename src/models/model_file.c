/* Loading an encoder from a safetensors model file (format: clattn/encoder.h). */
#include "clattn/encoder.h"
#include "nn/encoder_internal.h"
#include "runtime/shape.h"
#include "clattn/safetensors.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn[] = "clattn_encoder_load_file";

typedef struct model_file {
    clattn_context *ctx;
    const char *path;
    clattn_safetensors *st;
    clattn_host_tensor *hosts; /* one per st tensor, for the lookup */
    bool *used;
} model_file;

static clattn_status metadata_string(model_file *m, const char *key, const char **out)
{
    *out = clattn_safetensors_metadata(m->st, key);
    if (!*out)
        return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                            "%s: %s: the header's __metadata__ has no \"%s\"", fn, m->path, key);
    return CLATTN_OK;
}

static clattn_status metadata_size(model_file *m, const char *key, bool optional, size_t *out)
{
    const char *text = clattn_safetensors_metadata(m->st, key);
    if (!text && optional) {
        *out = 0;
        return CLATTN_OK;
    }
    clattn_status status = metadata_string(m, key, &text);
    if (status != CLATTN_OK)
        return status;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-' || v == 0 || v > (1ull << 40))
        return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                            "%s: %s: __metadata__ \"%s\" is \"%s\", not a positive integer", fn,
                            m->path, key, text);
    *out = (size_t)v;
    return CLATTN_OK;
}

/* Maps a metadata string to one of `count` choices. */
static clattn_status metadata_choice(model_file *m, const char *key, const char *const *choices,
                                     int count, int *out)
{
    const char *text;
    clattn_status status = metadata_string(m, key, &text);
    if (status != CLATTN_OK)
        return status;
    for (int i = 0; i < count; i++)
        if (strcmp(text, choices[i]) == 0) {
            *out = i;
            return CLATTN_OK;
        }
    char list[128] = "";
    for (int i = 0; i < count; i++) {
        strncat(list, i ? ", " : "", sizeof(list) - strlen(list) - 1);
        strncat(list, choices[i], sizeof(list) - strlen(list) - 1);
    }
    return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                        "%s: %s: __metadata__ \"%s\" is \"%s\", not one of %s", fn, m->path, key,
                        text, list);
}

static const char *const booleans[] = {"false", "true"};

/* An optional "false" | "true" entry; absent is false. */
static clattn_status metadata_flag(model_file *m, const char *key, uint8_t *out)
{
    int v = 0;
    clattn_status status = CLATTN_OK;
    if (clattn_safetensors_metadata(m->st, key))
        status = metadata_choice(m, key, booleans, 2, &v);
    *out = (uint8_t)v;
    return status;
}

static clattn_status read_config(model_file *m, clattn_encoder_config *c)
{
    /* In clattn_activation's order. */
    static const char *const activations[] = {"relu", "gelu", "gelu_tanh", "silu"};
    static const char *const positionals[] = {"none", "sinusoidal"};
    size_t d_model, nhead, layers, ff;
    int activation, norm_first, positional;
    const char *eps_text;
    clattn_status status;
    if ((status = metadata_size(m, "d_model", false, &d_model)) ||
        (status = metadata_size(m, "nhead", false, &nhead)) ||
        (status = metadata_size(m, "num_layers", false, &layers)) ||
        (status = metadata_size(m, "dim_feedforward", false, &ff)) ||
        (status = metadata_choice(m, "activation", activations, 4, &activation)) ||
        (status = metadata_choice(m, "norm_first", booleans, 2, &norm_first)) ||
        (status = metadata_string(m, "layer_norm_eps", &eps_text)) ||
        (status = metadata_choice(m, "positional", positionals, 2, &positional)))
        return status;
    clattn_encoder_config_default(c, d_model, nhead, layers, ff);
    if ((status = metadata_size(m, "head_dim_qk", true, &c->head_dim_qk)) ||
        (status = metadata_size(m, "head_dim_v", true, &c->head_dim_v)) ||
        (status = metadata_flag(m, "ffn_gated", &c->ffn_gated)) ||
        (status = metadata_flag(m, "linear_no_bias", &c->linear_no_bias)) ||
        (status = metadata_flag(m, "norm_no_bias", &c->norm_no_bias)))
        return status;
    char *end;
    double eps = strtod(eps_text, &end);
    if (end == eps_text || *end || !isfinite(eps) || eps <= 0.0 || eps > 1.0)
        return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                            "%s: %s: __metadata__ \"layer_norm_eps\" is \"%s\", not a small "
                            "positive number",
                            fn, m->path, eps_text);
    c->layer_norm_eps = (float)eps;
    c->activation = (clattn_activation)activation;
    c->norm_first = norm_first;
    c->positional = positional ? CLATTN_POSITIONAL_SINUSOIDAL : CLATTN_POSITIONAL_NONE;
    c->final_norm = clattn_safetensors_find(m->st, "norm.weight") != NULL;
    const clattn_safetensors_tensor *emb = clattn_safetensors_find(m->st, "embedding.weight");
    if (emb) {
        if (emb->ndim != 2 || emb->shape[1] != d_model || emb->shape[0] == 0)
            return clattn__fail(m->ctx, CLATTN_ERROR_SHAPE_MISMATCH,
                                "%s: %s: embedding.weight must be [vocab, d_model = %zu]", fn,
                                m->path, d_model);
        c->vocab_size = emb->shape[0];
    }
    if ((c->head_dim_qk == 0 || c->head_dim_v == 0) && d_model % nhead != 0)
        return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                            "%s: %s: inconsistent configuration: d_model %zu is not divisible by "
                            "nhead %zu (and head_dim_qk/head_dim_v are not given)",
                            fn, m->path, d_model, nhead);
    return CLATTN_OK;
}

/* The metadata's num_layers against the layers the tensor names hold ("layers.<n>."): a model
 * with more or fewer layers than it says is another model. */
static clattn_status check_layer_count(model_file *m, size_t num_layers)
{
    size_t n = m->st->tensor_count, found = 0;
    size_t *numbers = malloc((n ? n : 1) * sizeof(*numbers));
    if (!numbers)
        return clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; i < n; i++)
        found += clattn__layer_number(m->st->tensors[i].name, "layers.", &numbers[found]);
    char held[160];
    bool exact = clattn__layers_are(numbers, found, num_layers, held, sizeof(held));
    free(numbers);
    if (exact)
        return CLATTN_OK;
    return clattn__fail(m->ctx, CLATTN_ERROR_FORMAT,
                        "%s: %s: metadata num_layers is %zu but the file holds %s", fn, m->path,
                        num_layers, held);
}

static const clattn_host_tensor *lookup(void *user, const char *name)
{
    model_file *m = user;
    for (size_t i = 0; i < m->st->tensor_count; i++)
        if (strcmp(m->st->tensors[i].name, name) == 0) {
            m->used[i] = true;
            return &m->hosts[i];
        }
    return NULL;
}

static clattn_status prepare_lookup(model_file *m)
{
    size_t n = m->st->tensor_count;
    m->hosts = calloc(n ? n : 1, sizeof(*m->hosts));
    m->used = calloc(n ? n : 1, sizeof(*m->used));
    if (!m->hosts || !m->used)
        return clattn__fail(m->ctx, CLATTN_ERROR_OUT_OF_HOST_MEMORY, "%s: out of host memory", fn);
    for (size_t i = 0; i < n; i++) {
        const clattn_safetensors_tensor *t = &m->st->tensors[i];
        m->hosts[i].data = t->data;
        /* Tensors of more dimensions than any weight has fail the shape check by their ndim. */
        m->hosts[i].ndim = t->ndim;
        for (int d = 0; d < t->ndim && d < CLATTN_MAX_DIMS; d++)
            m->hosts[i].shape[d] = t->shape[d];
    }
    return CLATTN_OK;
}

/* Re-records the latest error with the file's name in front. */
static clattn_status name_the_file(clattn_context *ctx, clattn_status status, const char *path)
{
    const char *message = clattn_last_error(ctx);
    size_t size = strlen(fn) + strlen(path) + strlen(message) + 8;
    char *named = malloc(size);
    if (!named)
        return status;
    snprintf(named, size, "%s: %s: %s", fn, path, message);
    clattn__fail(ctx, status, "%s", named);
    free(named);
    return status;
}

clattn_status clattn_encoder_load_file(clattn_context *ctx, clattn_encoder **out,
                                       const char *path)
{
    CLATTN_CHECK_ARG(NULL, fn, ctx, "ctx is NULL");
    CLATTN_CHECK_ARG(ctx, fn, out, "encoder is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(ctx, fn, path, "path is NULL");
    model_file m = {ctx, path, NULL, NULL, NULL};
    clattn_status status = clattn_safetensors_read(&m.st, path);
    if (status != CLATTN_OK) /* the reader's message names the file and the problem */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));

    clattn_encoder_config cfg;
    clattn_encoder *enc = NULL;
    if (!(status = read_config(&m, &cfg)) && !(status = check_layer_count(&m, cfg.num_layers)) &&
        !(status = prepare_lookup(&m))) {
        /* These messages name the tensor or setting, not the file: add it. */
        if ((status = clattn_encoder_create(ctx, &enc, &cfg)) ||
            (status = clattn_encoder_load_weights(enc, lookup, &m)))
            status = name_the_file(ctx, status, path);
    }
    if (status == CLATTN_OK) {
        for (size_t i = 0; i < m.st->tensor_count; i++)
            if (!m.used[i])
                clattn__log(ctx, CLATTN_LOG_WARNING, "%s: %s: tensor %s is not used by the encoder",
                            fn, path, m.st->tensors[i].name);
        *out = enc;
    } else {
        clattn_encoder_destroy(&enc);
    }
    free(m.hosts);
    free(m.used);
    clattn_safetensors_destroy(&m.st);
    return status;
}
