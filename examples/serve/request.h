/*
 * The server's request bodies and response bodies (docs/serving.md, "Routes" and "Limits and
 * statuses"): pure functions, no I/O and no global state, so that fuzz/fuzz_request.c can run them
 * on any bytes.
 *
 * Parsing checks a body against the OpenAI or TEI shape and the server's limits, and tokenizes
 * its texts (clattn_tokenizer_encode_tokens, once each, on the calling HTTP thread) into ids
 * within the single template's special tokens ([CLS] ... [SEP] for BERT) ready for the
 * scheduler. Every refusal fills a serve_error naming the field ("input[3]", "dimensions")
 * with the status and error type of the route's API; serve_format_error turns it into the body:
 *   OpenAI (/v1/...)  {"error":{"message":...,"type":...,"param":...,"code":...}}
 *   TEI               {"error":...,"error_type":...}
 *
 * Status codes (OpenAI / TEI), by serve_error_kind:
 *   SERVE_ERROR_SYNTAX        400 / 400  an empty body, not JSON (invalid UTF-8 included), not
 *                                        an object
 *   SERVE_ERROR_INVALID       400 / 422  a missing field, a wrong type, a value out of range
 *   SERVE_ERROR_EMPTY         400 / 400  an empty list of inputs
 *   SERVE_ERROR_TOO_LARGE     413 / 413  body over --payload-limit, more inputs than
 *                                        --max-client-batch-size, a text longer than
 *                                        --max-input-length tokens without truncation
 *   SERVE_ERROR_UNAUTHORIZED  401 / 401  --api-key set and no or another Bearer key
 *   SERVE_ERROR_NOT_FOUND     404 / 404  unknown route
 *   SERVE_ERROR_MODEL_NOT_FOUND
 *                             404 / 404  OpenAI's "model" is none of the served names (its
 *                                        code "model_not_found", as OpenAI answers)
 *   SERVE_ERROR_METHOD        405 / 405  known route, other method
 *   SERVE_ERROR_OVERLOADED    429 / 429  beyond --max-concurrent-requests
 *   SERVE_ERROR_BACKEND       500 / 424  the library failed (its message)
 *   SERVE_ERROR_MODEL_KIND    400 / 424  a route the served model's kind has not: embeddings
 *                                        of a cross-encoder, /rerank of an embedder or of a
 *                                        model with several labels (TEI's status and type)
 *   SERVE_ERROR_UNAVAILABLE   503 / 503  loading (before the warm-up) or shutting down
 *   SERVE_ERROR_TIMEOUT       504 / 504  the per-request deadline passed
 */
#ifndef CLATTN_SERVE_REQUEST_H
#define CLATTN_SERVE_REQUEST_H

#include <clattn/clattn.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum serve_api {
    SERVE_API_OPENAI = 0, /* /v1/... */
    SERVE_API_TEI = 1,    /* /embed, /tokenize, /info, ... */
} serve_api;

typedef enum serve_error_kind {
    SERVE_ERROR_SYNTAX,
    SERVE_ERROR_INVALID,
    SERVE_ERROR_EMPTY,
    SERVE_ERROR_TOO_LARGE,
    SERVE_ERROR_UNAUTHORIZED,
    SERVE_ERROR_NOT_FOUND,
    SERVE_ERROR_MODEL_NOT_FOUND,
    SERVE_ERROR_METHOD,
    SERVE_ERROR_OVERLOADED,
    SERVE_ERROR_BACKEND,
    SERVE_ERROR_MODEL_KIND,
    SERVE_ERROR_UNAVAILABLE,
    SERVE_ERROR_TIMEOUT,
} serve_error_kind;

typedef struct serve_error {
    int status;          /* the HTTP status */
    const char *type;    /* OpenAI's "type" / TEI's "error_type" (a static string) */
    const char *code;    /* OpenAI's "code" (static), NULL: null */
    char param[96];      /* OpenAI's "param": the field ("input", "input[2]"); "": null */
    char message[512];
} serve_error;

/* Fills *e for `api` (status and type from the table above); param may be NULL. */
void serve_error_set(serve_error *e, serve_api api, serve_error_kind kind, const char *param,
                     const char *fmt, ...) __attribute__((format(printf, 5, 6)));

