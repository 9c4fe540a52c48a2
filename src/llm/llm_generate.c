/* The generation loop of clattn/llm_text.h over one sequence: the context checked before any
 * work, the prompt in one call, then a generator's steps (llm_generator.c) and decode steps. */
#include "clattn/llm_text.h"
#include "llm_text_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

void clattn_llm_generation_clear(clattn_llm_generation *g)
{
    if (!g)
        return;
    free(g->tokens);
    free(g->text);
    memset(g, 0, sizeof(*g));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

typedef struct text_buffer {
    char *data;
    size_t length, capacity;
} text_buffer;

static clattn_status append_text(const char *fn, text_buffer *b, const char *text,
                                 size_t length)
{
    if (b->length + length + 1 > b->capacity) {
        size_t cap = b->capacity ? b->capacity : 256;
        while (cap < b->length + length + 1)
            cap *= 2;
        char *grown = realloc(b->data, cap);
        if (!grown)
            return clattn__fail_in(fn, "text", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "cannot hold %zu bytes of text", cap);
        b->data = grown;
        b->capacity = cap;
    }
    if (length)
        memcpy(b->data + b->length, text, length);
    b->length += length;
    b->data[b->length] = '\0';
    return CLATTN_OK;
}

/* The room the prompt and the new tokens need, checked against the model's context before any
 * work; *max_new: the tokens that may be generated. */
static clattn_status check_room(const char *fn, const clattn_llm_info *info, size_t held,
                                size_t n, size_t max_new_tokens, size_t *max_new)
{
    size_t ctx = info->context_length;
    char held_text[64] = "";
    if (held)
        snprintf(held_text, sizeof(held_text), "%zu tokens held + ", held);
    if (held > ctx || n > ctx - held)
        return clattn__fail_in(fn, "context", CLATTN_ERROR_OUT_OF_RANGE,
                               "%sa prompt of %zu tokens exceed the model's context_length of %zu",
                               held_text, n, ctx);
    size_t room = ctx - held - n;
    if (max_new_tokens == 0) {
        *max_new = room + 1; /* the last token sampled is never run */
        return CLATTN_OK;
    }
    if (max_new_tokens > room)
        return clattn__fail_in(fn, "context", CLATTN_ERROR_OUT_OF_RANGE,
                               "%sa prompt of %zu tokens + max_new_tokens %zu = %zu exceed the "
                               "model's context_length of %zu",
                               held_text, n, max_new_tokens, held + n + max_new_tokens, ctx);
    *max_new = max_new_tokens;
    return CLATTN_OK;
}

/* The same against a caller's cache, which holds every token but the last generated (never
 * run): held + n + max_new - 1 <= its capacity; *max_new is lowered to the cache's room when
 * max_new_tokens was 0 (up to the room). */
static clattn_status check_cache_room(const char *fn, const clattn_llm_cache *cache, size_t held,
                                      size_t n, size_t max_new_tokens, size_t *max_new)
{
    size_t capacity = 0;
    clattn_status s = clattn_llm_cache_get_capacity(cache, NULL, &capacity);
    if (s != CLATTN_OK)
        return s;
    if (held > capacity || n > capacity - held)
        return clattn__fail_in(fn, "cache", CLATTN_ERROR_OUT_OF_RANGE,
                               "%zu tokens held + a prompt of %zu tokens exceed the cache's "
                               "capacity of %zu tokens per sequence",
                               held, n, capacity);
    size_t room = capacity - held - n + 1; /* tokens that may be generated */
    if (max_new_tokens == 0) {
        if (*max_new > room)
            *max_new = room;
        return CLATTN_OK;
    }
    if (max_new_tokens > room)
        return clattn__fail_in(fn, "cache", CLATTN_ERROR_OUT_OF_RANGE,
                               "%zu tokens held + a prompt of %zu tokens + max_new_tokens %zu "
                               "- 1 (the last token is not run) = %zu exceed the cache's "
                               "capacity of %zu tokens per sequence",
                               held, n, max_new_tokens, held + n + max_new_tokens - 1, capacity);
    return CLATTN_OK;
}

/* The loop after the prompt: logits holds the prompt's last logits. */
static clattn_status run_loop(const char *fn, clattn_llm_generator *gen, clattn_llm_cache *cache,
                              size_t seq, float *logits, clattn_llm_token_callback callback,
                              void *user_data, text_buffer *text, clattn_llm_generation *result)
{
    int finish = 0;
    clattn_status s = CLATTN_OK;
    while (!finish) {
        int32_t token;
        const char *piece;
        size_t length;
        s = clattn_llm_generator_next(gen, logits, &token, &piece, &length, &finish);
        if (s != CLATTN_OK || finish == CLATTN_LLM_FINISH_EOG)
            break;
        s = append_text(fn, text, piece, length);
        if (s != CLATTN_OK)
            break;
        if (callback && callback(piece, length, token, logits, user_data) != 0 && !finish)
            finish = CLATTN_LLM_FINISH_CALLBACK;
        if (finish)
            break;
        s = clattn_llm_decode(cache, &seq, &token, 1, logits);
        if (s != CLATTN_OK)
            break;
        result->decode_tokens++;
    }
    if (s != CLATTN_OK)
        return s;
    const char *held;
    size_t held_length;
    s = clattn_llm_generator_flush(gen, &held, &held_length);
    if (s == CLATTN_OK)
        s = append_text(fn, text, held, held_length);
    if (s == CLATTN_OK && callback)
        callback(held, held_length, -1, NULL, user_data);
    result->finish = finish;
    return s;
}

/* The options in force (the caller's, or the defaults) and the model's facts: the start of
 * both generate calls. */
static clattn_status generation_setup(const clattn_llm *llm,
                                      const clattn_llm_generate_options *options,
                                      clattn_llm_generate_options *o, clattn_llm_info *info)
{
    if (options)
        *o = *options;
    else
        clattn_llm_generate_options_default(o);
    return clattn_llm_get_info(llm, info);
}

clattn_status clattn_llm_generate(clattn_llm *llm, const clattn_llm_text *text,
                                  clattn_llm_cache *cache, size_t seq, const int32_t *prompt,
                                  size_t n, const clattn_llm_generate_options *options,
                                  clattn_llm_token_callback callback, void *user_data,
                                  clattn_llm_generation *result)
{
    static const char fn[] = "clattn_llm_generate";
    CLATTN_CHECK_ARG(NULL, fn, result, "result is NULL");
    memset(result, 0, sizeof(*result));
    CLATTN_CHECK_ARG(NULL, fn, llm && text, "llm or text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, prompt && n > 0, "the prompt is empty");
    clattn_llm_generate_options o;
    clattn_llm_info info;
    clattn_status s = generation_setup(llm, options, &o, &info);
    if (s != CLATTN_OK)
        return s;
    size_t held = 0;
    if (cache) {
        s = clattn_llm_sequence_length(cache, seq, &held);
        if (s != CLATTN_OK)
            return s;
    }
    size_t max_new = 0;
    s = check_room(fn, &info, held, n, o.max_new_tokens, &max_new);
    if (s == CLATTN_OK && cache)
        s = check_cache_room(fn, cache, held, n, o.max_new_tokens, &max_new);
    if (s != CLATTN_OK)
        return s;
    o.max_new_tokens = max_new;
    clattn_llm_generator *gen = NULL;
    s = clattn_llm_generator_create(text, info.vocab_size, &o, prompt, n, 0, &gen);
    if (s != CLATTN_OK)
        return s;
    float *logits = malloc(info.vocab_size * sizeof(float));
    text_buffer out = {0};
    if (!logits)
        s = clattn__fail_in(fn, "generation", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory");
    if (s == CLATTN_OK)
        s = append_text(fn, &out, "", 0);
    clattn_llm_cache *own = NULL;
    if (s == CLATTN_OK && !cache) {
        /* The last token sampled is never run. */
        s = clattn_llm_cache_create(llm, 1, n + max_new - 1, CLATTN_LLM_CACHE_FLOAT, &own);
        if (s == CLATTN_OK)
            s = clattn_llm_sequence_add(own, &seq);
        cache = own;
    }
    double t0 = now_s(), t1 = t0;
    if (s == CLATTN_OK) {
        s = clattn_llm_prompt(cache, seq, prompt, n, logits);
        t1 = now_s();
        result->prompt_tokens = n;
        result->prompt_seconds = t1 - t0;
    }
    if (s == CLATTN_OK)
        s = run_loop(fn, gen, cache, seq, logits, callback, user_data, &out, result);
    result->decode_seconds = now_s() - t1;
    if (s == CLATTN_OK) {
        size_t count = 0;
        const int32_t *tokens = clattn_llm_generator_tokens(gen, &count);
        result->tokens = malloc((count ? count : 1) * sizeof(int32_t));
        if (!result->tokens)
            s = clattn__fail_in(fn, "generation", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "out of host memory");
        else {
            if (count)
                memcpy(result->tokens, tokens, count * sizeof(int32_t));
            result->token_count = count;
            result->text = out.data;
            result->text_length = out.length;
            out.data = NULL;
        }
    }
    free(out.data);
    free(logits);
    clattn_llm_generator_destroy(&gen);
    clattn_llm_cache_destroy(&own);
    if (s != CLATTN_OK)
        clattn_llm_generation_clear(result);
    return s;
}

/* One sequence of a batch. */
typedef struct batch_seq {
    clattn_llm_generator *gen;
    size_t seq;      /* in the cache */
    size_t row;      /* its row of the logits */
    bool active;
    text_buffer text;
} batch_seq;

/* A sequence's step in the batch: sample; on its end, flush. *run: its token goes on. */
static clattn_status batch_step(const char *fn, batch_seq *q, size_t b, const float *logits,
                                clattn_llm_batch_callback callback, void *user_data,
                                clattn_llm_generation *result, int32_t *token, bool *run)
{
    *run = false;
    int finish = 0;
    const char *piece;
    size_t length;
    clattn_status s = clattn_llm_generator_next(q->gen, logits, token, &piece, &length, &finish);
    if (s != CLATTN_OK)
        return s;
    if (finish != CLATTN_LLM_FINISH_EOG) {
        s = append_text(fn, &q->text, piece, length);
        if (s != CLATTN_OK)
            return s;
        if (callback && callback(b, piece, length, *token, logits, user_data) != 0 && !finish)
            finish = CLATTN_LLM_FINISH_CALLBACK;
    }
    if (!finish) {
        *run = true;
        return CLATTN_OK;
    }
    q->active = false;
    result->finish = finish;
    s = clattn_llm_generator_flush(q->gen, &piece, &length);
    if (s == CLATTN_OK)
        s = append_text(fn, &q->text, piece, length);
    if (s == CLATTN_OK && callback)
        callback(b, piece, length, -1, NULL, user_data);
    return s;
}

static clattn_status batch_results(const char *fn, batch_seq *qs, size_t count,
                                   clattn_llm_generation *results)
{
    for (size_t b = 0; b < count; b++) {
        size_t n = 0;
        const int32_t *tokens = clattn_llm_generator_tokens(qs[b].gen, &n);
        results[b].tokens = malloc((n ? n : 1) * sizeof(int32_t));
        if (!results[b].tokens)
            return clattn__fail_in(fn, "generation", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "out of host memory");
        if (n)
            memcpy(results[b].tokens, tokens, n * sizeof(int32_t));
        results[b].token_count = n;
        results[b].text = qs[b].text.data;
        results[b].text_length = qs[b].text.length;
        qs[b].text.data = NULL;
    }
    return CLATTN_OK;
}

clattn_status clattn_llm_generate_batch(clattn_llm *llm, const clattn_llm_text *text,
                                        size_t count, const int32_t *const *prompts,
                                        const size_t *lengths,
                                        const clattn_llm_generate_options *options,
                                        clattn_llm_batch_callback callback, void *user_data,
                                        clattn_llm_generation *results)
{
    static const char fn[] = "clattn_llm_generate_batch";
    CLATTN_CHECK_ARG(NULL, fn, results || count == 0, "results is NULL");
    if (results)
        memset(results, 0, count * sizeof(*results));
    CLATTN_CHECK_ARG(NULL, fn, llm && text, "llm or text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, count > 0 && prompts && lengths, "no prompts");
    for (size_t b = 0; b < count; b++)
        CLATTN_CHECK_ARG(NULL, fn, prompts[b] && lengths[b] > 0, "prompt %zu is empty", b);
    clattn_llm_generate_options o;
    clattn_llm_info info;
    clattn_status s = generation_setup(llm, options, &o, &info);
    if (s != CLATTN_OK)
        return s;
    size_t capacity = 1, V = info.vocab_size;
    batch_seq *qs = calloc(count, sizeof(*qs));
    float *logits = malloc(count * V * sizeof(float));
    size_t *run_seqs = malloc(count * sizeof(size_t));
    int32_t *run_ids = malloc(count * sizeof(int32_t));
    if (!qs || !logits || !run_seqs || !run_ids)
        s = clattn__fail_in(fn, "generation", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                            "out of host memory");
    for (size_t b = 0; s == CLATTN_OK && b < count; b++) {
        size_t max_new = 0;
        s = check_room(fn, &info, 0, lengths[b], o.max_new_tokens, &max_new);
        if (s != CLATTN_OK)
            break;
        clattn_llm_generate_options ob = o;
        ob.max_new_tokens = max_new;
        s = clattn_llm_generator_create(text, V, &ob, prompts[b], lengths[b], 0, &qs[b].gen);
        if (lengths[b] + max_new - 1 > capacity)
            capacity = lengths[b] + max_new - 1;
    }
    clattn_llm_cache *cache = NULL;
    if (s == CLATTN_OK)
        s = clattn_llm_cache_create(llm, count, capacity, CLATTN_LLM_CACHE_FLOAT, &cache);
    double t1 = now_s();
    for (size_t b = 0; s == CLATTN_OK && b < count; b++) {
        qs[b].active = true;
        qs[b].row = b;
        s = clattn_llm_sequence_add(cache, &qs[b].seq);
        if (s == CLATTN_OK)
            s = append_text(fn, &qs[b].text, "", 0);
        double t0 = now_s();
        if (s == CLATTN_OK)
            s = clattn_llm_prompt(cache, qs[b].seq, prompts[b], lengths[b], logits + b * V);
        t1 = now_s();
        results[b].prompt_tokens = lengths[b];
        results[b].prompt_seconds = t1 - t0;
    }
    size_t running = count;
    while (s == CLATTN_OK && running) {
        size_t batch = 0;
        for (size_t b = 0; s == CLATTN_OK && b < count; b++) {
            if (!qs[b].active)
                continue;
            int32_t token;
            bool run;
            s = batch_step(fn, &qs[b], b, logits + qs[b].row * V, callback, user_data,
                           &results[b], &token, &run);
            if (s != CLATTN_OK || !run) {
                running--;
                continue;
            }
            qs[b].row = batch;
            run_seqs[batch] = qs[b].seq;
            run_ids[batch++] = token;
        }
        if (s == CLATTN_OK && batch) {
            s = clattn_llm_decode(cache, run_seqs, run_ids, batch, logits);
            for (size_t b = 0; b < count; b++)
                if (qs[b].active)
                    results[b].decode_tokens++;
        }
    }
    double t2 = now_s();
    if (s == CLATTN_OK) {
        for (size_t b = 0; b < count; b++)
            results[b].decode_seconds = t2 - t1;
        s = batch_results(fn, qs, count, results);
    }
    for (size_t b = 0; qs && b < count; b++) {
        clattn_llm_generator_destroy(&qs[b].gen);
        free(qs[b].text.data);
    }
    free(qs);
    free(logits);
    free(run_seqs);
    free(run_ids);
    clattn_llm_cache_destroy(&cache);
    if (s != CLATTN_OK)
        for (size_t b = 0; results && b < count; b++)
            clattn_llm_generation_clear(&results[b]);
    return s;
}
