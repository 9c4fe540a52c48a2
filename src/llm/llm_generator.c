/* One sequence's generation steps (clattn_llm_generator of clattn/llm_text.h): sample
 * (sampling.h), the end-of-generation set and max tokens (stop.h), streaming detokenisation
 * (text/tokenizer_gguf.h), stop strings over the streamed text (stop.h). */
#include "clattn/llm_text.h"
#include "llm_text_internal.h"
#include "sampling.h"
#include "stop.h"

#include <stdlib.h>
#include <string.h>

struct clattn_llm_generator {
    size_t vocab;
    clattn_sampler sampler;
    clattn_sampling_workspace *workspace;
    clattn_stop *stop;
    clattn__gguf_stream stream;
    char *piece; /* the stream's output of one step */
    size_t piece_length;
    int32_t *history; /* the prompt, then the generated ids */
    size_t prompt_count, count, capacity;
    int finish;   /* 0 while it runs */
    bool flushed;
};

void clattn_llm_generate_options_default(clattn_llm_generate_options *options)
{
    if (!options)
        return;
    memset(options, 0, sizeof(*options));
    clattn_sampling_config d = clattn__sampling_config_default();
    options->sampling.temperature = d.temperature;
    options->sampling.top_k = d.top_k;
    options->sampling.top_p = d.top_p;
    options->sampling.min_p = d.min_p;
    options->sampling.repetition_penalty = d.repetition_penalty;
    options->sampling.presence_penalty = d.presence_penalty;
    options->sampling.frequency_penalty = d.frequency_penalty;
    options->sampling.seed = d.seed;
    options->max_new_tokens = 256;
}

void clattn_llm_generator_destroy(clattn_llm_generator **generator)
{
    if (!generator || !*generator)
        return;
    clattn_llm_generator *g = *generator;
    clattn__sampling_workspace_destroy(g->workspace);
    clattn__stop_destroy(g->stop);
    free(g->piece);
    free(g->history);
    free(g);
    *generator = NULL;
}

