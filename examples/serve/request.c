/*
 * Request parsing and response formatting of clattn-serve (request.h). Pure: the only state is
 * in the arguments.
 */
#include "request.h"

#include "body_json.h"

#include <jansson.h>

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- errors ---- */

typedef struct error_style {
    int openai_status, tei_status;
    const char *openai_type, *openai_code, *tei_type;
} error_style;

static const error_style error_styles[] = {
    [SERVE_ERROR_SYNTAX] = {400, 400, "invalid_request_error", NULL, "Validation"},
    [SERVE_ERROR_INVALID] = {400, 422, "invalid_request_error", NULL, "Validation"},
    [SERVE_ERROR_EMPTY] = {400, 400, "invalid_request_error", NULL, "Empty"},
    [SERVE_ERROR_TOO_LARGE] = {413, 413, "invalid_request_error", NULL, "Validation"},
    [SERVE_ERROR_UNAUTHORIZED] = {401, 401, "invalid_request_error", "invalid_api_key",
                                  "Unauthorized"},
    [SERVE_ERROR_NOT_FOUND] = {404, 404, "invalid_request_error", "not_found", "NotFound"},
    [SERVE_ERROR_MODEL_NOT_FOUND] = {404, 404, "invalid_request_error", "model_not_found",
                                     "NotFound"},
    [SERVE_ERROR_METHOD] = {405, 405, "invalid_request_error", "method_not_allowed",
                            "MethodNotAllowed"},
    [SERVE_ERROR_OVERLOADED] = {429, 429, "rate_limit_error", "rate_limit_exceeded",
                                "Overloaded"},
    [SERVE_ERROR_BACKEND] = {500, 424, "server_error", NULL, "Backend"},
    [SERVE_ERROR_MODEL_KIND] = {400, 424, "invalid_request_error", "model_not_supported",
                                "Backend"},
    [SERVE_ERROR_UNAVAILABLE] = {503, 503, "server_error", "service_unavailable", "Unhealthy"},
    [SERVE_ERROR_TIMEOUT] = {504, 504, "server_error", "timeout", "Overloaded"},
};

void serve_error_set(serve_error *e, serve_api api, serve_error_kind kind, const char *param,
                     const char *fmt, ...)
{
    const error_style *s = &error_styles[kind];
    e->status = api == SERVE_API_OPENAI ? s->openai_status : s->tei_status;
    e->type = api == SERVE_API_OPENAI ? s->openai_type : s->tei_type;
    e->code = api == SERVE_API_OPENAI ? s->openai_code : NULL;
    snprintf(e->param, sizeof(e->param), "%s", param ? param : "");
    /* TEI prefixes its validation messages so; its clients match on it. */
    size_t used = 0;
    if (api == SERVE_API_TEI && (kind == SERVE_ERROR_INVALID || kind == SERVE_ERROR_EMPTY ||
                                 kind == SERVE_ERROR_TOO_LARGE))
        used = (size_t)snprintf(e->message, sizeof(e->message), "Input validation error: ");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message + used, sizeof(e->message) - used, fmt, ap);
    va_end(ap);
}

/* ---- texts ---- */

void serve_texts_free(serve_texts *t)
{
    for (size_t i = 0; i < t->count; i++) {
        if (t->ids)
            free(t->ids[i]);
        if (t->type_ids)
            free(t->type_ids[i]);
    }
    free(t->ids);
    free(t->type_ids);
    free(t->lengths);
    memset(t, 0, sizeof(*t));
}

static bool texts_alloc(serve_texts *t, size_t count)
{
    memset(t, 0, sizeof(*t));
    t->ids = calloc(count, sizeof(*t->ids));
    t->lengths = calloc(count, sizeof(*t->lengths));
    if (!t->ids || !t->lengths) {
        free(t->ids);
        free(t->lengths);
        t->ids = NULL;
        t->lengths = NULL;
        return false;
    }
    t->count = count;
    return true;
}

/* How one route reads its inputs. */
typedef struct input_rules {
    serve_api api;
    const char *field;     /* "input" (OpenAI) or "inputs" (TEI) */
    bool token_ids;        /* arrays of ids are accepted (OpenAI) */
    bool check_length;     /* refuse or truncate texts over max_input_length (not /tokenize) */
    bool truncate;         /* truncate instead of refusing */
    bool truncate_left;    /* keep the last ids rather than the first */
    const char *prompt;    /* put before each text input (NULL or "": none) */
    bool no_special_tokens; /* texts without the template's special tokens (/tokenize) */
} input_rules;

/* Cuts an encoding of n > max ids (`lead` special ids, the text's ids, `trail` special ids:
 * [CLS] a ... z [SEP] for BERT) to max ids: the first ones, or (left) the last ones; the
 * special ids stay. max is at least lead + trail. */
static void cut_encoding(int32_t *ids, size_t *n, size_t max, bool left, size_t lead,
                         size_t trail)
{
    if (*n <= max)
        return;
    size_t keep = max > lead + trail ? max - lead - trail : 0;
    if (left)
        memmove(ids + lead, ids + (*n - trail - keep), keep * sizeof(*ids));
    memmove(ids + lead + keep, ids + (*n - trail), trail * sizeof(*ids));
    *n = lead + keep + trail;
}

static bool too_long(serve_error *err, const input_rules *r, const char *name, size_t given,
                     size_t max)
{
    if (r->api == SERVE_API_TEI)
        serve_error_set(err, r->api, SERVE_ERROR_TOO_LARGE, name,
                        "`%s` must have at most %zu tokens (the special tokens included). Given: "
                        "%zu (ask for \"truncate\": true, or start the server with "
                        "--auto-truncate)",
                        name, max, given);
    else
        serve_error_set(err, r->api, SERVE_ERROR_TOO_LARGE, name,
                        "'%s' is %zu tokens long (the special tokens included), more than this "
                        "model's maximum of %zu; shorten it, or start the server with "
                        "--auto-truncate",
                        name, given, max);
    return false;
}

