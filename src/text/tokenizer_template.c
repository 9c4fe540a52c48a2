/* The post-processor: which special tokens surround one text ([CLS] and [SEP]) and the template
 * that joins two (tokenizer.json's "post_processor": TemplateProcessing, BertProcessing,
 * RobertaProcessing, as tokenizers 0.19.1's processors/ apply them); and longest-first
 * truncation of a pair (its utils/truncation.rs). */
#include "tokenizer_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

void clattn__truncate_longest_first(size_t n_a, size_t n_b, size_t budget, size_t *keep_a,
                                    size_t *keep_b)
{
    *keep_a = n_a;
    *keep_b = n_b;
    if (n_a <= budget && n_b <= budget - n_a)
        return; /* they fit (SIZE_MAX: always) */
    /* The crate orders the two by length, B counting as the longer when they are equal: the
     * longer one gets the odd id of an odd budget. */
    bool a_longer = n_a > n_b;
    size_t shorter = a_longer ? n_b : n_a, longer = a_longer ? n_a : n_b;
    size_t keep_short, keep_long;
    if (shorter <= budget / 2) {
        keep_short = shorter;          /* the shorter fits in its half: only the longer is cut */
        keep_long = budget - shorter;
    } else {
        keep_short = budget / 2;
        keep_long = budget / 2 + budget % 2;
    }
    if (keep_long > longer)
        keep_long = longer;
    *keep_a = a_longer ? keep_long : keep_short;
    *keep_b = a_longer ? keep_short : keep_long;
}

void clattn__pair_template_free(clattn__pair_template *t)
{
    free(t->pieces);
    free(t->special_ids);
    free(t->message);
    memset(t, 0, sizeof(*t));
}

/* Records why the pair template cannot be used (clattn_tokenizer_encode_pair reports it); the
 * tokenizer still loads. Fails only when out of memory. */
CLATTN_PRINTF(5, 6)
static clattn_status pair_unusable(clattn__pair_template *t, const char *function,
                                   const char *where, clattn_status status, const char *fmt, ...)
{
    clattn__pair_template_free(t);
    char buffer[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof(buffer), fmt, args);
    va_end(args);
    t->message = malloc(strlen(buffer) + 1);
    if (!t->message)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the pair template");
    memcpy(t->message, buffer, strlen(buffer) + 1);
    t->error = status;
    return CLATTN_OK;
}

/* Appends a piece (room for it was allocated); a special piece's ids are appended to
 * special_ids. False when out of memory. */
static bool add_piece(clattn__pair_template *t, clattn__piece_kind kind, int32_t type_id,
                      const int32_t *ids, size_t id_count)
{
    clattn__template_piece *p = &t->pieces[t->piece_count++];
    *p = (clattn__template_piece){.kind = kind, .type_id = type_id,
                                  .first = t->special_count, .count = 0};
    if (kind != CLATTN__PIECE_SPECIAL || id_count == 0)
        return true;
    int32_t *grown = realloc(t->special_ids, (t->special_count + id_count) * sizeof(*grown));
    if (!grown)
        return false;
    t->special_ids = grown;
    memcpy(grown + t->special_count, ids, id_count * sizeof(*ids));
    t->special_count += id_count;
    p->count = id_count;
    return true;
}

/* A template of `pieces` pieces, none yet. */
static bool template_init(clattn__pair_template *t, size_t pieces)
{
    memset(t, 0, sizeof(*t));
    t->pieces = malloc((pieces ? pieces : 1) * sizeof(*t->pieces));
    return t->pieces != NULL;
}

clattn_status clattn__pair_template_bert(clattn__pair_template *t, int32_t cls, int32_t sep,
                                         const char *function, const char *where)
{
    clattn__pair_template_free(t);
    if (!template_init(t, 5) || !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &cls, 1) ||
        !add_piece(t, CLATTN__PIECE_A, 0, NULL, 0) ||
        !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &sep, 1) ||
        !add_piece(t, CLATTN__PIECE_B, 1, NULL, 0) ||
        !add_piece(t, CLATTN__PIECE_SPECIAL, 1, &sep, 1)) {
        clattn__pair_template_free(t);
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the pair template");
    }
    return CLATTN_OK;
}

