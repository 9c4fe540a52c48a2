/* The text API of an LLM (clattn/llm_text.h) on a tiny random model with a tokenizer and a
 * ChatML template (tests/data/llm_chat, tools/gen_chat_fixture.py): loading (from the file, or
 * from the model without reading the file again), tokenize and detokenize, the streaming
 * detokeniser, the chat template against jinja2's rendering and the special tokens it sees
 * against transformers', and the generation loop — greedy equal to an argmax over
 * teacher-forced logits, seeded sampling reproducible, stop strings, max tokens, streamed
 * pieces equal to the text, a context or a cache that would overflow refused with the numbers
 * (clattn/llm.h's capacity getters). */
#include "common/test_util.h"
#include "clattn/llm.h"
#include "clattn/llm_text.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef LLM_CHAT_DIR
#error "LLM_CHAT_DIR must name tests/data/llm_chat (meson passes it with c_args)"
#endif

#define MODEL LLM_CHAT_DIR "/tiny_chat.gguf"

static clattn_llm_text *load_text(void)
{
    clattn_llm_text *t = NULL;
    if (clattn_llm_text_load(MODEL, &t) != CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    return t;
}

static void text_facts_and_tokens(void **state)
{
    (void)state;
    clattn_llm_text *t = load_text();
    assert_int_equal(clattn_llm_text_vocab_size(t), 271);
    assert_int_equal(clattn_llm_bos_id(t), 1);
    assert_int_equal(clattn_llm_eos_id(t), 2);
    assert_string_equal(clattn_llm_token_text(t, 2), "<|im_end|>");
    assert_null(clattn_llm_token_text(t, 271));
    assert_int_equal(clattn_llm_is_end_of_generation(t, 2), 1);
    assert_int_equal(clattn_llm_is_end_of_generation(t, 5), 0);
    assert_non_null(clattn_llm_chat_template(t));

    /* " the" is one token (merges "Ġ t", "h e", "Ġt he": id 261), "<|im_end|>" only with
     * parse_special. */
    const char *s = "<|im_end|> the";
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn_llm_tokenize(t, s, strlen(s), 1, 1, &ids, &n), CLATTN_OK);
    assert_int_equal(n, 2);
    assert_int_equal(ids[0], 2);
    assert_int_equal(ids[1], 261);
    clattn_llm_free(ids);
    assert_int_equal(clattn_llm_tokenize(t, s, strlen(s), 1, 0, &ids, &n), CLATTN_OK);
    assert_true(n > 2);
    char *back = NULL;
    size_t len = 0;
    assert_int_equal(clattn_llm_detokenize(t, ids, n, 0, &back, &len), CLATTN_OK);
    assert_int_equal(len, strlen(s));
    assert_string_equal(back, s);
    clattn_llm_free(back);
    clattn_llm_free(ids);

    int32_t bad = 271;
    assert_status_msg(NULL, clattn_llm_detokenize(t, &bad, 1, 0, &back, &len),
                      CLATTN_ERROR_INVALID_ARGUMENT, "271");
    assert_status_msg(NULL, clattn_llm_tokenize(t, "\xff", 1, 0, 0, &ids, &n),
                      CLATTN_ERROR_INVALID_ARGUMENT, "");
    clattn_llm_text_destroy(&t);
    assert_null(t);

    clattn_llm_text *none = NULL;
    assert_status_msg(NULL, clattn_llm_text_load(LLM_CHAT_DIR "/missing.gguf", &none),
                      CLATTN_ERROR_IO, "missing.gguf");
    assert_null(none);
}

static void streaming_detokenizer_is_byte_safe(void **state)
{
    (void)state;
    clattn_llm_text *t = load_text();
    const char *s = "h\xc3\xa9llo w\xc3\xb6rld \xe2\x82\xac!"; /* each byte one token */
    int32_t *ids = NULL;
    size_t n = 0;
    assert_int_equal(clattn_llm_tokenize(t, s, strlen(s), 0, 0, &ids, &n), CLATTN_OK);
    clattn_llm_detokenizer *d = NULL;
    assert_int_equal(clattn_llm_detokenizer_create(t, 0, &d), CLATTN_OK);
    char joined[256] = "";
    size_t pieces_with_text = 0;
    for (size_t i = 0; i <= n; i++) {
        const char *piece = NULL;
        size_t len = 0;
        assert_int_equal(clattn_llm_detokenizer_push(d, ids + (i < n ? i : 0), i < n ? 1 : 0,
                                                     i == n, &piece, &len),
                         CLATTN_OK);
        /* A piece never ends inside a character. */
        if (len) {
            unsigned char last = (unsigned char)piece[len - 1];
            assert_true(last < 0x80 || (last & 0xC0) == 0x80);
            pieces_with_text++;
        }
        strncat(joined, piece, len);
    }
    assert_string_equal(joined, s);
    assert_true(pieces_with_text < n); /* the multi-byte characters were held back */
    clattn_llm_detokenizer_destroy(&d);
    clattn_llm_free(ids);
    clattn_llm_text_destroy(&t);
}