static bool encode_text(const char *text, size_t bytes, size_t i, const char *name,
                        const clattn_tokenizer *tok, const serve_limits *limits,
                        const input_rules *r, serve_texts *t, serve_error *err);

/* Tokenizes the string of `item`, after the prompt, into t->ids[i]. */
static bool encode_string(const json_t *item, size_t i, const char *name,
                          const clattn_tokenizer *tok, const serve_limits *limits,
                          const input_rules *r, serve_texts *t, serve_error *err)
{
    const char *text = json_string_value(item);
    size_t bytes = json_string_length(item);
    char *prompted = NULL; /* the prompt and the text, as sentence-transformers joins them */
    if (r->prompt && r->prompt[0]) {
        size_t prompt_bytes = strlen(r->prompt);
        if (!(prompted = malloc(prompt_bytes + bytes + 1))) {
            serve_error_set(err, r->api, SERVE_ERROR_BACKEND, NULL,
                            "out of memory for the prompt and %s", name);
            return false;
        }
        memcpy(prompted, r->prompt, prompt_bytes);
        memcpy(prompted + prompt_bytes, text, bytes);
        text = prompted, bytes += prompt_bytes;
    }
    bool ok = encode_text(text, bytes, i, name, tok, limits, r, t, err);
    free(prompted);
    return ok;
}

/* Tokenizes text[0 .. bytes) into t->ids[i]. */
static bool encode_text(const char *text, size_t bytes, size_t i, const char *name,
                        const clattn_tokenizer *tok, const serve_limits *limits,
                        const input_rules *r, serve_texts *t, serve_error *err)
{
    /* Right truncation is the tokenizer's own; left truncation and refusals need every id. */
    size_t max_length = r->check_length && r->truncate && !r->truncate_left
                            ? limits->max_input_length
                            : SIZE_MAX;
    /* As `embed` tokenizes it (stripped) when the served model is an embedder. Tokenized once,
     * into arrays the tokenizer grows. */
    const clattn_tokenizer *from =
        limits->prompts ? clattn_sentence_model_tokenizer(limits->prompts) : tok;
    clattn_tokens out = {0};
    unsigned flags = (limits->prompts ? CLATTN_ENCODE_STRIP : 0) |
                     (r->no_special_tokens ? CLATTN_ENCODE_NO_SPECIAL_TOKENS : 0);
    clattn_status s = clattn_tokenizer_encode_tokens(from, text, bytes, max_length, flags, &out);
    free(out.type_ids); /* a single text's token types are all 0 in every supported template */
    /* An empty encoding (a template without special tokens) still gets an array. */
    bool no_room = s == CLATTN_OK && !out.ids && !(out.ids = malloc(sizeof(*out.ids)));
    if (s != CLATTN_OK || no_room) {
        free(out.ids);
        serve_error_set(err, r->api,
                        s == CLATTN_ERROR_INVALID_ARGUMENT ? SERVE_ERROR_INVALID
                                                           : SERVE_ERROR_BACKEND,
                        name, "%s cannot be tokenized: %s", name,
                        no_room ? "out of memory" : clattn_last_error(NULL));
        return false;
    }
    t->ids[i] = out.ids;
    t->lengths[i] = out.count;
    if (r->check_length && t->lengths[i] > limits->max_input_length) {
        if (!r->truncate)
            return too_long(err, r, name, t->lengths[i], limits->max_input_length);
        size_t lead = clattn_tokenizer_special_count(from, CLATTN_TEMPLATE_SINGLE_LEADING);
        size_t trail = clattn_tokenizer_special_count(from, CLATTN_TEMPLATE_SINGLE) - lead;
        cut_encoding(t->ids[i], &t->lengths[i], limits->max_input_length, r->truncate_left,
                     lead, trail);
    }
    return true;
}

/* Copies the array of vocabulary ids `item` into t->ids[i] with the single template's special
 * tokens around them ([CLS] and [SEP] for BERT), its first ids when it is truncated (only
 * OpenAI's route takes ids, and it truncates from the right). */
static bool copy_ids(const json_t *item, size_t i, const char *name, const clattn_tokenizer *tok,
                     const serve_limits *limits, const input_rules *r, serve_texts *t,
                     serve_error *err)
{
    size_t n = json_array_size(item);
    size_t vocab = clattn_tokenizer_vocab_size(tok);
    int32_t *given = malloc((n ? n : 1) * sizeof(*given));
    if (!given) {
        serve_error_set(err, r->api, SERVE_ERROR_BACKEND, NULL,
                        "out of memory for the ids of %s", name);
        return false;
    }
    for (size_t k = 0; k < n; k++) {
        const json_t *v = json_array_get(item, k);
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            (unsigned long long)json_integer_value(v) >= vocab) {
            char where[96];
            snprintf(where, sizeof(where), "%s[%zu]", name, k);
            if (json_is_integer(v))
                serve_error_set(err, r->api, SERVE_ERROR_INVALID, where,
                                "'%s' is %lld, not a token id of this model's vocabulary "
                                "(0 .. %zu)",
                                where, (long long)json_integer_value(v), vocab - 1);
            else
                serve_error_set(err, r->api, SERVE_ERROR_INVALID, where,
                                "'%s' must be an integer token id", where);
            free(given);
            return false;
        }
        given[k] = (int32_t)json_integer_value(v);
    }
    size_t specials = clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE);
    if (r->check_length && n + specials > limits->max_input_length && !r->truncate) {
        free(given);
        return too_long(err, r, name, n + specials, limits->max_input_length);
    }
    clattn_tokens out = {0};
    clattn_status s = clattn_tokenizer_post_process(
        tok, given, n, r->check_length ? limits->max_input_length : SIZE_MAX, 0, &out);
    free(given);
    free(out.type_ids);
    bool no_room = s == CLATTN_OK && !out.ids && !(out.ids = malloc(sizeof(*out.ids)));
    if (s != CLATTN_OK || no_room) {
        free(out.ids);
        serve_error_set(err, r->api,
                        s == CLATTN_ERROR_INVALID_ARGUMENT ? SERVE_ERROR_INVALID
                                                           : SERVE_ERROR_BACKEND,
                        name, "%s cannot be encoded: %s", name,
                        no_room ? "out of memory" : clattn_last_error(NULL));
        return false;
    }
    t->ids[i] = out.ids;
    t->lengths[i] = out.count;
    return true;
}