clattn_status clattn_llm_generator_create(const clattn_llm_text *text, size_t vocab_size,
                                          const clattn_llm_generate_options *options,
                                          const int32_t *prompt, size_t n, uint64_t stream_key,
                                          clattn_llm_generator **out)
{
    static const char fn[] = "clattn_llm_generator_create";
    CLATTN_CHECK_ARG(NULL, fn, out, "generator is NULL");
    *out = NULL;
    CLATTN_CHECK_ARG(NULL, fn, text, "text is NULL");
    CLATTN_CHECK_ARG(NULL, fn, vocab_size > 0 && vocab_size <= INT32_MAX,
                     "vocab_size %zu is not in [1, 2^31)", vocab_size);
    CLATTN_CHECK_ARG(NULL, fn, prompt || n == 0, "prompt is NULL with n %zu", n);
    clattn_llm_generate_options defaults;
    clattn_llm_generate_options_default(&defaults);
    const clattn_llm_generate_options *o = options ? options : &defaults;
    for (size_t i = 0; i < n; i++)
        CLATTN_CHECK_ARG(NULL, fn, prompt[i] >= 0 && (size_t)prompt[i] < vocab_size,
                         "prompt id %d at %zu is outside the vocabulary of %zu", (int)prompt[i],
                         i, vocab_size);
    for (size_t i = 0; i < o->stop_count; i++)
        CLATTN_CHECK_ARG(NULL, fn, o->stop && o->stop[i] && o->stop[i][0],
                         "stop string %zu is NULL or empty", i);
    clattn_sampling_config config = {
        .temperature = o->sampling.temperature,
        .top_k = o->sampling.top_k,
        .top_p = o->sampling.top_p,
        .min_p = o->sampling.min_p,
        .repetition_penalty = o->sampling.repetition_penalty,
        .presence_penalty = o->sampling.presence_penalty,
        .frequency_penalty = o->sampling.frequency_penalty,
        .seed = o->sampling.seed,
    };
    clattn_llm_generator *g = calloc(1, sizeof(*g));
    if (!g)
        return clattn__fail_in(fn, "generator", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    g->vocab = vocab_size;
    clattn__gguf_stream_init(&g->stream, text->tok, o->special != 0);
    size_t eog_count = 0;
    const int32_t *eog = clattn__gguf_tokenizer_eog(text->tok, &eog_count);
    clattn_stop_rules rules = {eog, eog_count, o->max_new_tokens, o->stop, o->stop_count};
    clattn_status s = clattn__sampler_init(&g->sampler, &config, stream_key);
    if (s == CLATTN_OK)
        s = clattn__sampling_workspace_create(vocab_size, &g->workspace);
    if (s == CLATTN_OK)
        s = clattn__stop_create(&rules, &g->stop);
    if (s == CLATTN_OK) {
        g->capacity = n + 64;
        g->history = malloc(g->capacity * sizeof(int32_t));
        if (!g->history)
            s = clattn__fail_in(fn, "generator", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                "out of host memory");
    }
    if (s != CLATTN_OK) {
        clattn_llm_generator_destroy(&g);
        return s;
    }
    if (n)
        memcpy(g->history, prompt, n * sizeof(int32_t));
    g->prompt_count = g->count = n;
    *out = g;
    return CLATTN_OK;
}

static clattn_status remember(clattn_llm_generator *g, const char *fn, int32_t token)
{
    if (g->count == g->capacity) {
        size_t capacity = 2 * g->capacity;
        int32_t *grown = realloc(g->history, capacity * sizeof(int32_t));
        if (!grown)
            return clattn__fail_in(fn, "generator", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                                   "cannot hold %zu tokens", capacity);
        g->history = grown;
        g->capacity = capacity;
    }
    g->history[g->count++] = token;
    return CLATTN_OK;
}

clattn_status clattn_llm_generator_next(clattn_llm_generator *g, const float *logits,
                                        int32_t *token, const char **piece, size_t *length,
                                        int *finish)
{
    static const char fn[] = "clattn_llm_generator_next";
    CLATTN_CHECK_ARG(NULL, fn, g && logits && token && piece && length && finish,
                     "an argument is NULL");
    *token = -1;
    *piece = "";
    *length = 0;
    *finish = 0;
    CLATTN_CHECK_ARG(NULL, fn, !g->finish, "the generation has ended");
    clattn_token_history h = {g->history, g->count, g->prompt_count};
    clattn_status s = clattn__sampler_next(&g->sampler, g->workspace, logits, &h, token);
    if (s != CLATTN_OK)
        return s;
    clattn_stop_reason counted = clattn__stop_token(g->stop, *token);
    if (counted == CLATTN_STOP_EOG) {
        *finish = g->finish = CLATTN_LLM_FINISH_EOG;
        return CLATTN_OK;
    }
    s = remember(g, fn, *token);
    if (s != CLATTN_OK)
        return s;
    g->piece_length = 0;
    s = clattn__gguf_stream_push(&g->stream, fn, token, 1, false, &g->piece, &g->piece_length);
    if (s != CLATTN_OK)
        return s;
    clattn_stop_reason matched = clattn__stop_text(g->stop, g->piece ? g->piece : "",
                                                   g->piece_length, piece, length);
    if (matched == CLATTN_STOP_ERROR)
        return CLATTN_ERROR_OUT_OF_HOST_MEMORY; /* recorded by stop.c */
    if (matched == CLATTN_STOP_STRING)
        g->finish = CLATTN_LLM_FINISH_STOP_STRING;
    else if (counted == CLATTN_STOP_MAX_TOKENS)
        g->finish = CLATTN_LLM_FINISH_LENGTH;
    *finish = g->finish;
    return CLATTN_OK;
}

clattn_status clattn_llm_generator_flush(clattn_llm_generator *g, const char **piece,
                                         size_t *length)
{
    static const char fn[] = "clattn_llm_generator_flush";
    CLATTN_CHECK_ARG(NULL, fn, g && piece && length, "an argument is NULL");
    *piece = "";
    *length = 0;
    if (g->flushed || g->finish == CLATTN_LLM_FINISH_STOP_STRING)
        return CLATTN_OK;
    g->flushed = true;
    g->finish = g->finish ? g->finish : CLATTN_LLM_FINISH_CALLBACK;
    /* The stream's unfinished character (as U+FFFD), through the stop matcher, then what the
     * matcher holds: one piece. */
    static const int32_t none[1] = {0};
    g->piece_length = 0;
    clattn_status s = clattn__gguf_stream_push(&g->stream, fn, none, 0, true, &g->piece,
                                               &g->piece_length);
    if (s != CLATTN_OK)
        return s;
    const char *shown = "";
    size_t shown_length = 0;
    if (g->piece_length) {
        clattn_stop_reason matched =
            clattn__stop_text(g->stop, g->piece, g->piece_length, &shown, &shown_length);
        if (matched == CLATTN_STOP_ERROR)
            return CLATTN_ERROR_OUT_OF_HOST_MEMORY;
        if (matched == CLATTN_STOP_STRING) {
            g->finish = CLATTN_LLM_FINISH_STOP_STRING;
            *piece = shown;
            *length = shown_length;
            return CLATTN_OK;
        }
    }
    const char *held = "";
    size_t held_length = 0;
    /* stop_text's text stays valid until the next call on the matcher: join both in piece. */
    char *joined = malloc(shown_length + 1);
    if (!joined)
        return clattn__fail_in(fn, "generator", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    if (shown_length)
        memcpy(joined, shown, shown_length);
    clattn__stop_flush(g->stop, &held, &held_length);
    char *all = realloc(joined, shown_length + held_length + 1);
    if (!all) {
        free(joined);
        return clattn__fail_in(fn, "generator", CLATTN_ERROR_OUT_OF_HOST_MEMORY,
                               "out of host memory");
    }
    if (held_length)
        memcpy(all + shown_length, held, held_length);
    all[shown_length + held_length] = '\0';
    free(g->piece);
    g->piece = all;
    g->piece_length = shown_length + held_length;
    *piece = g->piece;
    *length = g->piece_length;
    return CLATTN_OK;
}

const int32_t *clattn_llm_generator_tokens(const clattn_llm_generator *g, size_t *count)
{
    if (count)
        *count = g ? g->count - g->prompt_count : 0;
    return g ? g->history + g->prompt_count : NULL;
}
