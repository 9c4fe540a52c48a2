/*
 * A chat model's request and response bodies (chat_request.h). Pure: the only state is in the
 * arguments.
 */
#include "chat_request.h"

#include "body_json.h"

#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const serve_api api = SERVE_API_OPENAI;

void serve_chat_request_free(serve_chat_request *req)
{
    free(req->messages_json);
    free(req->kwargs_json);
    free(req->prompt);
    free(req->prompt_ids);
    for (size_t i = 0; i < req->stop_count; i++)
        free(req->stop[i]);
    free(req->stop);
    memset(req, 0, sizeof(*req));
}

/* ---- fields ---- */

static bool invalid(serve_error *err, const char *field, const char *fmt, const char *what)
{
    serve_error_set(err, api, SERVE_ERROR_INVALID, field, fmt, field, what);
    return false;
}

/* What the server does not support yet: refused by name. */
static bool unsupported(serve_error *err, const char *field, const char *what)
{
    serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                    "'%s' is not supported by this server yet (%s)", field, what);
    return false;
}

/* An optional number in [min, max] (absent or null leaves *out). */
static bool get_number(const json_t *root, const char *field, double min, double max,
                       double *out, serve_error *err)
{
    const json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v))
        return true;
    double x = json_number_value(v);
    if (!json_is_number(v) || !(x >= min && x <= max)) {
        char range[96];
        snprintf(range, sizeof(range), "%g to %g", min, max);
        return invalid(err, field, "'%s' must be a number from %s", range);
    }
    *out = x;
    return true;
}

/* An optional integer in [min, max]; *given says whether it was there. */
static bool get_integer(const json_t *root, const char *field, long long min, long long max,
                        long long *out, bool *given, serve_error *err)
{
    const json_t *v = json_object_get(root, field);
    if (given)
        *given = false;
    if (!v || json_is_null(v))
        return true;
    long long x = json_integer_value(v);
    if (!json_is_integer(v) || x < min || x > max) {
        char range[96];
        snprintf(range, sizeof(range), "%lld to %lld", min, max);
        return invalid(err, field, "'%s' must be an integer from %s", range);
    }
    *out = x;
    if (given)
        *given = true;
    return true;
}

/* A field that must be absent or null (or an accepted default value) because the server
 * does not support it. */
static bool refuse_present(const json_t *root, const char *field, const char *what,
                           serve_error *err)
{
    const json_t *v = json_object_get(root, field);
    if (!v || json_is_null(v))
        return true;
    return unsupported(err, field, what);
}

static char *dup_bytes(const char *s, size_t n)
{
    char *p = malloc(n + 1);
    if (p) {
        memcpy(p, s, n);
        p[n] = '\0';
    }
    return p;
}

static bool no_memory(serve_error *err)
{
    serve_error_set(err, api, SERVE_ERROR_BACKEND, NULL, "out of memory");
    return false;
}

/* "stop": a string or an array of non-empty strings. */
static bool get_stop(const json_t *root, serve_chat_request *req, serve_error *err)
{
    const json_t *v = json_object_get(root, "stop");
    if (!v || json_is_null(v))
        return true;
    size_t count = json_is_string(v) ? 1 : json_is_array(v) ? json_array_size(v) : 0;
    if (!json_is_string(v) && !json_is_array(v))
        return invalid(err, "stop", "'%s' must be a string or an array of strings%s", "");
    if (count > SERVE_MAX_STOP_STRINGS) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "stop",
                        "'stop' holds %zu strings: at most %d", count, SERVE_MAX_STOP_STRINGS);
        return false;
    }
    req->stop = calloc(count ? count : 1, sizeof(char *));
    if (!req->stop)
        return no_memory(err);
    for (size_t i = 0; i < count; i++) {
        const json_t *s = json_is_string(v) ? v : json_array_get(v, i);
        size_t n = json_string_length(s);
        if (!json_is_string(s) || n == 0 || strlen(json_string_value(s)) != n) {
            serve_error_set(err, api, SERVE_ERROR_INVALID, "stop",
                            "'stop'%s must be a non-empty string without NUL characters",
                            json_is_string(v) ? "" : "'s items");
            return false;
        }
        if (!(req->stop[i] = dup_bytes(json_string_value(s), n)))
            return no_memory(err);
        req->stop_count = i + 1;
    }
    return true;
}

