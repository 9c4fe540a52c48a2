/* SentencePiece-style tokenizers from tokenizer.json: the normaliser chain (Precompiled,
 * Strip, Replace, Sequence), the pre-tokenisers (Metaspace, WhitespaceSplit, Sequence) and the
 * Unigram model (Viterbi over the pieces' scores, unknown characters fused into one unk, byte
 * fallback), each as the tokenizers crate 0.19.1 runs it (normalizers/{strip,replace}.rs,
 * pre_tokenizers/{metaspace,whitespace}.rs, models/unigram/model.rs). */
#include "tokenizer_unigram.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum norm_kind { NORM_PRECOMPILED, NORM_STRIP, NORM_REPLACE } norm_kind;

typedef struct norm_step {
    norm_kind kind;
    clattn__precompiled pre;     /* NORM_PRECOMPILED */
    bool left, right;            /* NORM_STRIP */
    uint32_t *pattern;           /* NORM_REPLACE: a literal, or one character repeated */
    size_t pattern_length;
    size_t min_repeat;           /* 0: the pattern is a literal; else pattern[0] >= this often */
    uint32_t *content;
    size_t content_length;
} norm_step;

typedef enum prepend_scheme { PREPEND_ALWAYS, PREPEND_FIRST, PREPEND_NEVER } prepend_scheme;

typedef struct pre_step {
    bool metaspace;              /* else WhitespaceSplit */
    uint32_t replacement;
    prepend_scheme prepend;
    bool split;
} pre_step;

struct clattn__unigram {
    norm_step *norms;
    size_t norm_count;
    pre_step *pres;
    size_t pre_count;
    double *scores;              /* [vocab count] */
    double unk_score;            /* the lowest score less 10 */
    int32_t unk;                 /* -1: none */
    bool byte_fallback;
    int32_t bytes[256];          /* the ids of "<0xXX>", or -1 */
};

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
static bool parse_regex(norm_step *st, const char *re)
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