/* RobertaProcessing's pair: <s> A </s> </s> B </s>, every type id 0 (the crate sets them all to
 * 0: "Roberta is weird"). */
static clattn_status pair_template_roberta(clattn__pair_template *t, int32_t cls, int32_t sep,
                                           const char *function, const char *where)
{
    clattn__pair_template_free(t);
    if (!template_init(t, 6) || !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &cls, 1) ||
        !add_piece(t, CLATTN__PIECE_A, 0, NULL, 0) ||
        !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &sep, 1) ||
        !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &sep, 1) ||
        !add_piece(t, CLATTN__PIECE_B, 0, NULL, 0) ||
        !add_piece(t, CLATTN__PIECE_SPECIAL, 0, &sep, 1)) {
        clattn__pair_template_free(t);
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the pair template");
    }
    return CLATTN_OK;
}

static bool is_id(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX;
}

/* TemplateProcessing's "pair": an array of {"Sequence": {"id": "A" | "B", "type_id": n}} and
 * {"SpecialToken": {"id": name, "type_id": n}}, each name's ids in "special_tokens". Anything
 * else makes the pair template unusable (recorded in *t), never the load fail. */
static clattn_status template_pair(clattn__pair_template *t, const json_t *pp, size_t vocab_size,
                                   const char *function, const char *where)
{
    const json_t *pair = json_object_get(pp, "pair");
    const json_t *specials = json_object_get(pp, "special_tokens");
    clattn__pair_template_free(t);
    if (!json_is_array(pair))
        return pair_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                             "post_processor: TemplateProcessing has no \"pair\" template (an "
                             "array of pieces)");
    if (!template_init(t, json_array_size(pair)))
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the pair template");
    for (size_t i = 0; i < json_array_size(pair); i++) {
        const json_t *piece = json_array_get(pair, i);
        const json_t *seq = json_object_get(piece, "Sequence");
        const json_t *special = json_object_get(piece, "SpecialToken");
        const json_t *body = seq ? seq : special;
        const json_t *type_id = json_object_get(body, "type_id");
        const char *id = json_string_value(json_object_get(body, "id"));
        if (json_object_size(piece) != 1 || !json_is_object(body) || !id ||
            !json_is_integer(type_id) || json_integer_value(type_id) < 0 ||
            json_integer_value(type_id) > UINT32_MAX ||
            (seq && strcmp(id, "A") != 0 && strcmp(id, "B") != 0))
            return pair_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                 "post_processor: pair[%zu] is neither {\"Sequence\": {\"id\": "
                                 "\"A\" or \"B\", \"type_id\": n}} nor {\"SpecialToken\": "
                                 "{\"id\": name, \"type_id\": n}}", i);
        if (json_integer_value(type_id) > INT32_MAX)
            return pair_unusable(t, function, where, CLATTN_ERROR_UNSUPPORTED,
                                 "post_processor: pair[%zu]'s type_id %lld is over 2^31 - 1", i,
                                 (long long)json_integer_value(type_id));
        int32_t type = (int32_t)json_integer_value(type_id);
        if (seq) {
            if (!add_piece(t, strcmp(id, "A") == 0 ? CLATTN__PIECE_A : CLATTN__PIECE_B, type,
                           NULL, 0))
                goto out_of_memory;
            continue;
        }
        const json_t *ids = json_object_get(json_object_get(specials, id), "ids");
        if (!json_is_array(ids))
            return pair_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                 "post_processor: the pair template's special token '%.40s' "
                                 "has no \"ids\" in \"special_tokens\"", id);
        size_t n = json_array_size(ids);
        int32_t *values = malloc((n ? n : 1) * sizeof(*values));
        if (!values)
            goto out_of_memory;
        for (size_t k = 0; k < n; k++) {
            const json_t *v = json_array_get(ids, k);
            if (!is_id(v) || (size_t)json_integer_value(v) >= vocab_size) {
                free(values);
                return pair_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                     "post_processor: special_tokens '%.40s': ids[%zu] is not "
                                     "a token's id", id, k);
            }
            values[k] = (int32_t)json_integer_value(v);
        }
        bool ok = add_piece(t, CLATTN__PIECE_SPECIAL, type, values, n);
        free(values);
        if (!ok)
            goto out_of_memory;
    }
    return CLATTN_OK;
