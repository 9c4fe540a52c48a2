/* chat's answers over one cached sequence, with the longest common prefix of the turns' prompts
 * run once (conversation.h). */
#include "conversation.h"

#include "../cli.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

void conversation_init(conversation *c, clattn_llm *llm, const clattn_llm_info *info, bool reuse)
{
    memset(c, 0, sizeof(*c));
    c->llm = llm;
    c->vocab_size = info->vocab_size;
    c->context_length = info->context_length;
    c->reuse = reuse;
}

void conversation_release(conversation *c)
{
    clattn_llm_cache_destroy(&c->cache);
    free(c->held);
    c->held = NULL;
    c->held_count = c->capacity = 0;
}

void conversation_answer_clear(conversation_answer *a)
{
    free(a->tokens);
    free(a->text);
    memset(a, 0, sizeof(*a));
}

/* Tokens a kept cache starts with room for (when the context has them): a few turns. */
#define FIRST_CAPACITY 1024

/* A cache whose sequence has room for `need` tokens. Without reuse it is exactly that large (one
 * prompt's); else at least FIRST_CAPACITY and twice the need (later turns then fit it), and a
 * larger need later takes a new cache, twice as large again, whose sequence starts empty; never
 * beyond the context. */
static int ensure_room(conversation *c, size_t need)
{
    if (c->cache && need <= c->capacity)
        return 0;
    size_t capacity = need;
    if (c->reuse) {
        capacity = 2 * (need > c->capacity ? need : c->capacity);
        if (capacity < FIRST_CAPACITY)
            capacity = FIRST_CAPACITY;
        if (capacity > c->context_length)
            capacity = c->context_length > need ? c->context_length : need;
    }
    conversation_release(c);
    c->held = malloc(capacity * sizeof(int32_t));
    if (!c->held)
        return runtime_error("out of memory (a cache of %zu tokens)", capacity);
    if (clattn_llm_cache_create(c->llm, 1, capacity, CLATTN_LLM_CACHE_FLOAT, &c->cache) !=
            CLATTN_OK ||
        clattn_llm_sequence_add(c->cache, &c->seq) != CLATTN_OK) {
        int rc = runtime_error("%s", clattn_last_error(NULL));
        conversation_release(c);
        return rc;
    }
    c->capacity = capacity;
    return 0;
}

/* The first tokens the sequence holds that the prompt starts with too, leaving at least one of the
 * prompt's to run (its logits give the first answer token). */
static size_t common_prefix(const conversation *c, const int32_t *ids, size_t n)
{
    size_t k = 0;
    while (k < c->held_count && k + 1 < n && c->held[k] == ids[k])
        k++;
    return k;
}

/* Runs n ids after the sequence's tokens and records them as held; logits: the last one's. */
static clattn_status run_ids(conversation *c, const int32_t *ids, size_t n, bool prompt,
                             float *logits)
{
    clattn_status s = prompt ? clattn_llm_prompt(c->cache, c->seq, ids, n, logits)
                             : clattn_llm_decode(c->cache, &c->seq, ids, 1, logits);
    if (s == CLATTN_OK) {
        memcpy(c->held + c->held_count, ids, n * sizeof(int32_t));
        c->held_count += n;
    }
    return s;
}

/* The generation loop of clattn_llm_generate over the conversation's sequence: sample from the
 * logits, show the piece, run the token as the next decode step until the generator ends. */
static clattn_status generate(conversation *c, clattn_llm_generator *gen, float *logits,
                              void (*on_piece)(const char *, size_t), conversation_answer *a)
{
    size_t cap = 256;
    a->text = malloc(cap);
    if (!a->text)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    a->text[0] = '\0';
    clattn_status s = CLATTN_OK;
    int finish = 0;
    bool flushed = false;
    while (s == CLATTN_OK && !flushed) {
        int32_t token = -1;
        const char *piece = "";
        size_t length = 0;
        if (!finish) {
            s = clattn_llm_generator_next(gen, logits, &token, &piece, &length, &finish);
        } else {
            s = clattn_llm_generator_flush(gen, &piece, &length);
            flushed = true;
        }
        if (s != CLATTN_OK)
            break;
        if (a->text_length + length + 1 > cap) {
            while (a->text_length + length + 1 > cap)
                cap *= 2;
            char *grown = realloc(a->text, cap);
            if (!grown)
                return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
            a->text = grown;
        }
        memcpy(a->text + a->text_length, piece, length);
        a->text_length += length;
        a->text[a->text_length] = '\0';
        if (on_piece && length)
            on_piece(piece, length);
        if (!finish && !flushed)
            s = run_ids(c, &token, 1, false, logits);
    }
    a->finish = finish;
    return s;
}

int conversation_answer_ids(conversation *c, const clattn_llm_text *text, const int32_t *ids,
                            size_t n, const clattn_llm_generate_options *options,
                            void (*on_piece)(const char *piece, size_t length),
                            conversation_answer *a)
{
    memset(a, 0, sizeof(*a));
    size_t max_new = options->max_new_tokens;
    if (n > c->context_length || max_new > c->context_length - n)
        return runtime_error("a prompt of %zu tokens + max_new_tokens %zu = %zu exceed the "
                             "model's context_length of %zu",
                             n, max_new, n + max_new, c->context_length);
    int rc = ensure_room(c, n + max_new - 1); /* the last token generated is never run */
    if (rc)
        return rc;
    a->prompt_tokens = n;
    a->cached_tokens = c->reuse ? common_prefix(c, ids, n) : 0;
    clattn_llm_generator *gen = NULL;
    float *logits = malloc(c->vocab_size * sizeof(float));
    if (!logits)
        return runtime_error("out of memory");
    /* The whole prompt is the repetition penalty's context, as for a prompt run whole. */
    clattn_status s = clattn_llm_generator_create(text, c->vocab_size, options, ids, n, 0, &gen);
    if (s == CLATTN_OK)
        s = clattn_llm_sequence_truncate(c->cache, c->seq, a->cached_tokens);
    c->held_count = a->cached_tokens;
    double t0 = now_s();
    if (s == CLATTN_OK)
        s = run_ids(c, ids + a->cached_tokens, n - a->cached_tokens, true, logits);
    double t1 = now_s();
    a->prompt_seconds = t1 - t0;
    if (s == CLATTN_OK)
        s = generate(c, gen, logits, on_piece, a);
    a->decode_seconds = now_s() - t1;
    if (s == CLATTN_OK) {
        size_t count = 0;
        const int32_t *tokens = clattn_llm_generator_tokens(gen, &count);
        a->tokens = malloc((count ? count : 1) * sizeof(int32_t));
        if (!a->tokens)
            s = CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        else if (count)
            memcpy(a->tokens, tokens, count * sizeof(int32_t));
        a->token_count = count;
    }
    clattn_llm_generator_destroy(&gen);
    free(logits);
    if (s == CLATTN_OK)
        return 0;
    conversation_answer_clear(a);
    /* The sequence may hold part of this turn: the next turn starts over. */
    c->held_count = 0;
    if (c->cache)
        clattn_llm_sequence_truncate(c->cache, c->seq, 0);
    if (s == CLATTN_ERROR_OUT_OF_HOST_MEMORY)
        return runtime_error("out of memory");
    return runtime_error("%s", clattn_last_error(NULL));
}
