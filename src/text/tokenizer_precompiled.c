/* The Precompiled normaliser: SentencePiece's precompiled_charsmap (a Darts double-array trie
 * over UTF-8 bytes whose leaves point into a blob of NUL-ended replacement strings), applied as
 * the tokenizers crate applies it (normalizers/precompiled.rs over spm_precompiled 0.1.4):
 * the text is cut into extended grapheme clusters; a cluster shorter than 6 bytes is looked
 * up whole, and when the trie has a match there the cluster becomes that match's replacement;
 * otherwise each character is looked up alone and replaced when it matches, kept when not.
 * A lookup takes the shortest key of the trie that prefixes the bytes (the first leaf on the
 * path), as spm_precompiled's transform() does: a cluster whose first character alone has a
 * replacement becomes that replacement, whatever follows in the cluster. Clusters come from
 * utf8proc (Unicode 15.0); the crate's unicode-segmentation 1.11 follows Unicode 15.1, whose
 * only new rule (GB9c, Indic conjuncts) joins clusters of 9 bytes or more, which are looked up
 * character by character either way. */
#include "tokenizer_unigram.h"

#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

static int b64_value(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/* Standard base64 with canonical padding (Rust's base64::prelude::BASE64_STANDARD). */
static bool b64_decode(const char *text, unsigned char **out, size_t *size)
{
    size_t n = strlen(text);
    if (n % 4 != 0)
        return false;
    size_t pad = 0;
    if (n >= 1 && text[n - 1] == '=')
        pad++;
    if (n >= 2 && text[n - 2] == '=')
        pad++;
    *out = malloc(n / 4 * 3 + 1);
    if (!*out)
        return false;
    size_t k = 0;
    for (size_t i = 0; i < n; i += 4) {
        int v[4];
        size_t used = i + 4 == n ? 4 - pad : 4;
        for (size_t j = 0; j < 4; j++)
            v[j] = j < used ? b64_value((unsigned char)text[i + j]) : 0;
        if (v[0] < 0 || v[1] < 0 || v[2] < 0 || v[3] < 0) {
            free(*out);
            *out = NULL;
            return false;
        }
        uint32_t w = (uint32_t)v[0] << 18 | (uint32_t)v[1] << 12 | (uint32_t)v[2] << 6 |
                     (uint32_t)v[3];
        /* The bits past the last whole byte must be zero (canonical). */
        if ((used == 3 && (w & 0xFF)) || (used == 2 && (w & 0xFFFF))) {
            free(*out);
            *out = NULL;
            return false;
        }
        (*out)[k++] = (unsigned char)(w >> 16);
        if (used >= 3)
            (*out)[k++] = (unsigned char)(w >> 8);
        if (used == 4)
            (*out)[k++] = (unsigned char)w;
    }
    *size = k;
    return true;
}

clattn_status clattn__precompiled_init(clattn__precompiled *p, const char *b64,
                                       const char *function, const char *where)
{
    memset(p, 0, sizeof(*p));
    unsigned char *bytes = NULL;
    size_t size = 0;
    if (!b64_decode(b64, &bytes, &size))
        return clattn__fail_in(function, where, bytes ? CLATTN_ERROR_OUT_OF_HOST_MEMORY
                                                      : CLATTN_ERROR_FORMAT,
                               "normalizer Precompiled: precompiled_charsmap is not base64");
    clattn_status s = CLATTN_OK;
    uint32_t trie_size = 0;
    if (size < 4) {
        s = clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                            "normalizer Precompiled: the charsmap has no trie size");
        goto done;
    }
    trie_size = (uint32_t)bytes[0] | (uint32_t)bytes[1] << 8 | (uint32_t)bytes[2] << 16 |
                (uint32_t)bytes[3] << 24;
    size_t units = trie_size / 4;
    if (units == 0 || units > (size - 4) / 4) {
        s = clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                            "normalizer Precompiled: the trie of %u bytes does not fit in the "
                            "charsmap of %zu bytes", (unsigned)trie_size, size);
        goto done;
    }
    size_t rest = size - 4 - units * 4;
    p->array = malloc(units * sizeof(*p->array));
    p->normalized = malloc(rest + 1);
    if (!p->array || !p->normalized) {
        s = clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "cannot allocate the charsmap");
        goto done;
    }
    for (size_t i = 0; i < units; i++) {
        const unsigned char *u = bytes + 4 + 4 * i;
        p->array[i] = (uint32_t)u[0] | (uint32_t)u[1] << 8 | (uint32_t)u[2] << 16 |
                      (uint32_t)u[3] << 24;
    }
    p->array_count = units;
    /* spm_precompiled's parse() reads trie_size / 4 units and leaves any remainder of bytes
     * to the blob. */
    memcpy(p->normalized, bytes + 4 + units * 4, rest);
    p->normalized[rest] = '\0';
    p->normalized_length = rest;
    /* The blob must be UTF-8 (NULs included, which clattn__utf8_valid refuses). */
    for (size_t i = 0; i < rest;) {
        uint32_t cp;
        size_t k = clattn__utf8_decode((const unsigned char *)p->normalized + i, rest - i, &cp);
        if (k == 0) {
            s = clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                "normalizer Precompiled: the normalised strings are not UTF-8 "
                                "at byte %zu", i);
            goto done;
        }
        i += k;
    }
done:
    free(bytes);
    if (s)
        clattn__precompiled_free(p);
    return s;
}

void clattn__precompiled_free(clattn__precompiled *p)
{
    free(p->array);
    free(p->normalized);
    memset(p, 0, sizeof(*p));
}

