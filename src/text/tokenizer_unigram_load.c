/* Reading a SentencePiece-style tokenizer from tokenizer.json into the structs of
 * tokenizer_unigram.h: "model" (type "Unigram": pieces and scores as serde_json reads them,
 * unk_id, byte_fallback), the "normalizer" chain and the "pre_tokenizer" steps, as the
 * tokenizers crate 0.19.1 deserialises them. */
#include "tokenizer_unigram.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- loading ---- */

#define FAIL(status, ...) clattn__fail_in(function, where, status, __VA_ARGS__)
#define FORMAT(...) FAIL(CLATTN_ERROR_FORMAT, __VA_ARGS__)

static bool utf8_to_cps(const char *s, uint32_t **out, size_t *n)
{
    size_t length = strlen(s);
    *out = malloc((length ? length : 1) * sizeof(**out));
    *n = 0;
    if (!*out)
        return false;
    for (size_t i = 0; i < length;) {
        size_t k = clattn__utf8_decode((const unsigned char *)s + i, length - i, &(*out)[*n]);
        if (k == 0)
            return false;
        i += k;
        (*n)++;
    }
    return true;
}

static bool is_regex_meta(uint32_t c)
{
    return c < 0x80 && strchr("\\.^$|?*+()[]{}", (int)c) && c != 0;
}

/* The regular expressions Replace supports: a literal (metacharacters escaped with "\"), or one
 * (possibly escaped) character followed by "+" or "{m,}" (" {2,}" of SentencePiece's
 * converters). */
static bool parse_regex(clattn__norm_step *st, const char *re)
{
    uint32_t *cps;
    size_t n;
    if (!utf8_to_cps(re, &cps, &n)) {
        free(cps);
        return false;
    }
    uint32_t *lit = malloc((n ? n : 1) * sizeof(*lit));
    size_t k = 0, i = 0;
    bool ok = lit != NULL;
    while (ok && i < n) {
        if (cps[i] == '\\') {
            if (i + 1 >= n || !is_regex_meta(cps[i + 1]))
                ok = false;
            else
                lit[k++] = cps[i + 1];
            i += 2;
        } else if (is_regex_meta(cps[i])) {
            /* Only a repetition of the one character before it, at the end. */
            if (k != 1 || (cps[i] != '+' && cps[i] != '{')) {
                ok = false;
                break;
            }
            size_t m = 1;
            if (cps[i] == '+') {
                i++;
            } else {
                size_t j = i + 1, digits = 0;
                m = 0;
                while (j < n && cps[j] >= '0' && cps[j] <= '9' && digits < 6) {
                    m = m * 10 + (cps[j] - '0');
                    j++;
                    digits++;
                }
                if (digits == 0 || j + 1 >= n || cps[j] != ',' || cps[j + 1] != '}' || m == 0)
                    ok = false;
                i = j + 2;
            }
            if (i != n)
                ok = false;
            st->min_repeat = m;
        } else {
            lit[k++] = cps[i++];
        }
    }
    free(cps);
    if (!ok || k == 0) {
        free(lit);
        return false;
    }
    st->pattern = lit;
    st->pattern_length = k;
    return true;
}

