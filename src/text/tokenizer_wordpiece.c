/* WordPiece: greedy longest-match-first splitting of one word into vocabulary entries, as the
 * tokenizers crate does it (models/wordpiece/mod.rs). */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

clattn_status clattn__wordpiece_init(clattn__wordpiece *wp, const char *prefix,
                                     size_t max_input_chars_per_word, const char *function,
                                     const char *where)
{
    size_t n = strlen(prefix);
    char *copy = malloc(n + 1);
    if (!copy)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the subword prefix");
    memcpy(copy, prefix, n + 1);
    free(wp->prefix);
    wp->prefix = copy;
    wp->prefix_length = n;
    wp->max_input_chars_per_word = max_input_chars_per_word;
    return CLATTN_OK;
}

bool clattn__ids_push(clattn__ids *a, int32_t id)
{
    if (a->count == a->capacity) {
        size_t cap = a->capacity ? 2 * a->capacity : 64;
        if (cap > SIZE_MAX / sizeof(*a->data))
            return false;
        int32_t *grown = realloc(a->data, cap * sizeof(*grown));
        if (!grown)
            return false;
        a->data = grown;
        a->capacity = cap;
    }
    a->data[a->count++] = id;
    return true;
}

bool clattn__wordpiece_word(const clattn__wordpiece *wp, const clattn__vocab *vocab,
                            const uint32_t *word, size_t n, char *scratch, clattn__ids *out)
{
    if (n == 0)
        return true;
    if (n > wp->max_input_chars_per_word)
        return clattn__ids_push(out, wp->unk);
    /* scratch: the word's UTF-8 (utf8), then the prefix and a tail of the word (cont);
     * off[i] = byte offset of character i in utf8. */
    char *utf8 = scratch, *cont = scratch + 4 * n;
    memcpy(cont, wp->prefix, wp->prefix_length);
    size_t offsets[101 + 1];
    size_t *off = offsets;
    size_t *heap = NULL;
    if (n + 1 > sizeof(offsets) / sizeof(offsets[0])) {
        heap = malloc((n + 1) * sizeof(*heap)); /* max_input_chars_per_word above 100 */
        if (!heap)
            return false;
        off = heap;
    }
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        off[i] = bytes;
        bytes += clattn__utf8_encode(word[i], utf8 + bytes);
    }
    off[n] = bytes;

    size_t first = out->count, start = 0;
    bool ok = true, bad = false;
    while (start < n) {
        size_t end = n;
        int32_t found = -1;
        if (start > 0)
            memcpy(cont + wp->prefix_length, utf8 + off[start], off[n] - off[start]);
        while (start < end) {
            /* Candidates longer than the longest token cannot match: no lookup. */
            size_t bytes_here = off[end] - off[start] + (start > 0 ? wp->prefix_length : 0);
            if (bytes_here <= vocab->longest) {
                found = clattn__vocab_find(vocab, start > 0 ? cont : utf8, bytes_here);
                if (found >= 0)
                    break;
            }
            end--;
        }
        if (found < 0) {
            bad = true;
            break;
        }
        if (!clattn__ids_push(out, found)) {
            ok = false;
            break;
        }
        start = end;
    }
    free(heap);
    if (!ok)
        return false;
    if (bad) {
        out->count = first;
        return clattn__ids_push(out, wp->unk);
    }
    return true;
}