/* What chat and completions share: model, sampling, max tokens, stop, stream, n. */
static bool parse_common(const json_t *root, const serve_chat_limits *limits,
                         serve_chat_request *req, serve_error *err)
{
    const char *model = NULL;
    if (!body_get_string(root, "model", api, &model, err) ||
        !body_find_model_name(model, model ? json_string_length(json_object_get(root, "model"))
                                           : 0,
                              limits->model_names, limits->model_name_count,
                              limits->accept_any_model_name, &req->model_name, err))
        return false;
    clattn_llm_sampling *s = &req->sampling;
    *s = (clattn_llm_sampling){.temperature = 1.0, .top_p = 1.0, .repetition_penalty = 1.0};
    long long top_k = 0, seed = 0, n = 1, max_tokens = 0;
    if (!get_number(root, "temperature", 0, 2, &s->temperature, err) ||
        !get_number(root, "top_p", 0, 1, &s->top_p, err) ||
        !get_integer(root, "top_k", -1, 1 << 30, &top_k, NULL, err) ||
        !get_number(root, "min_p", 0, 1, &s->min_p, err) ||
        !get_number(root, "presence_penalty", -2, 2, &s->presence_penalty, err) ||
        !get_number(root, "frequency_penalty", -2, 2, &s->frequency_penalty, err) ||
        !get_number(root, "repeat_penalty", 1e-6, 1e6, &s->repetition_penalty, err) ||
        !get_number(root, "repetition_penalty", 1e-6, 1e6, &s->repetition_penalty, err) ||
        !get_integer(root, "seed", INT64_MIN, INT64_MAX, &seed, &req->seed_given, err) ||
        !get_integer(root, "n", 1, 128, &n, NULL, err))
        return false;
    s->top_k = top_k < 0 ? 0 : (int32_t)top_k;
    s->seed = (uint64_t)seed;
    if (n > 1)
        return unsupported(err, "n", "one choice per request: send n = 1, or several requests");
    const long long cap = (long long)limits->max_tokens;
    for (int i = 0; i < 2; i++) {
        const char *field = i == 0 ? "max_tokens" : "max_completion_tokens";
        const json_t *v = json_object_get(root, field);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                            "'%s' must be a positive integer", field);
            return false;
        }
        if (json_integer_value(v) > cap) {
            serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                            "'%s' is %lld: this server generates at most %lld tokens per "
                            "request (--max-tokens)",
                            field, (long long)json_integer_value(v), cap);
            return false;
        }
        max_tokens = json_integer_value(v);
    }
    req->max_tokens = (size_t)max_tokens;
    if (!get_stop(root, req, err) || !body_get_bool(root, "stream", api, &req->stream, err))
        return false;
    const json_t *so = json_object_get(root, "stream_options");
    if (so && !json_is_null(so)) {
        if (!json_is_object(so))
            return invalid(err, "stream_options", "'%s' must be an object%s", "");
        if (!body_get_bool(so, "include_usage", api, &req->include_usage, err))
            return false;
    }
    const char *user = NULL;
    if (!body_get_string(root, "user", api, &user, err))
        return false;
    const json_t *lb = json_object_get(root, "logit_bias");
    if (lb && !json_is_null(lb) && !(json_is_object(lb) && json_object_size(lb) == 0))
        return unsupported(err, "logit_bias", "no biases on the logits");
    return refuse_present(root, "tools", "no tool calls", err) &&
           refuse_present(root, "tool_choice", "no tool calls", err) &&
           refuse_present(root, "functions", "no function calls", err) &&
           refuse_present(root, "function_call", "no function calls", err);
}

/* ---- chat ---- */

