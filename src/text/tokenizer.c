/* The tokenizer's encode pipeline (special tokens, normalisation, pre-tokenisation, WordPiece,
 * truncation) and its accessors. Loading is in tokenizer_load.c. */
#include "tokenizer_internal.h"
#include "tokenizer_unigram.h"

#include <stdlib.h>
#include <string.h>

static const char encode_fn[] = "clattn_tokenizer_encode";

/* The state of one encode call. */
typedef struct encode_state {
    const clattn_tokenizer *tok;
    const uint32_t *cps;   /* the piece being pre-tokenised */
    clattn__ids ids;       /* the text's ids, without [CLS] and [SEP] */
    size_t limit;          /* stop once this many ids are there (SIZE_MAX: never) */
    char *scratch;
    size_t scratch_size;
    bool out_of_memory;
    bool no_unk;           /* Unigram: a character without a piece and no unk_id */
    bool at_text_start;    /* the piece being encoded starts the text */
} encode_state;

static bool full(const encode_state *st)
{
    return st->ids.count >= st->limit;
}

static bool on_word(void *user, size_t start, size_t end)
{
    encode_state *st = user;
    if (full(st))
        return false;
    const clattn__wordpiece *wp = &st->tok->wp;
    size_t n = end - start;
    if (n <= wp->max_input_chars_per_word) {
        size_t need = wp->prefix_length + 8 * n;
        if (need > st->scratch_size) {
            char *grown = realloc(st->scratch, need);
            if (!grown) {
                st->out_of_memory = true;
                return false;
            }
            st->scratch = grown;
            st->scratch_size = need;
        }
    }
    if (!clattn__wordpiece_word(wp, &st->tok->vocab, st->cps + start, n, st->scratch, &st->ids)) {
        st->out_of_memory = true;
        return false;
    }
    return !full(st);
}

/* Normalises one piece of the text that is not an added token, then pre-tokenises and
 * WordPieces it, or (a BPE model) runs the ByteLevel pre-tokeniser and BPE on it, or (a Unigram
 * model) its pre-tokenisers and Unigram. */
static bool encode_piece(encode_state *st, const uint32_t *cps, size_t n)
{
    const clattn_tokenizer *tok = st->tok;
    clattn__cps norm = {0}, zero = {0};
    if (tok->unigram ? !clattn__unigram_normalize(tok->unigram, cps, n, &norm,
                                                  st->at_text_start ? &zero : NULL)
                     : !clattn__normalize(&tok->norm, cps, n, &norm)) {
        clattn__cps_free(&norm);
        clattn__cps_free(&zero);
        st->out_of_memory = true;
        return false;
    }
    clattn__added_match *matches = NULL;
    size_t match_count = 0, match_capacity = 0;
    if (tok->has_normalized_added &&
        !clattn__added_find(tok->added, tok->added_count, true, norm.data, norm.count, &matches,
                            &match_count, &match_capacity)) {
        clattn__cps_free(&norm);
        clattn__cps_free(&zero);
        st->out_of_memory = true;
        return false;
    }
    size_t at = 0;
    bool go = true;
    for (size_t m = 0; m <= match_count && go && !full(st); m++) {
        size_t end = m < match_count ? matches[m].start : norm.count;
        if (at < end && tok->unigram) {
            clattn__unigram_result r =
                clattn__unigram_encode(tok->unigram, &tok->vocab, norm.data + at, end - at,
                                       zero.count ? zero.data + at : NULL, &st->ids);
            st->out_of_memory = r == CLATTN__UNIGRAM_OUT_OF_MEMORY;
            st->no_unk = r == CLATTN__UNIGRAM_NO_UNK;
            go = r == CLATTN__UNIGRAM_OK;
        } else if (at < end && tok->bpe) {
            if (!clattn__bpe_piece(tok->bpe, &tok->vocab, norm.data + at, end - at, st->limit,
                                   &st->ids)) {
                st->out_of_memory = true;
                go = false;
            }
        } else if (at < end) {
            st->cps = norm.data + at;
            go = clattn__pre_tokenize(norm.data + at, end - at, on_word, st);
        }
        if (go && m < match_count && !full(st)) {
            if (!clattn__ids_push(&st->ids, matches[m].id)) {
                st->out_of_memory = true;
                go = false;
            }
            at = matches[m].end;
        }
    }
    free(matches);
    clattn__cps_free(&norm);
    clattn__cps_free(&zero);
    return !st->out_of_memory && !st->no_unk;
}

bool clattn__tokenizer_normalize(const clattn_tokenizer *tok, const uint32_t *in, size_t n,
                                 clattn__cps *out)
{
    if (tok->unigram)
        return clattn__unigram_normalize(tok->unigram, in, n, out, NULL);
    return clattn__normalize(&tok->norm, in, n, out);
}

