/*
 * clattn-serve: sentence embeddings, or a cross-encoder's reranking and scores, over HTTP
 * (docs/serving.md), OpenAI- and TEI-compatible, with dynamic batching. One model per process:
 * a folder whose config.json names a *ForSequenceClassification architecture is served as a
 * cross-encoder (POST /rerank, POST /predict), any other as a sentence-transformers embedder.
 *
 * Start-up: the soft open-file limit is raised to the hard one (the connection limit follows
 * it: http.h), the socket is bound and "clattn-serve: listening on http://HOST:PORT" printed on
 * stderr first, and the URL alone as one line on stdout (so that a script with --port 0 can
 * read the port), then the model is loaded and run once (the warm-up: the first run builds what
 * is built lazily); until then /health answers 503. SIGINT or SIGTERM: stop accepting, let the
 * requests in progress finish (at most --shutdown-timeout, 30 s; those still waiting then are
 * answered 503), exit 0. A signal that comes while the model loads is acted on once the load
 * returns.
 *
 * Exit status: 0 after a signal, 2 on a usage error, 1 on a runtime error (the model cannot be
 * loaded, the address cannot be bound); every error names its cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"
#include "http.h"
#include "metrics.h"
#include "request.h"
#include "engine.h"
#include "scheduler.h"
#include "llm_scheduler.h"

#include <getopt.h>
#include <jansson.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <pthread.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_SERVED_NAMES 64
/* The open-file limit is raised at most to this (the connection limit follows it: http.h). */
#define MAX_OPEN_FILES 65792

