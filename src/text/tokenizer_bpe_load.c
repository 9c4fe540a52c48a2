/* Reading a byte-level BPE model from tokenizer.json: "model" (type "BPE") and its ByteLevel
 * "pre_tokenizer", as the tokenizers crate (0.19.1) deserialises them
 * (models/bpe/serialization.rs, BpeBuilder::build, pre_tokenizers/byte_level.rs), into a
 * clattn__bpe_spec that tokenizer_bpe_build.c builds the model from. */
#include "tokenizer_bpe_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static const char load_fn[] = "clattn_tokenizer_load";

/* An optional string member: absent or null gives NULL; false on another type. */
static bool get_string(const json_t *obj, const char *key, const char **out)
{
    const json_t *v = json_object_get(obj, key);
    *out = NULL;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_string(v))
        return false;
    *out = json_string_value(v);
    return true;
}

static bool get_bool(const json_t *obj, const char *key, bool fallback, bool *out)
{
    const json_t *v = json_object_get(obj, key);
    *out = fallback;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_boolean(v))
        return false;
    *out = json_is_true(v);
    return true;
}

#define FAIL(status, ...) clattn__fail_in(load_fn, path, status, __VA_ARGS__)

/* "model"."merges" as an array of the tokens' bytes (pointing into the JSON), *out freed by the
 * caller: each "A B" (split at the one space) or ["A", "B"] (newer files). */
static clattn_status read_merges(const json_t *merges, const char *path, clattn__bpe_merge **out)
{
    size_t count = json_array_size(merges);
    *out = malloc((count ? count : 1) * sizeof(**out));
    if (!*out)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate %zu merges", count);
    for (size_t i = 0; i < count; i++) {
        const json_t *m = json_array_get(merges, i);
        clattn__bpe_merge *pair = &(*out)[i];
        memset(pair, 0, sizeof(*pair));
        if (json_is_string(m)) {
            const char *a = json_string_value(m), *space = strchr(a, ' ');
            if (space && !strchr(space + 1, ' ')) {
                pair->left = a;
                pair->left_length = (size_t)(space - a);
                pair->right = space + 1;
                pair->right_length = strlen(space + 1);
            }
        } else if (json_is_array(m) && json_array_size(m) == 2 &&
                   json_is_string(json_array_get(m, 0)) && json_is_string(json_array_get(m, 1))) {
            pair->left = json_string_value(json_array_get(m, 0));
            pair->left_length = strlen(pair->left);
            pair->right = json_string_value(json_array_get(m, 1));
            pair->right_length = strlen(pair->right);
        }
        if (!pair->right)
            return FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\"[%zu] is not \"A B\" (two "
                        "tokens and one space) nor [\"A\", \"B\"]", i);
    }
    return CLATTN_OK;
}

/* The ByteLevel "pre_tokenizer"'s options into spec. */
static clattn_status read_pre_tokenizer(clattn__bpe_spec *spec, const char *path,
                                        const json_t *pre)
{
    const char *type = json_string_value(json_object_get(pre, "type"));
    if (!json_is_object(pre) || !type || strcmp(type, "ByteLevel") != 0)
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "pre_tokenizer type '%s' is not supported with a "
                    "BPE model (only ByteLevel)", json_is_null(pre) || !pre ? "null" :
                    type ? type : "(none)");
    bool trim_offsets, use_regex;
    if (!get_bool(pre, "add_prefix_space", true, &spec->add_prefix_space) ||
        !get_bool(pre, "use_regex", true, &use_regex) ||
        !get_bool(pre, "trim_offsets", true, &trim_offsets))
        return FAIL(CLATTN_ERROR_FORMAT, "\"pre_tokenizer\": add_prefix_space, trim_offsets and "
                    "use_regex must be booleans");
    /* trim_offsets changes offsets only, never ids. */
    spec->pre_tokenizer = use_regex ? "gpt2" : NULL;
    return CLATTN_OK;
}

clattn_status clattn__bpe_load(clattn_tokenizer *tok, const char *path, const json_t *model,
                               const json_t *pre_tokenizer)
{
    clattn__bpe_spec spec = {.unk = -1, .byte_level = true,
                             .merges_name = "\"model\".\"merges\""};

    /* The model's options. */
    const json_t *dropout = json_object_get(model, "dropout");
    if (dropout && !json_is_null(dropout))
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "\"model\".\"dropout\" %g is not supported (only "
                    "null: BPE dropout is random, for training)", json_number_value(dropout));
    const char *unk = NULL;
    bool byte_fallback;
    if (!get_string(model, "unk_token", &unk) ||
        !get_string(model, "continuing_subword_prefix", &spec.continuing_subword_prefix) ||
        !get_string(model, "end_of_word_suffix", &spec.end_of_word_suffix))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\": unk_token, continuing_subword_prefix and "
                    "end_of_word_suffix must be strings or null");
    if (!get_bool(model, "fuse_unk", false, &spec.fuse_unk) ||
        !get_bool(model, "byte_fallback", false, &byte_fallback) ||
        !get_bool(model, "ignore_merges", false, &spec.ignore_merges))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\": fuse_unk, byte_fallback and ignore_merges "
                    "must be booleans");
    if (byte_fallback)
        return FAIL(CLATTN_ERROR_UNSUPPORTED, "\"model\".\"byte_fallback\" true is not "
                    "supported for BPE (a byte-level vocabulary has every byte)");
    if (unk) {
        spec.unk = clattn__vocab_find(&tok->vocab, unk, strlen(unk));
        if (spec.unk < 0)
            return FAIL(CLATTN_ERROR_FORMAT, "the unknown token '%s' (\"model\".\"unk_token\") "
                        "is not in the vocabulary", unk);
    }
    const json_t *merges = json_object_get(model, "merges");
    if (!json_is_array(merges))
        return FAIL(CLATTN_ERROR_FORMAT, "\"model\".\"merges\" is missing or not an array");
    clattn__bpe_merge *pairs = NULL;
    clattn_status s = read_merges(merges, path, &pairs);
    spec.merges = pairs;
    spec.merge_count = json_array_size(merges);
    if (!s)
        s = read_pre_tokenizer(&spec, path, pre_tokenizer);
    if (!s)
        s = clattn__bpe_build(&tok->bpe, &tok->vocab, &spec, load_fn, path);
    free(pairs);
    if (!s)
        tok->special.unk = spec.unk;
    return s;
}