/* The kinds of element an inputs array may hold. */
typedef enum input_kind { KIND_STRING, KIND_ID, KIND_ID_LIST, KIND_OTHER } input_kind;

static input_kind kind_of(const json_t *v)
{
    if (json_is_string(v))
        return KIND_STRING;
    if (json_is_integer(v))
        return KIND_ID;
    if (json_is_array(v))
        return KIND_ID_LIST;
    return KIND_OTHER;
}

static bool parse_inputs(const json_t *root, const clattn_tokenizer *tok,
                         const serve_limits *limits, const input_rules *r, serve_texts *t,
                         serve_error *err)
{
    const char *field = r->field;
    const json_t *in = json_object_get(root, field);
    const char *expected = r->token_ids ? "a string, an array of strings, an array of token ids "
                                          "or an array of arrays of token ids"
                                        : "a string or an array of strings";
    if (!in || json_is_null(in)) {
        serve_error_set(err, r->api, SERVE_ERROR_INVALID, field,
                        "'%s' is required: %s", field, expected);
        return false;
    }
    /* What the texts are: one string, an array of strings, one array of ids, arrays of ids. */
    size_t count;
    input_kind kind;
    if (json_is_string(in)) {
        count = 1;
        kind = KIND_STRING;
    } else if (json_is_array(in)) {
        count = json_array_size(in);
        if (count == 0) {
            serve_error_set(err, r->api, SERVE_ERROR_EMPTY, field, "`%s` cannot be empty",
                            field);
            return false;
        }
        kind = kind_of(json_array_get(in, 0));
        if (kind == KIND_ID) /* one text given as ids */
            count = 1;
    } else {
        serve_error_set(err, r->api, SERVE_ERROR_INVALID, field, "'%s' must be %s, not %s",
                        field, expected,
                        json_is_object(in) ? "an object"
                        : json_is_number(in) ? "a number"
                        : json_is_boolean(in) ? "a boolean" : "this");
        return false;
    }
    if (kind != KIND_STRING && !r->token_ids) {
        serve_error_set(err, r->api, SERVE_ERROR_INVALID, field,
                        "'%s[0]' must be a string: '%s' must be %s", field, field, expected);
        return false;
    }
    if (kind == KIND_OTHER) {
        serve_error_set(err, r->api, SERVE_ERROR_INVALID, field,
                        "'%s[0]' must be a string, a token id or an array of token ids", field);
        return false;
    }
    if (count > limits->max_client_batch_size) {
        if (r->api == SERVE_API_TEI)
            serve_error_set(err, r->api, SERVE_ERROR_TOO_LARGE, field,
                            "batch size %zu > maximum allowed batch size %zu", count,
                            limits->max_client_batch_size);
        else
            serve_error_set(err, r->api, SERVE_ERROR_TOO_LARGE, field,
                            "'%s' has %zu items, more than this server's maximum of %zu "
                            "(--max-client-batch-size)",
                            field, count, limits->max_client_batch_size);
        return false;
    }
    if (!texts_alloc(t, count)) {
        serve_error_set(err, r->api, SERVE_ERROR_BACKEND, NULL, "out of memory for %zu texts",
                        count);
        return false;
    }
    bool ok = true;
    for (size_t i = 0; ok && i < count; i++) {
        char name[64];
        const json_t *item;
        if (json_is_array(in) && kind != KIND_ID) {
            item = json_array_get(in, i);
            snprintf(name, sizeof(name), "%s[%zu]", field, i);
        } else {
            item = in;
            snprintf(name, sizeof(name), "%s", field);
        }
        if (kind == KIND_STRING && !json_is_string(item)) {
            serve_error_set(err, r->api, SERVE_ERROR_INVALID, name,
                            "'%s' must be a string, as '%s[0]' is", name, field);
            ok = false;
        } else if (kind == KIND_ID_LIST && !json_is_array(item)) {
            serve_error_set(err, r->api, SERVE_ERROR_INVALID, name,
                            "'%s' must be an array of token ids, as '%s[0]' is", name, field);
            ok = false;
        } else if (kind == KIND_STRING) {
            ok = encode_string(item, i, name, tok, limits, r, t, err);
        } else {
            ok = copy_ids(item, i, name, tok, limits, r, t, err);
        }
        if (ok)
            t->tokens += t->lengths[i];
    }
    if (!ok)
        serve_texts_free(t);
    return ok;
}

/* ---- the bodies ---- */

/* "truncation_direction"'s value, read by get_string (NULL: not given): *left for "left" or
 * "Left"; anything but those and "right" or "Right" is an error. */
static bool get_direction(const char *direction, serve_api api, bool *left, serve_error *err)
{
    *left = direction && (strcmp(direction, "left") == 0 || strcmp(direction, "Left") == 0);
    if (!direction || *left || strcmp(direction, "right") == 0 ||
        strcmp(direction, "Right") == 0)
        return true;
    serve_error_set(err, api, SERVE_ERROR_INVALID, "truncation_direction",
                    "'truncation_direction' must be \"right\" or \"left\"");
    return false;
}

