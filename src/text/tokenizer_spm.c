/*
 * SentencePiece's BPE as llama.cpp runs it for "llama" GGUF vocabularies
 * (llm_tokenizer_spm_session in llama.cpp's src/llama-vocab.cpp): the text (spaces already
 * U+2581) is cut into UTF-8 characters; every two adjacent symbols whose concatenation is a token
 * are queued with that token's score; the best (highest score, then leftmost) is merged, and the
 * pairs around the merged symbol are queued, until the queue is empty. A symbol that is a token
 * is that token; any other (a single character outside the vocabulary) is given as the tokens of
 * its bytes (<0xXX>: byte fallback).
 */
#include "tokenizer_gguf_internal.h"

#include <stdlib.h>
#include <string.h>

typedef struct symbol {
    size_t start, n; /* bytes of the text; n 0 once merged into its left neighbour */
    int prev, next;
} symbol;

typedef struct bigram {
    float score;
    int left, right;
    size_t size;
} bigram;

/* The queue's order: the highest score first, then the leftmost (llama.cpp's comparator). */
static bool before(const bigram *x, const bigram *y)
{
    return x->score != y->score ? x->score > y->score : x->left < y->left;
}

typedef struct queue {
    bigram *data;
    size_t count, capacity;
} queue;

static bool queue_push(queue *q, bigram b)
{
    if (q->count == q->capacity) {
        size_t cap = q->capacity ? 2 * q->capacity : 64;
        bigram *grown = realloc(q->data, cap * sizeof(*grown));
        if (!grown)
            return false;
        q->data = grown;
        q->capacity = cap;
    }
    size_t i = q->count++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!before(&b, &q->data[parent]))
            break;
        q->data[i] = q->data[parent];
        i = parent;
    }
    q->data[i] = b;
    return true;
}

static bigram queue_pop(queue *q)
{
    bigram top = q->data[0], last = q->data[--q->count];
    size_t n = q->count, i = 0;
    for (;;) {
        size_t child = 2 * i + 1;
        if (child >= n)
            break;
        if (child + 1 < n && before(&q->data[child + 1], &q->data[child]))
            child++;
        if (!before(&q->data[child], &last))
            break;
        q->data[i] = q->data[child];
        i = child;
    }
    if (n)
        q->data[i] = last;
    return top;
}

/* Queues the pair (left, right) when their text is a token (try_add_bigram). */
static bool try_add(const clattn__vocab *vocab, const float *scores, const char *text,
                    const symbol *sym, int left, int right, queue *q)
{
    if (left < 0 || right < 0)
        return true;
    size_t size = sym[left].n + sym[right].n;
    int32_t id = clattn__vocab_find(vocab, text + sym[left].start, size);
    if (id < 0)
        return true;
    return queue_push(q, (bigram){scores[id], left, right, size});
}

/* The UTF-8 length that a lead byte announces (unicode_len_utf8: 1 for a continuation byte). */
static size_t utf8_length(unsigned char c)
{
    static const size_t lookup[] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return lookup[c >> 4];
}

bool clattn__spm_encode(const clattn__vocab *vocab, const float *scores,
                        const int32_t byte_token[256], const char *text, size_t length,
                        clattn__ids *out)
{
    if (length == 0)
        return true;
    if (length > (size_t)INT32_MAX)
        return false;
    symbol *sym = malloc(length * sizeof(*sym));
    if (!sym)
        return false;
    int count = 0;
    for (size_t at = 0; at < length;) {
        size_t n = utf8_length((unsigned char)text[at]);
        if (n > length - at)
            n = length - at;
        sym[count] = (symbol){at, n, count - 1, at + n == length ? -1 : count + 1};
        count++;
        at += n;
    }
    queue q = {0};
    bool ok = true;
    for (int i = 1; ok && i < count; i++)
        ok = try_add(vocab, scores, text, sym, i - 1, i, &q);
    while (ok && q.count) {
        bigram b = queue_pop(&q);
        symbol *l = &sym[b.left], *r = &sym[b.right];
        /* One of the two was merged since: the entry is stale. */
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue;
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            sym[r->next].prev = b.left;
        ok = try_add(vocab, scores, text, sym, l->prev, b.left, &q) &&
             try_add(vocab, scores, text, sym, b.left, l->next, &q);
    }
    for (int i = 0; ok && i != -1; i = sym[i].next) {
        int32_t id = clattn__vocab_find(vocab, text + sym[i].start, sym[i].n);
        if (id >= 0) {
            ok = clattn__ids_push(out, id);
            continue;
        }
        /* Not a token: its bytes' tokens (a byte without one is left out). */
        for (size_t j = 0; ok && j < sym[i].n; j++) {
            int32_t b = byte_token[(unsigned char)text[sym[i].start + j]];
            if (b >= 0)
                ok = clattn__ids_push(out, b);
        }
    }
    free(q.data);
    free(sym);
    return ok;
}