static void chat_template_equals_jinja2(void **state)
{
    (void)state;
    clattn_llm_text *t = load_text();
    json_error_t jerr;
    json_t *golden = json_load_file(LLM_CHAT_DIR "/chat.json", 0, &jerr);
    if (!golden)
        fail_msg("chat.json: %s", jerr.text);
    char *messages = json_dumps(json_object_get(golden, "messages"), 0);
    for (int g = 0; g < 2; g++) {
        char *out = NULL;
        size_t len = 0;
        assert_int_equal(clattn_llm_apply_chat_template(t, messages, NULL, g, &out, &len),
                         CLATTN_OK);
        const char *want = json_string_value(
            json_object_get(json_object_get(golden, "rendered"), g ? "true" : "false"));
        assert_string_equal(out, want);
        assert_int_equal(len, strlen(want));
        clattn_llm_free(out);
    }
    char *out = NULL;
    size_t len = 0;
    assert_int_equal(clattn_llm_apply_chat_template(t, messages, "[{{ messages[0].content }}]",
                                                    1, &out, &len),
                     CLATTN_OK);
    assert_string_equal(out, "[Hi there, is it the cat?]");
    clattn_llm_free(out);
    assert_status_msg(NULL, clattn_llm_apply_chat_template(t, "[{\"role\": ", NULL, 1, &out, &len),
                      CLATTN_ERROR_INVALID_ARGUMENT, "messages");
    assert_status_msg(NULL, clattn_llm_apply_chat_template(t, "{}", NULL, 1, &out, &len),
                      CLATTN_ERROR_INVALID_ARGUMENT, "array");
    assert_status_msg(NULL,
                      clattn_llm_apply_chat_template(t, messages, "{% bogus %}", 1, &out, &len),
                      CLATTN_ERROR_FORMAT, "bogus");
    assert_null(out);
    /* Further variables (chat_template_kwargs): seen by the template, overriding the others
     * (here the EOS token's text); NULL is the plain call; anything but an object refused. */
    assert_int_equal(clattn_llm_apply_chat_template_vars(
                         t, messages, "{\"enable_thinking\": false, \"custom\": [1, 2], "
                                      "\"eos_token\": \"E\"}",
                         "{{ enable_thinking }}/{{ custom }}/{{ eos_token }}", 1, &out, &len),
                     CLATTN_OK);
    assert_string_equal(out, "False/[1, 2]/E");
    clattn_llm_free(out);
    char *plain = NULL;
    size_t plain_len = 0;
    assert_int_equal(clattn_llm_apply_chat_template(t, messages, NULL, 1, &plain, &plain_len),
                     CLATTN_OK);
    assert_int_equal(clattn_llm_apply_chat_template_vars(t, messages, NULL, NULL, 1, &out, &len),
                     CLATTN_OK);
    assert_string_equal(out, plain);
    clattn_llm_free(out);
    clattn_llm_free(plain);
    assert_status_msg(NULL,
                      clattn_llm_apply_chat_template_vars(t, messages, "[1]", NULL, 1, &out, &len),
                      CLATTN_ERROR_INVALID_ARGUMENT, "variables");
    assert_status_msg(NULL,
                      clattn_llm_apply_chat_template_vars(t, messages, "{", NULL, 1, &out, &len),
                      CLATTN_ERROR_INVALID_ARGUMENT, "variables");
    assert_null(out);
    free(messages);
    json_decref(golden);
    clattn_llm_text_destroy(&t);
}

/* Every special token the file names reaches the template under transformers' name (its
 * special_tokens_map), a missing one undefined: against transformers' apply_chat_template
 * (tools/gen_chat_special_tokens_golden.py), on a file with all but pad_token and on one with
 * BOS and EOS only. */