/* What requests are checked against. */
typedef struct serve_limits {
    size_t max_client_batch_size; /* inputs per request at most */
    size_t max_input_length;      /* ids per text at most, the template's special tokens
                                   * included (>= 2, and >= their count) */
    bool auto_truncate;           /* truncate longer texts unless the request says otherwise */
    size_t hidden_size;           /* the embeddings' width: "dimensions" at most */
    /* The model whose prompts (clattn_sentence_model_prompt) texts get: "prompt_name" picks
     * one, else its default prompt applies; and whose tokenization they get
     * (clattn_sentence_model_encode: stripped, as embed and sentence-transformers strip them,
     * so that a row is embed's bytes). NULL: no prompts, the tokenizer's own encoding. */
    const clattn_sentence_model *prompts;
    /* A cross-encoder: /rerank's and /predict's pairs are tokenized as its scoring call
     * tokenizes them (clattn_cross_encoder_encode_pair: both texts stripped), so that a route's
     * scores are the C API's bytes; NULL: with the tokenizer's clattn_tokenizer_encode_pair. */
    const clattn_cross_encoder *pairs;
    /* The names OpenAI's "model" may ask for (--served-model-name, model_names[0] the first);
     * another name is refused (404, code "model_not_found") unless accept_any_model_name.
     * model_name_count 0: any name. The TEI routes ignore "model". */
    const char *const *model_names;
    size_t model_name_count;
    bool accept_any_model_name;
} serve_limits;

/* A request's texts as ids: ids[i][0 .. lengths[i]) for text i. */
typedef struct serve_texts {
    size_t count;
    int32_t **ids;
    int32_t **type_ids; /* the cross-encoder routes': type_ids[i] beside ids[i]; else NULL */
    size_t *lengths;
    size_t tokens; /* the sum of lengths */
} serve_texts;

void serve_texts_free(serve_texts *t);

typedef struct serve_embed_request {
    serve_texts texts;   /* within the single template's special tokens ([CLS] ... [SEP] for
                          * BERT), max_input_length ids at most */
    bool base64;         /* OpenAI encoding_format "base64" */
    size_t dimensions;   /* 0: all of hidden_size; else keep the first `dimensions` */
    int normalize;       /* -1: the model's own output (OpenAI); 0 or 1 (TEI's "normalize") */
    size_t model_name;   /* OpenAI: the index in limits->model_names of the name asked for (0
                          * when none was, or another one was accepted) */
} serve_embed_request;

/*
 * POST /v1/embeddings (OpenAI): "input" a string, an array of strings, an array of token ids
 * (one text) or an array of arrays of token ids; "model" (a string, optional: one of
 * limits->model_names, else 404 model_not_found, see serve_limits); "encoding_format" "float"
 * (default) or "base64";
 * "dimensions" 1 .. hidden_size; "user" a string (ignored). Other fields are ignored. Token ids
 * are the vocabulary's ids without the single template's special tokens (added here: [CLS] and
 * [SEP] for BERT), each in 0 .. vocab_size - 1.
 * Texts longer than max_input_length are truncated with auto_truncate, else refused (413).
 * On failure *req is zeroed (nothing allocated) and *err says why.
 */
bool serve_parse_openai_embeddings(const char *body, size_t size, const clattn_tokenizer *tok,
                                   const serve_limits *limits, serve_embed_request *req,
                                   serve_error *err);

/*
 * POST /embed (TEI): "inputs" a string or an array of strings; "normalize" (default true);
 * "truncate" (default auto_truncate); "truncation_direction" "right" (default) or "left"
 * (either case: "Right", "Left"), which keeps the text's last ids; "dimensions";
 * "prompt_name" one of the model's prompts (422 naming them otherwise).
 *
 * Prompts (both embedding routes and /tokenize): a text input gets the prompt put before it,
 * as sentence-transformers and `embed` do — "prompt_name"'s (TEI routes), else the model's
 * default prompt (config_sentence_transformers.json's default_prompt_name), if any — and is
 * tokenized and truncated with it. Token-id inputs are the whole input: no prompt.
 */
bool serve_parse_tei_embed(const char *body, size_t size, const clattn_tokenizer *tok,
                           const serve_limits *limits, serve_embed_request *req, serve_error *err);

typedef struct serve_tokenize_request {
    serve_texts texts; /* with the single template's special tokens when add_special_tokens is
                        * true, without them when it is false */
    bool add_special_tokens;
} serve_tokenize_request;

/*
 * POST /tokenize (TEI): "inputs" a string or an array of strings, "add_special_tokens" (default
 * true), "prompt_name" (as /embed: the ids /embed would run). Texts are not truncated (the
 * body's size bounds them) and the batch size is checked as /embed's.
 */
bool serve_parse_tei_tokenize(const char *body, size_t size, const clattn_tokenizer *tok,
                              const serve_limits *limits, serve_tokenize_request *req,
                              serve_error *err);

/* A cross-encoder's request (POST /rerank, POST /predict): its pairs as ids and token types,
 * what the answer holds. */
typedef struct serve_score_request {
    serve_texts texts;   /* pair i (or a single text of /predict), with texts.type_ids */
    bool raw_scores;     /* the logits as they are; else sigmoid (one label) or softmax */
    bool return_text;    /* /rerank: each rank carries its text */
    bool batch;          /* /predict: the inputs were a list of sequences (a list of lists of
                          * predictions answers them) */
    char **documents;    /* /rerank with return_text: the texts, NUL-terminated copies */
    size_t *document_lengths; /* their byte lengths (a text may hold "\u0000") */
} serve_score_request;