static clattn_status add_norm(clattn__unigram *u, const json_t *n, int depth,
                              const char *function, const char *where)
{
    if (!n || json_is_null(n))
        return CLATTN_OK;
    const char *type = json_string_value(json_object_get(n, "type"));
    if (!json_is_object(n) || !type)
        return FORMAT("\"normalizer\": an entry has no \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(n, "normalizers");
        if (!json_is_array(list))
            return FORMAT("normalizer Sequence: \"normalizers\" is not an array");
        if (depth > 8)
            return FORMAT("normalizer Sequence: nested too deep");
        for (size_t i = 0; i < json_array_size(list); i++) {
            clattn_status s = add_norm(u, json_array_get(list, i), depth + 1, function, where);
            if (s)
                return s;
        }
        return CLATTN_OK;
    }
    bool precompiled = strcmp(type, "Precompiled") == 0, strip = strcmp(type, "Strip") == 0;
    bool replace = strcmp(type, "Replace") == 0;
    if (!precompiled && !strip && !replace)
        return FAIL(CLATTN_ERROR_UNSUPPORTED,
                    "normalizer type '%s' is not supported with a Unigram model (Precompiled, "
                    "Strip, Replace or a Sequence of them)", type);
    clattn__norm_step *grown = realloc(u->norms, (u->norm_count + 1) * sizeof(*grown));
    if (!grown)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the normalisers");
    u->norms = grown;
    clattn__norm_step *st = &u->norms[u->norm_count];
    memset(st, 0, sizeof(*st));
    if (precompiled) {
        const char *map = json_string_value(json_object_get(n, "precompiled_charsmap"));
        if (!map)
            return FORMAT("normalizer Precompiled: \"precompiled_charsmap\" is not a string");
        clattn_status s = clattn__precompiled_init(&st->pre, map, function, where);
        if (s)
            return s;
        st->kind = NORM_PRECOMPILED;
        u->norm_count++;
        return CLATTN_OK;
    }
    if (strip) {
        const json_t *l = json_object_get(n, "strip_left"), *r = json_object_get(n, "strip_right");
        if (!json_is_boolean(l) || !json_is_boolean(r))
            return FORMAT("normalizer Strip: \"strip_left\" and \"strip_right\" must be booleans");
        st->kind = NORM_STRIP;
        st->left = json_is_true(l);
        st->right = json_is_true(r);
        u->norm_count++;
        return CLATTN_OK;
    }
    const json_t *pattern = json_object_get(n, "pattern");
    const char *content = json_string_value(json_object_get(n, "content"));
    const char *literal = json_string_value(json_object_get(pattern, "String"));
    const char *regex = json_string_value(json_object_get(pattern, "Regex"));
    if (!content || !json_is_object(pattern) || (!literal && !regex))
        return FORMAT("normalizer Replace: needs \"pattern\" {\"String\": ...} or "
                      "{\"Regex\": ...} and a string \"content\"");
    st->kind = NORM_REPLACE;
    u->norm_count++;
    if (!utf8_to_cps(content, &st->content, &st->content_length))
        return FORMAT("normalizer Replace: \"content\" is not UTF-8");
    if (literal) {
        if (!utf8_to_cps(literal, &st->pattern, &st->pattern_length))
            return FORMAT("normalizer Replace: the pattern is not UTF-8");
    } else if (!parse_regex(st, regex)) {
        return FAIL(CLATTN_ERROR_UNSUPPORTED,
                    "normalizer Replace: the regular expression '%.60s' is not supported (a "
                    "literal, or one character followed by + or {m,})", regex);
    }
    return CLATTN_OK;
}