static void chat_template_sees_special_tokens(void **state)
{
    (void)state;
    json_error_t jerr;
    json_t *golden = json_load_file(GOLDEN_DIR "/chat_special_tokens/renders.json", 0, &jerr);
    if (!golden)
        fail_msg("renders.json: %s", jerr.text);
    const char *tmpl = json_string_value(json_object_get(golden, "template"));
    char *messages = json_dumps(json_object_get(golden, "messages"), 0);
    static const char *const files[][2] = {
        {"special_tokens.gguf", GOLDEN_DIR "/chat_special_tokens/special_tokens.gguf"},
        {"tiny_chat.gguf", MODEL},
    };
    for (size_t f = 0; f < 2; f++) {
        clattn_llm_text *t = NULL;
        if (clattn_llm_text_load(files[f][1], &t) != CLATTN_OK)
            fail_msg("%s", clattn_last_error(NULL));
        json_t *want = json_object_get(json_object_get(golden, "renders"), files[f][0]);
        for (int g = 0; g < 2; g++) {
            char *out = NULL;
            size_t len = 0;
            assert_int_equal(clattn_llm_apply_chat_template(t, messages, tmpl, g, &out, &len),
                             CLATTN_OK);
            const char *expected = json_string_value(json_object_get(want, g ? "true" : "false"));
            assert_string_equal(out, expected);
            clattn_llm_free(out);
        }
        clattn_llm_text_destroy(&t);
    }
    free(messages);
    json_decref(golden);
}

/* ---- generation (device) ---- */

typedef struct gen_fixture {
    clattn_context *ctx;
    clattn_llm *llm;
    clattn_llm_text *text;
    int32_t *prompt;
    size_t n;
} gen_fixture;

static int gen_setup(void **state)
{
    gen_fixture *f = calloc(1, sizeof(*f));
    f->ctx = test_context_create(NULL);
    if (!f->ctx)
        return -1;
    if (clattn_llm_load(f->ctx, MODEL, &f->llm) != CLATTN_OK) {
        fprintf(stderr, "%s\n", clattn_last_error(NULL));
        return -1;
    }
    f->text = load_text();
    const char *p = "<|im_start|>user\nIs it the cat?<|im_end|>\n<|im_start|>assistant\n";
    if (clattn_llm_tokenize(f->text, p, strlen(p), 0, 1, &f->prompt, &f->n) != CLATTN_OK)
        return -1;
    *state = f;
    return 0;
}

static int gen_teardown(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_free(f->prompt);
    clattn_llm_text_destroy(&f->text);
    clattn_llm_destroy(&f->llm);
    clattn_context_destroy(&f->ctx);
    free(f);
    return 0;
}

static void generate_or_fail(gen_fixture *f, const clattn_llm_generate_options *o,
                             clattn_llm_token_callback cb, void *user, clattn_llm_generation *g)
{
    if (clattn_llm_generate(f->llm, f->text, NULL, 0, f->prompt, f->n, o, cb, user, g) !=
        CLATTN_OK)
        fail_msg("generate: %s", clattn_last_error(NULL));
}

