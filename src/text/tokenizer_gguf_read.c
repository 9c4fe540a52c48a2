/* A GGUF file's "tokenizer.ggml.*" metadata into a clattn__gguf_vocab_spec, then
 * clattn__gguf_tokenizer_build: the only file of the GGUF tokenizer that knows the file format. */
#include "tokenizer_gguf.h"

#include "base/errors.h"

#include <stdlib.h>
#include <string.h>

/* A special id: -1 when the key is absent. */
static clattn_status get_id(const clattn_gguf *g, const char *function, const char *key,
                            int64_t *id)
{
    if (!clattn__gguf_find(g, key)) {
        *id = -1;
        return CLATTN_OK;
    }
    uint64_t v = 0;
    clattn_status s = clattn__gguf_get_u64(g, function, key, &v);
    if (s)
        return s;
    *id = v > (uint64_t)INT32_MAX ? (int64_t)INT32_MAX + 1 : (int64_t)v; /* out of range later */
    return CLATTN_OK;
}

/* A boolean: -1 when the key is absent. */
static clattn_status get_flag(const clattn_gguf *g, const char *function, const char *key,
                              int *flag)
{
    if (!clattn__gguf_find(g, key)) {
        *flag = -1;
        return CLATTN_OK;
    }
    bool v = false;
    clattn_status s = clattn__gguf_get_bool_or(g, function, key, false, &v);
    *flag = v;
    return s;
}

/* A string as a NUL-terminated copy (NULL when absent and optional). */
static clattn_status get_string(const clattn_gguf *g, const char *function, const char *key,
                                bool optional, char **out)
{
    *out = NULL;
    const clattn_gguf_string *str = NULL;
    clattn_status s = clattn__gguf_get_string(g, function, key, optional, &str);
    if (s || !str)
        return s;
    if (memchr(str->data, 0, str->len))
        return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT, "%s holds a NUL byte",
                               key);
    *out = malloc(str->len + 1);
    if (!*out)
        return clattn__fail_in(function, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate %s", key);
    memcpy(*out, str->data, str->len);
    (*out)[str->len] = 0;
    return CLATTN_OK;
}

/* A string array as pointers and lengths (pointing into the reader's storage). */
static clattn_status get_strings(const clattn_gguf *g, const char *function, const char *key,
                                 bool optional, const char ***texts, size_t **lengths,
                                 size_t *count)
{
    *texts = NULL;
    *lengths = NULL;
    *count = 0;
    const void *data = NULL;
    uint64_t n = 0;
    clattn_status s = clattn__gguf_get_array(g, function, key, CLATTN_GGUF_STRING, optional,
                                             &data, &n);
    if (s || !data || n == 0)
        return s;
    if (n > SIZE_MAX / sizeof(char *))
        return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT, "%s: too many strings",
                               key);
    const clattn_gguf_string *strings = data;
    *texts = malloc((size_t)n * sizeof(**texts));
    *lengths = malloc((size_t)n * sizeof(**lengths));
    if (!*texts || !*lengths) {
        free(*texts);
        free(*lengths);
        *texts = NULL;
        *lengths = NULL;
        return clattn__fail_in(function, g->path, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate %s", key);
    }
    for (uint64_t i = 0; i < n; i++) {
        (*texts)[i] = strings[i].data;
        (*lengths)[i] = (size_t)strings[i].len;
    }
    *count = (size_t)n;
    return CLATTN_OK;
}

/* A per-token array of `type` with at least `need` elements (NULL when absent). */
static clattn_status get_per_token(const clattn_gguf *g, const char *function, const char *key,
                                   clattn_gguf_value_type type, size_t need, const void **data)
{
    uint64_t n = 0;
    clattn_status s = clattn__gguf_get_array(g, function, key, type, true, data, &n);
    if (s)
        return s;
    if (*data && n < need)
        return clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                               "%s has %llu values for %zu tokens", key, (unsigned long long)n,
                               need);
    return CLATTN_OK;
}

clattn_status clattn__gguf_tokenizer_from_file(clattn__gguf_tokenizer **out, const clattn_gguf *g,
                                               const char *function)
{
    *out = NULL;
    clattn__gguf_vocab_spec spec = {0};
    char *model = NULL, *pre = NULL;
    const char **tokens = NULL, **merges = NULL;
    size_t *token_lengths = NULL, *merge_lengths = NULL;
    const void *scores = NULL, *types = NULL;
    clattn_status s = get_string(g, function, "tokenizer.ggml.model", false, &model);
    if (!s)
        s = get_string(g, function, "tokenizer.ggml.pre", true, &pre);
    if (!s)
        s = get_strings(g, function, "tokenizer.ggml.tokens", false, &tokens, &token_lengths,
                        &spec.token_count);
    if (!s && spec.token_count == 0)
        s = clattn__fail_in(function, g->path, CLATTN_ERROR_FORMAT,
                            "tokenizer.ggml.tokens is empty");
    if (!s)
        s = get_per_token(g, function, "tokenizer.ggml.scores", CLATTN_GGUF_FLOAT32,
                          spec.token_count, &scores);
    if (!s)
        s = get_per_token(g, function, "tokenizer.ggml.token_type", CLATTN_GGUF_INT32,
                          spec.token_count, &types);
    if (!s && model && strcmp(model, "gpt2") == 0)
        s = get_strings(g, function, "tokenizer.ggml.merges", false, &merges, &merge_lengths,
                        &spec.merge_count);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.bos_token_id", &spec.bos);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.eos_token_id", &spec.eos);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.unknown_token_id", &spec.unk);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.padding_token_id", &spec.pad);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.eot_token_id", &spec.eot);
    if (!s)
        s = get_id(g, function, "tokenizer.ggml.eom_token_id", &spec.eom);
    if (!s)
        s = get_flag(g, function, "tokenizer.ggml.add_bos_token", &spec.add_bos);
    if (!s)
        s = get_flag(g, function, "tokenizer.ggml.add_eos_token", &spec.add_eos);
    if (!s)
        s = get_flag(g, function, "tokenizer.ggml.add_space_prefix", &spec.add_space_prefix);
    if (!s) {
        /* The arrays are packed little-endian in the reader's storage: copied for alignment. */
        float *score_copy = NULL;
        int32_t *type_copy = NULL;
        if (scores && !(score_copy = malloc(spec.token_count * sizeof(float))))
            s = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        if (!s && types && !(type_copy = malloc(spec.token_count * sizeof(int32_t))))
            s = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        if (s) {
            s = clattn__fail_in(function, g->path, s, "cannot allocate the token arrays");
        } else {
            if (scores)
                memcpy(score_copy, scores, spec.token_count * sizeof(float));
            if (types)
                memcpy(type_copy, types, spec.token_count * sizeof(int32_t));
            spec.model = model;
            spec.pre = pre;
            spec.tokens = tokens;
            spec.token_lengths = token_lengths;
            spec.scores = score_copy;
            spec.token_types = type_copy;
            spec.merges = merges;
            spec.merge_lengths = merge_lengths;
            s = clattn__gguf_tokenizer_build(out, &spec, function, g->path);
        }
        free(score_copy);
        free(type_copy);
    }
    free(model);
    free(pre);
    free(tokens);
    free(token_lengths);
    free(merges);
    free(merge_lengths);
    return s;
}