static clattn_status add_pre(clattn__unigram *u, const json_t *p, int depth,
                             const char *function, const char *where)
{
    if (!p || json_is_null(p))
        return CLATTN_OK;
    const char *type = json_string_value(json_object_get(p, "type"));
    if (!json_is_object(p) || !type)
        return FORMAT("\"pre_tokenizer\": an entry has no \"type\"");
    if (strcmp(type, "Sequence") == 0) {
        const json_t *list = json_object_get(p, "pretokenizers");
        if (!json_is_array(list))
            return FORMAT("pre_tokenizer Sequence: \"pretokenizers\" is not an array");
        if (depth > 8)
            return FORMAT("pre_tokenizer Sequence: nested too deep");
        for (size_t i = 0; i < json_array_size(list); i++) {
            clattn_status s = add_pre(u, json_array_get(list, i), depth + 1, function, where);
            if (s)
                return s;
        }
        return CLATTN_OK;
    }
    bool metaspace = strcmp(type, "Metaspace") == 0;
    if (!metaspace && strcmp(type, "WhitespaceSplit") != 0)
        return FAIL(CLATTN_ERROR_UNSUPPORTED,
                    "pre_tokenizer type '%s' is not supported with a Unigram model (Metaspace, "
                    "WhitespaceSplit or a Sequence of them)", type);
    clattn__pre_step st = {.metaspace = metaspace};
    if (metaspace) {
        const char *rep = json_string_value(json_object_get(p, "replacement"));
        uint32_t *cps = NULL;
        size_t n = 0;
        bool ok = rep && utf8_to_cps(rep, &cps, &n) && n == 1;
        if (ok)
            st.replacement = cps[0];
        free(cps);
        if (!ok)
            return FORMAT("pre_tokenizer Metaspace: \"replacement\" is not one character");
        const json_t *scheme = json_object_get(p, "prepend_scheme");
        const char *name = json_string_value(scheme);
        if (!scheme || !name)
            st.prepend = PREPEND_ALWAYS; /* the crate's default */
        if (scheme && !name)
            return FORMAT("pre_tokenizer Metaspace: \"prepend_scheme\" is not a string");
        if (name && strcmp(name, "always") == 0)
            st.prepend = PREPEND_ALWAYS;
        else if (name && strcmp(name, "first") == 0)
            st.prepend = PREPEND_FIRST;
        else if (name && strcmp(name, "never") == 0)
            st.prepend = PREPEND_NEVER;
        else if (name)
            return FORMAT("pre_tokenizer Metaspace: prepend_scheme '%.20s' is not always, first "
                          "or never", name);
        const json_t *aps = json_object_get(p, "add_prefix_space");
        if (aps && !json_is_null(aps) && !json_is_boolean(aps))
            return FORMAT("pre_tokenizer Metaspace: \"add_prefix_space\" is not a boolean");
        if (json_is_false(aps)) {
            if (st.prepend != PREPEND_NEVER)
                return FORMAT("pre_tokenizer Metaspace: add_prefix_space false does not match "
                              "the prepend_scheme (as the tokenizers crate refuses it)");
        }
        const json_t *split = json_object_get(p, "split");
        if (split && !json_is_null(split) && !json_is_boolean(split))
            return FORMAT("pre_tokenizer Metaspace: \"split\" is not a boolean");
        st.split = !json_is_false(split);
    }
    clattn__pre_step *grown = realloc(u->pres, (u->pre_count + 1) * sizeof(*grown));
    if (!grown)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the pre-tokenisers");
    u->pres = grown;
    u->pres[u->pre_count++] = st;
    return CLATTN_OK;
}

/* A score as the crate holds it. serde_json 1.0 (without its float_roundtrip feature, as the
 * crate builds it) reads a decimal number as its digits, an integer, converted to f64 and then
 * multiplied or divided by the power of ten: two roundings, so about one score in eight of a
 * SentencePiece vocabulary ends one unit in the last place away from the correctly rounded
 * value that jansson's strtod gives. The digits are those of the shortest decimal that reads
 * back as `d` (what Python's json and serde_json itself write: every tokenizer.json). */
