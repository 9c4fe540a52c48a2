/*
 * Named random encoder weights for tests: the same host arrays feed the library (through a
 * clattn_weight_lookup) and the plain-C reference (ref_encoder).
 */
#ifndef CLATTN_TEST_WEIGHT_BANK_H
#define CLATTN_TEST_WEIGHT_BANK_H

#include <clattn/clattn.h>

#include "ref/ref_encoder.h"

#define BANK_MAX 256

typedef struct weight_bank {
    size_t count;
    char names[BANK_MAX][96];
    clattn_host_tensor tensors[BANK_MAX];
    ref_encoder_layer layers[16];
    ref_encoder ref;
} weight_bank;

/* Random weights for `c` (head widths resolved by the caller or 0 for d/h); packed selects
 * in_proj_weight over q/k/v_proj_weight (only possible when d_k = d_v = d/h). */
void bank_init(weight_bank *bank, const clattn_encoder_config *c, bool packed, uint64_t seed);
void bank_free(weight_bank *bank);
/* A clattn_weight_lookup over the bank. */
const clattn_host_tensor *bank_lookup(void *bank, const char *name);
/* Removes a tensor (so that loading fails), or replaces its shape. */
void bank_remove(weight_bank *bank, const char *name);
clattn_host_tensor *bank_find(weight_bank *bank, const char *name);

#endif
