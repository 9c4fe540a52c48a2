/* When generation ends: end-of-generation ids, max tokens, stop strings over streamed text
 * (stop.h). */
#include "stop.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* A growable byte buffer. */
typedef struct byte_buffer {
    char *bytes;
    size_t length;
    size_t capacity;
} byte_buffer;

struct clattn_stop {
    int32_t *eog_ids;
    size_t eog_count;
    size_t max_tokens;
    size_t tokens;
    char **stop_strings;
    size_t *stop_lengths;
    size_t stop_count;
    byte_buffer held;    /* text not shown yet */
    byte_buffer emitted; /* what the last call shows */
    bool stopped;        /* a stop string matched */
};

static bool buffer_reserve(byte_buffer *b, size_t length)
{
    if (length <= b->capacity)
        return true;
    size_t capacity = b->capacity ? b->capacity : 64;
    while (capacity < length) {
        if (capacity > SIZE_MAX / 2)
            return false;
        capacity *= 2;
    }
    char *bytes = realloc(b->bytes, capacity);
    if (!bytes)
        return false;
    b->bytes = bytes;
    b->capacity = capacity;
    return true;
}

/* The length of the valid UTF-8 sequence starting at s[0..n), 0 when there is none. */
static size_t utf8_sequence_length(const unsigned char *s, size_t n)
{
    size_t need;
    if (s[0] < 0x80)
        return 1;
    else if (s[0] >= 0xC2 && s[0] <= 0xDF)
        need = 2;
    else if (s[0] >= 0xE0 && s[0] <= 0xEF)
        need = 3;
    else if (s[0] >= 0xF0 && s[0] <= 0xF4)
        need = 4;
    else
        return 0;
    if (n < need)
        return 0;
    for (size_t i = 1; i < need; i++)
        if ((s[i] & 0xC0) != 0x80)
            return 0;
    if (need == 3 && ((s[0] == 0xE0 && s[1] < 0xA0) || (s[0] == 0xED && s[1] >= 0xA0)))
        return 0; /* overlong, surrogate */
    if (need == 4 && ((s[0] == 0xF0 && s[1] < 0x90) || (s[0] == 0xF4 && s[1] >= 0x90)))
        return 0; /* overlong, above U+10FFFF */
    return need;
}

