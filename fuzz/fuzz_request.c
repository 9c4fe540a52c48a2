/*
 * Fuzz harness: clattn-serve's request parsers (examples/serve/request.c) on any body, with a
 * small WordPiece vocabulary written to a temporary vocab.txt at start-up. The input's first
 * byte picks the route and the limits (so that truncation, auto-truncate and the batch limit
 * are all reached); the rest is the body. Invariants beyond "no crash, no sanitizer report":
 *   - on failure the request is all zero (nothing allocated), the status is one of request.h's
 *     table for the route's API, the message is not empty, and the error body
 *     (serve_format_error) is valid JSON with the API's fields;
 *   - on success there are 1 .. max_client_batch_size texts, each an encoding within the
 *     single template's special ids ([CLS] ... [SEP] for this vocabulary; none for /tokenize
 *     with add_special_tokens false) of at least their count and at most max_input_length ids
 *     (the embedding routes), every id within the vocabulary, tokens is their sum, dimensions
 *     is 0 or 1 .. hidden_size, and OpenAI's model name is one of the served names (the
 *     embedding routes with the selector's high bit serve two names; another one is 404
 *     model_not_found, whose message names it as valid UTF-8 without control characters: cut
 *     at a character boundary, a NUL escaped);
 *   - the responses built from the parsed request (embeddings of made-up rows, float and base64;
 *     /tokenize's tokens, one per id; /rerank's ranks and /predict's labels from made-up
 *     scores) are valid JSON of the right shape;
 *   - /rerank and /predict: every pair has its token types (0 or 1), within max_input_length.
 */
#include "fuzz_util.h"

#include "request.h"

#include <clattn/clattn.h>
#include <jansson.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static clattn_tokenizer *tokenizer;
/* The single template's special ids: the first `leading` before a text's ids, the rest after. */
static clattn_tokens template_ids;
static size_t leading;

static const char vocab[] =
    "[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\n"
    "the\na\nhello\nworld\ncat\n##s\n##ing\nrun\n,\n.\n!\n?\n'\n-\n"
    "un\n##aff\n##able\n中\n文\né\n";

enum { HIDDEN = 8 };

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc, (void)argv;
    const char *path = fuzz_temp_path("vocab.txt");
    fuzz_write_bytes(path, (const uint8_t *)vocab, sizeof(vocab) - 1);
    if (clattn_tokenizer_load(&tokenizer, path) != CLATTN_OK)
        fuzz_fail("cannot load the harness's vocabulary: %s", clattn_last_error(NULL));
    if (clattn_tokenizer_post_process(tokenizer, NULL, 0, SIZE_MAX, 0, &template_ids) !=
        CLATTN_OK)
        fuzz_fail("cannot apply the single template: %s", clattn_last_error(NULL));
    leading = clattn_tokenizer_special_count(tokenizer, CLATTN_TEMPLATE_SINGLE_LEADING);
    if (template_ids.count != clattn_tokenizer_special_count(tokenizer, CLATTN_TEMPLATE_SINGLE) ||
        leading > template_ids.count)
        fuzz_fail("the single template has %zu special ids, %zu leading, but counts %zu",
                  template_ids.count, leading,
                  clattn_tokenizer_special_count(tokenizer, CLATTN_TEMPLATE_SINGLE));
    return 0;
}