static bool get_dimensions(const json_t *root, serve_api api, const serve_limits *limits,
                           size_t *out, serve_error *err)
{
    const json_t *v = json_object_get(root, "dimensions");
    *out = 0;
    if (!v || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 1 ||
        (unsigned long long)json_integer_value(v) > limits->hidden_size) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "dimensions",
                        "'dimensions' must be an integer from 1 to %zu (this model's "
                        "embedding size)",
                        limits->hidden_size);
        return false;
    }
    *out = (size_t)json_integer_value(v);
    return true;
}

/* The prompt a request's texts get: "prompt_name"'s (when `named` and the body has one), else
 * the model's default; *prompt NULL: none. */
static bool get_prompt(const json_t *root, serve_api api, const serve_limits *limits, bool named,
                       const char **prompt, serve_error *err)
{
    const char *name = NULL;
    *prompt = NULL;
    if (named && !body_get_string(root, "prompt_name", api, &name, err))
        return false;
    if (!name) {
        clattn_sentence_model_info info;
        if (limits->prompts && clattn_sentence_model_get_info(limits->prompts, &info) == CLATTN_OK)
            *prompt = clattn_sentence_model_prompt(limits->prompts, info.default_prompt_name);
        return true;
    }
    /* A name with "\u0000" in it is none of the model's (not the part before the NUL). */
    size_t length = json_string_length(json_object_get(root, "prompt_name"));
    if (strlen(name) == length && (*prompt = clattn_sentence_model_prompt(limits->prompts, name)))
        return true;
    char names[400] = "", shown[68];
    const char *known;
    for (size_t i = 0; (known = clattn_sentence_model_prompt_name(limits->prompts, i)); i++)
        snprintf(names + strlen(names), sizeof(names) - strlen(names), "%s\"%s\"",
                 i ? ", " : "", known);
    body_displayable(shown, sizeof(shown), name, length);
    serve_error_set(err, api, SERVE_ERROR_INVALID, "prompt_name",
                    "'prompt_name' \"%s\" is not one of the model's prompts (%s)", shown,
                    names[0] ? names : "it has none");
    return false;
}

bool serve_parse_openai_embeddings(const char *body, size_t size, const clattn_tokenizer *tok,
                                   const serve_limits *limits, serve_embed_request *req,
                                   serve_error *err)
{
    const serve_api api = SERVE_API_OPENAI;
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    const char *model = NULL, *format = NULL, *user = NULL;
    bool ok = body_get_string(root, "model", api, &model, err) &&
              body_get_string(root, "encoding_format", api, &format, err) &&
              body_get_string(root, "user", api, &user, err) &&
              get_dimensions(root, api, limits, &req->dimensions, err);
    if (ok && format && strcmp(format, "float") != 0 && strcmp(format, "base64") != 0) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "encoding_format",
                        "'encoding_format' must be \"float\" or \"base64\"");
        ok = false;
    }
    size_t model_length = model ? json_string_length(json_object_get(root, "model")) : 0;
    ok = ok && body_find_model_name(model, model_length, limits->model_names,
                                   limits->model_name_count, limits->accept_any_model_name,
                                   &req->model_name, err);
    req->base64 = ok && format && strcmp(format, "base64") == 0;
    input_rules rules = {api, "input", true, true, limits->auto_truncate, false, NULL, false};
    ok = ok && get_prompt(root, api, limits, false, &rules.prompt, err);
    ok = ok && parse_inputs(root, tok, limits, &rules, &req->texts, err);
    json_decref(root);
    if (!ok)
        memset(req, 0, sizeof(*req));
    else
        req->normalize = -1; /* the model's own output */
    return ok;
}

bool serve_parse_tei_embed(const char *body, size_t size, const clattn_tokenizer *tok,
                           const serve_limits *limits, serve_embed_request *req, serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    bool normalize = true, truncate = limits->auto_truncate;
    const char *direction = NULL;
    bool ok = body_get_bool(root, "normalize", api, &normalize, err) &&
              body_get_bool(root, "truncate", api, &truncate, err) &&
              body_get_string(root, "truncation_direction", api, &direction, err) &&
              get_dimensions(root, api, limits, &req->dimensions, err);
    const char *prompt = NULL;
    ok = ok && get_prompt(root, api, limits, true, &prompt, err);
    bool left = false;
    ok = ok && get_direction(direction, api, &left, err);
    req->normalize = normalize;
    input_rules rules = {api, "inputs", false, true, truncate, left, prompt, false};
    ok = ok && parse_inputs(root, tok, limits, &rules, &req->texts, err);
    json_decref(root);
    if (!ok)
        memset(req, 0, sizeof(*req));
    return ok;
}

bool serve_parse_tei_tokenize(const char *body, size_t size, const clattn_tokenizer *tok,
                              const serve_limits *limits, serve_tokenize_request *req,
                              serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    bool special = true;
    input_rules rules = {api, "inputs", false, false, false, false, NULL, false};
    bool ok = body_get_bool(root, "add_special_tokens", api, &special, err) &&
              get_prompt(root, api, limits, true, &rules.prompt, err);
    rules.no_special_tokens = !special;
    ok = ok && parse_inputs(root, tok, limits, &rules, &req->texts, err);
    req->add_special_tokens = special;
    json_decref(root);
    if (!ok)
        memset(req, 0, sizeof(*req));
    return ok;
}

/* ---- the cross-encoder routes ---- */

void serve_score_request_free(serve_score_request *req)
{
    if (req->documents)
        for (size_t i = 0; i < req->texts.count; i++)
            free(req->documents[i]);
    free(req->documents);
    free(req->document_lengths);
    serve_texts_free(&req->texts);
    memset(req, 0, sizeof(*req));
}

