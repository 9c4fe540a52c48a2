/*
 * Fuzz harness: clattn-serve's chat-model request parsers (examples/serve/chat_request.c) on any
 * body. The input's first byte picks the route (chat, completions, /tokenize, /detokenize) and
 * the limits (--max-tokens 1, 16 or 4096; one served name or any); the rest is the body.
 * Invariants beyond "no crash, no sanitizer report":
 *   - on failure the request is all zero (nothing allocated), the status is 400 or 404 (another
 *     model name), the message is not empty and the error body is OpenAI's JSON error object;
 *   - on success: chat's messages are a JSON array of at least one {"role", "content"} with a
 *     role system, user or assistant (developer taken as system) and string content; the
 *     template variables are a JSON object or absent; a completion has a prompt string or 1+
 *     token ids within the vocabulary; every sampling value is within its documented range,
 *     max_tokens 0 (not given) or 1 .. the limit, at most 16 non-empty stop strings without NUL,
 *     top_logprobs at most 20 (5 for completions), the model's index among the served names;
 *   - the answers built from the parsed request (the whole answer, each stream chunk with and
 *     without a finish reason, the usage chunk, a stream error) are JSON of the right object
 *     ("data: " events for the stream), with made-up events and text of any bytes.
 */
#include "fuzz_util.h"

#include "chat_request.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { VOCAB = 300 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    return 0;
}

static json_t *parse_json(const char *text, size_t length, const char *what)
{
    json_error_t e;
    json_t *v = json_loadb(text, length, JSON_ALLOW_NUL, &e);
    FUZZ_CHECK(v, "%s is not JSON: %s: %.*s", what, e.text, (int)(length < 300 ? length : 300),
               text);
    return v;
}

/* A "data: {...}\n\n" event's object. */
static json_t *parse_event(const char *text, size_t length, const char *what)
{
    FUZZ_CHECK(length > 8 && memcmp(text, "data: ", 6) == 0 &&
                   memcmp(text + length - 2, "\n\n", 2) == 0,
               "%s is not one server-sent event", what);
    return parse_json(text + 6, length - 8, what);
}

static void check_error(const serve_error *e)
{
    FUZZ_CHECK(e->status == 400 || e->status == 404, "refused with status %d", e->status);
    FUZZ_CHECK(e->message[0], "refused without a message");
    size_t length = 0;
    char *body = serve_format_error(SERVE_API_OPENAI, e, &length);
    FUZZ_CHECK(body, "no error body");
    json_t *v = parse_json(body, length, "the error body");
    FUZZ_CHECK(json_is_string(json_object_get(json_object_get(v, "error"), "message")),
               "the error body has no error.message");
    json_decref(v);
    free(body);
}

static void check_request(const serve_chat_request *r, const serve_chat_limits *limits)
{
    const clattn_llm_sampling *s = &r->sampling;
    FUZZ_CHECK(s->temperature >= 0 && s->temperature <= 2, "temperature %g", s->temperature);
    FUZZ_CHECK(s->top_p >= 0 && s->top_p <= 1, "top_p %g", s->top_p);
    FUZZ_CHECK(s->top_k >= 0, "top_k %d", (int)s->top_k);
    FUZZ_CHECK(s->min_p >= 0 && s->min_p <= 1, "min_p %g", s->min_p);
    FUZZ_CHECK(fabs(s->presence_penalty) <= 2 && fabs(s->frequency_penalty) <= 2,
               "penalties %g %g", s->presence_penalty, s->frequency_penalty);
    FUZZ_CHECK(s->repetition_penalty > 0 && isfinite(s->repetition_penalty),
               "repetition penalty %g", s->repetition_penalty);
    FUZZ_CHECK(r->max_tokens <= limits->max_tokens, "max_tokens %zu", r->max_tokens);
    FUZZ_CHECK(r->stop_count <= SERVE_MAX_STOP_STRINGS, "%zu stop strings", r->stop_count);
    for (size_t i = 0; i < r->stop_count; i++)
        FUZZ_CHECK(r->stop[i] && r->stop[i][0], "stop string %zu empty", i);
    FUZZ_CHECK(r->top_logprobs <= (r->chat ? 20u : 5u), "top_logprobs %zu", r->top_logprobs);
    FUZZ_CHECK(r->model_name < limits->model_name_count || limits->model_name_count == 0,
               "model index %zu", r->model_name);
    if (r->chat) {
        json_t *m = parse_json(r->messages_json, strlen(r->messages_json), "messages");
        FUZZ_CHECK(json_is_array(m) && json_array_size(m) > 0, "messages not a non-empty array");
        for (size_t i = 0; i < json_array_size(m); i++) {
            const json_t *msg = json_array_get(m, i);
            const char *role = json_string_value(json_object_get(msg, "role"));
            FUZZ_CHECK(role && (strcmp(role, "system") == 0 || strcmp(role, "user") == 0 ||
                                strcmp(role, "assistant") == 0),
                       "message %zu's role", i);
            FUZZ_CHECK(json_is_string(json_object_get(msg, "content")), "message %zu's content",
                       i);
        }
        json_decref(m);
        if (r->kwargs_json) {
            json_t *k = parse_json(r->kwargs_json, strlen(r->kwargs_json), "kwargs");
            FUZZ_CHECK(json_is_object(k), "chat_template_kwargs not an object");
            json_decref(k);
        }
    } else {
        FUZZ_CHECK((r->prompt != NULL) != (r->prompt_ids != NULL), "prompt and ids");
        for (size_t i = 0; r->prompt_ids && i < r->prompt_id_count; i++)
            FUZZ_CHECK(r->prompt_ids[i] >= 0 && r->prompt_ids[i] < VOCAB, "prompt id %d",
                       (int)r->prompt_ids[i]);
        FUZZ_CHECK(!r->prompt_ids || r->prompt_id_count > 0, "no prompt ids");
    }
}

