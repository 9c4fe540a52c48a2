/* Reading tokenizer.json's "post_processor" into the templates of tokenizer_template.c:
 * TemplateProcessing, BertProcessing, RobertaProcessing, ByteLevel, a Sequence of them, or null
 * (as tokenizers 0.22's processors/ deserialise them). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

#include <jansson.h>

static bool is_id(const json_t *v)
{
    return json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= INT32_MAX;
}

/* TemplateProcessing's `which` template ("single" or "pair"): an array of {"Sequence": {"id":
 * "A" | "B", "type_id": n}} ("B" only in "pair") and {"SpecialToken": {"id": name, "type_id":
 * n}}, each name's ids in "special_tokens". Anything else makes the template unusable
 * (recorded in *t); only running out of memory fails. */
static clattn_status template_read(clattn__template *t, const json_t *pp, const char *which,
                                   size_t vocab_size, const char *function, const char *where)
{
    const json_t *pieces = json_object_get(pp, which);
    const json_t *specials = json_object_get(pp, "special_tokens");
    bool pair = strcmp(which, "pair") == 0;
    clattn__template_free(t);
    if (!json_is_array(pieces))
        return clattn__template_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                         "post_processor: TemplateProcessing has no \"%s\" "
                                         "template (an array of pieces)", which);
    if (!clattn__template_init(t, json_array_size(pieces)))
        goto out_of_memory;
    for (size_t i = 0; i < json_array_size(pieces); i++) {
        const json_t *piece = json_array_get(pieces, i);
        const json_t *seq = json_object_get(piece, "Sequence");
        const json_t *special = json_object_get(piece, "SpecialToken");
        const json_t *body = seq ? seq : special;
        const json_t *type_id = json_object_get(body, "type_id");
        const char *id = json_string_value(json_object_get(body, "id"));
        if (json_object_size(piece) != 1 || !json_is_object(body) || !id ||
            !json_is_integer(type_id) || json_integer_value(type_id) < 0 ||
            json_integer_value(type_id) > UINT32_MAX ||
            (seq && strcmp(id, "A") != 0 && (!pair || strcmp(id, "B") != 0)))
            return clattn__template_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                             "post_processor: %s[%zu] is neither {\"Sequence\": "
                                             "{\"id\": %s, \"type_id\": n}} nor "
                                             "{\"SpecialToken\": {\"id\": name, \"type_id\": "
                                             "n}}", which, i, pair ? "\"A\" or \"B\"" : "\"A\"");
        if (json_integer_value(type_id) > INT32_MAX)
            return clattn__template_unusable(t, function, where, CLATTN_ERROR_UNSUPPORTED,
                                             "post_processor: %s[%zu]'s type_id %lld is over "
                                             "2^31 - 1", which, i,
                                             (long long)json_integer_value(type_id));
        int32_t type = (int32_t)json_integer_value(type_id);
        if (seq) {
            if (!clattn__template_add(t, strcmp(id, "A") == 0 ? CLATTN__PIECE_A
                                                               : CLATTN__PIECE_B,
                                      type, NULL, 0))
                goto out_of_memory;
            continue;
        }
        const json_t *ids = json_object_get(json_object_get(specials, id), "ids");
        if (!json_is_array(ids))
            return clattn__template_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                             "post_processor: the %s template's special token "
                                             "'%.40s' has no \"ids\" in \"special_tokens\"",
                                             which, id);
        size_t n = json_array_size(ids);
        int32_t *values = malloc((n ? n : 1) * sizeof(*values));
        if (!values)
            goto out_of_memory;
        for (size_t k = 0; k < n; k++) {
            const json_t *v = json_array_get(ids, k);
            if (!is_id(v) || (size_t)json_integer_value(v) >= vocab_size) {
                free(values);
                return clattn__template_unusable(t, function, where, CLATTN_ERROR_FORMAT,
                                                 "post_processor: special_tokens '%.40s': "
                                                 "ids[%zu] is not a token's id", id, k);
            }
            values[k] = (int32_t)json_integer_value(v);
        }
        bool ok = clattn__template_add(t, CLATTN__PIECE_SPECIAL, type, values, n);
        free(values);
        if (!ok)
            goto out_of_memory;
    }
    return CLATTN_OK;
out_of_memory:
    clattn__template_free(t);
    return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                           "cannot allocate the templates");
}