/* The ids of the pair (a, b) as the served cross-encoder tokenizes it (limits->pairs: as
 * clattn_cross_encoder_encode_pair, max_length within the model's, both texts stripped), else
 * with the tokenizer's pair template; of a alone when b is NULL (the single template's token
 * types: 0). Appended to *out, each text tokenized once. */
static clattn_status encode_pair_or_text(const clattn_tokenizer *tok, const serve_limits *limits,
                                         const char *a, size_t bytes_a, const char *b,
                                         size_t bytes_b, size_t max_length, clattn_tokens *out)
{
    if (!b)
        return clattn_tokenizer_encode_tokens(tok, a, bytes_a, max_length, 0, out);
    if (limits->pairs) {
        clattn_cross_encoder_info info;
        clattn_status s = clattn_cross_encoder_get_info(limits->pairs, &info);
        if (s != CLATTN_OK)
            return s;
        if (max_length == 0 || (max_length != SIZE_MAX && max_length > info.max_length))
            max_length = info.max_length;
        return clattn_tokenizer_encode_pair_tokens(clattn_cross_encoder_tokenizer(limits->pairs),
                                                   a, bytes_a, b, bytes_b, max_length,
                                                   CLATTN_ENCODE_STRIP, out);
    }
    return clattn_tokenizer_encode_pair_tokens(tok, a, bytes_a, b, bytes_b, max_length, 0, out);
}

/* Encodes text i of t: the pair (a, b) (encode_pair_or_text), or a alone when b is NULL,
 * truncated to max_input_length longest-first when `truncate`, else
 * refused past it. */
static bool encode_sequence(const json_t *a, const json_t *b, size_t i, const char *name,
                            const clattn_tokenizer *tok, const serve_limits *limits,
                            bool truncate, serve_texts *t, serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    size_t max_length = truncate ? limits->max_input_length : SIZE_MAX;
    const char *text_a = json_string_value(a), *text_b = b ? json_string_value(b) : NULL;
    size_t bytes_a = json_string_length(a), bytes_b = b ? json_string_length(b) : 0;
    clattn_tokens out = {0};
    clattn_status s = encode_pair_or_text(tok, limits, text_a, bytes_a, text_b, bytes_b,
                                          max_length, &out);
    if (s == CLATTN_OK && out.count > limits->max_input_length) {
        serve_error_set(err, api, SERVE_ERROR_TOO_LARGE, name,
                        "`%s` must have at most %zu tokens (the special tokens included). "
                        "Given: %zu (ask for \"truncate\": true, or start the server with "
                        "--auto-truncate)",
                        name, limits->max_input_length, out.count);
        clattn_tokens_free(&out);
        return false;
    }
    if (s == CLATTN_OK && !out.ids) { /* an empty encoding: room for one id all the same */
        out.ids = malloc(sizeof(*out.ids));
        out.type_ids = calloc(1, sizeof(*out.type_ids));
        if (!out.ids || !out.type_ids) {
            clattn_tokens_free(&out);
            serve_error_set(err, api, SERVE_ERROR_BACKEND, NULL,
                            "out of memory for the ids of %s", name);
            return false;
        }
    }
    if (s != CLATTN_OK) {
        clattn_tokens_free(&out);
        serve_error_set(err, api,
                        s == CLATTN_ERROR_INVALID_ARGUMENT ? SERVE_ERROR_INVALID
                                                           : SERVE_ERROR_BACKEND,
                        name, "%s cannot be tokenized: %s", name, clattn_last_error(NULL));
        return false;
    }
    t->ids[i] = out.ids;
    t->type_ids[i] = out.type_ids;
    t->lengths[i] = out.count;
    t->tokens += out.count;
    return true;
}

/* Room for `count` sequences with their token types. */
static bool score_texts_alloc(serve_texts *t, size_t count, serve_error *err)
{
    if (!texts_alloc(t, count) || !(t->type_ids = calloc(count, sizeof(*t->type_ids)))) {
        serve_texts_free(t);
        serve_error_set(err, SERVE_API_TEI, SERVE_ERROR_BACKEND, NULL,
                        "out of memory for %zu texts", count);
        return false;
    }
    return true;
}

/* "truncate", "truncation_direction" (only "right") and "raw_scores" of a scoring route. */
static bool get_score_options(const json_t *root, const serve_limits *limits, bool *truncate,
                              serve_score_request *req, serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    const char *direction = NULL;
    *truncate = limits->auto_truncate;
    if (!body_get_bool(root, "truncate", api, truncate, err) ||
        !body_get_string(root, "truncation_direction", api, &direction, err) ||
        !body_get_bool(root, "raw_scores", api, &req->raw_scores, err))
        return false;
    bool left = false;
    if (!get_direction(direction, api, &left, err))
        return false;
    if (left)
        serve_error_set(err, api, SERVE_ERROR_INVALID, "truncation_direction",
                        "'truncation_direction' \"left\" is not supported for a cross-encoder: "
                        "pairs are truncated longest-first from the right");
    return !left;
}

static bool too_many(const serve_limits *limits, const char *field, size_t count,
                     serve_error *err)
{
    if (count <= limits->max_client_batch_size)
        return false;
    serve_error_set(err, SERVE_API_TEI, SERVE_ERROR_TOO_LARGE, field,
                    "batch size %zu > maximum allowed batch size %zu", count,
                    limits->max_client_batch_size);
    return true;
}