/* A message's content as text: a string, or its text parts joined with "\n". */
static bool message_content(const json_t *content, const char *role, size_t i, json_t **out,
                            serve_error *err)
{
    char field[48];
    snprintf(field, sizeof(field), "messages[%zu].content", i);
    if (json_is_string(content)) {
        *out = json_stringn(json_string_value(content), json_string_length(content));
        return *out ? true : no_memory(err);
    }
    if ((!content || json_is_null(content)) && strcmp(role, "assistant") == 0) {
        *out = json_string("");
        return *out ? true : no_memory(err);
    }
    if (!json_is_array(content)) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                        "'%s' must be a string or an array of text parts", field);
        return false;
    }
    strbuf b = {0};
    for (size_t k = 0; k < json_array_size(content); k++) {
        const json_t *part = json_array_get(content, k);
        const char *type = json_string_value(json_object_get(part, "type"));
        const json_t *text = json_object_get(part, "text");
        if (!json_is_object(part) || !type || strcmp(type, "text") != 0 ||
            !json_is_string(text)) {
            free(b.data);
            char name[96];
            snprintf(name, sizeof(name), "%s[%zu]", field, k);
            if (type && strcmp(type, "text") != 0)
                return unsupported(err, name, "text parts only: no images, audio or files");
            serve_error_set(err, api, SERVE_ERROR_INVALID, name,
                            "'%s' must be {\"type\": \"text\", \"text\": a string}", name);
            return false;
        }
        if (k)
            sb_append(&b, "\n", 1);
        sb_append(&b, json_string_value(text), json_string_length(text));
    }
    size_t length = 0;
    char *joined = sb_finish(&b, &length);
    *out = joined ? json_stringn(joined, length) : NULL;
    free(joined);
    return *out ? true : no_memory(err);
}

static bool parse_messages(const json_t *root, serve_chat_request *req, serve_error *err)
{
    const json_t *messages = json_object_get(root, "messages");
    if (!json_is_array(messages) || json_array_size(messages) == 0) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "messages",
                        "'messages' must be a non-empty array of messages");
        return false;
    }
    json_t *out = json_array();
    if (!out)
        return no_memory(err);
    bool ok = true;
    for (size_t i = 0; ok && i < json_array_size(messages); i++) {
        const json_t *m = json_array_get(messages, i);
        char field[48];
        snprintf(field, sizeof(field), "messages[%zu].role", i);
        const char *role = json_string_value(json_object_get(m, "role"));
        if (!json_is_object(m) || !role) {
            snprintf(field, sizeof(field), "messages[%zu]", i);
            serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                            "'%s' must be an object with a \"role\" string", field);
            ok = false;
            break;
        }
        if (strcmp(role, "tool") == 0 || strcmp(role, "function") == 0) {
            ok = unsupported(err, field, "no tool calls: roles system, developer, user, "
                                         "assistant");
            break;
        }
        bool known = strcmp(role, "system") == 0 || strcmp(role, "developer") == 0 ||
                     strcmp(role, "user") == 0 || strcmp(role, "assistant") == 0;
        if (!known) {
            serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                            "'%s' must be \"system\", \"developer\", \"user\" or \"assistant\"",
                            field);
            ok = false;
            break;
        }
        const json_t *calls = json_object_get(m, "tool_calls");
        if (calls && !json_is_null(calls) && !(json_is_array(calls) && !json_array_size(calls))) {
            snprintf(field, sizeof(field), "messages[%zu].tool_calls", i);
            ok = unsupported(err, field, "no tool calls");
            break;
        }
        json_t *content = NULL;
        if (!(ok = message_content(json_object_get(m, "content"), role, i, &content, err)))
            break;
        json_t *msg = json_object();
        const char *as = strcmp(role, "developer") == 0 ? "system" : role;
        if (!msg || json_object_set_new(msg, "role", json_string(as)) != 0 ||
            json_object_set_new(msg, "content", content) != 0 ||
            json_array_append_new(out, msg) != 0)
            ok = no_memory(err);
    }
    if (ok && !(req->messages_json = json_dumps(out, JSON_COMPACT | JSON_ENSURE_ASCII)))
        ok = no_memory(err);
    json_decref(out);
    return ok;
}

