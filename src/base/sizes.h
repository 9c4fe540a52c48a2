/*
 * Size arithmetic and small checks, as inline functions: the leaf every other file may use.
 */
#ifndef CLATTN_SIZES_H
#define CLATTN_SIZES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(__GNUC__)
#define CLATTN_PRINTF(fmt, args) __attribute__((format(printf, fmt, args)))
#else
#define CLATTN_PRINTF(fmt, args)
#endif

/* *out = a * b; false on overflow (then *out is unchanged). */
static inline bool clattn__mul_size(size_t a, size_t b, size_t *out)
{
    if (a != 0 && b > SIZE_MAX / a)
        return false;
    *out = a * b;
    return true;
}

/* *out = a + b; false on overflow (then *out is unchanged). */
static inline bool clattn__add_size(size_t a, size_t b, size_t *out)
{
    if (b > SIZE_MAX - a)
        return false;
    *out = a + b;
    return true;
}

/* True when every byte of a params struct's reserved[] is zero. */
static inline bool clattn__reserved_is_zero(const uint8_t *reserved, size_t size)
{
    for (size_t i = 0; i < size; i++)
        if (reserved[i])
            return false;
    return true;
}

#endif /* CLATTN_SIZES_H */
