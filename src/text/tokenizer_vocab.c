/* The tokenizer's vocabulary: token strings <-> ids, an open-addressing hash table. */
#include "tokenizer_internal.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a, 64-bit (clattn__vocab_hash, below, from the empty string's hash). */
static uint64_t hash_bytes(const char *s, size_t n)
{
    return clattn__vocab_hash(CLATTN__VOCAB_HASH_EMPTY, s, n);
}

clattn_status clattn__vocab_init(clattn__vocab *v, size_t count, const char *function,
                                 const char *where)
{
    memset(v, 0, sizeof(*v));
    if (count == 0)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT, "the vocabulary is empty");
    if (count > (size_t)INT32_MAX)
        return clattn__fail_in(function, where, CLATTN_ERROR_TOO_LARGE,
                               "the vocabulary has %zu entries; at most %d are supported", count,
                               INT32_MAX);
    size_t slots = 16;
    while (slots < 2 * count)
        slots *= 2;
    v->tokens = calloc(count, sizeof(*v->tokens));
    v->lengths = calloc(count, sizeof(*v->lengths));
    v->slots = malloc(slots * sizeof(*v->slots));
    if (!v->tokens || !v->lengths || !v->slots) {
        clattn__vocab_free(v);
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a vocabulary of %zu entries", count);
    }
    for (size_t i = 0; i < slots; i++)
        v->slots[i] = -1;
    v->count = count;
    v->mask = slots - 1;
    return CLATTN_OK;
}

/* Copies up to 40 bytes of a token for a message, control characters as '?'. */
static void quote(char *dst, size_t size, const char *s, size_t n)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 4 < size && i < 40; i++)
        dst[k++] = (unsigned char)s[i] < 0x20 ? '?' : s[i];
    if (n > 40 && k + 4 < size) {
        memcpy(dst + k, "...", 3);
        k += 3;
    }
    dst[k] = '\0';
}

clattn_status clattn__vocab_set(clattn__vocab *v, int32_t id, const char *token, size_t length,
                                const char *function, const char *where)
{
    char shown[64];
    quote(shown, sizeof(shown), token, length);
    if (id < 0 || (size_t)id >= v->count)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "token '%s' has id %d; the ids of %zu tokens must be 0..%zu",
                               shown, (int)id, v->count, v->count - 1);
    if (v->tokens[id])
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "id %d is given to both '%s' and '%s'", (int)id, v->tokens[id],
                               shown);
    if (length == 0)
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "the token of id %d is empty", (int)id);
    size_t bad;
    if (!clattn__utf8_valid(token, length, &bad))
        return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                               "the token of id %d is not UTF-8 (or holds a NUL) at byte %zu",
                               (int)id, bad);
    uint64_t h = hash_bytes(token, length);
    size_t slot = (size_t)h & v->mask;
    while (v->slots[slot] >= 0) {
        int32_t other = v->slots[slot];
        if (v->lengths[other] == length && memcmp(v->tokens[other], token, length) == 0)
            return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                   "token '%s' appears twice (ids %d and %d)", shown, (int)other,
                                   (int)id);
        slot = (slot + 1) & v->mask;
    }
    char *copy = malloc(length + 1);
    if (!copy)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a token of %zu bytes", length);
    memcpy(copy, token, length);
    copy[length] = '\0';
    v->tokens[id] = copy;
    v->lengths[id] = length;
    v->slots[slot] = id;
    if (length > v->longest)
        v->longest = length;
    return CLATTN_OK;
}

clattn_status clattn__vocab_build(clattn__vocab *v, const char *const *tokens,
                                  const size_t *lengths, const int32_t *ids, size_t count,
                                  const char *function, const char *where)
{
    clattn_status s = clattn__vocab_init(v, count, function, where);
    for (size_t k = 0; !s && k < count; k++)
        s = clattn__vocab_set(v, ids ? ids[k] : (int32_t)k, tokens[k],
                              lengths ? lengths[k] : strlen(tokens[k]), function, where);
    if (!s)
        s = clattn__vocab_check_complete(v, function, where);
    if (s)
        clattn__vocab_free(v);
    return s;
}

clattn_status clattn__vocab_check_complete(const clattn__vocab *v, const char *function,
                                           const char *where)
{
    for (size_t i = 0; i < v->count; i++)
        if (!v->tokens[i])
            return clattn__fail_in(function, where, CLATTN_ERROR_FORMAT,
                                   "no token has id %zu; the ids of %zu tokens must be 0..%zu", i,
                                   v->count, v->count - 1);
    return CLATTN_OK;
}

int32_t clattn__vocab_find(const clattn__vocab *v, const char *token, size_t length)
{
    if (!v->slots)
        return -1;
    size_t slot = (size_t)hash_bytes(token, length) & v->mask;
    while (v->slots[slot] >= 0) {
        int32_t id = v->slots[slot];
        if (v->lengths[id] == length && memcmp(v->tokens[id], token, length) == 0)
            return id;
        slot = (slot + 1) & v->mask;
    }
    return -1;
}

void clattn__vocab_free(clattn__vocab *v)
{
    if (v->tokens)
        for (size_t i = 0; i < v->count; i++)
            free(v->tokens[i]);
    free(v->tokens);
    free(v->lengths);
    free(v->slots);
    memset(v, 0, sizeof(*v));
}

uint64_t clattn__vocab_hash(uint64_t h, const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h;
}

int32_t clattn__vocab_find_hashed(const clattn__vocab *v, const char *token, size_t length,
                                  uint64_t hash)
{
    if (!v->slots)
        return -1;
    size_t slot = (size_t)hash & v->mask;
    while (v->slots[slot] >= 0) {
        int32_t id = v->slots[slot];
        if (v->lengths[id] == length && memcmp(v->tokens[id], token, length) == 0)
            return id;
        slot = (slot + 1) & v->mask;
    }
    return -1;
}