static void check_error_body(serve_api api, const serve_error *e)
{
    static const int openai[] = {400, 401, 404, 405, 413, 429, 500, 503, 504};
    static const int tei[] = {400, 401, 404, 405, 413, 422, 424, 429, 503, 504};
    const int *known = api == SERVE_API_OPENAI ? openai : tei;
    size_t n = api == SERVE_API_OPENAI ? sizeof(openai) / sizeof(*openai)
                                       : sizeof(tei) / sizeof(*tei);
    bool found = false;
    for (size_t i = 0; i < n; i++)
        found |= known[i] == e->status;
    FUZZ_CHECK(found, "status %d is not one of the API's", e->status);
    FUZZ_CHECK(e->message[0] && e->type, "an error without a message or a type");
    size_t length = 0;
    char *body = serve_format_error(api, e, &length);
    FUZZ_CHECK(body && strlen(body) == length, "the error body's length is wrong");
    json_error_t jerr;
    json_t *root = json_loadb(body, length, 0, &jerr);
    FUZZ_CHECK(root, "the error body is not JSON (%s): %s", jerr.text, body);
    if (api == SERVE_API_OPENAI) {
        json_t *err = json_object_get(root, "error");
        FUZZ_CHECK(json_is_string(json_object_get(err, "message")) &&
                       json_is_string(json_object_get(err, "type")) &&
                       json_object_get(err, "param") && json_object_get(err, "code"),
                   "not OpenAI's error shape: %s", body);
    } else {
        FUZZ_CHECK(json_is_string(json_object_get(root, "error")) &&
                       json_is_string(json_object_get(root, "error_type")),
                   "not TEI's error shape: %s", body);
    }
    json_decref(root);
    free(body);
}

