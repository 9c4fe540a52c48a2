/* What the families share in reading config.json: a key as a size, a number, a boolean or a whole
 * number in a range, and a key whose value is refused, each failure naming the key and the file
 * (family_config.c). */
#ifndef CLATTN_FAMILY_CONFIG_H
#define CLATTN_FAMILY_CONFIG_H

#include "clattn/common.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The fewest positions a text needs: its [CLS] and [SEP] (or <s> and </s>). */
#define CLATTN_FAMILY_MIN_POSITIONS 2

/* `key`, which must be present: a positive integer up to 2^31 into *out; else
 * CLATTN_ERROR_FORMAT ('the field "key" is missing', '... must be a positive integer below
 * 2^31'). */
clattn_status clattn__family_size(const char *path, json_t *root, const char *key, size_t *out);
/* `key` as a finite number: `fallback` when absent or null; else CLATTN_ERROR_FORMAT. */
clattn_status clattn__family_number(const char *path, json_t *root, const char *key,
                                    double fallback, double *out);
/* `key` as true or false: `fallback` when absent or null; else CLATTN_ERROR_FORMAT. */
clattn_status clattn__family_bool(const char *path, json_t *root, const char *key, bool fallback,
                                  bool *out);
/* A value of `key` that must be a whole number from `min` to below 2^30: CLATTN_ERROR_FORMAT
 * naming the key, the value and the range when it is not ('key is v: it must be a whole number
 * from min to 2^30<why>'; why may be ""). */
clattn_status clattn__family_whole_number(const char *path, const char *key, double value,
                                          double min, const char *why);
/* Each of keys[0 .. count) that is true: CLATTN_ERROR_UNSUPPORTED 'key true is not supported
 * (family)' (a value that is not a boolean: CLATTN_ERROR_FORMAT). */
clattn_status clattn__family_refuse_true(const char *path, json_t *root, const char *const *keys,
                                         size_t count, const char *family);
/* `key` present and not null: CLATTN_ERROR_UNSUPPORTED 'key is not supported (only null<why>)'. */
clattn_status clattn__family_refuse_non_null(const char *path, json_t *root, const char *key,
                                             const char *why);

#endif /* CLATTN_FAMILY_CONFIG_H */