static bool valid_utf8(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    for (size_t i = 0; i < n;) {
        size_t k = utf8_sequence_length(s + i, n - i);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* How many bytes at the end of s[0..n) are the start of a UTF-8 sequence still missing bytes:
 * a lead byte followed only by continuation bytes, fewer than it announces. 0 otherwise. */
static size_t incomplete_utf8_tail(const char *text, size_t n)
{
    const unsigned char *s = (const unsigned char *)text;
    size_t back = 0;
    while (back < 3 && back < n && (s[n - 1 - back] & 0xC0) == 0x80)
        back++;
    if (back == n)
        return 0;
    unsigned char lead = s[n - 1 - back];
    size_t need = lead >= 0xC2 && lead <= 0xDF ? 2 : lead >= 0xE0 && lead <= 0xEF ? 3
                : lead >= 0xF0 && lead <= 0xF4 ? 4 : 0;
    return need > back + 1 ? back + 1 : 0;
}

clattn_status clattn__stop_create(const clattn_stop_rules *rules, clattn_stop **out)
{
    CLATTN_CHECK_ARG(NULL, __func__, rules != NULL && out != NULL, "no rules or output");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, __func__, rules->eog_count == 0 || rules->eog_ids != NULL,
                     "no end-of-generation ids");
    CLATTN_CHECK_ARG(NULL, __func__, rules->stop_count == 0 || rules->stop_strings != NULL,
                     "no stop strings");
    for (size_t i = 0; i < rules->eog_count; i++)
        CLATTN_CHECK_ARG(NULL, __func__, rules->eog_ids[i] >= 0,
                         "end-of-generation id %zu is %d", i, (int)rules->eog_ids[i]);
    for (size_t i = 0; i < rules->stop_count; i++) {
        const char *s = rules->stop_strings[i];
        CLATTN_CHECK_ARG(NULL, __func__, s != NULL && s[0] != '\0', "stop string %zu is empty",
                         i);
        CLATTN_CHECK_ARG(NULL, __func__, valid_utf8(s, strlen(s)),
                         "stop string %zu is not valid UTF-8", i);
    }
    clattn_stop *st = calloc(1, sizeof(*st));
    bool ok = st != NULL;
    if (ok) {
        st->max_tokens = rules->max_tokens;
        st->eog_count = rules->eog_count;
        st->stop_count = rules->stop_count;
        st->eog_ids = malloc((rules->eog_count ? rules->eog_count : 1) * sizeof(int32_t));
        st->stop_strings = calloc(rules->stop_count ? rules->stop_count : 1, sizeof(char *));
        st->stop_lengths = calloc(rules->stop_count ? rules->stop_count : 1, sizeof(size_t));
        ok = st->eog_ids && st->stop_strings && st->stop_lengths;
    }
    if (ok && rules->eog_count)
        memcpy(st->eog_ids, rules->eog_ids, rules->eog_count * sizeof(int32_t));
    for (size_t i = 0; ok && i < rules->stop_count; i++) {
        st->stop_lengths[i] = strlen(rules->stop_strings[i]);
        st->stop_strings[i] = malloc(st->stop_lengths[i] + 1);
        ok = st->stop_strings[i] != NULL;
        if (ok)
            memcpy(st->stop_strings[i], rules->stop_strings[i], st->stop_lengths[i] + 1);
    }
    if (!ok) {
        clattn__stop_destroy(st);
        return clattn__fail_in(__func__, "stop rules", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "no memory");
    }
    *out = st;
    return CLATTN_OK;
}

void clattn__stop_destroy(clattn_stop *st)
{
    if (!st)
        return;
    for (size_t i = 0; st->stop_strings && i < st->stop_count; i++)
        free(st->stop_strings[i]);
    free(st->stop_strings);
    free(st->stop_lengths);
    free(st->eog_ids);
    free(st->held.bytes);
    free(st->emitted.bytes);
    free(st);
}

clattn_stop_reason clattn__stop_token(clattn_stop *st, int32_t id)
{
    st->tokens++;
    for (size_t i = 0; i < st->eog_count; i++)
        if (st->eog_ids[i] == id)
            return CLATTN_STOP_EOG;
    if (st->max_tokens != 0 && st->tokens >= st->max_tokens)
        return CLATTN_STOP_MAX_TOKENS;
    return CLATTN_STOP_NONE;
}

size_t clattn__stop_token_count(const clattn_stop *st)
{
    return st->tokens;
}

/* The first position of needle[0..m) in hay[0..n), or n when it does not occur. */
static size_t find(const char *hay, size_t n, const char *needle, size_t m)
{
    for (size_t i = 0; i + m <= n; i++)
        if (hay[i] == needle[0] && memcmp(hay + i, needle, m) == 0)
            return i;
    return n;
}

/* Moves the first `length` held bytes to the emitted buffer. */
static void emit_held(clattn_stop *st, size_t length, const char **text, size_t *text_length)
{
    /* emitted's capacity was reserved by the caller. */
    if (length > 0) /* the buffers may still be NULL when nothing was held */
        memcpy(st->emitted.bytes, st->held.bytes, length);
    st->emitted.length = length;
    if (st->held.length > length)
        memmove(st->held.bytes, st->held.bytes + length, st->held.length - length);
    st->held.length -= length;
    *text = st->emitted.bytes ? st->emitted.bytes : ""; /* never NULL, even when empty */
    *text_length = length;
}

clattn_stop_reason clattn__stop_text(clattn_stop *st, const char *piece, size_t length,
                                     const char **text, size_t *text_length)
{
    *text = "";
    *text_length = 0;
    if (st->stopped)
        return CLATTN_STOP_STRING;
    size_t total = st->held.length + length;
    if (total < length || !buffer_reserve(&st->held, total) ||
        !buffer_reserve(&st->emitted, total)) {
        clattn__fail_in(__func__, "stop strings", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                        "no memory for %zu bytes of text", total);
        return CLATTN_STOP_ERROR;
    }
    if (length)
        memcpy(st->held.bytes + st->held.length, piece, length);
    st->held.length = total;
    const char *h = st->held.bytes;

    /* The first stop string that occurs ends the text. */
    size_t first = total;
    for (size_t i = 0; i < st->stop_count; i++) {
        size_t at = find(h, total, st->stop_strings[i], st->stop_lengths[i]);
        if (at < first)
            first = at;
    }
    if (first < total) {
        emit_held(st, first, text, text_length);
        st->held.length = 0;
        st->stopped = true;
        return CLATTN_STOP_STRING;
    }

    /* Hold the longest end that begins a stop string, and an unfinished character. */
    size_t hold = incomplete_utf8_tail(h, total);
    for (size_t i = 0; i < st->stop_count; i++) {
        size_t m = st->stop_lengths[i] - 1;
        if (m > total)
            m = total;
        for (size_t k = m; k > hold; k--) {
            if (memcmp(h + total - k, st->stop_strings[i], k) == 0) {
                hold = k;
                break;
            }
        }
    }
    emit_held(st, total - hold, text, text_length);
    return CLATTN_STOP_NONE;
}

void clattn__stop_flush(clattn_stop *st, const char **text, size_t *text_length)
{
    *text = "";
    *text_length = 0;
    if (st->stopped || st->held.length == 0)
        return;
    if (!buffer_reserve(&st->emitted, st->held.length))
        return; /* cannot happen: emitted was reserved as large as held */
    emit_held(st, st->held.length, text, text_length);
}