bool serve_parse_chat(const char *body, size_t size, const serve_chat_limits *limits,
                      serve_chat_request *req, serve_error *err)
{
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    req->chat = true;
    bool ok = parse_common(root, limits, req, err) && parse_messages(root, req, err) &&
              body_get_bool(root, "logprobs", api, &req->logprobs, err);
    long long top = 0;
    bool top_given = false;
    ok = ok && get_integer(root, "top_logprobs", 0, SERVE_MAX_TOP_LOGPROBS, &top, &top_given,
                           err);
    if (ok && top_given && !req->logprobs)
        ok = invalid(err, "top_logprobs", "'%s' needs \"logprobs\": true%s", "");
    req->top_logprobs = (size_t)top;
    const json_t *rf = json_object_get(root, "response_format");
    const char *rf_type = json_string_value(json_object_get(rf, "type"));
    if (ok && rf && !json_is_null(rf) && !(rf_type && strcmp(rf_type, "text") == 0))
        ok = unsupported(err, "response_format", "text answers only: no JSON mode or schema");
    const json_t *kw = json_object_get(root, "chat_template_kwargs");
    if (ok && kw && !json_is_null(kw)) {
        /* What the server sets itself (transformers refuses these as duplicate arguments). */
        static const char *const reserved[] = {"messages", "tools", "documents",
                                               "add_generation_prompt"};
        if (!json_is_object(kw))
            ok = invalid(err, "chat_template_kwargs", "'%s' must be an object%s", "");
        for (size_t i = 0; ok && i < 4; i++)
            if (json_object_get(kw, reserved[i])) {
                char field[64];
                snprintf(field, sizeof(field), "chat_template_kwargs.%s", reserved[i]);
                serve_error_set(err, api, SERVE_ERROR_INVALID, field,
                                "'%s' is set by the server, not by chat_template_kwargs", field);
                ok = false;
            }
        if (ok && !(req->kwargs_json = json_dumps(kw, JSON_COMPACT | JSON_ENSURE_ASCII)))
            ok = no_memory(err);
    }
    json_decref(root);
    if (!ok) {
        serve_chat_request_free(req);
        return false;
    }
    return true;
}

/* ---- completions ---- */

/* A JSON array of token ids, each below vocab_size, into a new *ids of *count (the caller
 * frees it; NULL on failure, with *err naming field[i]). */
static bool token_ids(const json_t *v, const char *field, size_t vocab_size, int32_t **ids,
                      size_t *count, serve_error *err)
{
    size_t n = json_array_size(v);
    *count = 0;
    if (!(*ids = malloc((n ? n : 1) * sizeof(int32_t))))
        return no_memory(err);
    for (size_t i = 0; i < n; i++) {
        const json_t *id = json_array_get(v, i);
        if (!json_is_integer(id) || json_integer_value(id) < 0 ||
            (unsigned long long)json_integer_value(id) >= vocab_size) {
            char name[48];
            snprintf(name, sizeof(name), "%s[%zu]", field, i);
            serve_error_set(err, api, SERVE_ERROR_INVALID, name,
                            "'%s' must be a token id from 0 to %zu", name, vocab_size - 1);
            free(*ids);
            *ids = NULL;
            return false;
        }
        (*ids)[i] = (int32_t)json_integer_value(id);
    }
    *count = n;
    return true;
}

static bool parse_prompt(const json_t *root, const serve_chat_limits *limits,
                         serve_chat_request *req, serve_error *err)
{
    const json_t *p = json_object_get(root, "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 &&
        (json_is_string(json_array_get(p, 0)) || json_is_array(json_array_get(p, 0))))
        p = json_array_get(p, 0);
    else if (json_is_array(p) && json_array_size(p) > 1 &&
             !json_is_integer(json_array_get(p, 0)))
        return unsupported(err, "prompt", "one prompt per request: send several requests");
    if (json_is_string(p)) {
        req->prompt_length = json_string_length(p);
        req->prompt = dup_bytes(json_string_value(p), req->prompt_length);
        return req->prompt ? true : no_memory(err);
    }
    if (json_is_array(p) && json_array_size(p) > 0)
        return token_ids(p, "prompt", limits->vocab_size, &req->prompt_ids,
                         &req->prompt_id_count, err);
    serve_error_set(err, api, SERVE_ERROR_INVALID, "prompt",
                    "'prompt' must be a string, or a non-empty array of token ids");
    return false;
}

