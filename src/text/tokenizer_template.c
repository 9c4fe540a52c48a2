/* The post-processor in memory: templates (which special tokens surround one text or join two,
 * with their type ids; tokenizers 0.22's processors/ apply them), the fixed ones of
 * BertProcessing, RobertaProcessing and none, and longest-first truncation of a pair (the
 * crate's utils/truncation.rs). Reading them from tokenizer.json is tokenizer_post_load.c's. */
#include "tokenizer_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void clattn__truncate_longest_first(size_t n_a, size_t n_b, size_t budget, size_t *keep_a,
                                    size_t *keep_b)
{
    *keep_a = n_a;
    *keep_b = n_b;
    if (n_a <= budget && n_b <= budget - n_a)
        return; /* they fit (SIZE_MAX: always) */
    /* The crate orders the two by length, B counting as the longer when they are equal: the
     * longer one gets the odd id of an odd budget. */
    bool a_longer = n_a > n_b;
    size_t shorter = a_longer ? n_b : n_a, longer = a_longer ? n_a : n_b;
    size_t keep_short, keep_long;
    if (shorter <= budget / 2) {
        keep_short = shorter;          /* the shorter fits in its half: only the longer is cut */
        keep_long = budget - shorter;
    } else {
        keep_short = budget / 2;
        keep_long = budget / 2 + budget % 2;
    }
    if (keep_long > longer)
        keep_long = longer;
    *keep_a = a_longer ? keep_long : keep_short;
    *keep_b = a_longer ? keep_short : keep_long;
}

void clattn__template_free(clattn__template *t)
{
    free(t->pieces);
    free(t->special_ids);
    free(t->message);
    memset(t, 0, sizeof(*t));
}

void clattn__post_processor_free(clattn__post_processor *pp)
{
    clattn__template_free(&pp->single);
    clattn__template_free(&pp->pair);
    clattn__template_free(&pp->single_plain);
    clattn__template_free(&pp->pair_plain);
}

clattn_status clattn__template_unusable(clattn__template *t, const char *function,
                                        const char *where, clattn_status status,
                                        const char *fmt, ...)
{
    clattn__template_free(t);
    char buffer[512];
    va_list args;
    va_start(args, fmt);
    vsnprintf(buffer, sizeof(buffer), fmt, args);
    va_end(args);
    t->message = malloc(strlen(buffer) + 1);
    if (!t->message)
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate a template");
    memcpy(t->message, buffer, strlen(buffer) + 1);
    t->error = status;
    return CLATTN_OK;
}

bool clattn__template_init(clattn__template *t, size_t pieces)
{
    memset(t, 0, sizeof(*t));
    t->pieces = malloc((pieces ? pieces : 1) * sizeof(*t->pieces));
    return t->pieces != NULL;
}

bool clattn__template_add(clattn__template *t, clattn__piece_kind kind, int32_t type_id,
                          const int32_t *ids, size_t id_count)
{
    clattn__template_piece *p = &t->pieces[t->piece_count++];
    *p = (clattn__template_piece){.kind = kind, .type_id = type_id,
                                  .first = t->special_count, .count = 0};
    if (kind != CLATTN__PIECE_SPECIAL || id_count == 0)
        return true;
    int32_t *grown = realloc(t->special_ids, (t->special_count + id_count) * sizeof(*grown));
    if (!grown)
        return false;
    t->special_ids = grown;
    memcpy(grown + t->special_count, ids, id_count * sizeof(*ids));
    t->special_count += id_count;
    p->count = id_count;
    return true;
}

/* One piece of a fixed template: a text (A or B) or one special id. */
typedef struct fixed_piece {
    clattn__piece_kind kind;
    int32_t type_id;
    int32_t id;
} fixed_piece;