bool serve_parse_tei_rerank(const char *body, size_t size, const clattn_tokenizer *tok,
                            const serve_limits *limits, serve_score_request *req,
                            serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    bool truncate = false;
    bool ok = get_score_options(root, limits, &truncate, req, err) &&
              body_get_bool(root, "return_text", api, &req->return_text, err);
    const json_t *query = json_object_get(root, "query"), *texts = json_object_get(root, "texts");
    if (ok && !json_is_string(query)) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "query", "'query' is required: a string");
        ok = false;
    } else if (ok && !json_is_array(texts)) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "texts",
                        "'texts' is required: an array of strings");
        ok = false;
    } else if (ok && json_array_size(texts) == 0) {
        serve_error_set(err, api, SERVE_ERROR_EMPTY, "texts", "`texts` cannot be empty");
        ok = false;
    }
    size_t count = ok ? json_array_size(texts) : 0;
    ok = ok && !too_many(limits, "texts", count, err) &&
         score_texts_alloc(&req->texts, count, err);
    if (ok && req->return_text &&
        (!(req->documents = calloc(count, sizeof(*req->documents))) ||
         !(req->document_lengths = calloc(count, sizeof(*req->document_lengths))))) {
        serve_error_set(err, api, SERVE_ERROR_BACKEND, NULL, "out of memory for %zu texts",
                        count);
        ok = false;
    }
    for (size_t i = 0; ok && i < count; i++) {
        const json_t *text = json_array_get(texts, i);
        char name[64];
        snprintf(name, sizeof(name), "texts[%zu]", i);
        if (!json_is_string(text)) {
            serve_error_set(err, api, SERVE_ERROR_INVALID, name, "'%s' must be a string", name);
            ok = false;
        } else {
            ok = encode_sequence(query, text, i, name, tok, limits, truncate, &req->texts, err);
        }
        if (ok && req->return_text) {
            size_t n = json_string_length(text);
            if (!(req->documents[i] = malloc(n + 1))) {
                serve_error_set(err, api, SERVE_ERROR_BACKEND, NULL, "out of memory for %s",
                                name);
                ok = false;
            } else {
                memcpy(req->documents[i], json_string_value(text), n + 1);
                req->document_lengths[i] = n;
            }
        }
    }
    json_decref(root);
    if (!ok)
        serve_score_request_free(req);
    return ok;
}

/* One sequence of /predict: a string, ["a"] or ["a", "b"]; *a and *b (NULL: a single text). */
static bool predict_sequence(const json_t *v, const char *name, const json_t **a,
                             const json_t **b, serve_error *err)
{
    *a = *b = NULL;
    if (json_is_string(v)) {
        *a = v;
        return true;
    }
    size_t n = json_is_array(v) ? json_array_size(v) : 0;
    for (size_t k = 0; k < n; k++)
        if (!json_is_string(json_array_get(v, k)))
            n = 0;
    if (n == 1 || n == 2) {
        *a = json_array_get(v, 0);
        *b = n == 2 ? json_array_get(v, 1) : NULL;
        return true;
    }
    serve_error_set(err, SERVE_API_TEI, SERVE_ERROR_INVALID, name,
                    "'%s' must be a string, a pair of strings [string, string] or a batch of "
                    "them [[string], [string, string], ...]",
                    name);
    return false;
}

bool serve_parse_tei_predict(const char *body, size_t size, const clattn_tokenizer *tok,
                             const serve_limits *limits, serve_score_request *req,
                             serve_error *err)
{
    const serve_api api = SERVE_API_TEI;
    memset(req, 0, sizeof(*req));
    json_t *root = body_load_object(body, size, api, err);
    if (!root)
        return false;
    bool truncate = false;
    bool ok = get_score_options(root, limits, &truncate, req, err);
    const json_t *in = json_object_get(root, "inputs");
    /* As TEI reads it: an array whose first element is an array is a batch. */
    req->batch = json_is_array(in) && json_is_array(json_array_get(in, 0));
    size_t count = req->batch ? json_array_size(in) : 1;
    if (ok && (!in || json_is_null(in))) {
        serve_error_set(err, api, SERVE_ERROR_INVALID, "inputs",
                        "'inputs' is required: a string, a pair of strings or a batch of them");
        ok = false;
    } else if (ok && json_is_array(in) && json_array_size(in) == 0) {
        serve_error_set(err, api, SERVE_ERROR_EMPTY, "inputs", "`inputs` cannot be empty");
        ok = false;
    }
    ok = ok && !too_many(limits, "inputs", count, err) &&
         score_texts_alloc(&req->texts, count, err);
    for (size_t i = 0; ok && i < count; i++) {
        char name[64];
        if (req->batch)
            snprintf(name, sizeof(name), "inputs[%zu]", i);
        else
            snprintf(name, sizeof(name), "inputs");
        const json_t *a, *b;
        ok = predict_sequence(req->batch ? json_array_get(in, i) : in, name, &a, &b, err) &&
             encode_sequence(a, b, i, name, tok, limits, truncate, &req->texts, err);
    }
    json_decref(root);
    if (!ok)
        serve_score_request_free(req);
    return ok;
}

/* Indices 0 .. n-1 ordered by score, best first, ties by index (a stable sort). */
static size_t *order_by_score(const float *scores, size_t n, size_t stride)
{
    size_t *order = malloc((n ? n : 1) * sizeof(*order));
    if (!order)
        return NULL;
    for (size_t i = 0; i < n; i++) { /* insertion sort: n is a request's batch */
        size_t j = i;
        while (j > 0 && scores[order[j - 1] * stride] < scores[i * stride]) {
            order[j] = order[j - 1];
            j--;
        }
        order[j] = i;
    }
    return order;
}