static void free_norm(norm_step *st)
{
    if (st->kind == NORM_PRECOMPILED)
        clattn__precompiled_free(&st->pre);
    free(st->pattern);
    free(st->content);
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
    norm_step *grown = realloc(u->norms, (u->norm_count + 1) * sizeof(*grown));
    if (!grown)
        return FAIL(CLATTN_ERROR_OUT_OF_HOST_MEMORY, "cannot allocate the normalisers");
    u->norms = grown;
    norm_step *st = &u->norms[u->norm_count];
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
    pre_step st = {.metaspace = metaspace};
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
    pre_step *grown = realloc(u->pres, (u->pre_count + 1) * sizeof(*grown));
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

void clattn__unigram_free(clattn__unigram *u)
{
    if (!u)
        return;
    for (size_t i = 0; i < u->norm_count; i++)
        free_norm(&u->norms[i]);
    free(u->norms);
    free(u->pres);
    free(u->scores);
    free(u);
}

/* ---- normalisation ---- */

/* Replace: every non-overlapping match, left to right, becomes the content. The content's
 * characters are insertions aligned as the match's last character (NormalizedString::replace);
 * zin/zout (may be NULL) carry each character's alignment with the start of the text. */
static bool replace(const norm_step *st, const uint32_t *in, const uint32_t *zin, size_t n,
                    clattn__cps *out, clattn__cps *zout)
{
    size_t i = 0;
    while (i < n) {
        size_t match = 0;
        if (st->min_repeat) {
            while (i + match < n && in[i + match] == st->pattern[0])
                match++;
            if (match < st->min_repeat)
                match = 0;
        } else if (st->pattern_length && st->pattern_length <= n - i &&
                   memcmp(in + i, st->pattern, st->pattern_length * sizeof(*in)) == 0) {
            match = st->pattern_length;
        }
        if (match) {
            for (size_t k = 0; k < st->content_length; k++)
                if (!clattn__cps_push(out, st->content[k]) ||
                    (zout && !clattn__cps_push(zout, zin[i + match - 1])))
                    return false;
            i += match;
        } else {
            if (!clattn__cps_push(out, in[i]) || (zout && !clattn__cps_push(zout, zin[i])))
                return false;
            i++;
        }
    }
    return true;
}

bool clattn__unigram_normalize(const clattn__unigram *u, const uint32_t *in, size_t n,
                               clattn__cps *out, clattn__cps *zero)
{
    /* a/za: the current text and its alignment flags; b/zb: the next step's. */
    clattn__cps a = {0}, b = {0}, za = {0}, zb = {0};
    bool ok = true;
    for (size_t i = 0; ok && i < n; i++)
        ok = clattn__cps_push(&a, in[i]) && (!zero || clattn__cps_push(&za, i == 0));
    for (size_t k = 0; ok && k < u->norm_count; k++) {
        const norm_step *st = &u->norms[k];
        b.count = zb.count = 0;
        if (st->kind == NORM_PRECOMPILED) {
            ok = clattn__precompiled_normalize(&st->pre, a.data, a.count, za.data, &b,
                                               zero ? &zb : NULL);
        } else if (st->kind == NORM_STRIP) {
            size_t lo = 0, hi = a.count;
            while (st->left && lo < hi && clattn__is_whitespace(a.data[lo]))
                lo++;
            while (st->right && hi > lo && clattn__is_whitespace(a.data[hi - 1]))
                hi--;
            for (size_t i = lo; ok && i < hi; i++)
                ok = clattn__cps_push(&b, a.data[i]) &&
                     (!zero || clattn__cps_push(&zb, za.data[i]));
        } else {
            ok = replace(st, a.data, za.data, a.count, &b, zero ? &zb : NULL);
        }
        clattn__cps t = a;
        a = b;
        b = t;
        t = za;
        za = zb;
        zb = t;
    }
    for (size_t i = 0; ok && i < a.count; i++)
        ok = clattn__cps_push(out, a.data[i]) && (!zero || clattn__cps_push(zero, za.data[i]));
    clattn__cps_free(&a);
    clattn__cps_free(&b);
    clattn__cps_free(&za);
    clattn__cps_free(&zb);
    return ok;
}

/* ---- pre-tokenisation ---- */

/* The words of a piece: word i is cps.data[start[i] .. start[i] + length[i]); zero.data[j]:
 * character j is aligned with the start of the text. */
typedef struct words {
    clattn__cps cps, zero;
    size_t *start, *length;
    size_t count, capacity;
} words;

static bool words_push(words *w, size_t start, size_t length)
{
    if (length == 0)
        return true; /* the crate drops empty splits */
    if (w->count == w->capacity) {
        size_t cap = w->capacity ? 2 * w->capacity : 16;
        size_t *s = realloc(w->start, cap * sizeof(*s));
        if (s)
            w->start = s;
        size_t *l = realloc(w->length, cap * sizeof(*l));
        if (l)
            w->length = l;
        if (!s || !l)
            return false;
        w->capacity = cap;
    }
    w->start[w->count] = start;
    w->length[w->count] = length;
    w->count++;
    return true;
}

static bool push_char(words *w, uint32_t cp, uint32_t zero)
{
    return clattn__cps_push(&w->cps, cp) && clattn__cps_push(&w->zero, zero);
}

static void words_free(words *w)
{
    clattn__cps_free(&w->cps);
    clattn__cps_free(&w->zero);
    free(w->start);
    free(w->length);
    memset(w, 0, sizeof(*w));
}

/* One pre-tokeniser on every word of *in, into *out. */
static bool pre_apply(const pre_step *st, const words *in, words *out)
{
    for (size_t i = 0; i < in->count; i++) {
        const uint32_t *w = in->cps.data + in->start[i];
        const uint32_t *z = in->zero.data + in->start[i];
        size_t n = in->length[i];
        if (!st->metaspace) { /* WhitespaceSplit: split at White_Space, removed */
            size_t at = 0;
            while (at < n) {
                while (at < n && clattn__is_whitespace(w[at]))
                    at++;
                size_t end = at;
                while (end < n && !clattn__is_whitespace(w[end]))
                    end++;
                size_t base = out->cps.count;
                for (size_t k = at; k < end; k++)
                    if (!push_char(out, w[k], z[k]))
                        return false;
                if (!words_push(out, base, end - at))
                    return false;
                at = end;
            }
            continue;
        }
        /* Metaspace: spaces become the replacement, which is prepended (by the scheme: "first"
         * when the word's first character is aligned with the start of the text) and split
         * before, merged with the next part. A prepended replacement shares the alignment of
         * the character it goes before. */
        size_t base = out->cps.count;
        bool starts = n > 0 && (w[0] == ' ' || w[0] == st->replacement);
        bool prepend = n > 0 && !starts &&
                       (st->prepend == PREPEND_ALWAYS || (st->prepend == PREPEND_FIRST && z[0]));
        if (prepend && !push_char(out, st->replacement, z[0]))
            return false;
        for (size_t k = 0; k < n; k++)
            if (!push_char(out, w[k] == ' ' ? st->replacement : w[k], z[k]))
                return false;
        size_t total = out->cps.count - base;
        if (!st->split) {
            if (!words_push(out, base, total))
                return false;
            continue;
        }
        const uint32_t *v = out->cps.data + base;
        size_t from = 0;
        for (size_t k = 1; k <= total; k++) {
            if (k == total || v[k] == st->replacement) {
                if (!words_push(out, base + from, k - from))
                    return false;
                from = k;
            }
        }
    }
    return true;
}

/* ---- the Unigram model ---- */

typedef struct best_node {
    double score;
    size_t start;   /* SIZE_MAX: not reached */
    int32_t id;
} best_node;

/* Viterbi over the UTF-8 bytes s[0..size-1] of one word, then the crate's tokenize(): the
 * best path's pieces, consecutive unk pieces fused into one, each piece's id (a fused unk that
 * is not a piece: its bytes' <0xXX> ids with byte fallback when all exist, else unk). */
static clattn__unigram_result encode_word(const clattn__unigram *u, const clattn__vocab *vocab,
                                          const char *s, size_t size, best_node *best,
                                          size_t *cuts, clattn__ids *ids)
{
    for (size_t i = 0; i <= size; i++)
        best[i] = (best_node){0.0, SIZE_MAX, 0};
    size_t at = 0;
    while (at < size) {
        uint32_t cp;
        size_t mblen = clattn__utf8_decode((const unsigned char *)s + at, size - at, &cp);
        if (mblen == 0)
            mblen = 1; /* not reached: the text is UTF-8 */
        double here = best[at].score;
        bool single = false;
        size_t most = size - at < vocab->longest ? size - at : vocab->longest;
        uint64_t h = CLATTN__VOCAB_HASH_EMPTY;
        for (size_t len = 1; len <= most; len++) {
            h = clattn__vocab_hash(h, s + at + len - 1, 1);
            /* Pieces are UTF-8: only whole characters can match. */
            if (at + len < size && ((unsigned char)s[at + len] & 0xC0) == 0x80)
                continue;
            int32_t id = clattn__vocab_find_hashed(vocab, s + at, len, h);
            if (id < 0)
                continue;
            best_node *t = &best[at + len];
            double candidate = u->scores[id] + here;
            if (t->start == SIZE_MAX || candidate > t->score)
                *t = (best_node){candidate, at, id};
            if (len == mblen)
                single = true;
        }
        if (!single) {
            best_node *t = &best[at + mblen];
            double candidate = u->unk_score + here;
            if (t->start == SIZE_MAX || candidate > t->score) {
                if (u->unk < 0)
                    return CLATTN__UNIGRAM_NO_UNK;
                *t = (best_node){candidate, at, u->unk};
            }
        }
        at += mblen;
    }
    /* Backtrack: cuts[] gets the piece boundaries, from the end; unk pieces fuse. */
    size_t cut_count = 0, end = size;
    bool in_unk = false;
    while (end > 0) {
        const best_node *node = &best[end];
        bool unk = u->unk >= 0 && node->id == u->unk;
        if (!(unk && in_unk))
            cuts[cut_count++] = end;
        in_unk = unk;
        end = node->start;
    }
    cuts[cut_count] = 0;
    for (size_t c = cut_count; c > 0; c--) {
        size_t a = cuts[c], b = cuts[c - 1];
        int32_t id = clattn__vocab_find(vocab, s + a, b - a);
        if (id < 0 && u->byte_fallback) {
            bool all = true;
            for (size_t k = a; k < b; k++)
                all = all && u->bytes[(unsigned char)s[k]] >= 0;
            if (all) {
                for (size_t k = a; k < b; k++)
                    if (!clattn__ids_push(ids, u->bytes[(unsigned char)s[k]]))
                        return CLATTN__UNIGRAM_OUT_OF_MEMORY;
                continue;
            }
        }
        if (id < 0)
            id = u->unk;
        if (id < 0)
            return CLATTN__UNIGRAM_NO_UNK;
        if (!clattn__ids_push(ids, id))
            return CLATTN__UNIGRAM_OUT_OF_MEMORY;
    }
    return CLATTN__UNIGRAM_OK;
}

clattn__unigram_result clattn__unigram_encode(const clattn__unigram *u, const clattn__vocab *vocab,
                                              const uint32_t *cps, size_t n,
                                              const uint32_t *zero, clattn__ids *ids)
{
    words a = {0}, b = {0};
    clattn__unigram_result r = CLATTN__UNIGRAM_OUT_OF_MEMORY;
    char *bytes = NULL;
    best_node *best = NULL;
    size_t *cuts = NULL;
    for (size_t i = 0; i < n; i++)
        if (!push_char(&a, cps[i], zero ? zero[i] : 0))
            goto done;
    if (!words_push(&a, 0, n))
        goto done;
    for (size_t k = 0; k < u->pre_count; k++) {
        b.cps.count = b.zero.count = 0;
        b.count = 0;
        if (!pre_apply(&u->pres[k], &a, &b))
            goto done;
        words t = a;
        a = b;
        b = t;
    }
    size_t longest = 0;
    for (size_t i = 0; i < a.count; i++)
        if (a.length[i] > longest)
            longest = a.length[i];
    bytes = malloc(4 * longest + 1);
    best = malloc((4 * longest + 1) * sizeof(*best));
    cuts = malloc((4 * longest + 2) * sizeof(*cuts));
    if (!bytes || !best || !cuts)
        goto done;
    r = CLATTN__UNIGRAM_OK;
    for (size_t i = 0; r == CLATTN__UNIGRAM_OK && i < a.count; i++) {
        size_t size = 0;
        for (size_t k = 0; k < a.length[i]; k++)
            size += clattn__utf8_encode(a.cps.data[a.start[i] + k], bytes + size);
        r = encode_word(u, vocab, bytes, size, best, cuts, ids);
    }
done:
    free(bytes);
    free(best);
    free(cuts);
    words_free(&a);
    words_free(&b);
    return r;
}