static bool template_fixed(clattn__template *t, const fixed_piece *pieces, size_t n)
{
    clattn__template_free(t);
    if (!clattn__template_init(t, n))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!clattn__template_add(t, pieces[i].kind, pieces[i].type_id, &pieces[i].id,
                                  pieces[i].kind == CLATTN__PIECE_SPECIAL))
            return false;
    return true;
}

#define A CLATTN__PIECE_A
#define B CLATTN__PIECE_B
#define S CLATTN__PIECE_SPECIAL

/* The four templates of a fixed post-processor; the plain ones are the texts alone with the
 * type ids b_type (A always 0). */
static clattn_status post_processor_fixed(clattn__post_processor *pp, const fixed_piece *single,
                                          size_t single_n, const fixed_piece *pair,
                                          size_t pair_n, int32_t b_type, const char *function,
                                          const char *where)
{
    const fixed_piece single_plain[] = {{A, 0, 0}}, pair_plain[] = {{A, 0, 0}, {B, b_type, 0}};
    clattn__post_processor_free(pp);
    if (!template_fixed(&pp->single, single, single_n) ||
        !template_fixed(&pp->pair, pair, pair_n) ||
        !template_fixed(&pp->single_plain, single_plain, 1) ||
        !template_fixed(&pp->pair_plain, pair_plain, 2)) {
        clattn__post_processor_free(pp);
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the templates");
    }
    return CLATTN_OK;
}

clattn_status clattn__post_processor_bert(clattn__post_processor *pp, int32_t cls, int32_t sep,
                                          const char *function, const char *where)
{
    const fixed_piece single[] = {{S, 0, cls}, {A, 0, 0}, {S, 0, sep}};
    const fixed_piece pair[] = {{S, 0, cls}, {A, 0, 0}, {S, 0, sep}, {B, 1, 0}, {S, 1, sep}};
    return post_processor_fixed(pp, single, 3, pair, 5, 1, function, where);
}

/* The crate sets every type id to 0, with or without the special tokens ("Roberta is
 * weird"). */
clattn_status clattn__post_processor_roberta(clattn__post_processor *pp, int32_t cls,
                                             int32_t sep, const char *function,
                                             const char *where)
{
    const fixed_piece single[] = {{S, 0, cls}, {A, 0, 0}, {S, 0, sep}};
    const fixed_piece pair[] = {{S, 0, cls}, {A, 0, 0}, {S, 0, sep},
                                {S, 0, sep}, {B, 0, 0}, {S, 0, sep}};
    return post_processor_fixed(pp, single, 3, pair, 6, 0, function, where);
}

clattn_status clattn__post_processor_none(clattn__post_processor *pp, const char *function,
                                          const char *where)
{
    const fixed_piece single[] = {{A, 0, 0}}, pair[] = {{A, 0, 0}, {B, 1, 0}};
    return post_processor_fixed(pp, single, 1, pair, 2, 1, function, where);
}

/* *plain = *t without its special pieces; an unusable template's error is copied. */
static bool without_specials(clattn__template *plain, const clattn__template *t)
{
    clattn__template_free(plain);
    if (t->error) {
        plain->error = t->error;
        plain->message = malloc(strlen(t->message) + 1);
        if (plain->message)
            memcpy(plain->message, t->message, strlen(t->message) + 1);
        return plain->message != NULL;
    }
    if (!clattn__template_init(plain, t->piece_count))
        return false;
    for (size_t i = 0; i < t->piece_count; i++)
        if (t->pieces[i].kind != CLATTN__PIECE_SPECIAL)
            clattn__template_add(plain, t->pieces[i].kind, t->pieces[i].type_id, NULL, 0);
    return true;
}

clattn_status clattn__post_processor_derive_plain(clattn__post_processor *pp,
                                                  const char *function, const char *where)
{
    if (!without_specials(&pp->single_plain, &pp->single) ||
        !without_specials(&pp->pair_plain, &pp->pair))
        return clattn__fail_in(function, where, CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "cannot allocate the templates");
    return CLATTN_OK;
}