typedef struct options {
    const char *model;
    const char *device;
    int precision; /* clattn_precision (--precision) */
    const char *host;
    unsigned port;
    size_t max_batch_tokens, max_batch_requests, max_client_batch_size;
    size_t max_concurrent_requests;
    size_t max_input_length; /* 0: the model's */
    bool auto_truncate;
    size_t payload_limit;
    const char *api_key;     /* NULL: none */
    const char *served_names[MAX_SERVED_NAMES]; /* --served-model-name's, else the folder's */
    size_t served_name_count;
    bool accept_any_model_name;
    double request_timeout_s;
    bool request_timeout_given;
    double shutdown_timeout_s; /* how long requests in progress get after SIGINT/SIGTERM */
    /* A chat model's (a GGUF file): */
    size_t parallel, ctx_size, prompt_chunk, max_tokens; /* ctx_size, max_tokens 0: defaults */
    bool no_prefix_reuse;
    char default_name[256];  /* the folder's name */
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: clattn-serve --model DIR|FILE.gguf [--device SPEC] [--precision P]\n"
            "                    [--host 127.0.0.1]\n"
            "                    [--port 8080]\n"
            "                    [--max-batch-tokens 16384] [--max-batch-requests 64]\n"
            "                    [--max-client-batch-size 128] [--max-concurrent-requests 512]\n"
            "                    [--max-input-length N] [--auto-truncate]\n"
            "                    [--payload-limit 2000000] [--api-key KEY]\n"
            "                    [--served-model-name NAME]... [--accept-any-model-name]\n"
            "                    [--request-timeout 30] [--shutdown-timeout 30]\n"
            "                    [--parallel 4] [--ctx-size N] [--prompt-chunk 512]\n"
            "                    [--max-tokens N] [--no-prefix-reuse]\n"
            "\n"
            "Serves the sentence embeddings of a sentence-transformers model folder over HTTP,\n"
            "with OpenAI's and text-embeddings-inference's APIs:\n"
            "  POST /v1/embeddings  OpenAI: input (string, strings, token ids, lists of ids),\n"
            "                       encoding_format float|base64, dimensions\n"
            "  POST /embed          TEI: inputs, normalize, truncate, truncation_direction,\n"
            "                       dimensions\n"
            "or, for a cross-encoder folder (config.json's architectures: a\n"
            "*ForSequenceClassification), its scores of text pairs, with TEI's API:\n"
            "  POST /rerank         TEI: query, texts, truncate, raw_scores, return_text\n"
            "                       (a model with one label)\n"
            "  POST /predict        TEI: inputs (a text, a pair, or a list of them), truncate,\n"
            "                       raw_scores: every label's score\n"
            "or, for a chat model (a GGUF file: llama, qwen2, qwen3), OpenAI's generation\n"
            "routes with continuous batching (docs/serving.md, \"Chat models\"):\n"
            "  POST /v1/chat/completions  messages, max_tokens, temperature, top_p, top_k, min_p,\n"
            "                       seed, stop, penalties, logprobs, top_logprobs, stream,\n"
            "                       stream_options, chat_template_kwargs\n"
            "  POST /v1/completions prompt (text or token ids), the same sampling, logprobs\n"
            "  POST /tokenize, POST /detokenize  llama-server's: content / tokens\n"
            "and for any:\n"
            "  POST /tokenize       TEI: inputs, add_special_tokens (a chat model: as above)\n"
            "  GET  /health         200 when ready, 503 while loading or stopping\n"
            "  GET  /info, /v1/models, /metrics (Prometheus text)\n"
            "\n"
            "  --model DIR|FILE.gguf      the model folder (as embed takes it), or a chat\n"
            "                             model's GGUF file\n"
            "  --device SPEC              gpu, cpu, P:D, or part of a device name (default:\n"
            "                             $CLATTN_DEVICE, else the first GPU, else the first CPU)\n"
            "  --precision P              fp32 (default), bf16 or int8: the GEMMs' number format\n"
            "                             (CPU devices with oneDNN; bf16 needs AVX512_BF16 or AMX,\n"
            "                             int8 VNNI or AMX; accuracy: docs/performance.md)\n"
            "  --host ADDR                the address to listen on (default 127.0.0.1)\n"
            "  --port P                   the port (default 8080; 0: a free one). The URL is\n"
            "                             printed as one line on stdout (http://HOST:PORT, for\n"
            "                             scripts) and as 'clattn-serve: listening on URL' on\n"
            "                             stderr\n"
            "  --max-batch-tokens N       tokens per batch at most (default 16384; an\n"
            "                             embedder or cross-encoder: a chat model's prompts go\n"
            "                             by --prompt-chunk)\n"
            "  --max-batch-requests N     requests per batch at most (default 64)\n"
            "  --max-client-batch-size N  inputs (or documents to rerank) per request at most\n"
            "                             (default 128; more: 413)\n"
            "  --max-concurrent-requests N  requests at once at most (default 512; more: 429).\n"
            "                             Idle connections do not count: the server keeps as\n"
            "                             many as its open-file limit allows (raised to the\n"
            "                             hard limit) less 256, at most 65536\n"
            "  --max-input-length N       tokens per text (or pair) at most, the special tokens\n"
            "                             included (default and at most: the model's maximum;\n"
            "                             a cross-encoder's at least its pair template's\n"
            "                             special tokens + 2)\n"
            "  --auto-truncate            truncate longer texts, pairs longest-first (default:\n"
            "                             refuse them, 413)\n"
            "  --payload-limit BYTES      request body at most (default 2000000; more: 413, sent\n"
            "                             once the body is read, up to 4 times the limit)\n"
            "  --api-key KEY              require 'Authorization: Bearer KEY' (default:\n"
            "                             $CLATTN_API_KEY; none when neither is set)\n"
            "  --served-model-name NAME   a name of the model (repeat it for aliases, a name\n"
            "                             given twice counts once; default: the folder's):\n"
            "                             /v1/models lists them, /info shows the first; an\n"
            "                             OpenAI request for another \"model\" is refused (404\n"
            "                             model_not_found; TEI's routes ignore it)\n"
            "  --accept-any-model-name    accept any OpenAI \"model\" name\n"
            "  --request-timeout SECONDS  a request's deadline from its headers to its answer;\n"
            "                             headers too must arrive within it, however slowly\n"
            "                             they trickle in (libmicrohttpd's own timeout, this\n"
            "                             too, is an idle one that every byte resets); a chat\n"
            "                             model's generations end at it\n"
            "                             (default 30; a chat model: 600)\n"
            "  --shutdown-timeout SECONDS on SIGINT or SIGTERM, how long the requests in\n"
            "                             progress get to finish; those still waiting for the\n"
            "                             model then are answered 503 (default 30; 0: at once)\n"
            "A chat model's:\n"
            "  --parallel N               sequences generated at once: slots (default 4)\n"
            "  --ctx-size N               tokens per slot, prompt and answer (default: the\n"
            "                             model's context, at most 4096)\n"
            "  --prompt-chunk N           prompt tokens run between two decode steps at most\n"
            "                             (default 512)\n"
            "  --max-tokens N             tokens one request may generate at most (default:\n"
            "                             --ctx-size; more asked: 400)\n"
            "  --no-prefix-reuse          run every prompt whole (default: a slot's cached\n"
            "                             prefix is reused; the answers are the same bytes)\n"
            "\n"
            "One log line per request on stderr: method, route, status, texts, tokens, ms.\n");
}

/* The last component of a path, without trailing slashes. */
static void folder_name(const char *path, char *out, size_t size)
{
    size_t end = strlen(path);
    while (end > 1 && path[end - 1] == '/')
        end--;
    size_t start = end;
    while (start > 0 && path[start - 1] != '/')
        start--;
    size_t n = end - start < size - 1 ? end - start : size - 1;
    memcpy(out, path + start, n);
    out[n] = '\0';
}

/* Where name is among the served names so far (served_name_count: not there). */
static size_t served_name_index(const options *o, const char *name)
{
    size_t i = 0;
    while (i < o->served_name_count && strcmp(o->served_names[i], name) != 0)
        i++;
    return i;
}