/* Darts' unit fields, as spm_precompiled reads them (a u32 widened to usize). */
static bool unit_has_leaf(uint64_t u) { return (u >> 8) & 1; }
static uint64_t unit_value(uint64_t u) { return u & ((1ull << 31) - 1); }
static uint64_t unit_label(uint64_t u) { return u & ((1ull << 31) | 0xFF); }
static uint64_t unit_offset(uint64_t u) { return (u >> 10) << ((u & (1ull << 9)) >> 6); }

/* The replacement of the shortest trie key that prefixes key[0..n-1] (stopping at a NUL
 * byte); false when none. A unit outside the array ends the search (where Rust would panic on
 * a corrupt charsmap). */
static bool transform(const clattn__precompiled *p, const unsigned char *key, size_t n,
                      const char **repl, size_t *repl_length)
{
    uint64_t pos = 0;
    uint64_t unit = p->array[0];
    pos ^= unit_offset(unit);
    for (size_t i = 0; i < n; i++) {
        if (key[i] == 0)
            return false;
        pos ^= key[i];
        if (pos >= p->array_count)
            return false;
        unit = p->array[pos];
        if (unit_label(unit) != key[i])
            return false;
        pos ^= unit_offset(unit);
        if (unit_has_leaf(unit)) {
            if (pos >= p->array_count)
                return false;
            uint64_t index = unit_value(p->array[pos]);
            if (index > p->normalized_length)
                index = p->normalized_length;
            *repl = p->normalized + index;
            *repl_length = strlen(*repl);
            return true;
        }
    }
    return false;
}

/* The crate's transformations: each output character with its change (0: replaces the next
 * input character, 1: inserted, -k: replaces the next one and removes k more). */
typedef struct changes {
    clattn__cps *out;
    size_t first;      /* out->data[first] is the first output of this call */
    int64_t *change;   /* [out->count - first] */
    size_t capacity;
} changes;

static bool push_change(changes *t, uint32_t cp, int64_t change)
{
    if (!clattn__cps_push(t->out, cp))
        return false;
    size_t count = t->out->count - t->first;
    if (count > t->capacity) {
        size_t cap = t->capacity ? 2 * t->capacity : 64;
        while (cap < count)
            cap *= 2;
        int64_t *grown = realloc(t->change, cap * sizeof(*grown));
        if (!grown)
            return false;
        t->change = grown;
        t->capacity = cap;
    }
    t->change[count - 1] = change;
    return true;
}

/* normalizers/precompiled.rs's replace(): old_count input characters become the UTF-8 string
 * s[0..n-1] (from the checked blob). */
static bool push_replacement(changes *t, size_t old_count, const char *s, size_t n)
{
    size_t new_count = 0;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        size_t k = clattn__utf8_decode((const unsigned char *)s + i, n - i, &cp);
        if (k == 0) { /* a replacement that starts inside a character: skip that byte */
            i++;
            continue;
        }
        if (!push_change(t, cp, 0))
            return false;
        new_count++;
        i += k;
    }
    if (new_count > old_count) {
        /* The last (new - old) transformations of the whole list are insertions. */
        size_t count = t->out->count - t->first;
        for (size_t k = 0; k < new_count - old_count; k++)
            t->change[count - 1 - k] = 1;
    } else if (new_count < old_count && t->out->count > t->first) {
        /* The last transformation of the whole list (perhaps an earlier cluster's) removes the
         * rest; with none before, the removal is dropped. */
        t->change[t->out->count - t->first - 1] -= (int64_t)(old_count - new_count);
    }
    return true;
}

bool clattn__precompiled_normalize(const clattn__precompiled *p, const uint32_t *in, size_t n,
                                   const uint32_t *zin, clattn__cps *out, clattn__cps *zout)
{
    size_t start = 0, first = out->count;
    utf8proc_int32_t state = 0;
    unsigned char buf[4 * 8];
    changes t = {out, first, NULL, 0};
    while (start < n) {
        /* The extended grapheme cluster in[start..end-1]. */
        size_t end = start + 1;
        while (end < n && !utf8proc_grapheme_break_stateful((utf8proc_int32_t)in[end - 1],
                                                            (utf8proc_int32_t)in[end], &state))
            end++;
        state = 0;
        const char *repl;
        size_t repl_length, bytes = 0;
        bool small = true;
        for (size_t i = start; i < end; i++) {
            if (bytes + 4 > sizeof(buf)) {
                small = false;
                break;
            }
            bytes += clattn__utf8_encode(in[i], (char *)buf + bytes);
        }
        if (small && bytes < 6 && transform(p, buf, bytes, &repl, &repl_length)) {
            if (!push_replacement(&t, end - start, repl, repl_length))
                goto oom;
        } else {
            for (size_t i = start; i < end; i++) {
                size_t k = clattn__utf8_encode(in[i], (char *)buf);
                if (transform(p, buf, k, &repl, &repl_length)) {
                    if (!push_replacement(&t, 1, repl, repl_length))
                        goto oom;
                } else if (!push_change(&t, in[i], 0)) {
                    goto oom;
                }
            }
        }
        start = end;
    }
    if (zout) {
        /* NormalizedString::transform's alignments: whether each output character is aligned
         * with the start of the text (zin: the same of each input character). */
        size_t offset = 0;
        for (size_t i = first; i < out->count; i++) {
            int64_t ch = t.change[i - first];
            uint32_t z;
            if (ch > 0) {
                z = offset == 0 ? 1 : zin[offset - 1];
            } else {
                z = offset < n ? zin[offset] : 0;
                offset += 1 + (size_t)(-ch);
            }
            if (!clattn__cps_push(zout, z))
                goto oom;
        }
    }
    free(t.change);
    return true;
oom:
    free(t.change);
    return false;
}