bool serve_parse_completion(const char *body, size_t size, const serve_chat_limits *limits,
                            serve_chat_request *req, serve_error *err)
{
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    long long top = 0, best_of = 1;
    bool ok = parse_common(root, limits, req, err) && parse_prompt(root, limits, req, err) &&
              get_integer(root, "logprobs", 0, 5, &top, &req->logprobs, err) &&
              get_integer(root, "best_of", 1, 128, &best_of, NULL, err);
    req->top_logprobs = (size_t)top;
    bool echo = false;
    ok = ok && body_get_bool(root, "echo", api, &echo, err);
    if (ok && echo)
        ok = unsupported(err, "echo", "the answer holds the generated text only");
    if (ok && best_of > 1)
        ok = unsupported(err, "best_of", "one candidate per request");
    ok = ok && refuse_present(root, "suffix", "no text after the insertion point", err);
    json_decref(root);
    if (!ok) {
        serve_chat_request_free(req);
        return false;
    }
    return true;
}

/* ---- llama-server's /tokenize and /detokenize ---- */

bool serve_parse_llm_tokenize(const char *body, size_t size, serve_llm_tokenize_request *req,
                              serve_error *err)
{
    memset(req, 0, sizeof(*req));
    req->parse_special = true;
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    const json_t *content = json_object_get(root, "content");
    bool ok = body_get_bool(root, "add_special", api, &req->add_special, err) &&
              body_get_bool(root, "parse_special", api, &req->parse_special, err) &&
              body_get_bool(root, "with_pieces", api, &req->with_pieces, err);
    if (ok && !json_is_string(content))
        ok = invalid(err, "content", "'%s' must be a string%s", "");
    if (ok) {
        req->length = json_string_length(content);
        ok = (req->content = dup_bytes(json_string_value(content), req->length)) != NULL ||
             no_memory(err);
    }
    json_decref(root);
    if (!ok) {
        free(req->content);
        memset(req, 0, sizeof(*req));
    }
    return ok;
}

bool serve_parse_llm_detokenize(const char *body, size_t size, size_t vocab_size,
                                int32_t **ids, size_t *count, serve_error *err)
{
    *ids = NULL;
    *count = 0;
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    const json_t *tokens = json_object_get(root, "tokens");
    bool ok = json_is_array(tokens)
                  ? token_ids(tokens, "tokens", vocab_size, ids, count, err)
                  : invalid(err, "tokens", "'%s' must be an array of token ids%s", "");
    json_decref(root);
    return ok;
}

/* A token's bytes (control tokens shown); *n 0 when it has none or cannot be decoded. */
static char *token_bytes(const clattn_llm_text *text, int32_t id, size_t *n)
{
    char *out = NULL;
    *n = 0;
    if (!text || clattn_llm_detokenize(text, &id, 1, 1, &out, n) != CLATTN_OK)
        return NULL;
    return out;
}

char *serve_format_llm_tokens(const int32_t *ids, size_t count, const clattn_llm_text *text,
                              bool with_pieces, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "{\"tokens\":[");
    for (size_t i = 0; i < count; i++) {
        if (i)
            sb_puts(&b, ",");
        if (!with_pieces) {
            sb_printf(&b, "%d", (int)ids[i]);
            continue;
        }
        size_t n = 0;
        char *piece = token_bytes(text, ids[i], &n);
        sb_printf(&b, "{\"id\":%d,\"piece\":", (int)ids[i]);
        sb_json_string(&b, piece ? piece : "", n);
        sb_puts(&b, "}");
        clattn_llm_free(piece);
    }
    sb_puts(&b, "]}");
    return sb_finish(&b, length);
}

char *serve_format_llm_content(const char *content, size_t content_length, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "{\"content\":");
    sb_json_string(&b, content, content_length);
    sb_puts(&b, "}");
    return sb_finish(&b, length);
}

/* ---- answers ---- */

const char *serve_finish_reason(serve_gen_end end)
{
    return end == SERVE_GEN_LENGTH ? "length" : "stop";
}