static bool parse_size(const char *text, unsigned long long min, unsigned long long max,
                       size_t *out)
{
    unsigned long long v;
    if (!parse_count(text, max, &v) || v < min)
        return false;
    *out = (size_t)v;
    return true;
}

/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_MODEL = 256, O_DEVICE, O_PRECISION, O_HOST, O_PORT, O_MAX_BATCH_TOKENS, O_MAX_BATCH_REQUESTS,
           O_MAX_CLIENT_BATCH_SIZE, O_MAX_CONCURRENT_REQUESTS, O_MAX_INPUT_LENGTH,
           O_AUTO_TRUNCATE, O_PAYLOAD_LIMIT, O_API_KEY, O_SERVED_MODEL_NAME,
           O_ACCEPT_ANY_MODEL_NAME, O_REQUEST_TIMEOUT, O_SHUTDOWN_TIMEOUT, O_PARALLEL,
           O_CTX_SIZE, O_PROMPT_CHUNK, O_MAX_TOKENS, O_NO_PREFIX_REUSE, O_HELP };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"host", required_argument, NULL, O_HOST},
        {"port", required_argument, NULL, O_PORT},
        {"max-batch-tokens", required_argument, NULL, O_MAX_BATCH_TOKENS},
        {"max-batch-requests", required_argument, NULL, O_MAX_BATCH_REQUESTS},
        {"max-client-batch-size", required_argument, NULL, O_MAX_CLIENT_BATCH_SIZE},
        {"max-concurrent-requests", required_argument, NULL, O_MAX_CONCURRENT_REQUESTS},
        {"max-input-length", required_argument, NULL, O_MAX_INPUT_LENGTH},
        {"auto-truncate", no_argument, NULL, O_AUTO_TRUNCATE},
        {"payload-limit", required_argument, NULL, O_PAYLOAD_LIMIT},
        {"api-key", required_argument, NULL, O_API_KEY},
        {"served-model-name", required_argument, NULL, O_SERVED_MODEL_NAME},
        {"accept-any-model-name", no_argument, NULL, O_ACCEPT_ANY_MODEL_NAME},
        {"request-timeout", required_argument, NULL, O_REQUEST_TIMEOUT},
        {"shutdown-timeout", required_argument, NULL, O_SHUTDOWN_TIMEOUT},
        {"parallel", required_argument, NULL, O_PARALLEL},
        {"ctx-size", required_argument, NULL, O_CTX_SIZE},
        {"prompt-chunk", required_argument, NULL, O_PROMPT_CHUNK},
        {"max-tokens", required_argument, NULL, O_MAX_TOKENS},
        {"no-prefix-reuse", no_argument, NULL, O_NO_PREFIX_REUSE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->host = "127.0.0.1";
    o->port = 8080;
    o->max_batch_tokens = 16384;
    o->max_batch_requests = 64;
    o->max_client_batch_size = 128;
    o->max_concurrent_requests = 512;
    o->payload_limit = 2000000;
    o->request_timeout_s = 30.0;
    o->shutdown_timeout_s = 30.0;
    o->parallel = 4;
    o->prompt_chunk = 512;
    o->api_key = getenv("CLATTN_API_KEY");
    opterr = 0;
    int c;
    size_t v;
    char *end;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION:
            if (!cli_parse_precision(optarg, &o->precision))
                return usage_error("--precision is fp32, bf16 or int8, not \"%s\"", optarg);
            break;
        case O_HOST:
            if (!optarg[0])
                return usage_error("--host needs an address");
            o->host = optarg;
            break;
        case O_PORT:
            if (!parse_size(optarg, 0, 65535, &v))
                return usage_error("--port needs a port number from 0 to 65535, not '%s'",
                                   optarg);
            o->port = (unsigned)v;
            break;
        case O_MAX_BATCH_TOKENS:
            if (!parse_size(optarg, 2, 1u << 30, &o->max_batch_tokens))
                return usage_error("--max-batch-tokens needs an integer from 2 to 2^30, not '%s'",
                                   optarg);
            break;
        case O_MAX_BATCH_REQUESTS:
            if (!parse_size(optarg, 1, 1u << 20, &o->max_batch_requests))
                return usage_error("--max-batch-requests needs a positive integer, not '%s'",
                                   optarg);
            break;
        case O_MAX_CLIENT_BATCH_SIZE:
            if (!parse_size(optarg, 1, 1u << 20, &o->max_client_batch_size))
                return usage_error("--max-client-batch-size needs a positive integer, not '%s'",
                                   optarg);
            break;
        case O_MAX_CONCURRENT_REQUESTS:
            if (!parse_size(optarg, 1, 65536, &o->max_concurrent_requests))
                return usage_error("--max-concurrent-requests needs an integer from 1 to 65536, "
                                   "not '%s'",
                                   optarg);
            break;
        case O_MAX_INPUT_LENGTH:
            if (!parse_size(optarg, 2, 1u << 30, &o->max_input_length))
                return usage_error("--max-input-length needs an integer of at least 2, not "
                                   "'%s'",
                                   optarg);
            break;
        case O_AUTO_TRUNCATE: o->auto_truncate = true; break;
        case O_PAYLOAD_LIMIT:
            if (!parse_size(optarg, 1, (unsigned long long)1 << 32, &o->payload_limit))
                return usage_error("--payload-limit needs a number of bytes from 1 to 2^32, "
                                   "not '%s'",
                                   optarg);
            break;
        case O_API_KEY: o->api_key = optarg; break;
        case O_SERVED_MODEL_NAME:
            if (!optarg[0])
                return usage_error("--served-model-name needs a name");
            if (served_name_index(o, optarg) < o->served_name_count)
                break; /* given before: one name, listed once */
            if (o->served_name_count == MAX_SERVED_NAMES)
                return usage_error("--served-model-name: at most %d names", MAX_SERVED_NAMES);
            o->served_names[o->served_name_count++] = optarg;
            break;
        case O_ACCEPT_ANY_MODEL_NAME: o->accept_any_model_name = true; break;
        case O_REQUEST_TIMEOUT:
            o->request_timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o->request_timeout_s > 0) ||
                o->request_timeout_s > 86400)
                return usage_error("--request-timeout needs a number of seconds above 0 and at "
                                   "most 86400, not '%s'",
                                   optarg);
            o->request_timeout_given = true;
            break;
        case O_PARALLEL:
            if (!parse_size(optarg, 1, 256, &o->parallel))
                return usage_error("--parallel needs an integer from 1 to 256, not '%s'", optarg);
            break;
        case O_CTX_SIZE:
            if (!parse_size(optarg, 2, 1u << 24, &o->ctx_size))
                return usage_error("--ctx-size needs an integer from 2 to 2^24, not '%s'",
                                   optarg);
            break;
        case O_PROMPT_CHUNK:
            if (!parse_size(optarg, 1, 1u << 20, &o->prompt_chunk))
                return usage_error("--prompt-chunk needs a positive integer, not '%s'", optarg);
            break;
        case O_MAX_TOKENS:
            if (!parse_size(optarg, 1, 1u << 24, &o->max_tokens))
                return usage_error("--max-tokens needs an integer from 1 to 2^24, not '%s'",
                                   optarg);
            break;
        case O_NO_PREFIX_REUSE: o->no_prefix_reuse = true; break;
        case O_SHUTDOWN_TIMEOUT:
            o->shutdown_timeout_s = strtod(optarg, &end);
            if (end == optarg || *end || !(o->shutdown_timeout_s >= 0) ||
                o->shutdown_timeout_s > 86400)
                return usage_error("--shutdown-timeout needs a number of seconds from 0 to "
                                   "86400, not '%s'",
                                   optarg);
            break;
        case 'h':
        case O_HELP: usage(stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s' (the server takes options only)",
                           argv[optind]);
    if (!o->model)
        return usage_error("--model DIR (or FILE.gguf) is required");
    if (o->api_key && !o->api_key[0])
        return usage_error("the API key (--api-key or CLATTN_API_KEY) is empty");
    folder_name(o->model, o->default_name, sizeof(o->default_name));
    if (o->served_name_count == 0)
        o->served_names[o->served_name_count++] = o->default_name[0] ? o->default_name : "model";
    return -1;
}

