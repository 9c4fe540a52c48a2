/* SentencePiece-style tokenizers in memory: the normaliser chain (Precompiled, Strip, Replace,
 * Sequence), the pre-tokenisers (Metaspace, WhitespaceSplit, Sequence) and the Unigram model
 * (Viterbi over the pieces' scores, unknown characters fused into one unk, byte fallback), each
 * as the tokenizers crate 0.19.1 runs it (normalizers/{strip,replace}.rs,
 * pre_tokenizers/{metaspace,whitespace}.rs, models/unigram/model.rs). Reading them from
 * tokenizer.json is tokenizer_unigram_load.c's. */
#include "tokenizer_unigram.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void free_norm(clattn__norm_step *st)
{
    if (st->kind == NORM_PRECOMPILED)
        clattn__precompiled_free(&st->pre);
    free(st->pattern);
    free(st->content);
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
static bool replace(const clattn__norm_step *st, const uint32_t *in, const uint32_t *zin, size_t n,
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
        const clattn__norm_step *st = &u->norms[k];
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
static bool pre_apply(const clattn__pre_step *st, const words *in, words *out)
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