/* A log-probability: %.17g (the double's exact value read back); -9999 for -infinity (a token
 * the model rules out), as OpenAI shows it. */
static void sb_logprob(strbuf *b, double x)
{
    if (isfinite(x))
        sb_printf(b, "%.17g", x);
    else
        sb_puts(b, "-9999.0");
}

static void sb_token_entry(strbuf *b, const clattn_llm_text *text, int32_t id, double logprob)
{
    size_t n = 0;
    char *bytes = token_bytes(text, id, &n);
    sb_puts(b, "\"token\":");
    sb_json_string(b, bytes ? bytes : "", n);
    sb_puts(b, ",\"logprob\":");
    sb_logprob(b, logprob);
    sb_puts(b, ",\"bytes\":[");
    for (size_t i = 0; i < n; i++)
        sb_printf(b, i ? ",%u" : "%u", (unsigned char)bytes[i]);
    sb_puts(b, "]");
    clattn_llm_free(bytes);
}

/* The "logprobs" value of a choice: null, chat's {"content": [...]}, or completions'
 * {"tokens", "token_logprobs", "top_logprobs", "text_offset"}. */
static void sb_logprobs(strbuf *b, const serve_chat_request *req, const clattn_llm_text *text,
                        const serve_gen_event *events, size_t count)
{
    if (!req->logprobs) {
        sb_puts(b, "null");
        return;
    }
    if (req->chat) {
        sb_puts(b, "{\"content\":[");
        bool first = true;
        for (size_t i = 0; i < count; i++) {
            const serve_gen_event *e = &events[i];
            if (e->token < 0)
                continue;
            sb_puts(b, first ? "{" : ",{");
            first = false;
            sb_token_entry(b, text, e->token, e->logprob);
            sb_puts(b, ",\"top_logprobs\":[");
            for (size_t k = 0; k < e->top_count && k < req->top_logprobs; k++) {
                sb_puts(b, k ? ",{" : "{");
                sb_token_entry(b, text, e->top_ids[k], e->top_logprobs[k]);
                sb_puts(b, "}");
            }
            sb_puts(b, "]}");
        }
        sb_puts(b, "],\"refusal\":null}");
        return;
    }
    for (int part = 0; part < 4; part++) {
        static const char *const names[] = {"{\"tokens\":[", "],\"token_logprobs\":[",
                                            "],\"top_logprobs\":[", "],\"text_offset\":["};
        sb_puts(b, names[part]);
        bool first = true;
        for (size_t i = 0; i < count; i++) {
            const serve_gen_event *e = &events[i];
            if (e->token < 0)
                continue;
            if (!first)
                sb_puts(b, ",");
            first = false;
            size_t n = 0;
            char *bytes = NULL;
            switch (part) {
            case 0:
                bytes = token_bytes(text, e->token, &n);
                sb_json_string(b, bytes ? bytes : "", n);
                clattn_llm_free(bytes);
                break;
            case 1: sb_logprob(b, e->logprob); break;
            case 2:
                sb_puts(b, "{");
                for (size_t k = 0; k < e->top_count && k < req->top_logprobs; k++) {
                    if (k)
                        sb_puts(b, ",");
                    bytes = token_bytes(text, e->top_ids[k], &n);
                    sb_json_string(b, bytes ? bytes : "", n);
                    clattn_llm_free(bytes);
                    sb_puts(b, ":");
                    sb_logprob(b, e->top_logprobs[k]);
                }
                sb_puts(b, "}");
                break;
            default: sb_printf(b, "%zu", e->text_start); break;
            }
        }
    }
    sb_puts(b, "]}");
}

static void sb_head(strbuf *b, const serve_completion_info *info, const char *object)
{
    sb_puts(b, "{\"id\":");
    sb_json_string(b, info->id, strlen(info->id));
    sb_printf(b, ",\"object\":\"%s\",\"created\":%lld,\"model\":", object, info->created);
    sb_json_string(b, info->model, strlen(info->model));
    sb_puts(b, ",\"system_fingerprint\":\"clattn\"");
}

