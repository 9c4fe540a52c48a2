/* The tokenizer's encode pipeline for one text (special tokens, normalisation,
 * pre-tokenisation, the model, truncation) and its accessors. Loading is in tokenizer_load.c,
 * the templates around the texts and the public encode calls in tokenizer_encode.c. */
#include "text_strip.h"
#include "tokenizer_internal.h"
#include "tokenizer_unigram.h"

#include <stdlib.h>
#include <string.h>

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

/* The pre-tokeniser and model of the tokenizer's kind on normalised text without added tokens
 * (zero: Unigram's start-of-text marks, or NULL): the one place that dispatches on the kind. */
static bool model_piece(encode_state *st, const uint32_t *cps, size_t n, const uint32_t *zero)
{
    const clattn_tokenizer *tok = st->tok;
    switch (tok->kind) {
    case CLATTN__MODEL_UNIGRAM: {
        clattn__unigram_result r =
            clattn__unigram_encode(tok->unigram, &tok->vocab, cps, n, zero, &st->ids);
        st->out_of_memory = r == CLATTN__UNIGRAM_OUT_OF_MEMORY;
        st->no_unk = r == CLATTN__UNIGRAM_NO_UNK;
        return r == CLATTN__UNIGRAM_OK;
    }
    case CLATTN__MODEL_BPE:
        if (!clattn__bpe_piece(tok->bpe, &tok->vocab, cps, n, st->limit, &st->ids)) {
            st->out_of_memory = true;
            return false;
        }
        return true;
    case CLATTN__MODEL_WORDPIECE:
        st->cps = cps;
        return clattn__pre_tokenize(cps, n, on_word, st);
    }
    return false;
}

/* Normalises one piece of the text that is not an added token, then pre-tokenises and
 * WordPieces it, or (a BPE model) runs the ByteLevel pre-tokeniser and BPE on it, or (a Unigram
 * model) its pre-tokenisers and Unigram. */
static bool encode_piece(encode_state *st, const uint32_t *cps, size_t n)
{
    const clattn_tokenizer *tok = st->tok;
    clattn__cps norm = {0}, zero = {0};
    bool normalized = tok->kind == CLATTN__MODEL_UNIGRAM
                          ? clattn__unigram_normalize(tok->unigram, cps, n, &norm,
                                                      st->at_text_start ? &zero : NULL)
                          : clattn__normalize(&tok->norm, cps, n, &norm);
    if (!normalized) {
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
        if (at < end)
            go = model_piece(st, norm.data + at, end - at, zero.count ? zero.data + at : NULL);
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
    if (tok->kind == CLATTN__MODEL_UNIGRAM)
        return clattn__unigram_normalize(tok->unigram, in, n, out, NULL);
    return clattn__normalize(&tok->norm, in, n, out);
}

/* Texts run through the pipeline (clattn__tokenizer_texts_encoded). */
static size_t texts_encoded;

size_t clattn__tokenizer_texts_encoded(void)
{
    return __atomic_load_n(&texts_encoded, __ATOMIC_RELAXED);
}

clattn_status clattn__encode_text(const clattn_tokenizer *tok, const char *function,
                                 const char *name, const char *text, size_t length, size_t limit,
                                 bool strip, clattn__ids *out)
{
    __atomic_fetch_add(&texts_encoded, 1, __ATOMIC_RELAXED);
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

    uint32_t *text_cps = cps; /* freed below; cps moves past stripped whitespace */
    if (strip) {
        while (n > 0 && clattn__is_python_space(cps[n - 1]))
            n--;
        while (n > 0 && clattn__is_python_space(cps[0]))
            cps++, n--;
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
    free(text_cps);
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
    clattn__post_processor_free(&(*tok)->post);
    free(*tok);
    *tok = NULL;
}