/* The first SIGINT or SIGTERM already pending (0: none), without waiting. */
static int pending_signal(const sigset_t *set)
{
    struct timespec zero = {0, 0};
    int sig = sigtimedwait(set, NULL, &zero);
    return sig > 0 ? sig : 0;
}

typedef struct server {
    serve_metrics *metrics;
    serve_http *http;
    clattn_context *ctx;
    clattn_sentence_model *model;       /* an embedder, or */
    clattn_cross_encoder *cross_encoder; /* a cross-encoder, or */
    clattn_llm *llm;                     /* a chat model */
    clattn_llm_text *llm_text;
    serve_scheduler *scheduler;          /* the embedder's or cross-encoder's */
    serve_llm *generator;                /* the chat model's */
} server;

/* What the loaded model is, for the scheduler and the routes. */
typedef struct served_model {
    serve_engine engine;
    const clattn_tokenizer *tokenizer;
    size_t max_length, hidden_size;
    bool cross_encoder;
    clattn_sentence_model_info embedder;   /* an embedder's */
    clattn_cross_encoder_info classifier;  /* a cross-encoder's */
} served_model;

/* Stops in the right order: no new requests, those in progress finish (bounded), the scheduler's
 * queue (in what is left of the bound), the connections, the scheduler, the model. */