char *serve_format_tei_rerank(const serve_score_request *req, const float *scores,
                              size_t *length)
{
    size_t n = req->texts.count;
    size_t *order = order_by_score(scores, n, 1);
    if (!order)
        return NULL;
    strbuf b = {0};
    sb_puts(&b, "[");
    for (size_t r = 0; r < n && !b.failed; r++) {
        size_t i = order[r];
        sb_printf(&b, "%s{\"index\":%zu,", r ? "," : "", i);
        if (req->return_text && req->documents) {
            sb_puts(&b, "\"text\":");
            sb_json_string(&b, req->documents[i], req->document_lengths[i]);
            sb_puts(&b, ",");
        }
        sb_printf(&b, "\"score\":%.9g}", (double)scores[i]);
    }
    sb_puts(&b, "]");
    free(order);
    return sb_finish(&b, length);
}

char *serve_format_tei_predict(const serve_score_request *req, const float *scores,
                               size_t labels, const char *const *label_names, size_t *length)
{
    strbuf b = {0};
    if (req->batch)
        sb_puts(&b, "[");
    for (size_t i = 0; i < req->texts.count && !b.failed; i++) {
        size_t *order = order_by_score(scores + i * labels, labels, 1);
        if (!order) {
            b.failed = true;
            break;
        }
        sb_puts(&b, i ? ",[" : "[");
        for (size_t r = 0; r < labels; r++) {
            size_t k = order[r];
            sb_printf(&b, "%s{\"score\":%.9g,\"label\":", r ? "," : "",
                      (double)scores[i * labels + k]);
            if (label_names && label_names[k])
                sb_json_string(&b, label_names[k], strlen(label_names[k]));
            else
                sb_printf(&b, "\"LABEL_%zu\"", k);
            sb_puts(&b, "}");
        }
        sb_puts(&b, "]");
        free(order);
    }
    if (req->batch)
        sb_puts(&b, "]");
    return sb_finish(&b, length);
}

/* ---- rows ---- */

void serve_finish_rows(float *rows, size_t count, size_t hidden, size_t dims, bool normalize)
{
    for (size_t i = 0; i < count; i++) {
        float *dst = rows + i * dims;
        memmove(dst, rows + i * hidden, dims * sizeof(float));
        if (!normalize)
            continue;
        double sum = 0.0;
        for (size_t k = 0; k < dims; k++)
            sum += (double)dst[k] * (double)dst[k];
        double norm = sqrt(sum);
        float scale = (float)(1.0 / (norm > 1e-12 ? norm : 1e-12));
        for (size_t k = 0; k < dims; k++)
            dst[k] *= scale;
    }
}

size_t serve_first_non_finite_row(const float *rows, size_t count, size_t dims)
{
    for (size_t i = 0; i < count; i++)
        for (size_t k = 0; k < dims; k++)
            if (!isfinite(rows[i * dims + k]))
                return i;
    return count;
}

/* ---- responses ---- */

static void sb_float_array(strbuf *b, const float *v, size_t n)
{
    sb_append(b, "[", 1);
    for (size_t k = 0; k < n; k++)
        sb_printf(b, k ? ",%.9g" : "%.9g", (double)v[k]);
    sb_append(b, "]", 1);
}

/* Base64 of the row's float32 values, little-endian whatever the host's order. */
static void sb_base64_floats(strbuf *b, const float *v, size_t n)
{
    static const char alphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t bytes = n * 4;
    if (!sb_reserve(b, (bytes + 2) / 3 * 4 + 2))
        return;
    char *out = b->data + b->length;
    *out++ = '"';
    uint8_t chunk[3];
    size_t filled = 0;
    for (size_t i = 0; i < bytes; i++) {
        uint32_t bits;
        memcpy(&bits, &v[i / 4], 4);
        chunk[filled++] = (uint8_t)(bits >> (8 * (i % 4)));
        if (filled == 3 || i + 1 == bytes) {
            uint32_t w = (uint32_t)chunk[0] << 16 | (filled > 1 ? (uint32_t)chunk[1] << 8 : 0) |
                         (filled > 2 ? chunk[2] : 0);
            *out++ = alphabet[(w >> 18) & 63];
            *out++ = alphabet[(w >> 12) & 63];
            *out++ = filled > 1 ? alphabet[(w >> 6) & 63] : '=';
            *out++ = filled > 2 ? alphabet[w & 63] : '=';
            filled = 0;
        }
    }
    *out++ = '"';
    *out = '\0';
    b->length = (size_t)(out - b->data);
}

char *serve_format_openai_embeddings(const float *rows, size_t count, size_t dims, bool base64,
                                     const char *model, size_t tokens, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < count && !b.failed; i++) {
        sb_printf(&b, "%s{\"object\":\"embedding\",\"index\":%zu,\"embedding\":", i ? "," : "",
                  i);
        if (base64)
            sb_base64_floats(&b, rows + i * dims, dims);
        else
            sb_float_array(&b, rows + i * dims, dims);
        sb_puts(&b, "}");
    }
    sb_puts(&b, "],\"model\":");
    sb_json_string(&b, model, strlen(model));
    sb_printf(&b, ",\"usage\":{\"prompt_tokens\":%zu,\"total_tokens\":%zu}}", tokens, tokens);
    return sb_finish(&b, length);
}

char *serve_format_tei_embeddings(const float *rows, size_t count, size_t dims, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "[");
    for (size_t i = 0; i < count && !b.failed; i++) {
        if (i)
            sb_puts(&b, ",");
        sb_float_array(&b, rows + i * dims, dims);
    }
    sb_puts(&b, "]");
    return sb_finish(&b, length);
}

