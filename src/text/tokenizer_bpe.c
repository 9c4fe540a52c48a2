/* Byte-level BPE encoding, as the tokenizers crate (0.19.1) runs it: the ByteLevel
 * pre-tokeniser (pre_tokenizers/byte_level.rs: a prefix space, the GPT-2 regex, bytes to
 * characters) and the BPE model (models/bpe/model.rs and word.rs: the bytes' ids, then the
 * merges in order of rank through a priority queue). Loading is in tokenizer_bpe_load.c. */
#include "tokenizer_bpe_internal.h"

#include <stdlib.h>
#include <string.h>

bool clattn__bpe_merge_find(const clattn__bpe *bpe, int32_t a, int32_t b, uint32_t *rank,
                            int32_t *merged)
{
    if (!bpe->merge_count)
        return false;
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    for (size_t i = clattn__bpe_pair_hash(key) & bpe->merge_mask;; i = (i + 1) & bpe->merge_mask) {
        if (bpe->merge_keys[i] == UINT64_MAX)
            return false;
        if (bpe->merge_keys[i] == key) {
            *rank = bpe->merge_ranks[i];
            *merged = bpe->merge_ids[i];
            return true;
        }
    }
}

/* ---- one word: the crate's Word::merge_all ---- */

/* A queued merge: the symbol at `pos` with the one after it, into `merged`. The queue is a
 * binary min-heap on (rank, pos), as the crate's BinaryHeap with its reversed Ord. */
typedef struct merge_entry {
    uint32_t rank;
    uint32_t pos;
    int32_t merged;
} merge_entry;

static bool entry_less(const merge_entry *x, const merge_entry *y)
{
    return x->rank != y->rank ? x->rank < y->rank : x->pos < y->pos;
}

static void heap_push(merge_entry *heap, size_t *count, merge_entry e)
{
    size_t i = (*count)++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!entry_less(&e, &heap[parent]))
            break;
        heap[i] = heap[parent];
        i = parent;
    }
    heap[i] = e;
}

static merge_entry heap_pop(merge_entry *heap, size_t *count)
{
    merge_entry top = heap[0], last = heap[--*count];
    size_t n = *count, i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && entry_less(&heap[child + 1], &heap[child]))
            child++;
        if (!entry_less(&heap[child], &last))
            break;
        heap[i] = heap[child];
        i = child;
    }
    if (n)
        heap[i] = last;
    return top;
}

/* Scratch memory for the words of one encode call, grown as needed. */
typedef struct word_scratch {
    int32_t *id;        /* [n] each symbol's id */
    int32_t *prev, *next;
    bool *removed;
    merge_entry *heap;  /* [3 n]: n - 1 pairs at first, at most two more per merge */
    char *text;         /* [2 n]: the word's characters (ignore_merges) */
    size_t capacity;    /* in symbols */
} word_scratch;

static bool scratch_reserve(word_scratch *ws, size_t n)
{
    if (n <= ws->capacity)
        return true;
    if (n > SIZE_MAX / (3 * sizeof(merge_entry)))
        return false;
    size_t cap = ws->capacity ? ws->capacity : 64;
    while (cap < n)
        cap *= 2;
    int32_t *id = realloc(ws->id, cap * sizeof(*id));
    if (id)
        ws->id = id;
    int32_t *prev = realloc(ws->prev, cap * sizeof(*prev));
    if (prev)
        ws->prev = prev;
    int32_t *next = realloc(ws->next, cap * sizeof(*next));
    if (next)
        ws->next = next;
    bool *removed = realloc(ws->removed, cap * sizeof(*removed));
    if (removed)
        ws->removed = removed;
    merge_entry *heap = realloc(ws->heap, 3 * cap * sizeof(*heap));
    if (heap)
        ws->heap = heap;
    char *text = realloc(ws->text, 2 * cap + 1);
    if (text)
        ws->text = text;
    if (!id || !prev || !next || !removed || !heap || !text)
        return false;
    ws->capacity = cap;
    return true;
}

static void scratch_free(word_scratch *ws)
{
    free(ws->id);
    free(ws->prev);
    free(ws->next);
    free(ws->removed);
    free(ws->heap);
    free(ws->text);
}

/* Appends the ids of one pre-token, the `n` bytes at bytes (each byte one character of the
 * byte-level alphabet), to *out: the crate's BPE::tokenize_with_cache and merge_word. */