static void greedy_equals_argmax_of_logits(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 24;
    clattn_llm_generation g;
    generate_or_fail(f, &o, NULL, NULL, &g);
    assert_true(g.token_count > 0);

    /* The same by hand: argmax (first maximum) of the teacher-forced logits' last row. */
    clattn_llm_info info;
    assert_int_equal(clattn_llm_get_info(f->llm, &info), CLATTN_OK);
    int32_t ids[128];
    memcpy(ids, f->prompt, f->n * sizeof(int32_t));
    size_t count = f->n, made = 0;
    int finish = CLATTN_LLM_FINISH_LENGTH;
    float *logits = malloc((f->n + 24) * info.vocab_size * sizeof(float));
    while (made < 24) {
        assert_int_equal(clattn_llm_logits(f->llm, ids, count, logits), CLATTN_OK);
        const float *last = logits + (count - 1) * info.vocab_size;
        int32_t best = 0;
        for (size_t v = 1; v < info.vocab_size; v++)
            if (last[v] > last[best])
                best = (int32_t)v;
        if (clattn_llm_is_end_of_generation(f->text, best)) {
            finish = CLATTN_LLM_FINISH_EOG;
            break;
        }
        ids[count++] = best;
        made++;
    }
    free(logits);
    assert_int_equal(g.token_count, made);
    assert_memory_equal(g.tokens, ids + f->n, made * sizeof(int32_t));
    assert_int_equal(g.finish, finish);
    assert_int_equal(g.prompt_tokens, f->n);
    char *text = NULL;
    size_t len = 0;
    assert_int_equal(clattn_llm_detokenize(f->text, g.tokens, g.token_count, 0, &text, &len),
                     CLATTN_OK);
    assert_string_equal(g.text, text);
    clattn_llm_free(text);

    /* In a cache of the caller's: the same tokens; the sequence keeps the prompt and every
     * generated token but the last (never run); a second call continues after them. */
    clattn_llm_cache *cache = NULL;
    size_t seq = 0, length = 0;
    assert_int_equal(clattn_llm_cache_create(f->llm, 2, 256, CLATTN_LLM_CACHE_FLOAT, &cache),
                     CLATTN_OK);
    assert_int_equal(clattn_llm_sequence_add(cache, &seq), CLATTN_OK);
    assert_int_equal(clattn_llm_sequence_add(cache, &seq), CLATTN_OK); /* the second slot */
    o.max_new_tokens = 8;
    clattn_llm_generation c;
    if (clattn_llm_generate(f->llm, f->text, cache, seq, f->prompt, f->n, &o, NULL, NULL, &c) !=
        CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    assert_int_equal(c.token_count, 8);
    assert_memory_equal(c.tokens, g.tokens, 8 * sizeof(int32_t));
    assert_int_equal(clattn_llm_sequence_length(cache, seq, &length), CLATTN_OK);
    assert_int_equal(length, f->n + 7);
    clattn_llm_generation d;
    if (clattn_llm_generate(f->llm, f->text, cache, seq, c.tokens + 7, 1, &o, NULL, NULL, &d) !=
        CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    assert_memory_equal(d.tokens, g.tokens + 8, 8 * sizeof(int32_t));
    clattn_llm_generation_clear(&d);
    o.max_new_tokens = 200;
    char want[160];
    snprintf(want, sizeof(want), "%zu tokens held + a prompt of %zu tokens + max_new_tokens 200",
             f->n + 15, f->n);
    assert_status_msg(NULL,
                      clattn_llm_generate(f->llm, f->text, cache, seq, f->prompt, f->n, &o, NULL,
                                          NULL, &d),
                      CLATTN_ERROR_OUT_OF_RANGE, want);
    clattn_llm_generation_clear(&c);
    clattn_llm_cache_destroy(&cache);
    clattn_llm_generation_clear(&g);
}

typedef struct stream_log {
    char text[4096];
    size_t calls, ends;
} stream_log;

static int on_token(const char *piece, size_t length, int32_t token, const float *logits,
                    void *user)
{
    stream_log *s = user;
    strncat(s->text, piece, length);
    s->calls++;
    if (token < 0) {
        assert_null(logits);
        s->ends++;
    } else
        assert_non_null(logits);
    return 0;
}

static int on_batch_token(size_t sequence, const char *piece, size_t length, int32_t token,
                          const float *logits, void *user)
{
    stream_log *logs = user;
    return on_token(piece, length, token, logits, &logs[sequence]);
}

static void sampling_is_seeded_and_streams(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 20;
    o.sampling.temperature = 1.0;
    o.sampling.top_k = 20; /* ASCII tokens only (the fixture's output rows) */
    o.sampling.seed = 7;
    clattn_llm_generation a, b, c;
    stream_log log = {{0}, 0, 0};
    generate_or_fail(f, &o, on_token, &log, &a);
    generate_or_fail(f, &o, NULL, NULL, &b);
    o.sampling.seed = 8;
    generate_or_fail(f, &o, NULL, NULL, &c);
    assert_true(a.token_count >= 5);
    assert_int_equal(a.token_count, b.token_count);
    assert_memory_equal(a.tokens, b.tokens, a.token_count * sizeof(int32_t));
    assert_false(a.token_count == c.token_count &&
                 memcmp(a.tokens, c.tokens, a.token_count * sizeof(int32_t)) == 0);
    /* The streamed pieces join to the text; one call per token and one at the end. */
    assert_string_equal(log.text, a.text);
    assert_int_equal(log.calls, a.token_count + 1);
    assert_int_equal(log.ends, 1);
    clattn_llm_generation_clear(&a);
    clattn_llm_generation_clear(&b);
    clattn_llm_generation_clear(&c);
}

static void stop_strings_and_max_tokens(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 20;
    o.sampling.temperature = 1.0;
    o.sampling.top_k = 20;
    o.sampling.seed = 3;
    clattn_llm_generation full, cut, few;
    generate_or_fail(f, &o, NULL, NULL, &full);
    assert_true(full.text_length >= 6);
    /* A stop string taken from the middle of the text: the text ends before its first
     * occurrence. */
    char stop[3] = {full.text[full.text_length / 2], full.text[full.text_length / 2 + 1], 0};
    const char *stops[1] = {stop};
    o.stop = stops;
    o.stop_count = 1;
    stream_log log = {{0}, 0, 0};
    generate_or_fail(f, &o, on_token, &log, &cut);
    assert_int_equal(cut.finish, CLATTN_LLM_FINISH_STOP_STRING);
    size_t at = (size_t)(strstr(full.text, stop) - full.text);
    assert_int_equal(cut.text_length, at);
    assert_memory_equal(cut.text, full.text, at);
    assert_string_equal(log.text, cut.text);
    assert_true(cut.token_count < full.token_count);
    assert_memory_equal(cut.tokens, full.tokens, cut.token_count * sizeof(int32_t));

    o.stop_count = 0;
    o.max_new_tokens = 3;
    generate_or_fail(f, &o, NULL, NULL, &few);
    assert_int_equal(few.token_count, 3);
    assert_int_equal(few.finish, CLATTN_LLM_FINISH_LENGTH);
    assert_memory_equal(few.tokens, full.tokens, 3 * sizeof(int32_t));
    clattn_llm_generation_clear(&full);
    clattn_llm_generation_clear(&cut);
    clattn_llm_generation_clear(&few);
}

/* Two sequences generated in one decode batch with generators (what a server does) give the
 * tokens and text of two clattn_llm_generate calls. */
static void generators_in_one_batch_equal_single_runs(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_info info;
    assert_int_equal(clattn_llm_get_info(f->llm, &info), CLATTN_OK);
    size_t V = info.vocab_size;
    const char *other =
        "<|im_start|>user\nThe Pin is at the sea?<|im_end|>\n<|im_start|>assistant\n";
    int32_t *ids_b = NULL;
    size_t n_b = 0;
    assert_int_equal(clattn_llm_tokenize(f->text, other, strlen(other), 0, 1, &ids_b, &n_b),
                     CLATTN_OK);
    const int32_t *prompts[2] = {f->prompt, ids_b};
    size_t lengths[2] = {f->n, n_b};
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 12;
    o.sampling.temperature = 1.0;
    o.sampling.top_k = 20;
    o.sampling.seed = 11;
    clattn_llm_generation single[2];
    for (int b = 0; b < 2; b++)
        if (clattn_llm_generate(f->llm, f->text, NULL, 0, prompts[b], lengths[b], &o, NULL,
                                NULL, &single[b]) != CLATTN_OK)
            fail_msg("%s", clattn_last_error(NULL));

    clattn_llm_cache *cache = NULL;
    assert_int_equal(clattn_llm_cache_create(f->llm, 2, 128, CLATTN_LLM_CACHE_FLOAT, &cache),
                     CLATTN_OK);
    float *logits = malloc(2 * V * sizeof(float));
    clattn_llm_generator *gen[2] = {NULL, NULL};
    size_t seqs[2];
    char text[2][512] = {"", ""};
    for (int b = 0; b < 2; b++) {
        assert_int_equal(clattn_llm_sequence_add(cache, &seqs[b]), CLATTN_OK);
        assert_int_equal(clattn_llm_prompt(cache, seqs[b], prompts[b], lengths[b],
                                           logits + b * V),
                         CLATTN_OK);
        assert_int_equal(clattn_llm_generator_create(f->text, V, &o, prompts[b], lengths[b], 0,
                                                     &gen[b]),
                         CLATTN_OK);
    }
    bool active[2] = {true, true};
    size_t batch_of[2] = {0, 1}; /* each sequence's row of logits */
    while (active[0] || active[1]) {
        size_t run_seqs[2], count = 0, rows[2];
        int32_t run_ids[2];
        for (int b = 0; b < 2; b++) {
            if (!active[b])
                continue;
            int32_t token;
            const char *piece;
            size_t len;
            int finish;
            assert_int_equal(clattn_llm_generator_next(gen[b], logits + batch_of[b] * V, &token,
                                                       &piece, &len, &finish),
                             CLATTN_OK);
            if (finish != CLATTN_LLM_FINISH_EOG)
                strncat(text[b], piece, len);
            if (finish) {
                active[b] = false;
                assert_int_equal(clattn_llm_generator_flush(gen[b], &piece, &len), CLATTN_OK);
                strncat(text[b], piece, len);
                assert_int_equal(finish, single[b].finish);
                continue;
            }
            rows[b] = count;
            run_seqs[count] = seqs[b];
            run_ids[count++] = token;
        }
        if (!count)
            break;
        assert_int_equal(clattn_llm_decode(cache, run_seqs, run_ids, count, logits), CLATTN_OK);
        for (int b = 0; b < 2; b++)
            if (active[b])
                batch_of[b] = rows[b];
    }
    for (int b = 0; b < 2; b++) {
        size_t count = 0;
        const int32_t *tokens = clattn_llm_generator_tokens(gen[b], &count);
        assert_int_equal(count, single[b].token_count);
        assert_memory_equal(tokens, single[b].tokens, count * sizeof(int32_t));
        assert_string_equal(text[b], single[b].text);
        clattn_llm_generator_destroy(&gen[b]);
        clattn_llm_generation_clear(&single[b]);
    }
    assert_int_not_equal(memcmp(text[0], text[1], 4), 0);
    free(logits);
    clattn_llm_cache_destroy(&cache);

    /* clattn_llm_generate_batch: the same, three prompts (one twice), greedy and sampled. */
    const int32_t *three[3] = {f->prompt, ids_b, f->prompt};
    size_t three_n[3] = {f->n, n_b, f->n};
    for (int sampled = 0; sampled < 2; sampled++) {
        o.sampling.temperature = sampled ? 1.0 : 0.0;
        clattn_llm_generation batch[3];
        stream_log logs[3];
        memset(logs, 0, sizeof(logs));
        if (clattn_llm_generate_batch(f->llm, f->text, 3, three, three_n, &o, on_batch_token,
                                      logs, batch) != CLATTN_OK)
            fail_msg("%s", clattn_last_error(NULL));
        for (int b = 0; b < 3; b++) {
            clattn_llm_generation one;
            if (clattn_llm_generate(f->llm, f->text, NULL, 0, three[b], three_n[b], &o, NULL,
                                    NULL, &one) != CLATTN_OK)
                fail_msg("%s", clattn_last_error(NULL));
            assert_int_equal(batch[b].token_count, one.token_count);
            assert_memory_equal(batch[b].tokens, one.tokens, one.token_count * sizeof(int32_t));
            assert_string_equal(batch[b].text, one.text);
            assert_string_equal(logs[b].text, one.text);
            assert_int_equal(logs[b].ends, 1);
            assert_int_equal(batch[b].finish, one.finish);
            assert_int_equal(batch[b].prompt_tokens, three_n[b]);
            clattn_llm_generation_clear(&one);
            clattn_llm_generation_clear(&batch[b]);
        }
    }
    clattn_llm_free(ids_b);
}

/* Sampled freely, some seeds end at <|im_end|> (id 2): the generation stops there, without
 * the token. */
static void end_of_generation_stops(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 40;
    o.sampling.temperature = 1.0;
    size_t ended = 0;
    for (uint64_t seed = 0; seed < 30; seed++) {
        o.sampling.seed = seed;
        clattn_llm_generation g;
        generate_or_fail(f, &o, NULL, NULL, &g);
        if (g.finish == CLATTN_LLM_FINISH_EOG) {
            ended++;
            assert_true(g.token_count < 40);
        } else
            assert_int_equal(g.token_count, 40);
        for (size_t i = 0; i < g.token_count; i++)
            assert_int_equal(clattn_llm_is_end_of_generation(f->text, g.tokens[i]), 0);
        clattn_llm_generation_clear(&g);
    }
    assert_true(ended > 0);
}

static void overflow_is_refused_with_numbers(void **state)
{
    gen_fixture *f = *state;
    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 256 - f->n + 1; /* the context is 256 */
    clattn_llm_generation g;
    char want[128];
    snprintf(want, sizeof(want), "a prompt of %zu tokens + max_new_tokens %zu = 257 exceed the "
             "model's context_length of 256", f->n, o.max_new_tokens);
    assert_status_msg(NULL,
                      clattn_llm_generate(f->llm, f->text, NULL, 0, f->prompt, f->n, &o, NULL,
                                          NULL, &g),
                      CLATTN_ERROR_OUT_OF_RANGE, want);
    assert_null(g.tokens);
    o.max_new_tokens = 256 - f->n; /* exactly fits */
    generate_or_fail(f, &o, NULL, NULL, &g);
    clattn_llm_generation_clear(&g);
    o.sampling.top_p = 2.0;
    assert_status_msg(NULL,
                      clattn_llm_generate(f->llm, f->text, NULL, 0, f->prompt, f->n, &o, NULL,
                                          NULL, &g),
                      CLATTN_ERROR_INVALID_ARGUMENT, "top_p");
}

/* One file opening for both: the text object from the model equals the file's, though the file
 * is gone by then (the model's open reader and metadata are used), and outlives the model. A
 * Hugging Face folder's model has no GGUF tokenizer: refused, naming the folder's tokenizer. */
static void text_from_model_reads_the_file_once(void **state)
{
    gen_fixture *f = *state;
    char dir[256], path[300];
    assert_int_equal(test_temp_dir_create(dir, sizeof(dir), "clattn-llm-text-"), 0);
    snprintf(path, sizeof(path), "%s/model.gguf", dir);
    size_t size = 0;
    unsigned char *bytes = test_read_file(MODEL, &size);
    test_write_file(path, bytes, size);
    free(bytes);
    clattn_llm *llm = NULL;
    clattn_llm_text *from_file = NULL, *t = NULL;
    assert_int_equal(clattn_llm_load(f->ctx, path, &llm), CLATTN_OK);
    assert_int_equal(unlink(path), 0);
    assert_status_msg(NULL, clattn_llm_text_load(path, &from_file), CLATTN_ERROR_IO, "model.gguf");
    test_temp_dir_remove(dir);
    assert_int_equal(clattn_llm_text_from_model(llm, &t), CLATTN_OK);
    clattn_llm_destroy(&llm); /* the text object does not need the model */

    assert_int_equal(clattn_llm_text_vocab_size(t), clattn_llm_text_vocab_size(f->text));
    assert_int_equal(clattn_llm_bos_id(t), 1);
    assert_int_equal(clattn_llm_eos_id(t), 2);
    assert_string_equal(clattn_llm_chat_template(t), clattn_llm_chat_template(f->text));
    for (int32_t id = 0; id < 271; id++)
        assert_int_equal(clattn_llm_is_end_of_generation(t, id),
                         clattn_llm_is_end_of_generation(f->text, id));
    const char *s = "<|im_start|>user\nIs it the cat? Paris, h\xc3\xa9!<|im_end|>";
    int32_t *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    assert_int_equal(clattn_llm_tokenize(t, s, strlen(s), 1, 1, &a, &na), CLATTN_OK);
    assert_int_equal(clattn_llm_tokenize(f->text, s, strlen(s), 1, 1, &b, &nb), CLATTN_OK);
    assert_int_equal(na, nb);
    assert_memory_equal(a, b, na * sizeof(int32_t));
    clattn_llm_free(a);
    clattn_llm_free(b);
    clattn_llm_text_destroy(&t);

    assert_status_msg(NULL, clattn_llm_text_from_model(NULL, &t), CLATTN_ERROR_INVALID_ARGUMENT,
                      "llm is NULL");
    assert_status_msg(NULL, clattn_llm_text_from_model(f->llm, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "text is NULL");
    assert_int_equal(clattn_llm_load(f->ctx, GOLDEN_DIR "/llm/hf_llama_f32", &llm), CLATTN_OK);
    assert_status_msg(NULL, clattn_llm_text_from_model(llm, &t), CLATTN_ERROR_UNSUPPORTED,
                      "tokenizer.json");
    assert_null(t);
    clattn_llm_destroy(&llm);
}

/* A caller's cache is checked up front too: prompt + max_new_tokens - 1 (the last token is never
 * run) beyond its capacity is refused with the numbers before anything runs; max_new_tokens 0
 * generates up to the cache's end. The getters give the cache's size and a sequence's room. */
static void cache_capacity_is_checked_up_front(void **state)
{
    gen_fixture *f = *state;
    size_t capacity = f->n + 10, max_sequences = 0, got = 0, seq = 0, room = 0, length = 0;
    clattn_llm_cache *cache = NULL;
    assert_int_equal(clattn_llm_cache_create(f->llm, 2, capacity, CLATTN_LLM_CACHE_FLOAT, &cache),
                     CLATTN_OK);
    assert_int_equal(clattn_llm_cache_get_capacity(cache, &max_sequences, &got), CLATTN_OK);
    assert_int_equal(max_sequences, 2);
    assert_int_equal(got, capacity);
    assert_int_equal(clattn_llm_cache_get_capacity(cache, NULL, NULL), CLATTN_OK);
    assert_status_msg(NULL, clattn_llm_sequence_room(cache, 0, &room),
                      CLATTN_ERROR_INVALID_ARGUMENT, "sequence 0 is not in the cache");
    assert_int_equal(clattn_llm_sequence_add(cache, &seq), CLATTN_OK);
    assert_int_equal(clattn_llm_sequence_room(cache, seq, &room), CLATTN_OK);
    assert_int_equal(room, capacity);

    clattn_llm_generate_options o;
    clattn_llm_generate_options_default(&o);
    o.max_new_tokens = 12; /* n + 12 - 1 = capacity + 1 */
    clattn_llm_generation g;
    char want[200];
    snprintf(want, sizeof(want),
             "0 tokens held + a prompt of %zu tokens + max_new_tokens 12 - 1 (the last token is "
             "not run) = %zu exceed the cache's capacity of %zu tokens per sequence",
             f->n, capacity + 1, capacity);
    assert_status_msg(NULL,
                      clattn_llm_generate(f->llm, f->text, cache, seq, f->prompt, f->n, &o, NULL,
                                          NULL, &g),
                      CLATTN_ERROR_OUT_OF_RANGE, want);
    assert_null(g.tokens);
    assert_int_equal(clattn_llm_sequence_length(cache, seq, &length), CLATTN_OK);
    assert_int_equal(length, 0); /* refused before any work */

    /* max_new_tokens 0: up to the cache's end (11 tokens unless an end-of-generation token comes
     * first), the same tokens as a run of its own cache. */
    o.max_new_tokens = 0;
    if (clattn_llm_generate(f->llm, f->text, cache, seq, f->prompt, f->n, &o, NULL, NULL, &g) !=
        CLATTN_OK)
        fail_msg("%s", clattn_last_error(NULL));
    assert_true(g.finish == CLATTN_LLM_FINISH_EOG || g.token_count == 11);
    assert_true(g.token_count <= 11);
    clattn_llm_generation alone;
    o.max_new_tokens = 11;
    generate_or_fail(f, &o, NULL, NULL, &alone);
    assert_int_equal(alone.token_count, g.token_count);
    assert_memory_equal(alone.tokens, g.tokens, g.token_count * sizeof(int32_t));
    clattn_llm_generation_clear(&alone);
    assert_int_equal(clattn_llm_sequence_room(cache, seq, &room), CLATTN_OK);
    /* The sequence holds the prompt and every token generated but the last (not run), or all
     * of them when an end-of-generation token ended it (not one of the tokens). */
    size_t run = g.finish == CLATTN_LLM_FINISH_EOG ? g.token_count : g.token_count - 1;
    assert_int_equal(room, capacity - f->n - run);
    clattn_llm_generation_clear(&g);

    /* A full sequence: the prompt alone no longer fits. */
    assert_int_equal(clattn_llm_sequence_truncate(cache, seq, capacity - 1), CLATTN_OK);
    snprintf(want, sizeof(want),
             "%zu tokens held + a prompt of %zu tokens exceed the cache's capacity of %zu",
             capacity - 1, f->n, capacity);
    assert_status_msg(NULL,
                      clattn_llm_generate(f->llm, f->text, cache, seq, f->prompt, f->n, &o, NULL,
                                          NULL, &g),
                      CLATTN_ERROR_OUT_OF_RANGE, want);
    clattn_llm_cache_destroy(&cache);
}

int main(void)
{
    const struct CMUnitTest host[] = {
        cmocka_unit_test(text_facts_and_tokens),
        cmocka_unit_test(streaming_detokenizer_is_byte_safe),
        cmocka_unit_test(chat_template_equals_jinja2),
        cmocka_unit_test(chat_template_sees_special_tokens),
    };
    int failed = cmocka_run_group_tests_name("llm_text (host)", host, NULL, NULL);
    test_require_device();
    const struct CMUnitTest device[] = {
        cmocka_unit_test(greedy_equals_argmax_of_logits),
        cmocka_unit_test(sampling_is_seeded_and_streams),
        cmocka_unit_test(stop_strings_and_max_tokens),
        cmocka_unit_test(end_of_generation_stops),
        cmocka_unit_test(generators_in_one_batch_equal_single_runs),
        cmocka_unit_test(overflow_is_refused_with_numbers),
        cmocka_unit_test(cache_capacity_is_checked_up_front),
        cmocka_unit_test(text_from_model_reads_the_file_once),
    };
    return failed + cmocka_run_group_tests_name("llm_text (device)", device, gen_setup,
                                                gen_teardown);
}