clattn_status clattn__encode_text(const clattn_tokenizer *tok, const char *function,
                                 const char *name, const char *text, size_t length, size_t limit,
                                 clattn__ids *out)
{
    /* Decode (and validate) the whole text first: invalid UTF-8 anywhere is an error. */
    uint32_t *cps = NULL;
    if (length <= SIZE_MAX / sizeof(*cps))
        cps = malloc((length ? length : 1) * sizeof(*cps));
    if (!cps)
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: cannot allocate %zu code points", function, length);
    size_t n = 0;
    const unsigned char *u = (const unsigned char *)text;
    for (size_t i = 0; i < length;) {
        size_t k = clattn__utf8_decode(u + i, length - i, &cps[n]);
        if (k == 0) {
            char shown[32] = "";
            size_t shown_len = 0;
            for (size_t j = i; j < length && j < i + 4; j++)
                shown_len += (size_t)snprintf(shown + shown_len, sizeof(shown) - shown_len,
                                              "%s%02X", j > i ? " " : "", u[j]);
            free(cps);
            return clattn__fail_arg(NULL, function,
                                "%s is not valid UTF-8 at byte %zu "
                                "(bytes %s)", name, i, shown);
        }
        i += k;
        n++;
    }

    encode_state st = {.tok = tok, .limit = limit};
    clattn__added_match *matches = NULL;
    size_t match_count = 0, match_capacity = 0;
    bool ok = clattn__added_find(tok->added, tok->added_count, false, cps, n, &matches,
                                 &match_count, &match_capacity);
    size_t at = 0;
    for (size_t m = 0; ok && m <= match_count && !full(&st); m++) {
        size_t end = m < match_count ? matches[m].start : n;
        st.at_text_start = at == 0;
        if (at < end)
            ok = encode_piece(&st, cps + at, end - at);
        if (ok && m < match_count && !full(&st)) {
            ok = clattn__ids_push(&st.ids, matches[m].id);
            at = matches[m].end;
        }
    }
    free(matches);
    free(cps);
    free(st.scratch);
    if (!ok) {
        free(st.ids.data);
        if (st.no_unk)
            return clattn__fail(NULL, CLATTN_ERROR_FORMAT,
                                "%s: %s has a character that no piece of the Unigram model "
                                "covers, and the model has no unk_id", function, name);
        return clattn__fail(NULL, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "%s: out of memory while encoding %s (%zu bytes)", function, name,
                            length);
    }
    if (st.ids.count > limit)
        st.ids.count = limit;
    *out = st.ids;
    return CLATTN_OK;
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
    if (max_length == 0)
        max_length = tok->max_length;
    CLATTN_CHECK_ARG(NULL, encode_fn, max_length >= 2,
                     "max_length is %zu, but [CLS] and [SEP] need 2", max_length);

    clattn__ids body = {0};
    clattn_status s = clattn__encode_text(tok, encode_fn, "the text", text, length,
                                          max_length == SIZE_MAX ? SIZE_MAX : max_length - 2,
                                          &body);
    if (s)
        return s;
    size_t total = body.count + 2;
    *count = total;
    if (capacity == 0) {
        free(body.data);
        return CLATTN_OK;
    }
    if (capacity < total) {
        free(body.data);
        return clattn__fail_arg(NULL, encode_fn,
                            "ids has room for %zu ids but the encoding "
                            "has %zu", capacity, total);
    }
    ids[0] = tok->special.cls;
    if (body.count)
        memcpy(ids + 1, body.data, body.count * sizeof(*ids));
    ids[body.count + 1] = tok->special.sep;
    free(body.data);
    return CLATTN_OK;
}

clattn_tokenizer_special clattn_tokenizer_special_ids(const clattn_tokenizer *tok)
{
    if (!tok)
        return (clattn_tokenizer_special){-1, -1, -1, -1, -1};
    return tok->special;
}

size_t clattn_tokenizer_vocab_size(const clattn_tokenizer *tok)
{
    return tok ? tok->vocab_size : 0;
}

size_t clattn_tokenizer_max_length(const clattn_tokenizer *tok)
{
    return tok ? tok->max_length : 0;
}

const char *clattn_tokenizer_token(const clattn_tokenizer *tok, int32_t id)
{
    if (!tok || id < 0)
        return NULL;
    if ((size_t)id < tok->vocab.count)
        return tok->vocab.tokens[id];
    for (size_t i = 0; i < tok->added_count; i++)
        if (tok->added[i].id == id)
            return tok->added[i].text;
    return NULL;
}

int32_t clattn_tokenizer_token_id(const clattn_tokenizer *tok, const char *token)
{
    if (!tok || !token)
        return -1;
    for (size_t i = 0; i < tok->added_count; i++)
        if (strcmp(tok->added[i].text, token) == 0)
            return tok->added[i].id;
    return clattn__vocab_find(&tok->vocab, token, strlen(token));
}

void clattn__tokenizer_free_added(clattn_tokenizer *tok)
{
    for (size_t i = 0; i < tok->added_count; i++) {
        free(tok->added[i].text);
        free(tok->added[i].content);
        free(tok->added[i].normalized_content);
    }
    free(tok->added);
    tok->added = NULL;
    tok->added_count = 0;
}

void clattn_tokenizer_destroy(clattn_tokenizer **tok)
{
    if (!tok || !*tok)
        return;
    clattn__vocab_free(&(*tok)->vocab);
    clattn__unigram_free((*tok)->unigram);
    free((*tok)->wp.prefix);
    clattn__bpe_free((*tok)->bpe);
    clattn__tokenizer_free_added(*tok);
    clattn__pair_template_free(&(*tok)->pair);
    free(*tok);
    *tok = NULL;
}