static bool bpe_word(const clattn__bpe *bpe, const clattn__vocab *vocab,
                     const unsigned char *bytes, size_t n, word_scratch *ws, clattn__ids *out)
{
    if (n == 0)
        return true;
    if (!scratch_reserve(ws, n))
        return false;
    if (bpe->ignore_merges) {
        size_t length = 0;
        for (size_t i = 0; i < n; i++)
            length += clattn__utf8_encode(bpe->byte_cp[bytes[i]], ws->text + length);
        int32_t id = clattn__vocab_find(vocab, ws->text, length);
        if (id >= 0)
            return clattn__ids_push(out, id);
    }

    /* The symbols: each byte's id, unknown ones as unk_token (fused when fuse_unk) or dropped
     * when there is no unk_token. */
    int32_t *sym = ws->id;
    size_t count = 0;
    int32_t pending = -1; /* an unk not yet added (the crate's `unk`) */
    for (size_t i = 0; i < n; i++) {
        int variant = (i > 0 ? BPE_CONTINUING : 0) | (i + 1 == n ? BPE_LAST : 0);
        int32_t id = bpe->byte_id[variant][bytes[i]];
        if (id >= 0) {
            if (pending >= 0) {
                sym[count++] = pending;
                pending = -1;
            }
            sym[count++] = id;
        } else if (bpe->unk >= 0) {
            if (pending >= 0 && !bpe->fuse_unk)
                sym[count++] = pending;
            pending = bpe->unk;
        }
    }
    if (pending >= 0)
        sym[count++] = pending;

    int32_t *prev = ws->prev, *next = ws->next;
    bool *removed = ws->removed;
    merge_entry *heap = ws->heap;
    size_t queued = 0;
    for (size_t i = 0; i < count; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < count ? (int32_t)i + 1 : -1;
        removed[i] = false;
    }
    uint32_t rank;
    int32_t merged;
    for (size_t i = 0; i + 1 < count; i++)
        if (clattn__bpe_merge_find(bpe, sym[i], sym[i + 1], &rank, &merged))
            heap_push(heap, &queued, (merge_entry){rank, (uint32_t)i, merged});
    while (queued) {
        merge_entry top = heap_pop(heap, &queued);
        size_t pos = top.pos;
        if (removed[pos] || next[pos] < 0)
            continue;
        size_t right = (size_t)next[pos];
        /* An expired entry: the pair at pos is no longer this merge. */
        if (!clattn__bpe_merge_find(bpe, sym[pos], sym[right], &rank, &merged) ||
            merged != top.merged)
            continue;
        sym[pos] = top.merged;
        next[pos] = next[right];
        removed[right] = true;
        if (next[right] >= 0)
            prev[next[right]] = (int32_t)pos;
        if (prev[pos] >= 0 &&
            clattn__bpe_merge_find(bpe, sym[prev[pos]], sym[pos], &rank, &merged))
            heap_push(heap, &queued, (merge_entry){rank, (uint32_t)prev[pos], merged});
        if (next[pos] >= 0 &&
            clattn__bpe_merge_find(bpe, sym[pos], sym[next[pos]], &rank, &merged))
            heap_push(heap, &queued, (merge_entry){rank, (uint32_t)pos, merged});
    }
    for (size_t i = 0; i < count; i++)
        if (!removed[i] && !clattn__ids_push(out, sym[i]))
            return false;
    return true;
}

/* ---- the ByteLevel pre-tokeniser ---- */

bool clattn__bpe_split(const clattn__bpe *bpe, const char *text, size_t length,
                       bool (*piece)(void *user, size_t start, size_t end), void *user)
{
    if (length == 0)
        return true;
    if (!bpe->re)
        return piece(user, 0, length);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(bpe->re, NULL);
    if (!md)
        return false;
    const PCRE2_SPTR subject = (PCRE2_SPTR)text;
    size_t at = 0, done = 0; /* search from `at`; bytes before `done` are emitted */
    bool ok = true;
    while (ok && at < length) {
        int rc = pcre2_match(bpe->re, subject, length, at, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0 && rc != PCRE2_ERROR_NOMATCH)
            /* The JIT's stack (or a limit) ran out: once more with the interpreter. */
            rc = pcre2_match(bpe->re, subject, length, at, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT,
                             md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            ok = false;
            break;
        }
        const PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t start = ov[0], end = ov[1];
        if (end == start) {
            /* An empty match (the GPT-2 regex has none) yields no pre-token: go on after the
             * character there. */
            at = start + 1;
            while (at < length && ((unsigned char)text[at] & 0xC0) == 0x80)
                at++;
            continue;
        }
        /* SplitDelimiterBehavior::Isolated: the text between matches is a pre-token too. */
        if (start > done)
            ok = piece(user, done, start);
        if (ok)
            ok = piece(user, start, end);
        done = at = end;
    }
    if (ok && done < length)
        ok = piece(user, done, length);
    pcre2_match_data_free(md);
    return ok;
}

typedef struct piece_state {
    const clattn__bpe *bpe;
    const clattn__vocab *vocab;
    const unsigned char *text;
    size_t limit;
    word_scratch ws;
    clattn__ids *out;
    bool out_of_memory;
} piece_state;

static bool on_pre_token(void *user, size_t start, size_t end)
{
    piece_state *st = user;
    if (!bpe_word(st->bpe, st->vocab, st->text + start, end - start, &st->ws, st->out)) {
        st->out_of_memory = true;
        return false;
    }
    return st->out->count < st->limit;
}

bool clattn__bpe_piece(const clattn__bpe *bpe, const clattn__vocab *vocab, const uint32_t *cps,
                       size_t n, size_t limit, clattn__ids *out)
{
    if (n == 0)
        return true;
    /* The piece as UTF-8, with the prefix space when add_prefix_space and the piece does not
     * start with U+0020 (NormalizedString::prepend, the crate's test is starts_with(' ')). */
    char *text = n <= (SIZE_MAX - 2) / 4 ? malloc(4 * n + 2) : NULL;
    if (!text)
        return false;
    size_t length = 0;
    if (bpe->add_prefix_space && cps[0] != ' ')
        text[length++] = ' ';
    for (size_t i = 0; i < n; i++)
        length += clattn__utf8_encode(cps[i], text + length);
    piece_state st = {.bpe = bpe, .vocab = vocab, .text = (const unsigned char *)text,
                      .limit = limit, .out = out};
    bool ok = clattn__bpe_split(bpe, text, length, on_pre_token, &st);
    scratch_free(&st.ws);
    free(text);
    /* `ok` is also false when the limit was reached: that is no failure. */
    return ok || (!st.out_of_memory && out->count >= limit);
}

void clattn__bpe_free(clattn__bpe *bpe)
{
    if (!bpe)
        return;
    free(bpe->merge_keys);
    free(bpe->merge_ranks);
    free(bpe->merge_ids);
    pcre2_code_free(bpe->re);
    free(bpe);
}