char *serve_format_tei_tokens(const serve_tokenize_request *req, const clattn_tokenizer *tok,
                              size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "[");
    for (size_t i = 0; i < req->texts.count && !b.failed; i++) {
        sb_puts(&b, i ? ",[" : "[");
        size_t n = req->texts.lengths[i];
        /* With add_special_tokens, the single template's special ids before and after the
         * text's ([CLS] and [SEP] for BERT); without, the text's alone. */
        size_t lead = 0, trail = 0;
        if (req->add_special_tokens) {
            lead = clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE_LEADING);
            trail = clattn_tokenizer_special_count(tok, CLATTN_TEMPLATE_SINGLE) - lead;
            if (lead + trail > n)
                lead = trail = 0; /* (never: every such encoding holds them) */
        }
        for (size_t k = 0; k < n; k++) {
            int32_t id = req->texts.ids[i][k];
            const char *text = clattn_tokenizer_token(tok, id);
            bool special = k < lead || k + trail >= n;
            sb_printf(&b, "%s{\"id\":%d,\"text\":", k ? "," : "", (int)id);
            sb_json_string(&b, text ? text : "", text ? strlen(text) : 0);
            sb_printf(&b, ",\"special\":%s,\"start\":null,\"stop\":null}",
                      special ? "true" : "false");
        }
        sb_puts(&b, "]");
    }
    sb_puts(&b, "]");
    return sb_finish(&b, length);
}

char *serve_format_error(serve_api api, const serve_error *e, size_t *length)
{
    strbuf b = {0};
    if (api == SERVE_API_OPENAI) {
        sb_puts(&b, "{\"error\":{\"message\":");
        sb_json_string(&b, e->message, strlen(e->message));
        sb_puts(&b, ",\"type\":");
        sb_json_string(&b, e->type, strlen(e->type));
        sb_puts(&b, ",\"param\":");
        if (e->param[0])
            sb_json_string(&b, e->param, strlen(e->param));
        else
            sb_puts(&b, "null");
        sb_puts(&b, ",\"code\":");
        if (e->code)
            sb_json_string(&b, e->code, strlen(e->code));
        else
            sb_puts(&b, "null");
        sb_puts(&b, "}}");
    } else {
        sb_puts(&b, "{\"error\":");
        sb_json_string(&b, e->message, strlen(e->message));
        sb_puts(&b, ",\"error_type\":");
        sb_json_string(&b, e->type, strlen(e->type));
        sb_puts(&b, "}");
    }
    return sb_finish(&b, length);
}

char *serve_format_info(const serve_model_description *d, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "{\"model_id\":");
    sb_json_string(&b, d->served_names[0], strlen(d->served_names[0]));
    sb_puts(&b, ",\"model_sha\":null,\"model_dtype\":\"float32\",\"model_type\":{");
    if (d->chat) {
        sb_puts(&b, "\"chat\":{\"architecture\":");
        sb_json_string(&b, d->architecture, strlen(d->architecture));
        sb_printf(&b, ",\"slots\":%zu,\"ctx_size\":%zu,\"max_tokens\":%zu,\"vocab_size\":%zu}}",
                  d->slots, d->ctx_size, d->max_tokens, d->vocab_size);
        sb_printf(&b, ",\"max_concurrent_requests\":%zu,\"version\":\"%s\"}",
                  d->max_concurrent_requests, clattn_version_string());
        return sb_finish(&b, length);
    }
    if (d->cross_encoder) {
        sb_puts(&b, d->labels == 1 ? "\"reranker\":{\"id2label\":{" : "\"classifier\":{\"id2label\":{");
        for (int pass = 0; pass < 2; pass++) { /* id2label, then label2id */
            for (size_t k = 0; k < d->labels; k++) {
                const char *name = d->label_names ? d->label_names[k] : NULL;
                char fallback[32];
                snprintf(fallback, sizeof(fallback), "LABEL_%zu", k);
                if (!name)
                    name = fallback;
                if (pass == 0) {
                    sb_printf(&b, "%s\"%zu\":", k ? "," : "", k);
                    sb_json_string(&b, name, strlen(name));
                } else {
                    sb_puts(&b, k ? "," : "");
                    sb_json_string(&b, name, strlen(name));
                    sb_printf(&b, ":%zu", k);
                }
            }
            sb_puts(&b, pass == 0 ? "},\"label2id\":{" : "}}}");
        }
        sb_printf(&b, ",\"hidden_size\":%zu", d->hidden_size);
    } else {
        sb_puts(&b, "\"embedding\":{\"pooling\":");
        sb_json_string(&b, d->pooling, strlen(d->pooling));
        sb_printf(&b, "}},\"normalize\":%s,\"hidden_size\":%zu",
                  d->normalize ? "true" : "false", d->hidden_size);
    }
    sb_printf(&b, ",\"max_concurrent_requests\":%zu,\"max_input_length\":%zu",
              d->max_concurrent_requests, d->max_input_length);
    sb_printf(&b, ",\"max_batch_tokens\":%zu,\"max_batch_requests\":%zu", d->max_batch_tokens,
              d->max_batch_requests);
    sb_printf(&b, ",\"max_client_batch_size\":%zu,\"auto_truncate\":%s",
              d->max_client_batch_size, d->auto_truncate ? "true" : "false");
    sb_printf(&b, ",\"tokenization_workers\":null,\"version\":\"%s\",\"sha\":null,"
                  "\"docker_label\":null}",
              clattn_version_string());
    return sb_finish(&b, length);
}

char *serve_format_models(const serve_model_description *d, size_t *length)
{
    strbuf b = {0};
    sb_puts(&b, "{\"object\":\"list\",\"data\":[");
    for (size_t i = 0; i < d->served_name_count; i++) {
        sb_puts(&b, i ? ",{\"id\":" : "{\"id\":");
        sb_json_string(&b, d->served_names[i], strlen(d->served_names[i]));
        sb_printf(&b, ",\"object\":\"model\",\"created\":%lld,\"owned_by\":\"clattn\"}",
                  d->created);
    }
    sb_puts(&b, "]}");
    return sb_finish(&b, length);
}