/* s is valid UTF-8 (RFC 3629) without C0 control characters or DEL. */
static bool printable_utf8(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    while (*u) {
        unsigned c = *u;
        size_t len = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3
                                 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        if (len == 0 || (len == 1 && (c < 0x20 || c == 0x7f)))
            return false;
        unsigned cp = len == 1 ? c : c & (0x7F >> len);
        for (size_t i = 1; i < len; i++) {
            if ((u[i] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (u[i] & 0x3F);
        }
        if ((len == 3 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)))
            return false;
        u += len;
    }
    return true;
}

/* with_specials: each text within the single template's special ids. */
static void check_texts(const serve_texts *t, const serve_limits *limits, bool bounded,
                        bool with_specials)
{
    size_t specials = with_specials ? template_ids.count : 0;
    size_t lead = with_specials ? leading : 0, trail = specials - lead;
    size_t vocab_size = clattn_tokenizer_vocab_size(tokenizer);
    FUZZ_CHECK(t->count >= 1 && t->count <= limits->max_client_batch_size, "%zu texts",
               t->count);
    size_t sum = 0;
    for (size_t i = 0; i < t->count; i++) {
        size_t n = t->lengths[i];
        FUZZ_CHECK(n >= specials, "text %zu has %zu ids", i, n);
        FUZZ_CHECK(!bounded || n <= limits->max_input_length, "text %zu has %zu ids, max %zu",
                   i, n, limits->max_input_length);
        FUZZ_CHECK((lead == 0 || memcmp(t->ids[i], template_ids.ids, lead * sizeof(int32_t)) ==
                                     0) &&
                       (trail == 0 || memcmp(t->ids[i] + n - trail, template_ids.ids + lead,
                                             trail * sizeof(int32_t)) == 0),
                   "text %zu is not within the template's special ids", i);
        for (size_t k = 0; k < n; k++)
            FUZZ_CHECK(t->ids[i][k] >= 0 && (size_t)t->ids[i][k] < vocab_size,
                       "text %zu: id %d", i, (int)t->ids[i][k]);
        sum += n;
    }
    FUZZ_CHECK(sum == t->tokens, "tokens %zu, but the texts hold %zu", t->tokens, sum);
}

static void check_embeddings_response(const serve_embed_request *req, bool openai)
{
    size_t count = req->texts.count, dims = req->dimensions ? req->dimensions : HIDDEN;
    float *rows = malloc(count * HIDDEN * sizeof(float));
    FUZZ_CHECK(rows, "out of memory");
    for (size_t i = 0; i < count * HIDDEN; i++)
        rows[i] = (float)((double)(i % 7) - 3.0) / 3.0f;
    serve_finish_rows(rows, count, HIDDEN, dims, req->normalize == 1);
    FUZZ_CHECK(serve_first_non_finite_row(rows, count, dims) == count, "non-finite rows");
    size_t length = 0;
    char *body = openai ? serve_format_openai_embeddings(rows, count, dims, req->base64,
                                                         "fuzz \"model\"\n", req->texts.tokens,
                                                         &length)
                        : serve_format_tei_embeddings(rows, count, dims, &length);
    FUZZ_CHECK(body, "out of memory");
    json_error_t jerr;
    json_t *root = json_loadb(body, length, 0, &jerr);
    FUZZ_CHECK(root, "the response is not JSON (%s)", jerr.text);
    json_t *list = openai ? json_object_get(root, "data") : root;
    FUZZ_CHECK(json_array_size(list) == count, "the response has %zu rows, not %zu",
               json_array_size(list), count);
    json_t *first = json_array_get(list, 0);
    if (openai)
        first = json_object_get(first, "embedding");
    FUZZ_CHECK(req->base64 && openai ? json_string_length(first) == (dims * 4 + 2) / 3 * 4
                                     : json_array_size(first) == dims,
               "the first row has the wrong size");
    json_decref(root);
    free(body);
    free(rows);
}

/* POST /rerank or /predict: the pairs, then the answers built from made-up scores. */
static void check_scores(const char *body, size_t size, const serve_limits *limits, bool predict)
{
    serve_score_request req, zero = {0};
    serve_error err;
    bool ok = predict ? serve_parse_tei_predict(body, size, tokenizer, limits, &req, &err)
                      : serve_parse_tei_rerank(body, size, tokenizer, limits, &req, &err);
    if (!ok) {
        FUZZ_CHECK(memcmp(&req, &zero, sizeof(req)) == 0, "a refused request is not zero");
        check_error_body(SERVE_API_TEI, &err);
        return;
    }
    const serve_texts *t = &req.texts;
    size_t vocab_size = clattn_tokenizer_vocab_size(tokenizer), sum = 0;
    FUZZ_CHECK(t->count >= 1 && t->count <= limits->max_client_batch_size && t->type_ids,
               "%zu sequences", t->count);
    FUZZ_CHECK(!req.return_text || req.documents, "return_text without the texts");
    for (size_t i = 0; i < t->count; i++) {
        size_t n = t->lengths[i];
        FUZZ_CHECK(n >= 2 && n <= limits->max_input_length, "pair %zu has %zu ids", i, n);
        for (size_t k = 0; k < n; k++)
            FUZZ_CHECK(t->ids[i][k] >= 0 && (size_t)t->ids[i][k] < vocab_size &&
                           (t->type_ids[i][k] == 0 || t->type_ids[i][k] == 1),
                       "pair %zu: id %d, type %d", i, (int)t->ids[i][k],
                       (int)t->type_ids[i][k]);
        sum += n;
    }
    FUZZ_CHECK(sum == t->tokens, "tokens %zu, but the pairs hold %zu", t->tokens, sum);
    enum { LABELS = 3 };
    size_t labels = predict ? LABELS : 1;
    float *scores = malloc(t->count * labels * sizeof(float));
    FUZZ_CHECK(scores, "out of memory");
    for (size_t i = 0; i < t->count * labels; i++)
        scores[i] = (float)((i * 7) % 5) - 2.0f; /* ties too */
    static const char *const names[LABELS] = {"yes", "no \"quoted\"", NULL};
    size_t length = 0;
    char *out = predict ? serve_format_tei_predict(&req, scores, labels, names, &length)
                        : serve_format_tei_rerank(&req, scores, &length);
    FUZZ_CHECK(out && strlen(out) == length, "out of memory, or a wrong length");
    json_error_t jerr;
    json_t *root = json_loadb(out, length, 0, &jerr);
    FUZZ_CHECK(root, "the answer is not JSON (%s): %s", jerr.text, out);
    if (predict) {
        json_t *first = req.batch ? json_array_get(root, 0) : root;
        FUZZ_CHECK(json_array_size(root) == (req.batch ? t->count : labels) &&
                       json_array_size(first) == labels,
                   "not /predict's shape: %s", out);
    } else {
        FUZZ_CHECK(json_array_size(root) == t->count, "not %zu ranks: %s", t->count, out);
        double last = INFINITY;
        for (size_t r = 0; r < t->count; r++) {
            json_t *rank = json_array_get(root, r);
            double score = json_number_value(json_object_get(rank, "score"));
            FUZZ_CHECK(json_is_integer(json_object_get(rank, "index")) && score <= last &&
                           (json_object_get(rank, "text") != NULL) == req.return_text,
                       "rank %zu is wrong: %s", r, out);
            last = score;
        }
    }
    json_decref(root);
    free(out);
    free(scores);
    serve_score_request_free(&req);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0)
        return 0;
    uint8_t selector = data[0];
    const char *body = (const char *)data + 1;
    size_t body_size = size - 1;
    serve_limits limits = {
        .max_client_batch_size = 1 + (selector >> 4 & 3) * 3, /* 1, 4, 7, 10 */
        .max_input_length = 2 + (selector >> 2 & 3) * 3,      /* 2, 5, 8, 11 */
        .auto_truncate = selector & 0x40,
        .hidden_size = HIDDEN,
    };
    static const char *const names[] = {"served", "alias"};
    serve_error err;
    switch (selector & 3) {
    case 0:
    case 1: {
        bool openai = (selector & 3) == 0;
        if (selector & 0x80) {
            limits.model_names = names;
            limits.model_name_count = 2;
        }
        serve_embed_request req, zero = {0};
        bool ok = openai ? serve_parse_openai_embeddings(body, body_size, tokenizer, &limits,
                                                         &req, &err)
                         : serve_parse_tei_embed(body, body_size, tokenizer, &limits, &req,
                                                 &err);
        if (!ok) {
            FUZZ_CHECK(memcmp(&req, &zero, sizeof(req)) == 0, "a refused request is not zero");
            check_error_body(openai ? SERVE_API_OPENAI : SERVE_API_TEI, &err);
            FUZZ_CHECK(!err.code || strcmp(err.code, "model_not_found") != 0 ||
                           printable_utf8(err.message),
                       "the model_not_found message is not printable UTF-8: %s", err.message);
            return 0;
        }
        check_texts(&req.texts, &limits, true, true);
        FUZZ_CHECK(req.dimensions <= HIDDEN, "dimensions %zu", req.dimensions);
        FUZZ_CHECK(openai ? req.normalize == -1 : req.normalize == 0 || req.normalize == 1,
                   "normalize %d", req.normalize);
        FUZZ_CHECK(req.model_name < (limits.model_name_count ? limits.model_name_count : 1),
                   "model name %zu of %zu", req.model_name, limits.model_name_count);
        check_embeddings_response(&req, openai);
        serve_texts_free(&req.texts);
        break;
    }
    case 2: {
        serve_tokenize_request req, zero = {0};
        if (!serve_parse_tei_tokenize(body, body_size, tokenizer, &limits, &req, &err)) {
            FUZZ_CHECK(memcmp(&req, &zero, sizeof(req)) == 0, "a refused request is not zero");
            check_error_body(SERVE_API_TEI, &err);
            return 0;
        }
        check_texts(&req.texts, &limits, false, req.add_special_tokens);
        size_t length = 0;
        char *out = serve_format_tei_tokens(&req, tokenizer, &length);
        FUZZ_CHECK(out, "out of memory");
        json_error_t jerr;
        json_t *root = json_loadb(out, length, 0, &jerr);
        FUZZ_CHECK(root && json_array_size(root) == req.texts.count,
                   "the tokens are not a JSON array of %zu lists", req.texts.count);
        for (size_t i = 0; i < req.texts.count; i++)
            FUZZ_CHECK(json_array_size(json_array_get(root, i)) == req.texts.lengths[i],
                       "text %zu has %zu ids but %zu tokens", i, req.texts.lengths[i],
                       json_array_size(json_array_get(root, i)));
        json_decref(root);
        free(out);
        serve_texts_free(&req.texts);
        break;
    }
    default: {
        if (selector & 0x80) {
            check_scores(body, body_size, &limits, selector & 0x10);
            break;
        }
        /* The error body with the body's bytes as the message (invalid UTF-8, quotes, control
         * characters): it must still be JSON. */
        serve_error e;
        serve_error_set(&e, selector & 0x10 ? SERVE_API_OPENAI : SERVE_API_TEI,
                        SERVE_ERROR_INVALID, NULL, "%.*s", (int)(body_size < 400 ? body_size : 400),
                        body);
        if (e.message[0])
            check_error_body(selector & 0x10 ? SERVE_API_OPENAI : SERVE_API_TEI, &e);
        break;
    }
    }
    return 0;
}