void serve_score_request_free(serve_score_request *req);

/*
 * POST /rerank (TEI): "query" a string, "texts" a non-empty array of strings (at most
 * max_client_batch_size), "truncate" (default auto_truncate), "truncation_direction" "right"
 * (default; "left" is refused: pairs are truncated longest-first from the right, as the
 * tokenizer's clattn_tokenizer_encode_pair does), "raw_scores" (default false), "return_text"
 * (default false). Each pair (query, texts[i]) is encoded with the model's pair template; with
 * truncation a pair longer than max_input_length is cut longest-first, without it refused (413).
 */
bool serve_parse_tei_rerank(const char *body, size_t size, const clattn_tokenizer *tok,
                            const serve_limits *limits, serve_score_request *req,
                            serve_error *err);

/*
 * POST /predict (TEI): "inputs" one sequence — a string, ["text"] or ["text_a", "text_b"] — or
 * a batch of them, [["a"], ["a", "b"], ...] (at most max_client_batch_size); "truncate",
 * "truncation_direction" and "raw_scores" as /rerank. A single text is encoded alone (token
 * types 0), a pair with the pair template.
 */
bool serve_parse_tei_predict(const char *body, size_t size, const clattn_tokenizer *tok,
                             const serve_limits *limits, serve_score_request *req,
                             serve_error *err);

/*
 * /rerank's answer: [{"index": i, "text"?: ..., "score": s}, ...], best score first (ties: the
 * lower index first); scores [count], one per text.
 * /predict's: per sequence [{"score": s, "label": name}, ...] best first (labels[k] names
 * label k; NULL or a NULL name: "LABEL_k"), a list of those when the inputs were a batch.
 */
char *serve_format_tei_rerank(const serve_score_request *req, const float *scores,
                              size_t *length);
char *serve_format_tei_predict(const serve_score_request *req, const float *scores,
                               size_t labels, const char *const *label_names, size_t *length);

/*
 * The rows as the request asked: rows is [count, hidden] on entry and [count, dims] (packed)
 * on return, dims = dimensions or hidden. When `normalize` each row is divided by
 * max(‖row‖₂, 1e-12) after the truncation (TEI's normalize, and the re-normalisation of a
 * normalised output that "dimensions" cut short).
 */
void serve_finish_rows(float *rows, size_t count, size_t hidden, size_t dims, bool normalize);

/* The index of the first row holding NaN or infinity, or count when all are finite. */
size_t serve_first_non_finite_row(const float *rows, size_t count, size_t dims);

/*
 * Response bodies, NUL-terminated in malloc'd buffers (NULL when out of memory); *length gets
 * the length. Floats are printed with 9 significant digits ("%.9g"), which read back as the same
 * float32; base64 is of the little-endian float32 bytes.
 */
char *serve_format_openai_embeddings(const float *rows, size_t count, size_t dims, bool base64,
                                     const char *model, size_t tokens, size_t *length);
char *serve_format_tei_embeddings(const float *rows, size_t count, size_t dims, size_t *length);
/* TEI's tokens: [[{"id","text","special","start","stop"}...]...]; "text" is the vocabulary's
 * token (the tokenizer gives no offsets: "start" and "stop" are null). */
char *serve_format_tei_tokens(const serve_tokenize_request *req, const clattn_tokenizer *tok,
                              size_t *length);
char *serve_format_error(serve_api api, const serve_error *e, size_t *length);

/* What GET /info and GET /v1/models describe. */
typedef struct serve_model_description {
    /* --served-model-name's names (at least one; the folder's name by default): /info's
     * model_id is the first, /v1/models lists each */
    const char *const *served_names;
    size_t served_name_count;
    /* A cross-encoder: /info's model_type is {"reranker"} (one label) or {"classifier"} with
     * its id2label and label2id; pooling and normalize are not shown. */
    bool cross_encoder;
    size_t labels;
    const char *const *label_names; /* NULL or a NULL name: "LABEL_k" */
    const char *pooling;      /* "mean" or "cls" */
    bool normalize;           /* the model's Normalize module */
    size_t hidden_size;
    size_t max_input_length;
    size_t max_batch_tokens, max_batch_requests, max_client_batch_size;
    size_t max_concurrent_requests;
    bool auto_truncate;
    long long created;        /* Unix time the server started (OpenAI's "created") */
    /* A chat model: /info's model_type is {"chat": {"architecture", "slots", "ctx_size",
     * "vocab_size"}} and shows no embedding or batching fields. */
    bool chat;
    const char *architecture;
    size_t slots, ctx_size, vocab_size, max_tokens;
} serve_model_description;

char *serve_format_info(const serve_model_description *d, size_t *length);
char *serve_format_models(const serve_model_description *d, size_t *length);

#endif /* CLATTN_SERVE_REQUEST_H */