static void shut_down(server *s, double drain_s)
{
    double start = cli_now_s();
    if (s->http) {
        serve_http_stop_accepting(s->http);
        if ((s->scheduler || s->generator) && !serve_http_wait_idle(s->http, drain_s))
            cli_note("requests still in progress after %g s (--shutdown-timeout) are answered "
                     "503",
                     drain_s);
    }
    double left_ms = (drain_s - (cli_now_s() - start)) * 1000.0;
    /* Jobs still queued get what is left of the bound; then the connections' threads are
     * joined (a request past the bound answers 503), and only then is the scheduler freed. */
    serve_scheduler_drain(s->scheduler, left_ms > 0 ? left_ms : 0);
    serve_llm_drain(s->generator, left_ms > 0 ? left_ms : 0);
    serve_http_stop(&s->http);
    serve_scheduler_stop(&s->scheduler, 0);
    serve_llm_stop(&s->generator);
    clattn_llm_text_destroy(&s->llm_text);
    clattn_llm_destroy(&s->llm);
    clattn_sentence_model_destroy(&s->model);
    clattn_cross_encoder_destroy(&s->cross_encoder);
    clattn_context_destroy(&s->ctx);
    serve_metrics_destroy(&s->metrics);
}

/* Whether the folder's config.json's "architectures" names one ending with `suffix` (read only
 * when it is a regular file: a FIFO is never waited on; anything unreadable is left to the
 * loader to report). */
static bool folder_architecture_is(const char *dir, const char *suffix)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof(path), "%s/config.json", dir);
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    json_t *root = json_load_file(path, 0, NULL);
    json_t *architectures = json_object_get(root, "architectures");
    bool found = false;
    for (size_t i = 0; i < json_array_size(architectures); i++) {
        const char *name = json_string_value(json_array_get(architectures, i));
        size_t n = name ? strlen(name) : 0, k = strlen(suffix);
        found |= n > k && strcmp(name + n - k, suffix) == 0;
    }
    json_decref(root);
    return found;
}

/* Whether --model names a chat model: a GGUF file (by its ".gguf" name or its magic). */
static bool is_chat_model(const char *path)
{
    struct stat st;
    if (stat(path, &st) != 0 || !S_ISREG(st.st_mode))
        return false;
    size_t n = strlen(path);
    if (n > 5 && strcmp(path + n - 5, ".gguf") == 0)
        return true;
    FILE *f = fopen(path, "rb");
    char magic[4] = {0};
    bool gguf = f && fread(magic, 1, 4, f) == 4 && memcmp(magic, "GGUF", 4) == 0;
    if (f)
        fclose(f);
    return gguf;
}

/* Loads the chat model and its text side, checks the slots against it, and warms it up (a
 * prompt and a decode step build the kernels). Returns -1 on success, else the exit status. */
static int load_chat_model(server *s, options *o, clattn_llm_info *info)
{
    if (clattn_llm_load(s->ctx, o->model, &s->llm) != CLATTN_OK ||
        clattn_llm_get_info(s->llm, info) != CLATTN_OK)
        return runtime_error("--model: %s", clattn_last_error(s->ctx));
    if (clattn_llm_text_from_model(s->llm, &s->llm_text) != CLATTN_OK)
        return runtime_error("--model: %s", clattn_last_error(NULL));
    if (!clattn_llm_chat_template(s->llm_text))
        cli_note("the file has no chat template: POST /v1/chat/completions answers 400, "
                 "POST /v1/completions works");
    if (o->precision == CLATTN_PRECISION_INT8 &&
        clattn_llm_set_precision(s->llm, CLATTN_PRECISION_INT8) != CLATTN_OK)
        return runtime_error("--precision int8: %s", clattn_last_error(s->ctx));
    if (o->precision == CLATTN_PRECISION_BF16)
        return usage_error("--precision bf16 is not available for chat models: fp32 or int8");
    size_t trained = info->context_length ? info->context_length : 4096;
    if (o->ctx_size > trained)
        return usage_error("--ctx-size %zu is more than the model's context of %zu tokens",
                           o->ctx_size, trained);
    if (!o->ctx_size)
        o->ctx_size = trained < 4096 ? trained : 4096;
    if (!o->max_tokens)
        o->max_tokens = o->ctx_size;
    clattn_llm_cache *cache = NULL;
    float *logits = malloc(info->vocab_size * sizeof(float));
    int32_t ids[2] = {0, 0};
    size_t seq = 0;
    clattn_status st = logits ? clattn_llm_cache_create(s->llm, 1, 4, CLATTN_LLM_CACHE_FLOAT,
                                                        &cache)
                              : CLATTN_ERROR_OUT_OF_HOST_MEMORY;
    if (st == CLATTN_OK)
        st = clattn_llm_sequence_add(cache, &seq);
    if (st == CLATTN_OK)
        st = clattn_llm_prompt(cache, seq, ids, 2, logits);
    if (st == CLATTN_OK)
        st = clattn_llm_decode(cache, &seq, ids, 1, logits);
    clattn_llm_cache_destroy(&cache);
    free(logits);
    if (st != CLATTN_OK)
        return runtime_error("the warm-up pass failed: %s", clattn_last_error(s->ctx));
    return -1;
}