out_of_memory:
    clattn__pair_template_free(t);
    return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "cannot allocate the pair template");
}

clattn_status clattn__post_processor_load(clattn_tokenizer *tok, const json_t *pp,
                                          const char *path, const char *function, bool *found)
{
    *found = false;
    if (!pp || json_is_null(pp))
        return CLATTN_OK;
    const char *type = json_string_value(json_object_get(pp, "type"));
    /* RobertaProcessing (MPNet's <s> A </s>) gives the same ids for one sequence; its
     * trim_offsets and add_prefix_space only change offsets. */
    bool bert = type && strcmp(type, "BertProcessing") == 0;
    if (bert || (type && strcmp(type, "RobertaProcessing") == 0)) {
        const json_t *c = json_object_get(pp, "cls"), *s = json_object_get(pp, "sep");
        if (!json_is_array(c) || !json_is_array(s) || json_array_size(c) != 2 ||
            json_array_size(s) != 2 || !is_id(json_array_get(c, 1)) ||
            !is_id(json_array_get(s, 1)))
            return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                                   "post_processor: %s needs \"cls\" and \"sep\" as [token, id]",
                                   type);
        tok->special.cls = (int32_t)json_integer_value(json_array_get(c, 1));
        tok->special.sep = (int32_t)json_integer_value(json_array_get(s, 1));
        *found = true;
        return bert ? clattn__pair_template_bert(&tok->pair, tok->special.cls, tok->special.sep,
                                                 function, path)
                    : pair_template_roberta(&tok->pair, tok->special.cls, tok->special.sep,
                                            function, path);
    }
    if (!type || strcmp(type, "TemplateProcessing") != 0)
        return clattn__fail_in(function, path, CLATTN_ERROR_UNSUPPORTED,
                               "post_processor type '%s' is not supported (TemplateProcessing, "
                               "BertProcessing or RobertaProcessing)", type ? type : "(none)");
    /* single: [SpecialToken X, Sequence A, SpecialToken Y]; X and Y's ids in special_tokens. */
    const json_t *single = json_object_get(pp, "single");
    const json_t *specials = json_object_get(pp, "special_tokens");
    const char *names[2] = {NULL, NULL};
    if (json_is_array(single) && json_array_size(single) == 3 &&
        json_object_get(json_array_get(single, 1), "Sequence")) {
        for (int i = 0; i < 2; i++) {
            const json_t *st = json_object_get(json_array_get(single, i ? 2 : 0), "SpecialToken");
            names[i] = json_string_value(json_object_get(st, "id"));
        }
    }
    if (!names[0] || !names[1])
        return clattn__fail_in(function, path, CLATTN_ERROR_UNSUPPORTED,
                               "post_processor: only the single template [SpecialToken, "
                               "Sequence, SpecialToken] is supported");
    int32_t out[2];
    for (int i = 0; i < 2; i++) {
        const json_t *ids = json_object_get(json_object_get(specials, names[i]), "ids");
        if (!json_is_array(ids) || json_array_size(ids) != 1 || !is_id(json_array_get(ids, 0)))
            return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                                   "post_processor: special_tokens has no single id for '%s'",
                                   names[i]);
        out[i] = (int32_t)json_integer_value(json_array_get(ids, 0));
    }
    tok->special.cls = out[0];
    tok->special.sep = out[1];
    *found = true;
    return template_pair(&tok->pair, pp, tok->vocab_size, function, path);
}
