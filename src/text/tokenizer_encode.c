/* The public encode calls: one text or a pair (a query and a document for a cross-encoder) with
 * the post-processor's templates, each text encoded alone (tokenizer.c's pipeline), truncated
 * to what the template leaves (a pair longest-first), then joined by the template, as
 * tokenizers 0.22's TokenizerImpl::encode and post_process do it; appended to a growing
 * clattn_tokens, or copied into the caller's array (the older calls). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

static const char encode_fn[] = "clattn_tokenizer_encode";
static const char pair_fn[] = "clattn_tokenizer_encode_pair";
static const char tokens_fn[] = "clattn_tokenizer_encode_tokens";
static const char pair_tokens_fn[] = "clattn_tokenizer_encode_pair_tokens";
static const char post_fn[] = "clattn_tokenizer_post_process";

static const unsigned known_flags = CLATTN_ENCODE_NO_SPECIAL_TOKENS | CLATTN_ENCODE_STRIP;

bool clattn__tokens_reserve(clattn_tokens *out, size_t n)
{
    if (n <= out->capacity && out->count <= out->capacity - n)
        return true;
    if (n > SIZE_MAX / sizeof(int32_t) / 2 - out->count)
        return false;
    size_t capacity = out->count + n;
    if (capacity < 2 * out->capacity)
        capacity = 2 * out->capacity;
    if (capacity < 16)
        capacity = 16;
    int32_t *ids = realloc(out->ids, capacity * sizeof(int32_t));
    if (!ids)
        return false;
    out->ids = ids;
    int32_t *types = realloc(out->type_ids, capacity * sizeof(int32_t));
    if (!types)
        return false; /* ids grew, capacity did not: still consistent */
    out->type_ids = types;
    out->capacity = capacity;
    return true;
}

void clattn_tokens_free(clattn_tokens *tokens)
{
    if (!tokens)
        return;
    free(tokens->ids);
    free(tokens->type_ids);
    memset(tokens, 0, sizeof(*tokens));
}

/* The template for one text or a pair, with or without its special tokens. */
static const clattn__template *template_of(const clattn_tokenizer *tok, bool pair,
                                           unsigned flags)
{
    bool plain = flags & CLATTN_ENCODE_NO_SPECIAL_TOKENS;
    const clattn__post_processor *pp = &tok->post;
    return pair ? (plain ? &pp->pair_plain : &pp->pair)
                : (plain ? &pp->single_plain : &pp->single);
}

/* Appends template t filled with a[0..keep_a) and b[0..keep_b) to *out. */
static clattn_status apply_template(const clattn__template *t, const char *function,
                                    const int32_t *a, size_t keep_a, const int32_t *b,
                                    size_t keep_b, clattn_tokens *out)
{
    size_t total = 0;
    bool too_many = false;
    for (size_t p = 0; p < t->piece_count; p++) {
        const clattn__template_piece *piece = &t->pieces[p];
        size_t n = piece->kind == CLATTN__PIECE_A ? keep_a
                 : piece->kind == CLATTN__PIECE_B ? keep_b : piece->count;
        too_many = too_many || n > SIZE_MAX - total;
        total += n;
    }
    if (too_many)
        return clattn__fail(NULL, CLATTN_ERROR_TOO_LARGE, "%s: the encoding has more than "
                            "SIZE_MAX ids", function);
    if (!clattn__tokens_reserve(out, total))
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: cannot allocate room for %zu more ids", function, total);
    size_t at = out->count;
    for (size_t p = 0; p < t->piece_count; p++) {
        const clattn__template_piece *piece = &t->pieces[p];
        const int32_t *from = piece->kind == CLATTN__PIECE_A ? a
                            : piece->kind == CLATTN__PIECE_B ? b
                                                             : t->special_ids + piece->first;
        size_t n = piece->kind == CLATTN__PIECE_A ? keep_a
                 : piece->kind == CLATTN__PIECE_B ? keep_b : piece->count;
        if (n)
            memcpy(out->ids + at, from, n * sizeof(*from));
        for (size_t k = 0; k < n; k++)
            out->type_ids[at + k] = piece->type_id;
        at += n;
    }
    out->count = at;
    return CLATTN_OK;
}

/* The template for the call, and the budget of the texts' ids within max_length (0: the
 * tokenizer's default): what is left after its special tokens. */
static clattn_status template_budget(const clattn_tokenizer *tok, const char *function,
                                     bool pair, unsigned flags, size_t *max_length,
                                     const clattn__template **t, size_t *budget)
{
    *t = template_of(tok, pair, flags);
    if ((*t)->error)
        return clattn__fail(NULL, (*t)->error, "%s: the tokenizer's %s template cannot be used: "
                            "%s", function, pair ? "pair" : "single", (*t)->message);
    if (*max_length == 0)
        *max_length = tok->max_length;
    /* Hugging Face subtracts the special tokens from max_length without a check: below their
     * number the subtraction wraps around and nothing is truncated at all. */
    CLATTN_CHECK_ARG(NULL, function, *max_length >= (*t)->special_count,
                     "max_length is %zu, but the %s template's special tokens need %zu",
                     *max_length, pair ? "pair" : "single", (*t)->special_count);
    *budget = *max_length == SIZE_MAX ? SIZE_MAX : *max_length - (*t)->special_count;
    return CLATTN_OK;
}