static void sb_usage(strbuf *b, const serve_usage *u)
{
    sb_printf(b,
              "{\"prompt_tokens\":%zu,\"completion_tokens\":%zu,\"total_tokens\":%zu,"
              "\"prompt_tokens_details\":{\"cached_tokens\":%zu}}",
              u->prompt_tokens, u->completion_tokens, u->prompt_tokens + u->completion_tokens,
              u->cached_tokens);
}

static void sb_finish_reason(strbuf *b, const char *finish_reason)
{
    if (finish_reason)
        sb_json_string(b, finish_reason, strlen(finish_reason));
    else
        sb_puts(b, "null");
}

char *serve_format_completion(const serve_completion_info *info, const serve_chat_request *req,
                              const clattn_llm_text *text, const char *answer,
                              size_t answer_length, const serve_gen_event *events,
                              size_t event_count, const char *finish_reason,
                              const serve_usage *usage, size_t *length)
{
    strbuf b = {0};
    sb_head(&b, info, info->chat ? "chat.completion" : "text_completion");
    if (info->chat) {
        sb_puts(&b, ",\"choices\":[{\"index\":0,\"message\":{\"role\":\"assistant\",\"content\":");
        sb_json_string(&b, answer, answer_length);
        sb_puts(&b, ",\"refusal\":null},\"logprobs\":");
    } else {
        sb_puts(&b, ",\"choices\":[{\"index\":0,\"text\":");
        sb_json_string(&b, answer, answer_length);
        sb_puts(&b, ",\"logprobs\":");
    }
    sb_logprobs(&b, req, text, events, event_count);
    sb_puts(&b, ",\"finish_reason\":");
    sb_finish_reason(&b, finish_reason);
    sb_puts(&b, "}],\"usage\":");
    sb_usage(&b, usage);
    sb_puts(&b, "}");
    return sb_finish(&b, length);
}

char *serve_format_completion_chunk(const serve_completion_info *info,
                                    const serve_chat_request *req, const clattn_llm_text *text,
                                    const char *piece, size_t piece_length, bool first,
                                    const serve_gen_event *events, size_t event_count,
                                    const char *finish_reason, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "data: ");
    sb_head(&b, info, info->chat ? "chat.completion.chunk" : "text_completion");
    if (info->chat) {
        sb_puts(&b, ",\"choices\":[{\"index\":0,\"delta\":{");
        if (first)
            sb_puts(&b, "\"role\":\"assistant\",");
        if (piece_length || !finish_reason || first) {
            sb_puts(&b, "\"content\":");
            sb_json_string(&b, piece, piece_length);
        } else if (b.length && b.data[b.length - 1] == ',') {
            b.length--;
        }
        sb_puts(&b, "},\"logprobs\":");
    } else {
        sb_puts(&b, ",\"choices\":[{\"index\":0,\"text\":");
        sb_json_string(&b, piece, piece_length);
        sb_puts(&b, ",\"logprobs\":");
    }
    if (event_count)
        sb_logprobs(&b, req, text, events, event_count);
    else
        sb_puts(&b, "null");
    sb_puts(&b, ",\"finish_reason\":");
    sb_finish_reason(&b, finish_reason);
    sb_puts(&b, "}]");
    if (req->include_usage)
        sb_puts(&b, ",\"usage\":null");
    sb_puts(&b, "}\n\n");
    return sb_finish(&b, length);
}

char *serve_format_usage_chunk(const serve_completion_info *info, const serve_usage *usage,
                               size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "data: ");
    sb_head(&b, info, info->chat ? "chat.completion.chunk" : "text_completion");
    sb_puts(&b, ",\"choices\":[],\"usage\":");
    sb_usage(&b, usage);
    sb_puts(&b, "}\n\n");
    return sb_finish(&b, length);
}

char *serve_format_stream_error(const serve_error *e, size_t *length)
{
    size_t n = 0;
    char *body = serve_format_error(api, e, &n);
    if (!body)
        return NULL;
    strbuf b = {0};
    sb_puts(&b, "data: ");
    sb_append(&b, body, n);
    sb_puts(&b, "\n\n");
    free(body);
    return sb_finish(&b, length);
}