static double serde_f64(double d)
{
    if (d == 0 || !isfinite(d))
        return d;
    char text[40];
    /* Fast path: when 15 digits read back as d and the power of ten is at most 1e22, serde's
     * integer (below 2^53) and power are exact and its one division or product is correctly
     * rounded: d itself. */
    snprintf(text, sizeof(text), "%.14e", d);
    bool fifteen = strtod(text, NULL) == d;
    if (fifteen) {
        int e = atoi(strchr(text, 'e') + 1);
        if (e - 14 >= -22 && e <= 22)
            return d;
    }
    /* The shortest digits: 16 or 17 when 15 do not read back (most f32 scores). */
    for (int digits = fifteen ? 1 : 16; digits <= 17; digits++) {
        snprintf(text, sizeof(text), "%.*e", digits - 1, d);
        if (strtod(text, NULL) == d)
            break;
    }
    const char *c = text + (text[0] == '-');
    uint64_t significand = 0;
    int after_point = 0;
    bool point = false;
    for (; *c && *c != 'e'; c++) {
        if (*c == '.') {
            point = true;
            continue;
        }
        significand = significand * 10 + (uint64_t)(*c - '0');
        after_point += point;
    }
    int exponent = (*c == 'e' ? atoi(c + 1) : 0) - after_point;
    double f = (double)significand;
    while (exponent < -308) { /* serde_json's loop for exponents past its table */
        f /= 1e308;
        exponent += 308;
    }
    char power[16];
    snprintf(power, sizeof(power), "1e%d", exponent < 0 ? -exponent : exponent);
    double p = strtod(power, NULL); /* serde_json's POW10 table: the correctly rounded power */
    f = exponent >= 0 ? f * p : f / p;
    return d < 0 ? -f : f;
}

clattn_status clattn__unigram_load(clattn__unigram **out, clattn__vocab *vocab,
                                   const json_t *root, int32_t *unk, const char *function,
                                   const char *where)
{
    *out = NULL;
    const json_t *model = json_object_get(root, "model");
    const json_t *pieces = json_object_get(model, "vocab");
    if (!json_is_array(pieces))
        return FORMAT("\"model\".\"vocab\" of a Unigram model is not an array of [piece, score]");
    clattn__unigram *u = calloc(1, sizeof(*u));
    if (!u)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the Unigram model");
    clattn_status s = clattn__vocab_init(vocab, json_array_size(pieces), function, where);
    if (!s && !(u->scores = malloc(vocab->count * sizeof(*u->scores))))
        s = FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the scores");
    double lowest = INFINITY;
    for (size_t i = 0; !s && i < vocab->count; i++) {
        const json_t *e = json_array_get(pieces, i);
        const json_t *piece = json_array_get(e, 0), *score = json_array_get(e, 1);
        if (!json_is_array(e) || json_array_size(e) != 2 || !json_is_string(piece) ||
            !json_is_number(score)) {
            s = FORMAT("\"model\".\"vocab\"[%zu] is not [piece, score]", i);
            break;
        }
        s = clattn__vocab_set(vocab, (int32_t)i, json_string_value(piece),
                              json_string_length(piece), function, where);
        u->scores[i] = json_is_integer(score) ? (double)json_integer_value(score)
                                              : serde_f64(json_real_value(score));
        if (u->scores[i] < lowest)
            lowest = u->scores[i];
    }
    u->unk_score = lowest - 10.0;
    u->unk = -1;
    const json_t *unk_id = json_object_get(model, "unk_id");
    if (!s && unk_id && !json_is_null(unk_id)) {
        if (!json_is_integer(unk_id) || json_integer_value(unk_id) < 0 ||
            (size_t)json_integer_value(unk_id) >= vocab->count)
            s = FORMAT("\"model\".\"unk_id\" is not an id of the vocabulary");
        else
            u->unk = (int32_t)json_integer_value(unk_id);
    }
    const json_t *bf = json_object_get(model, "byte_fallback");
    if (!s && bf && !json_is_null(bf) && !json_is_boolean(bf))
        s = FORMAT("\"model\".\"byte_fallback\" is not a boolean");
    u->byte_fallback = json_is_true(bf);
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof(name), "<0x%02X>", b);
        u->bytes[b] = s ? -1 : clattn__vocab_find(vocab, name, 6);
    }
    if (!s)
        s = add_norm(u, json_object_get(root, "normalizer"), 0, function, where);
    if (!s)
        s = add_pre(u, json_object_get(root, "pre_tokenizer"), 0, function, where);
    if (s) {
        clattn__unigram_free(u);
        return s;
    }
    *unk = u->unk;
    *out = u;
    return CLATTN_OK;
}

