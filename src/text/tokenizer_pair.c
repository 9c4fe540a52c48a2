/* Encoding a pair of texts (a query and a document for a cross-encoder): each text encoded alone,
 * the two truncated longest-first to what the pair template leaves, then joined by the template,
 * as tokenizers 0.19.1's TokenizerImpl::encode and post_process do it. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

static const char pair_fn[] = "clattn_tokenizer_encode_pair";

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
    const clattn__pair_template *t = &tok->pair;
    if (t->error)
        return clattn__fail(NULL, t->error, "%s: the tokenizer's pair template cannot be used: %s",
                            pair_fn, t->message);
    if (max_length == 0)
        max_length = tok->max_length;
    /* Hugging Face subtracts the special tokens from max_length without a check: below their
     * number the subtraction wraps around and nothing is truncated at all. */
    CLATTN_CHECK_ARG(NULL, pair_fn, max_length >= t->special_count,
                     "max_length is %zu, but the pair template's special tokens need %zu",
                     max_length, t->special_count);

    /* Both texts in full: which one is longer decides where an odd budget's last id goes. */
    clattn__ids a = {0}, b = {0};
    clattn_status s = clattn__encode_text(tok, pair_fn, "text_a", text_a, length_a, SIZE_MAX, &a);
    if (!s)
        s = clattn__encode_text(tok, pair_fn, "text_b", text_b, length_b, SIZE_MAX, &b);
    if (s) {
        free(a.data);
        return s;
    }
    size_t budget = max_length == SIZE_MAX ? SIZE_MAX : max_length - t->special_count;
    size_t keep_a, keep_b;
    clattn__truncate_longest_first(a.count, b.count, budget, &keep_a, &keep_b);

    size_t total = 0;
    bool too_many = false;
    for (size_t p = 0; p < t->piece_count; p++) {
        const clattn__template_piece *piece = &t->pieces[p];
        size_t n = piece->kind == CLATTN__PIECE_A ? keep_a
                 : piece->kind == CLATTN__PIECE_B ? keep_b : piece->count;
        too_many = too_many || n > SIZE_MAX - total;
        total += n;
    }
    if (too_many) {
        free(a.data);
        free(b.data);
        return clattn__fail(NULL, CLATTN_ERROR_TOO_LARGE, "%s: the pair's encoding has more "
                            "than SIZE_MAX ids", pair_fn);
    }
    *count = total;
    if (capacity == 0 || capacity < total) {
        free(a.data);
        free(b.data);
        if (capacity == 0)
            return CLATTN_OK;
        return clattn__fail_arg(NULL, pair_fn, "ids has room for %zu ids but the encoding has %zu",
                                capacity, total);
    }
    size_t at = 0;
    for (size_t p = 0; p < t->piece_count; p++) {
        const clattn__template_piece *piece = &t->pieces[p];
        const int32_t *from = piece->kind == CLATTN__PIECE_A ? a.data
                            : piece->kind == CLATTN__PIECE_B ? b.data
                                                             : t->special_ids + piece->first;
        size_t n = piece->kind == CLATTN__PIECE_A ? keep_a
                 : piece->kind == CLATTN__PIECE_B ? keep_b : piece->count;
        if (n)
            memcpy(ids + at, from, n * sizeof(*ids));
        for (size_t k = 0; type_ids && k < n; k++)
            type_ids[at + k] = piece->type_id;
        at += n;
    }
    free(a.data);
    free(b.data);
    return CLATTN_OK;
}
