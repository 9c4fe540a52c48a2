/* Loading a Hugging Face encoder folder (config.json + model.safetensors) into an encoder: the
 * family of config.json (families/registry.c) reads it into the encoder's configuration, and
 * model.safetensors's tensors are handed to the encoder under the family's names
 * (families/<family>.c; docs/model-families.md). */
#include "clattn/safetensors.h"
#include "base/errors.h"
#include "formats/file_io.h"
#include "hf_model.h"
#include "models/families/family.h"
#include "runtime/shape.h"

#include <jansson.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fn[] = CLATTN_FAMILY_FN;

/* ---- config.json ---- */

clattn_status clattn__hf_read_config(const char *dir, clattn_encoder_config *cfg,
                                     const char **family)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/config.json", dir);
    json_t *root;
    clattn_status status = clattn__read_json(fn, path, &root);
    if (status != CLATTN_OK)
        return status;
    const clattn_family *f = NULL;
    if (!json_is_object(root))
        status = clattn__fail_in(fn, path, CLATTN_ERROR_FORMAT, "not a JSON object");
    else if (!(status = clattn__family_of_config(path, root, &f)) &&
             !(status = f->read_config(path, root, cfg)) && family)
        *family = f->name;
    json_decref(root);
    return status;
}

/* ---- model.safetensors under the encoder's names ---- */

/* The lookup's state: the file, its name prefix, and the packed q/k/v tensors it builds. */
typedef struct hf_lookup {
    clattn_safetensors *st;   /* its layers' floats are freed as the encoder copies them */
    size_t released_below;    /* the file's layers below this one have been freed */
    const clattn_family *family;
    const clattn_family_tensors *names; /* the family's */
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
    if (!t || !t->data)
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
    if (view && (view->ndim == 1 || view->ndim == 2) && view->shape[0] == 2 * l->d_ff &&
        half < 2) { /* rows of a weight [2·d_ff, d], or elements of a bias [2·d_ff] */
        view->data += half * l->d_ff * (view->ndim == 2 ? view->shape[1] : 1);
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
        snprintf(name, sizeof(name), "%s%s%zu.%s%s.%s", l->prefix, l->names->layers, layer,
                 l->names->qkv_part, l->names->qkv[i], what);
        parts[i] = clattn_safetensors_find(l->st, name);
        if (!parts[i] || !parts[i]->data)
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
static int family_names(const clattn_family_tensors *f, const char *ours, char bert[3][256],
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
    if (f->qkv_part && (strcmp(rest, "self_attn.in_proj_weight") == 0 ||
                        strcmp(rest, "self_attn.in_proj_bias") == 0)) {
        *packed_layer = layer;
        *what = strcmp(rest, "self_attn.in_proj_weight") == 0 ? "weight" : "bias";
        for (int i = 0; i < 3; i++)
            snprintf(bert[i], sizeof(bert[i]), "%s%zu.%s%s.%s", f->layers, layer, f->qkv_part,
                     f->qkv[i], *what);
        return 3;
    }
    for (size_t i = 0; i < f->layer_count; i++)
        if (strcmp(rest, f->layer[i].ours) == 0) {
            snprintf(bert[0], sizeof(bert[0]), "%s%zu.%s", f->layers, layer, f->layer[i].theirs);
            return 1;
        }
    return 0;
}

/* The layer number of a tensor name in the file ("...layer.<n>." or "...layers.<n>."). */
static bool file_layer_of(const char *name, size_t *layer)
{
    for (const char *p = strstr(name, "layer"); p; p = strstr(p + 1, "layer")) {
        const char *q = p + 5 + (p[5] == 's');
        size_t n = 0, digits = 0;
        if (*q++ != '.')
            continue;
        for (; *q >= '0' && *q <= '9' && digits < 9; q++, digits++)
            n = 10 * n + (size_t)(*q - '0');
        if (digits > 0 && *q == '.') {
            *layer = n;
            return true;
        }
    }
    return false;
}

/* Frees the floats of the file's layer tensors below `layer` (SIZE_MAX: all of them). The
 * encoder asks for its layers in order, then the rest, and copies each tensor to the device
 * before asking for the next: a large model is never held twice in host memory. */
static void release_layers_below(hf_lookup *l, size_t layer)
{
    if (layer <= l->released_below)
        return;
    bool freed = false;
    for (size_t i = 0; i < l->st->tensor_count; i++) {
        clattn_safetensors_tensor *t = &l->st->tensors[i];
        size_t n;
        if (t->data && file_layer_of(t->name, &n) && n < layer) {
            free(t->data);
            t->data = NULL;
            freed = true;
        }
    }
    l->released_below = layer;
#ifdef __GLIBC__
    if (freed) /* glibc keeps freed chunks below its mmap threshold: hand them back */
        malloc_trim(0);
#endif
}

/* Maps the encoder's PyTorch names onto the family's. */
static const clattn_host_tensor *lookup(void *user, const char *name)
{
    hf_lookup *l = user;
    size_t asked_layer;
    release_layers_below(l, sscanf(name, "layers.%zu.", &asked_layer) == 1 ? asked_layer
                                                                           : SIZE_MAX);
    char bert[3][256];
    size_t layer = 0;
    const char *what = NULL;
    int count = family_names(l->names, name, bert, &layer, &what);
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
    int count = family_names(l->names, ours, bert, &layer, &what);
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
        snprintf(extra, extra_size, " (in this file: %s%s%zu.%s{%s,%s,%s}.%s)", l->prefix,
                 l->names->layers, layer, l->names->qkv_part, l->names->qkv[0], l->names->qkv[1],
                 l->names->qkv[2], what);
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
    snprintf(prefix, sizeof(prefix), "%s%s", l->prefix, l->names->layers);
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
                           "config.json's %s is %zu but the file holds %s (%s<n>.*)",
                           l->family->layer_count_key, num_layers, held, prefix);
}

clattn_status clattn__hf_load_weights(clattn_encoder *enc, const char *dir,
                                      const char *family_name)
{
    const clattn_family *family = clattn__family_named(family_name);
    if (!family)
        return clattn__family_unsupported(dir, family_name);
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
    l.names = &family->tensors;
    l.prefix = "";
    /* The file of a task model holds the names under the family's prefix: told by where the
     * token embedding is. */
    const char *embedding = "embeddings.word_embeddings.weight";
    for (size_t i = 0; i < l.names->fixed_count; i++)
        if (strcmp(l.names->fixed[i].ours, "embedding.weight") == 0)
            embedding = l.names->fixed[i].theirs;
    char prefixed[128];
    snprintf(prefixed, sizeof(prefixed), "%s%s", l.names->prefix, embedding);
    if (!clattn_safetensors_find(st, embedding) && clattn_safetensors_find(st, prefixed))
        l.prefix = l.names->prefix;
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
#ifdef __GLIBC__
    malloc_trim(0); /* the file's floats, freed: back to the system */
#endif
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
    const char *family = NULL;
    clattn_status status = clattn__hf_read_config(dir, &cfg, &family);
    if (status == CLATTN_OK && (status = clattn_encoder_create(ctx, &enc, &cfg)) == CLATTN_OK &&
        (status = clattn__hf_load_weights(enc, dir, family)) != CLATTN_OK)
        clattn_encoder_destroy(&enc);
    if (status != CLATTN_OK) /* the file errors were recorded for the thread: the context too */
        return clattn__fail(ctx, status, "%s", clattn_last_error(NULL));
    *out = enc;
    return status;
}