clattn_status clattn__encode_with_template(const clattn_tokenizer *tok, const char *function,
                                           const char *text_a, size_t length_a,
                                           const char *text_b, size_t length_b,
                                           size_t max_length, unsigned flags, clattn_tokens *out)
{
    bool pair = text_b != NULL;
    bool strip = flags & CLATTN_ENCODE_STRIP;
    const clattn__template *t;
    size_t budget;
    clattn_status s = template_budget(tok, function, pair, flags, &max_length, &t, &budget);
    if (s)
        return s;
    clattn__ids a = {0}, b = {0};
    size_t keep_a, keep_b = 0;
    if (!pair) {
        /* One text: its first ids; tokenizing stops there. */
        s = clattn__encode_text(tok, function, "the text", text_a, length_a, budget, strip, &a);
        keep_a = a.count;
    } else {
        /* Both texts in full: which one is longer decides where an odd budget's last id goes. */
        s = clattn__encode_text(tok, function, "text_a", text_a, length_a, SIZE_MAX, strip, &a);
        if (!s)
            s = clattn__encode_text(tok, function, "text_b", text_b, length_b, SIZE_MAX, strip,
                                    &b);
        if (!s)
            clattn__truncate_longest_first(a.count, b.count, budget, &keep_a, &keep_b);
    }
    if (!s)
        s = apply_template(t, function, a.data, keep_a, b.data, keep_b, out);
    free(a.data);
    free(b.data);
    return s;
}

clattn_status clattn_tokenizer_encode(const clattn_tokenizer *tok, const char *text,
                                      size_t length, size_t max_length, int32_t *ids,
                                      size_t capacity, size_t *count)
{
    CLATTN_CHECK_ARG(NULL, encode_fn, tok, "tok is NULL");
    CLATTN_CHECK_ARG(NULL, encode_fn, text || length == 0,
                     "text is NULL but length is %zu", length);
    CLATTN_CHECK_ARG(NULL, encode_fn, count, "count is NULL");
    CLATTN_CHECK_ARG(NULL, encode_fn, ids || capacity == 0,
                     "ids is NULL but capacity is %zu",
                     capacity);
    clattn_tokens encoding = {0};
    clattn_status s = clattn__encode_with_template(tok, encode_fn, text, length, NULL, 0,
                                                   max_length, 0, &encoding);
    if (s)
        return s;
    *count = encoding.count;
    if (capacity != 0 && capacity < encoding.count)
        s = clattn__fail_arg(NULL, encode_fn, "ids has room for %zu ids but the encoding has %zu",
                             capacity, encoding.count);
    else if (capacity != 0 && encoding.count)
        memcpy(ids, encoding.ids, encoding.count * sizeof(*ids));
    clattn_tokens_free(&encoding);
    return s;
}

clattn_status clattn_tokenizer_encode_pair(const clattn_tokenizer *tok, const char *text_a,
                                           size_t length_a, const char *text_b, size_t length_b,
                                           size_t max_length, int32_t *ids, int32_t *type_ids,
                                           size_t capacity, size_t *count)
{
    CLATTN_CHECK_ARG(NULL, pair_fn, tok, "tok is NULL");
    CLATTN_CHECK_ARG(NULL, pair_fn, text_a || length_a == 0,
                     "text_a is NULL but length_a is %zu", length_a);
    CLATTN_CHECK_ARG(NULL, pair_fn, text_b || length_b == 0,
                     "text_b is NULL but length_b is %zu", length_b);
    CLATTN_CHECK_ARG(NULL, pair_fn, count, "count is NULL");
    CLATTN_CHECK_ARG(NULL, pair_fn, ids || capacity == 0, "ids is NULL but capacity is %zu",
                     capacity);
    clattn_tokens encoding = {0};
    clattn_status s = clattn__encode_with_template(tok, pair_fn, text_a, length_a,
                                                   text_b ? text_b : "", length_b, max_length,
                                                   0, &encoding);
    if (s)
        return s;
    *count = encoding.count;
    if (capacity != 0 && capacity < encoding.count) {
        s = clattn__fail_arg(NULL, pair_fn, "ids has room for %zu ids but the encoding has %zu",
                             capacity, encoding.count);
    } else if (capacity != 0 && encoding.count) {
        memcpy(ids, encoding.ids, encoding.count * sizeof(*ids));
        if (type_ids)
            memcpy(type_ids, encoding.type_ids, encoding.count * sizeof(*type_ids));
    }
    clattn_tokens_free(&encoding);
    return s;
}

