/* Added (special) tokens found in the text before and after normalisation, as the tokenizers
 * crate's AddedVocabulary does it (added_vocabulary.rs: a leftmost-longest Aho-Corasick scan,
 * then the single_word, lstrip and rstrip rules). */
#include "tokenizer_internal.h"

#include <stdlib.h>

/* The length of the longest token (of the wanted kind) that matches at cps[at], or 0. */
static size_t longest_at(const clattn__added_token *tokens, size_t token_count, bool normalized,
                         const uint32_t *cps, size_t n, size_t at,
                         const clattn__added_token **which)
{
    size_t best = 0;
    for (size_t t = 0; t < token_count; t++) {
        const clattn__added_token *tok = &tokens[t];
        if (tok->normalized != normalized)
            continue;
        const uint32_t *content = normalized ? tok->normalized_content : tok->content;
        size_t length = normalized ? tok->normalized_length : tok->length;
        if (length == 0 || length <= best || length > n - at)
            continue;
        size_t k = 0;
        while (k < length && cps[at + k] == content[k])
            k++;
        if (k == length) {
            best = length;
            *which = tok;
        }
    }
    return best;
}

static bool push_match(clattn__added_match **matches, size_t *count, size_t *capacity,
                       size_t start, size_t end, int32_t id)
{
    if (*count == *capacity) {
        size_t cap = *capacity ? 2 * *capacity : 16;
        clattn__added_match *grown = realloc(*matches, cap * sizeof(*grown));
        if (!grown)
            return false;
        *matches = grown;
        *capacity = cap;
    }
    (*matches)[(*count)++] = (clattn__added_match){start, end, id};
    return true;
}

bool clattn__added_find(const clattn__added_token *tokens, size_t token_count, bool normalized,
                        const uint32_t *cps, size_t n, clattn__added_match **matches,
                        size_t *count, size_t *capacity)
{
    size_t pos = 0, start_offset = 0;
    while (pos < n) {
        /* The leftmost position where a token matches, and the longest token there. */
        size_t at = pos, length = 0;
        const clattn__added_token *tok = NULL;
        for (; at < n; at++) {
            length = longest_at(tokens, token_count, normalized, cps, n, at, &tok);
            if (length)
                break;
        }
        if (!length)
            break;
        size_t start = at, stop = at + length;
        pos = stop; /* the scan goes on after the match, whatever happens to it below */
        if (tok->single_word) {
            bool start_space = start == 0 || !clattn__is_word_char(cps[start - 1]);
            bool stop_space = stop == n || !clattn__is_word_char(cps[stop]);
            if (!start_space || !stop_space)
                continue;
        }
        if (tok->lstrip) {
            size_t s = start;
            while (s > 0 && clattn__is_whitespace(cps[s - 1]))
                s--;
            start = s > start_offset ? s : start_offset;
        }
        if (tok->rstrip)
            while (stop < n && clattn__is_whitespace(cps[stop]))
                stop++;
        if (start < start_offset)
            start = start_offset;
        if (!push_match(matches, count, capacity, start, stop, tok->id))
            return false;
        start_offset = stop;
    }
    return true;
}
