/*
 * Tuning overrides from an environment variable of "key=value" pairs, such as
 * CLATTN_GEMM_CPU="vw=16,nv=2,mr=12" (runtime/gemm_cpu.c) or CLATTN_QLINEAR="mvr=4,mvc=4"
 * (ops/qlinear.c). The caller names its keys in a table; each key points at the unsigned field
 * it sets and the range the field takes.
 *
 * The text: pairs separated by commas (white space around keys, '=', values and commas is
 * skipped); a key is one of the table's; a value is a decimal whole number within the key's
 * range. Anything else is an error naming the variable and the pair, and then no field is
 * changed. An empty text changes nothing.
 */
#ifndef CLATTN_ENV_TUNING_H
#define CLATTN_ENV_TUNING_H

#include "base/errors.h"

#include <stddef.h>

/* One key of a caller's table: "key=value" sets *field to value, min <= value <= max. */
typedef struct clattn_env_tuning_key {
    const char *key;
    unsigned *field;
    unsigned min, max;
} clattn_env_tuning_key;

/* Parses `text` (the value of the variable `variable`, named in messages) against `keys`.
 * CLATTN_OK with the fields set, or CLATTN_ERROR_INVALID_ARGUMENT with a message in `error`
 * (when it is not NULL) and no field changed. */
clattn_status clattn__env_tuning_parse(const char *variable, const char *text,
                                       const clattn_env_tuning_key *keys, size_t key_count,
                                       char *error, size_t error_size);

/* The same for the environment variable `variable`; CLATTN_OK and nothing changed when it is
 * not set. */
clattn_status clattn__env_tuning_read(const char *variable, const clattn_env_tuning_key *keys,
                                      size_t key_count, char *error, size_t error_size);

#endif