/* Loads the cross-encoder and scores one pair. Returns -1 on success, else the exit status. */
static int load_cross_encoder(server *s, const options *o, served_model *m)
{
    if (clattn_cross_encoder_load(s->ctx, &s->cross_encoder, o->model) != CLATTN_OK ||
        clattn_cross_encoder_get_info(s->cross_encoder, &m->classifier) != CLATTN_OK ||
        serve_engine_of_cross_encoder(&m->engine, s->cross_encoder) != CLATTN_OK)
        return runtime_error("--model: %s", clattn_last_error(s->ctx));
    m->cross_encoder = true;
    m->tokenizer = clattn_cross_encoder_tokenizer(s->cross_encoder);
    m->max_length = m->classifier.max_length;
    m->hidden_size = m->classifier.hidden_size;
    static const char *const query[] = {"clattn-serve warm-up"}, *const document[] = {"warm-up"};
    float *scores = malloc(m->classifier.num_labels * sizeof(float));
    if (!scores)
        return runtime_error("out of memory");
    clattn_cross_encoder_params params;
    clattn_cross_encoder_params_default(&params);
    clattn_status st = clattn_cross_encoder_score(s->cross_encoder, query, NULL, document, NULL,
                                                  1, scores, &params, NULL);
    free(scores);
    if (st != CLATTN_OK)
        return runtime_error("the warm-up pass failed: %s", clattn_last_error(s->ctx));
    return -1;
}

/* Loads the embedder and embeds one text. Returns -1 on success, else the exit status. */
static int load_embedder(server *s, const options *o, served_model *m)
{
    if (clattn_sentence_model_load(s->ctx, &s->model, o->model) != CLATTN_OK ||
        clattn_sentence_model_get_info(s->model, &m->embedder) != CLATTN_OK ||
        serve_engine_of_sentence_model(&m->engine, s->model) != CLATTN_OK)
        return runtime_error("--model: %s", clattn_last_error(s->ctx));
    m->tokenizer = clattn_sentence_model_tokenizer(s->model);
    m->max_length = m->embedder.max_length;
    m->hidden_size = m->embedder.hidden_size;
    static const char *const warm_up[] = {"clattn-serve warm-up"};
    float *row = malloc(m->hidden_size * sizeof(float));
    if (!row)
        return runtime_error("out of memory");
    clattn_embed_params params;
    clattn_embed_params_default(&params);
    clattn_status st = clattn_sentence_model_embed(s->model, warm_up, NULL, 1, row, &params,
                                                   NULL);
    free(row);
    if (st != CLATTN_OK)
        return runtime_error("the warm-up pass failed: %s", clattn_last_error(s->ctx));
    return -1;
}

/* Loads the model (an embedder or a cross-encoder) and runs it once (the warm-up: the first
 * run builds what is built lazily). Returns -1 on success, else the exit status. */