static void check_answers(const serve_chat_request *r, const uint8_t *data, size_t size)
{
    serve_gen_event events[3] = {{.token = 5, .text_start = 0, .text_length = size / 2,
                                  .logprob = -0.5, .top_count = 2, .top_ids = {5, 7},
                                  .top_logprobs = {-0.5, -1.5}},
                                 {.token = -1, .text_start = size / 2, .text_length = 0},
                                 {.token = 9, .text_start = size / 2,
                                  .text_length = size - size / 2, .logprob = -INFINITY}};
    serve_completion_info info = {.chat = r->chat, .id = "chatcmpl-1", .model = "m",
                                  .created = 1};
    serve_usage usage = {3, 2, 1};
    const char *text = (const char *)data;
    size_t length = 0;
    char *out = serve_format_completion(&info, r, NULL, text, size, events, 3, "stop", &usage,
                                        &length);
    FUZZ_CHECK(out, "no answer");
    json_t *v = parse_json(out, length, "the answer");
    FUZZ_CHECK(json_array_size(json_object_get(v, "choices")) == 1, "the answer's choices");
    json_decref(v);
    free(out);
    for (int k = 0; k < 3; k++) {
        out = serve_format_completion_chunk(&info, r, NULL, text, k == 2 ? 0 : size, k == 0,
                                            events, k == 1 ? 0 : 3, k == 2 ? "length" : NULL,
                                            &length);
        FUZZ_CHECK(out, "no chunk");
        v = parse_event(out, length, "a chunk");
        FUZZ_CHECK(json_array_size(json_object_get(v, "choices")) == 1, "a chunk's choices");
        json_decref(v);
        free(out);
    }
    out = serve_format_usage_chunk(&info, &usage, &length);
    FUZZ_CHECK(out, "no usage chunk");
    v = parse_event(out, length, "the usage chunk");
    FUZZ_CHECK(json_integer_value(json_object_get(json_object_get(v, "usage"),
                                                  "total_tokens")) == 5,
               "the usage chunk's total");
    json_decref(v);
    free(out);
    serve_error e;
    serve_error_set(&e, SERVE_API_OPENAI, SERVE_ERROR_BACKEND, NULL, "%.*s",
                    (int)(size < 200 ? size : 200), text);
    out = serve_format_stream_error(&e, &length);
    FUZZ_CHECK(out, "no stream error");
    v = parse_event(out, length, "the stream error");
    json_decref(v);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    static const char *const names[] = {"tiny", "other"};
    static const size_t caps[] = {1, 16, 4096, 4096};
    unsigned selector = data[0];
    serve_chat_limits limits = {.model_names = names,
                                .model_name_count = selector & 0x40 ? 0 : 2,
                                .accept_any_model_name = (selector & 0x80) != 0,
                                .max_tokens = caps[(selector >> 2) & 3],
                                .vocab_size = VOCAB};
    const char *body = (const char *)data + 1;
    size_t length = size - 1;
    serve_error err;
    memset(&err, 0, sizeof(err));
    switch (selector & 3) {
    case 0:
    case 1: {
        serve_chat_request r;
        bool ok = (selector & 3) == 0 ? serve_parse_chat(body, length, &limits, &r, &err)
                                      : serve_parse_completion(body, length, &limits, &r, &err);
        if (!ok) {
            static const serve_chat_request zero;
            FUZZ_CHECK(memcmp(&r, &zero, sizeof(r)) == 0, "a refused request is not zero");
            check_error(&err);
            return 0;
        }
        check_request(&r, &limits);
        check_answers(&r, data, size);
        serve_chat_request_free(&r);
        return 0;
    }
    case 2: {
        serve_llm_tokenize_request t;
        if (!serve_parse_llm_tokenize(body, length, &t, &err)) {
            FUZZ_CHECK(!t.content, "a refused /tokenize kept its content");
            check_error(&err);
            return 0;
        }
        FUZZ_CHECK(t.content && t.content[t.length] == '\0', "content not NUL-terminated");
        size_t n = 0;
        char *out = serve_format_llm_content(t.content, t.length, &n);
        FUZZ_CHECK(out, "no content answer");
        json_decref(parse_json(out, n, "the content answer"));
        free(out);
        free(t.content);
        return 0;
    }
    default: {
        int32_t *ids = NULL;
        size_t count = 0;
        if (!serve_parse_llm_detokenize(body, length, VOCAB, &ids, &count, &err)) {
            FUZZ_CHECK(!ids && !count, "a refused /detokenize kept ids");
            check_error(&err);
            return 0;
        }
        for (size_t i = 0; i < count; i++)
            FUZZ_CHECK(ids[i] >= 0 && ids[i] < VOCAB, "id %d", (int)ids[i]);
        size_t n = 0;
        char *out = serve_format_llm_tokens(ids, count, NULL, (selector & 0x10) != 0, &n);
        FUZZ_CHECK(out, "no tokens answer");
        json_decref(parse_json(out, n, "the tokens answer"));
        free(out);
        free(ids);
        return 0;
    }
    }
}