clattn_status clattn_tokenizer_encode_tokens(const clattn_tokenizer *tok, const char *text,
                                             size_t length, size_t max_length, unsigned flags,
                                             clattn_tokens *out)
{
    CLATTN_CHECK_ARG(NULL, tokens_fn, tok, "tok is NULL");
    CLATTN_CHECK_ARG(NULL, tokens_fn, text || length == 0, "text is NULL but length is %zu",
                     length);
    CLATTN_CHECK_ARG(NULL, tokens_fn, out, "out is NULL");
    CLATTN_CHECK_ARG(NULL, tokens_fn, (flags & ~known_flags) == 0, "flags 0x%x are unknown",
                     flags & ~known_flags);
    CLATTN_CHECK_ARG(NULL, tokens_fn, out->count <= out->capacity,
                     "out->count %zu is over out->capacity %zu", out->count, out->capacity);
    CLATTN_CHECK_ARG(NULL, tokens_fn, out->capacity == 0 || (out->ids && out->type_ids),
                     "out->capacity is %zu but out->ids or out->type_ids is NULL",
                     out->capacity);
    return clattn__encode_with_template(tok, tokens_fn, text, length, NULL, 0, max_length, flags,
                                        out);
}

clattn_status clattn_tokenizer_encode_pair_tokens(const clattn_tokenizer *tok,
                                                  const char *text_a, size_t length_a,
                                                  const char *text_b, size_t length_b,
                                                  size_t max_length, unsigned flags,
                                                  clattn_tokens *out)
{
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, tok, "tok is NULL");
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, text_a || length_a == 0,
                     "text_a is NULL but length_a is %zu", length_a);
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, text_b || length_b == 0,
                     "text_b is NULL but length_b is %zu", length_b);
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, out, "out is NULL");
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, (flags & ~known_flags) == 0,
                     "flags 0x%x are unknown", flags & ~known_flags);
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, out->count <= out->capacity,
                     "out->count %zu is over out->capacity %zu", out->count, out->capacity);
    CLATTN_CHECK_ARG(NULL, pair_tokens_fn, out->capacity == 0 || (out->ids && out->type_ids),
                     "out->capacity is %zu but out->ids or out->type_ids is NULL",
                     out->capacity);
    return clattn__encode_with_template(tok, pair_tokens_fn, text_a, length_a,
                                        text_b ? text_b : "", length_b, max_length, flags, out);
}

clattn_status clattn_tokenizer_post_process(const clattn_tokenizer *tok, const int32_t *ids,
                                            size_t count, size_t max_length, unsigned flags,
                                            clattn_tokens *out)
{
    CLATTN_CHECK_ARG(NULL, post_fn, tok, "tok is NULL");
    CLATTN_CHECK_ARG(NULL, post_fn, ids || count == 0, "ids is NULL but count is %zu", count);
    CLATTN_CHECK_ARG(NULL, post_fn, out, "out is NULL");
    const unsigned post_flags = CLATTN_ENCODE_NO_SPECIAL_TOKENS;
    CLATTN_CHECK_ARG(NULL, post_fn, (flags & ~post_flags) == 0, "flags 0x%x are unknown here",
                     flags & ~post_flags);
    CLATTN_CHECK_ARG(NULL, post_fn, out->count <= out->capacity,
                     "out->count %zu is over out->capacity %zu", out->count, out->capacity);
    CLATTN_CHECK_ARG(NULL, post_fn, out->capacity == 0 || (out->ids && out->type_ids),
                     "out->capacity is %zu but out->ids or out->type_ids is NULL",
                     out->capacity);
    for (size_t k = 0; k < count; k++)
        CLATTN_CHECK_ARG(NULL, post_fn, ids[k] >= 0 && (size_t)ids[k] < tok->vocab_size,
                         "ids[%zu] is %d, not a token id (0 .. %zu)", k, (int)ids[k],
                         tok->vocab_size - 1);
    const clattn__template *t;
    size_t budget;
    clattn_status s = template_budget(tok, post_fn, false, flags, &max_length, &t, &budget);
    if (s)
        return s;
    return apply_template(t, post_fn, ids, count < budget ? count : budget, NULL, 0, out);
}

size_t clattn_tokenizer_special_count(const clattn_tokenizer *tok, clattn_template_part part)
{
    if (!tok)
        return 0;
    const clattn__template *t = &tok->post.single;
    switch (part) {
    case CLATTN_TEMPLATE_SINGLE:
        return t->special_count;
    case CLATTN_TEMPLATE_PAIR:
        return tok->post.pair.error ? 0 : tok->post.pair.special_count;
    case CLATTN_TEMPLATE_SINGLE_LEADING: {
        size_t n = 0;
        for (size_t p = 0; p < t->piece_count && t->pieces[p].kind == CLATTN__PIECE_SPECIAL; p++)
            n += t->pieces[p].count;
        return n;
    }
    }
    return 0;
}