static int load_model(server *s, const options *o, served_model *m)
{
    clattn_context_params cp;
    clattn_context_params_default(&cp);
    cp.device = o->device;
    cp.precision = o->precision;
    if (clattn_context_create(&s->ctx, &cp) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    memset(m, 0, sizeof(*m));
    int rc = folder_architecture_is(o->model, "ForSequenceClassification")
                 ? load_cross_encoder(s, o, m)
                 : load_embedder(s, o, m);
    if (rc >= 0)
        return rc;
    /* A cross-encoder's pair needs its template's special tokens and one token of each text:
     * less would start, then refuse every /rerank as the client's fault. */
    size_t specials = clattn_tokenizer_special_count(m->tokenizer, CLATTN_TEMPLATE_PAIR);
    if (m->cross_encoder && o->max_input_length && o->max_input_length < specials + 2)
        return usage_error("--max-input-length %zu cannot hold a pair: this cross-encoder's pair "
                           "template has %zu special tokens, so it needs at least %zu (one "
                           "token of each text)",
                           o->max_input_length, specials, specials + 2);
    /* A text needs room for the single template's special tokens ([CLS] and [SEP] for BERT). */
    specials = clattn_tokenizer_special_count(m->tokenizer, CLATTN_TEMPLATE_SINGLE);
    if (o->max_input_length && o->max_input_length < specials)
        return usage_error("--max-input-length %zu cannot hold a text: this model's template "
                           "has %zu special tokens",
                           o->max_input_length, specials);
    if (o->max_input_length > m->max_length)
        return usage_error("--max-input-length %zu is more than the model's maximum of %zu "
                           "tokens",
                           o->max_input_length, m->max_length);
    size_t max_input = o->max_input_length ? o->max_input_length : m->max_length;
    if (o->max_batch_tokens < max_input)
        return usage_error("--max-batch-tokens %zu is less than the longest text (%zu tokens, "
                           "--max-input-length): such a text would fit in no batch",
                           o->max_batch_tokens, max_input);
    return -1;
}

/* Raises the soft open-file limit to the hard one (at most MAX_OPEN_FILES): the connection
 * limit follows it (http.h). Left as it is when that fails. */
static void raise_open_file_limit(void)
{
    struct rlimit files;
    if (getrlimit(RLIMIT_NOFILE, &files) != 0)
        return;
    rlim_t want = files.rlim_max == RLIM_INFINITY || files.rlim_max > MAX_OPEN_FILES
                      ? MAX_OPEN_FILES
                      : files.rlim_max;
    if (files.rlim_cur != RLIM_INFINITY && files.rlim_cur < want) {
        files.rlim_cur = want;
        setrlimit(RLIMIT_NOFILE, &files);
    }
}

/* Serves until SIGINT or SIGTERM, then stops. Returns 0. */
static int wait_and_stop(server *s, const options *o, const sigset_t *stop_signals)
{
    int sig = pending_signal(stop_signals);
    while (!sig)
        if (sigwait(stop_signals, &sig) != 0)
            sig = 0;
    fprintf(stderr, "clattn-serve: %s: stopping (requests in progress get at most %g s)\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM", o->shutdown_timeout_s);
    shut_down(s, o->shutdown_timeout_s);
    fprintf(stderr, "clattn-serve: stopped\n");
    return 0;
}

/* A chat model: loaded, its scheduler started, its routes opened; then as main. */
static int serve_chat_model(server *s, options *o, const sigset_t *stop_signals)
{
    clattn_context_params cp;
    clattn_context_params_default(&cp);
    cp.device = o->device;
    clattn_llm_info info;
    int rc = clattn_context_create(&s->ctx, &cp) != CLATTN_OK
                 ? runtime_error("%s", clattn_last_error(NULL))
                 : load_chat_model(s, o, &info);
    char error[512];
    if (rc < 0) {
        serve_llm_config lc = {
            .slots = o->parallel,
            .ctx_size = o->ctx_size,
            .prompt_chunk = o->prompt_chunk,
            .prefix_reuse = !o->no_prefix_reuse,
            .max_waiting = o->max_concurrent_requests,
            .metrics = s->metrics,
        };
        if (serve_llm_start(&s->generator, s->llm, s->llm_text, &lc, error, sizeof(error)) != 0)
            rc = runtime_error("cannot start the generation scheduler: %s", error);
    }
    if (rc >= 0) {
        shut_down(s, o->shutdown_timeout_s);
        return rc;
    }
    serve_backend backend = {
        .chat =
            {
                .scheduler = s->generator,
                .text = s->llm_text,
                .limits = {.model_names = o->served_names,
                           .model_name_count = o->served_name_count,
                           .accept_any_model_name = o->accept_any_model_name,
                           .max_tokens = o->max_tokens,
                           .vocab_size = info.vocab_size},
                .ctx_size = o->ctx_size,
            },
        .description =
            {
                .served_names = o->served_names,
                .served_name_count = o->served_name_count,
                .chat = true,
                .architecture = info.architecture,
                .slots = o->parallel,
                .ctx_size = o->ctx_size,
                .max_tokens = o->max_tokens,
                .vocab_size = info.vocab_size,
                .max_concurrent_requests = o->max_concurrent_requests,
                .created = (long long)time(NULL),
            },
    };
    serve_http_set_ready(s->http, &backend);
    clattn_device_info device;
    if (clattn_context_device_info(s->ctx, &device) != CLATTN_OK)
        snprintf(device.name, sizeof(device.name), "?");
    fprintf(stderr,
            "clattn-serve: ready: %s on %s (a chat model, %s: %zu slots of %zu tokens, prompts "
            "in chunks of %zu, prefix reuse %s)\n",
            o->served_names[0], device.name, info.architecture, o->parallel, o->ctx_size,
            o->prompt_chunk, o->no_prefix_reuse ? "off" : "on");
    fflush(stderr);
    return wait_and_stop(s, o, stop_signals);
}

int main(int argc, char **argv)
{
    cli_set_program("clattn-serve");
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;

    /* Every thread inherits this mask: only main takes SIGINT and SIGTERM (sigwait). A closed
     * connection is an error of a send, not a signal. */
    sigset_t stop_signals;
    sigemptyset(&stop_signals);
    sigaddset(&stop_signals, SIGINT);
    sigaddset(&stop_signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop_signals, NULL);
    signal(SIGPIPE, SIG_IGN);

    bool chat = is_chat_model(o.model);
    if (folder_architecture_is(o.model, "ForCausalLM"))
        return usage_error("--model %s: a Hugging Face *ForCausalLM folder is not served yet "
                           "(its tokenizer.json and chat template are not read as a chat "
                           "model's); convert it to a GGUF file with llama.cpp's "
                           "convert_hf_to_gguf.py and serve that",
                           o.model);
    if (chat && !o.request_timeout_given)
        o.request_timeout_s = 600.0; /* generations take longer than embeddings */
    raise_open_file_limit();
    server s = {0};
    s.metrics = serve_metrics_create();
    if (!s.metrics)
        return runtime_error("out of memory");
    char error[512];
    /* The headers, the body and an idle connection get the request timeout, at most 30 s for a
     * chat model (whose default deadline, 600 s, is for its generations). */
    double header_timeout = chat && o.request_timeout_s > 30.0 ? 30.0 : o.request_timeout_s;
    unsigned idle_timeout = (unsigned)ceil(header_timeout);
    serve_http_config hc = {
        .host = o.host,
        .port = o.port,
        .payload_limit = o.payload_limit,
        .api_key = o.api_key,
        .request_timeout_s = o.request_timeout_s,
        .header_timeout_s = header_timeout,
        .idle_timeout_s = idle_timeout,
        .max_concurrent_requests = o.max_concurrent_requests,
        .metrics = s.metrics,
    };
    if (serve_http_start(&s.http, &hc, error, sizeof(error)) != 0) {
        serve_metrics_destroy(&s.metrics);
        return runtime_error("%s", error);
    }
    fprintf(stderr, "clattn-serve: listening on %s\n", serve_http_address(s.http));
    fflush(stderr);
    printf("%s\n", serve_http_address(s.http)); /* for scripts: the URL alone */
    fflush(stdout);
    struct rlimit files = {0};
    getrlimit(RLIMIT_NOFILE, &files);
    fprintf(stderr, "clattn-serve: at most %u connections at once (open files: %llu), %u HTTP "
                    "threads\n",
            serve_http_connection_limit(s.http), (unsigned long long)files.rlim_cur,
            serve_http_threads(s.http));

    if (chat)
        return serve_chat_model(&s, &o, &stop_signals);
    served_model m;
    rc = load_model(&s, &o, &m);
    if (rc >= 0) {
        shut_down(&s, o.shutdown_timeout_s);
        return rc;
    }
    serve_scheduler_config sc = {
        .max_batch_tokens = o.max_batch_tokens,
        .max_batch_requests = o.max_batch_requests,
        .max_queued_jobs = o.max_concurrent_requests,
        .metrics = s.metrics,
    };
    if (serve_scheduler_start(&s.scheduler, &m.engine, &sc, error, sizeof(error)) != 0) {
        shut_down(&s, o.shutdown_timeout_s);
        return runtime_error("cannot start the scheduler: %s", error);
    }
    serve_backend backend = {
        .tokenizer = m.tokenizer,
        .scheduler = s.scheduler,
        .limits =
            {
                .max_client_batch_size = o.max_client_batch_size,
                .max_input_length = o.max_input_length ? o.max_input_length : m.max_length,
                .auto_truncate = o.auto_truncate,
                .hidden_size = m.hidden_size,
                .prompts = s.model,
                .pairs = s.cross_encoder,
                .model_names = o.served_names,
                .model_name_count = o.served_name_count,
                .accept_any_model_name = o.accept_any_model_name,
            },
        .description =
            {
                .served_names = o.served_names,
                .served_name_count = o.served_name_count,
                .cross_encoder = m.cross_encoder,
                .labels = m.classifier.num_labels,
                .label_names = m.classifier.labels,
                .pooling = m.embedder.pooling == CLATTN_POOLING_CLS ? "cls" : "mean",
                .normalize = m.embedder.normalize != 0,
                .hidden_size = m.hidden_size,
                .max_batch_tokens = o.max_batch_tokens,
                .max_batch_requests = o.max_batch_requests,
                .max_client_batch_size = o.max_client_batch_size,
                .max_concurrent_requests = o.max_concurrent_requests,
                .auto_truncate = o.auto_truncate,
                .created = (long long)time(NULL),
            },
        .model_normalizes = m.embedder.normalize != 0,
        .cross_encoder = m.cross_encoder,
        .scorer = s.cross_encoder,
        .labels = m.classifier.num_labels,
        .label_names = m.classifier.labels,
    };
    backend.description.max_input_length = backend.limits.max_input_length;
    serve_http_set_ready(s.http, &backend);
    char kind[96];
    if (m.cross_encoder)
        snprintf(kind, sizeof(kind), "a cross-encoder with %zu label%s",
                 m.classifier.num_labels, m.classifier.num_labels == 1 ? "" : "s");
    else
        snprintf(kind, sizeof(kind), "%zu dimensions", m.hidden_size);
    clattn_device_info device;
    if (clattn_context_device_info(s.ctx, &device) != CLATTN_OK)
        snprintf(device.name, sizeof(device.name), "?");
    fprintf(stderr,
            "clattn-serve: ready: %s on %s (%s, at most %zu tokens per %s)\n",
            o.served_names[0], device.name, kind, backend.limits.max_input_length,
            m.cross_encoder ? "pair" : "text");
    fflush(stderr);

    return wait_and_stop(&s, &o, &stop_signals);
}
