/* Tuning overrides from an environment variable of "key=value" pairs. */
#include "env_tuning.h"

#include <ctype.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A pair is quoted in messages up to this many bytes. */
#define PAIR_QUOTE_MAX 64

static int is_space(char c) { return isspace((unsigned char)c) != 0; }

/* [begin, end) with white space trimmed on both sides. */
static void trim(const char **begin, const char **end)
{
    while (*begin < *end && is_space(**begin))
        (*begin)++;
    while (*end > *begin && is_space((*end)[-1]))
        (*end)--;
}

#if defined(__GNUC__)
__attribute__((format(printf, 6, 7)))
#endif
static clattn_status bad_pair(char *error, size_t error_size, const char *variable,
                              const char *pair, const char *pair_end, const char *fmt, ...)
{
    if (error && error_size) {
        int pair_length = (int)(pair_end - pair);
        int shown = pair_length > PAIR_QUOTE_MAX ? PAIR_QUOTE_MAX : pair_length;
        int used = snprintf(error, error_size, "%s: \"%.*s%s\": ", variable, shown, pair,
                            shown < pair_length ? "..." : "");
        if (used >= 0 && (size_t)used < error_size) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(error + used, error_size - (size_t)used, fmt, ap);
            va_end(ap);
        }
    }
    return CLATTN_ERROR_INVALID_ARGUMENT;
}

static const clattn_env_tuning_key *find_key(const clattn_env_tuning_key *keys, size_t key_count,
                                             const char *key, const char *key_end)
{
    size_t length = (size_t)(key_end - key);
    for (size_t i = 0; i < key_count; i++)
        if (strlen(keys[i].key) == length && memcmp(keys[i].key, key, length) == 0)
            return &keys[i];
    return NULL;
}

/* "vw, nv, mr" into `out`. */
static void key_list(const clattn_env_tuning_key *keys, size_t key_count, char *out, size_t size)
{
    size_t used = 0;
    out[0] = '\0';
    for (size_t i = 0; i < key_count && used < size; i++) {
        int n = snprintf(out + used, size - used, "%s%s", i ? ", " : "", keys[i].key);
        if (n < 0)
            break;
        used += (size_t)n;
    }
}

/* The decimal whole number [begin, end) into *value; false when it is not one or exceeds
 * UINT_MAX. */
static int parse_unsigned(const char *begin, const char *end, unsigned long long *value)
{
    if (begin == end)
        return 0;
    unsigned long long v = 0;
    for (const char *c = begin; c < end; c++) {
        if (*c < '0' || *c > '9')
            return 0;
        v = v * 10 + (unsigned)(*c - '0');
        if (v > UINT_MAX)
            return 0;
    }
    *value = v;
    return 1;
}

/* One pass over the pairs: checks them all, and sets the fields when `apply`. */
static clattn_status walk(const char *variable, const char *text,
                          const clattn_env_tuning_key *keys, size_t key_count, int apply,
                          char *error, size_t error_size)
{
    const char *next = text;
    while (*next) {
        const char *pair = next, *pair_end = strchr(next, ',');
        if (!pair_end)
            pair_end = next + strlen(next);
        next = *pair_end ? pair_end + 1 : pair_end;
        trim(&pair, &pair_end);
        if (pair == pair_end)
            continue; /* an empty pair: ",," or a trailing comma */
        const char *equals = memchr(pair, '=', (size_t)(pair_end - pair));
        if (!equals)
            return bad_pair(error, error_size, variable, pair, pair_end,
                            "not a key=value pair");
        const char *key = pair, *key_end = equals, *value = equals + 1, *value_end = pair_end;
        trim(&key, &key_end);
        trim(&value, &value_end);
        const clattn_env_tuning_key *entry = find_key(keys, key_count, key, key_end);
        if (!entry) {
            char known[256];
            key_list(keys, key_count, known, sizeof(known));
            return bad_pair(error, error_size, variable, pair, pair_end,
                            "unknown key \"%.*s\" (the keys: %s)", (int)(key_end - key), key,
                            known);
        }
        unsigned long long number;
        if (!parse_unsigned(value, value_end, &number))
            return bad_pair(error, error_size, variable, pair, pair_end,
                            "the value is not a whole number from 0 to %u", UINT_MAX);
        if (number < entry->min || number > entry->max)
            return bad_pair(error, error_size, variable, pair, pair_end,
                            "%s is out of its range %u..%u", entry->key, entry->min, entry->max);
        if (apply)
            *entry->field = (unsigned)number;
    }
    return CLATTN_OK;
}

clattn_status clattn__env_tuning_parse(const char *variable, const char *text,
                                       const clattn_env_tuning_key *keys, size_t key_count,
                                       char *error, size_t error_size)
{
    clattn_status status = walk(variable, text, keys, key_count, 0, error, error_size);
    if (status == CLATTN_OK)
        walk(variable, text, keys, key_count, 1, NULL, 0);
    return status;
}

clattn_status clattn__env_tuning_read(const char *variable, const clattn_env_tuning_key *keys,
                                      size_t key_count, char *error, size_t error_size)
{
    const char *text = getenv(variable);
    if (!text)
        return CLATTN_OK;
    return clattn__env_tuning_parse(variable, text, keys, key_count, error, error_size);
}