/* BertProcessing's or RobertaProcessing's "cls" and "sep", [token, id] each, ids of tokens. */
static clattn_status cls_sep_read(const clattn_tokenizer *tok, const json_t *pp,
                                  const char *type, int32_t *cls, int32_t *sep,
                                  const char *function, const char *path)
{
    const json_t *c = json_object_get(pp, "cls"), *s = json_object_get(pp, "sep");
    if (!json_is_array(c) || !json_is_array(s) || json_array_size(c) != 2 ||
        json_array_size(s) != 2 || !is_id(json_array_get(c, 1)) || !is_id(json_array_get(s, 1)))
        return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                               "post_processor: %s needs \"cls\" and \"sep\" as [token, id]",
                               type);
    *cls = (int32_t)json_integer_value(json_array_get(c, 1));
    *sep = (int32_t)json_integer_value(json_array_get(s, 1));
    if ((size_t)*cls >= tok->vocab_size || (size_t)*sep >= tok->vocab_size)
        return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                               "post_processor: the [CLS] id %d or [SEP] id %d is not a "
                               "token's id", (int)*cls, (int)*sep);
    return CLATTN_OK;
}

/* Whether a post-processor of this type adds no token (ByteLevel: it only trims offsets). */
static bool adds_nothing(const char *type)
{
    return type && strcmp(type, "ByteLevel") == 0;
}

/* One post-processor that may add tokens: TemplateProcessing, BertProcessing or
 * RobertaProcessing. */
static clattn_status one_read(clattn_tokenizer *tok, const json_t *pp, const char *path,
                              const char *function)
{
    const char *type = json_string_value(json_object_get(pp, "type"));
    bool bert = type && strcmp(type, "BertProcessing") == 0;
    /* RobertaProcessing's trim_offsets and add_prefix_space only change offsets. */
    if (bert || (type && strcmp(type, "RobertaProcessing") == 0)) {
        int32_t cls = -1, sep = -1;
        clattn_status s = cls_sep_read(tok, pp, type, &cls, &sep, function, path);
        if (s)
            return s;
        return bert ? clattn__post_processor_bert(&tok->post, cls, sep, function, path)
                    : clattn__post_processor_roberta(&tok->post, cls, sep, function, path);
    }
    if (!type || strcmp(type, "TemplateProcessing") != 0)
        return clattn__fail_in(function, path, CLATTN_ERROR_UNSUPPORTED,
                               "post_processor type '%s' is not supported (TemplateProcessing, "
                               "BertProcessing, RobertaProcessing, ByteLevel or a Sequence of "
                               "them)", type ? type : "(none)");
    clattn__post_processor_free(&tok->post);
    clattn_status s = template_read(&tok->post.single, pp, "single", tok->vocab_size, function,
                                    path);
    if (!s && tok->post.single.error)
        s = clattn__fail_in(function, path, tok->post.single.error, "%s",
                            tok->post.single.message);
    if (!s)
        s = template_read(&tok->post.pair, pp, "pair", tok->vocab_size, function, path);
    if (!s)
        s = clattn__post_processor_derive_plain(&tok->post, function, path);
    return s;
}

clattn_status clattn__post_processor_load(clattn_tokenizer *tok, const json_t *pp,
                                          const char *path, const char *function)
{
    const char *type = json_string_value(json_object_get(pp, "type"));
    clattn_status s;
    if (!pp || json_is_null(pp) || adds_nothing(type)) {
        s = clattn__post_processor_none(&tok->post, function, path);
    } else if (type && strcmp(type, "Sequence") == 0) {
        /* Each processor in turn: the ByteLevel ones change no id; one other at most. */
        const json_t *list = json_object_get(pp, "processors"), *adding = NULL;
        if (!json_is_array(list))
            return clattn__fail_in(function, path, CLATTN_ERROR_FORMAT,
                                   "post_processor: Sequence has no \"processors\" array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            const json_t *p = json_array_get(list, i);
            if (adds_nothing(json_string_value(json_object_get(p, "type"))))
                continue;
            if (adding)
                return clattn__fail_in(function, path, CLATTN_ERROR_UNSUPPORTED,
                                       "post_processor: a Sequence of more than one processor "
                                       "that adds tokens is not supported");
            adding = p;
        }
        s = adding ? one_read(tok, adding, path, function)
                   : clattn__post_processor_none(&tok->post, function, path);
    } else {
        s = one_read(tok, pp, path, function);
    }
    if (s)
        return s;
    /* [CLS] and [SEP]: the single template's first and last ids, when special. */
    const clattn__template *single = &tok->post.single;
    tok->special.cls = tok->special.sep = -1;
    if (single->piece_count) {
        const clattn__template_piece *first = &single->pieces[0];
        const clattn__template_piece *last = &single->pieces[single->piece_count - 1];
        if (first->kind == CLATTN__PIECE_SPECIAL && first->count)
            tok->special.cls = single->special_ids[first->first];
        if (last->kind == CLATTN__PIECE_SPECIAL && last->count)
            tok->special.sep = single->special_ids[last->first + last->count - 1];
    }
    return CLATTN_OK;
}
