/*
 * chat: a decoder-only LLM from a GGUF file (clattn/llm.h, clattn/llm_text.h) on an OpenCL
 * device — an interactive chat with history and streamed output, or one prompt (-p).
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error; every error names its
 * cause on stderr.
 */
#include <clattn/clattn.h>

#include "../cli.h"
#include "conversation.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct options {
    const char *model, *device, *prompt, *system, *template_file;
    bool json, no_chat, seed_given, max_tokens_given, verbose_special, no_prefix_reuse;
    bool int8; /* --precision int8 */
    unsigned long long max_tokens;
    clattn_llm_sampling sampling;
    const char **stop;
    size_t stop_count;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: chat MODEL.gguf [-p PROMPT] [--system TEXT] [--json] [--no-chat]\n"
            "            [--seed N] [--temperature T] [--top-k K] [--top-p P] [--min-p P]\n"
            "            [--repeat-penalty R] [--presence-penalty A] [--frequency-penalty F]\n"
            "            [--max-tokens N] [--stop TEXT]... [--chat-template FILE]\n"
            "            [--no-prefix-reuse] [--precision fp32|int8] [--device SPEC]\n"
            "\n"
            "Chats with a decoder-only LLM from a GGUF file (architectures llama, qwen2, qwen3;\n"
            "weights F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q4_K, Q5_K, Q6_K). The\n"
            "conversation is rendered with the file's chat template (tokenizer.chat_template,\n"
            "as transformers' apply_chat_template renders it) and tokenized with the file's\n"
            "tokenizer; the answer is streamed to standard output as it is generated.\n"
            "\n"
            "Without -p: an interactive chat. Each line read from standard input is a user\n"
            "turn; the answer follows, and the whole conversation so far is the next prompt.\n"
            "/exit or the end of input ends it. The model's cache keeps the conversation: of\n"
            "each new prompt, the tokens it shares with what the cache holds (the longest\n"
            "common prefix: the earlier turns) are not run again, only the rest; the answers\n"
            "are the same as when every prompt is run whole.\n"
            "\n"
            "  MODEL.gguf         the model file\n"
            "  -p, --prompt TEXT  one user turn: prints the answer and exits\n"
            "  --system TEXT      a system message first (without it, the template's default,\n"
            "                     if it has one)\n"
            "  --no-chat          no template: the prompt is raw text to continue (BOS added\n"
            "                     as the file says); needs -p\n"
            "  --chat-template FILE  a Jinja chat template to use instead of the file's\n"
            "  --json             with -p: one JSON object on standard output instead of the\n"
            "                     streamed text: {\"text\", \"tokens\", \"prompt_tokens\",\n"
            "                     \"finish_reason\" (\"stop\": an end-of-generation token or a\n"
            "                     stop string, \"length\": --max-tokens or the context),\n"
            "                     \"seed\",\n"
            "                     \"timings\": {\"prompt_seconds\", \"prompt_tokens_per_second\",\n"
            "                     \"decode_seconds\", \"decode_tokens_per_second\"}}\n"
            "  --seed N           the sampler's seed (default: from the clock); the same seed,\n"
            "                     options and prompt give the same answer\n"
            "  --temperature T    0 is greedy (the most likely token each step); default 0.8\n"
            "  --top-k K          sample among the K most likely tokens; 0: off; default 40\n"
            "  --top-p P          ... among the most likely tokens of total probability P; 1:\n"
            "                     off; default 0.95\n"
            "  --min-p P          ... among tokens of at least P times the best one's\n"
            "                     probability; 0: off; default 0.05\n"
            "  --repeat-penalty R divide (multiply, when negative) the logits of tokens already\n"
            "                     in the conversation by R (transformers' repetition_penalty);\n"
            "                     1: off (default)\n"
            "  --presence-penalty A, --frequency-penalty F\n"
            "                     subtract A from the logits of tokens already generated, and F\n"
            "                     times their count (OpenAI's); 0: off (default)\n"
            "  --max-tokens N     generate at most N tokens per answer (default 256, or what\n"
            "                     the context has room for; a larger N than the room is an\n"
            "                     error naming the numbers)\n"
            "  --stop TEXT        end the answer before TEXT (repeatable)\n"
            "  --no-prefix-reuse  run each turn's whole prompt (the earlier turns included)\n"
            "                     instead of what the cache does not hold yet\n"
            "  --precision P      fp32 (default: transformers' answers) or int8: activations\n"
            "                     quantised to 8 bits before the quantised weights' products,\n"
            "                     as llama.cpp does (faster on CPUs; answers can differ)\n"
            "  --device SPEC      gpu, cpu, P:D, or part of a device name (default:\n"
            "                     $CLATTN_DEVICE, else the first GPU, else the first CPU)\n"
            "  -h, --help         this text\n"
            "\n"
            "Sampling applies, in this order: the repetition penalty, the presence and frequency\n"
            "penalties, the temperature, top-k, top-p, min-p (transformers' order). The answer\n"
            "ends at the model's end-of-generation tokens (such as <|im_end|>, <|eot_id|>), a\n"
            "stop string, or --max-tokens. After each answer the prompt and decode speeds\n"
            "(tokens/s) are printed on standard error (in the object with --json): \"prompt: N\n"
            "tokens (C from the cache)\" counts the prompt's tokens and those of them that were\n"
            "not run again; the prompt speed is over the N - C tokens run.\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error.\n");
}

static bool parse_double(const char *text, double lo, double hi, bool lo_open, double *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v) || v < lo || v > hi || (lo_open && v == lo))
        return false;
    *out = v;
    return true;
}

/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_SYSTEM = 256, O_JSON, O_NO_CHAT, O_SEED, O_TEMP, O_TOP_K, O_TOP_P, O_MIN_P,
           O_REPEAT, O_PRESENCE, O_FREQUENCY, O_MAX_TOKENS, O_STOP, O_TEMPLATE, O_DEVICE,
           O_NO_PREFIX_REUSE, O_PRECISION };
    static const struct option longs[] = {
        {"prompt", required_argument, NULL, 'p'},
        {"system", required_argument, NULL, O_SYSTEM},
        {"json", no_argument, NULL, O_JSON},
        {"no-chat", no_argument, NULL, O_NO_CHAT},
        {"seed", required_argument, NULL, O_SEED},
        {"temperature", required_argument, NULL, O_TEMP},
        {"top-k", required_argument, NULL, O_TOP_K},
        {"top-p", required_argument, NULL, O_TOP_P},
        {"min-p", required_argument, NULL, O_MIN_P},
        {"repeat-penalty", required_argument, NULL, O_REPEAT},
        {"presence-penalty", required_argument, NULL, O_PRESENCE},
        {"frequency-penalty", required_argument, NULL, O_FREQUENCY},
        {"max-tokens", required_argument, NULL, O_MAX_TOKENS},
        {"stop", required_argument, NULL, O_STOP},
        {"chat-template", required_argument, NULL, O_TEMPLATE},
        {"device", required_argument, NULL, O_DEVICE},
        {"no-prefix-reuse", no_argument, NULL, O_NO_PREFIX_REUSE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    clattn_llm_sampling *s = &o->sampling;
    s->temperature = 0.8;
    s->top_k = 40;
    s->top_p = 0.95;
    s->min_p = 0.05;
    s->repetition_penalty = 1.0;
    o->max_tokens = 256;
    opterr = 0;
    int c;
    unsigned long long n;
    while ((c = getopt_long(argc, argv, ":p:h", longs, NULL)) != -1) {
        switch (c) {
        case 'p': o->prompt = optarg; break;
        case O_SYSTEM: o->system = optarg; break;
        case O_JSON: o->json = true; break;
        case O_NO_CHAT: o->no_chat = true; break;
        case O_SEED:
            if (!parse_count(optarg, UINT64_MAX, &n))
                return usage_error("--seed: '%s' is not a count from 0", optarg);
            s->seed = n;
            o->seed_given = true;
            break;
        case O_TEMP:
            if (!parse_double(optarg, 0, 1e6, false, &s->temperature))
                return usage_error("--temperature: '%s' is not a number >= 0", optarg);
            break;
        case O_TOP_K:
            if (!parse_count(optarg, INT32_MAX, &n))
                return usage_error("--top-k: '%s' is not a count from 0", optarg);
            s->top_k = (int32_t)n;
            break;
        case O_TOP_P:
            if (!parse_double(optarg, 0, 1, false, &s->top_p))
                return usage_error("--top-p: '%s' is not a number in [0, 1]", optarg);
            break;
        case O_MIN_P:
            if (!parse_double(optarg, 0, 1, false, &s->min_p))
                return usage_error("--min-p: '%s' is not a number in [0, 1]", optarg);
            break;
        case O_REPEAT:
            if (!parse_double(optarg, 0, 1e6, true, &s->repetition_penalty))
                return usage_error("--repeat-penalty: '%s' is not a number > 0", optarg);
            break;
        case O_PRESENCE:
            if (!parse_double(optarg, -1e6, 1e6, false, &s->presence_penalty))
                return usage_error("--presence-penalty: '%s' is not a number", optarg);
            break;
        case O_FREQUENCY:
            if (!parse_double(optarg, -1e6, 1e6, false, &s->frequency_penalty))
                return usage_error("--frequency-penalty: '%s' is not a number", optarg);
            break;
        case O_MAX_TOKENS:
            if (!parse_count(optarg, SIZE_MAX, &n) || n == 0)
                return usage_error("--max-tokens: '%s' is not a count from 1", optarg);
            o->max_tokens = n;
            o->max_tokens_given = true;
            break;
        case O_STOP: {
            if (!*optarg)
                return usage_error("--stop: the text is empty");
            const char **grown = realloc(o->stop, (o->stop_count + 1) * sizeof(*grown));
            if (!grown)
                return runtime_error("out of memory");
            o->stop = grown;
            o->stop[o->stop_count++] = optarg;
            break;
        }
        case O_TEMPLATE: o->template_file = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_NO_PREFIX_REUSE: o->no_prefix_reuse = true; break;
        case O_PRECISION:
            if (strcmp(optarg, "fp32") != 0 && strcmp(optarg, "int8") != 0)
                return usage_error("--precision: '%s' is not fp32 or int8", optarg);
            o->int8 = strcmp(optarg, "int8") == 0;
            break;
        case 'h': usage(stdout); return 0;
        case ':': return usage_error("%s needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind >= argc)
        return usage_error("the model file is missing");
    if (optind + 1 < argc)
        return usage_error("one model file only ('%s' is extra)", argv[optind + 1]);
    o->model = argv[optind];
    if (o->json && !o->prompt)
        return usage_error("--json needs -p (one prompt)");
    if (o->no_chat && !o->prompt)
        return usage_error("--no-chat needs -p (one prompt)");
    if (o->no_chat && (o->system || o->template_file))
        return usage_error("--no-chat takes no --system or --chat-template");
    if (!o->seed_given)
        s->seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    return -1;
}

static char *read_file(const char *path, int *status)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        *status = runtime_error("%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + len, 1, cap - len - 1, f)) > 0) {
        len += got;
        if (cap - len - 1 == 0) {
            char *grown = realloc(buf, cap * 2);
            if (!grown) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = grown;
            cap *= 2;
        }
    }
    bool failed = ferror(f);
    fclose(f);
    if (!buf || failed) {
        free(buf);
        *status = runtime_error("%s: cannot read it", path);
        return NULL;
    }
    buf[len] = '\0';
    return buf;
}

typedef struct session {
    const options *o;
    clattn_llm *llm;
    clattn_llm_text *text;
    clattn_llm_info info;
    char *template_text; /* --chat-template's, or NULL */
    json_t *messages;
    conversation conv;   /* the model's cache of the conversation */
} session;

static void print_piece(const char *piece, size_t length)
{
    fwrite(piece, 1, length, stdout);
    fflush(stdout);
}

static const char *finish_name(int finish)
{
    return finish == CLATTN_LLM_FINISH_LENGTH ? "length" : "stop";
}

/* Generates the answer to the prompt's ids; prints it (streamed, or as JSON); *answer: its
 * text (the caller frees it) when asked. Returns 0 or the exit status. */
static int answer(session *s, const int32_t *ids, size_t n, char **answer_text)
{
    const options *o = s->o;
    clattn_llm_generate_options g;
    clattn_llm_generate_options_default(&g);
    g.sampling = o->sampling;
    g.stop = o->stop;
    g.stop_count = o->stop_count;
    size_t room = n < s->info.context_length ? s->info.context_length - n : 0;
    g.max_new_tokens = o->max_tokens;
    if (!o->max_tokens_given && g.max_new_tokens > room)
        g.max_new_tokens = room;
    if (g.max_new_tokens == 0)
        return runtime_error("a prompt of %zu tokens leaves no room in the model's context of "
                             "%zu tokens",
                             n, s->info.context_length);
    conversation_answer r;
    int rc = conversation_answer_ids(&s->conv, s->text, ids, n, &g, o->json ? NULL : print_piece,
                                     &r);
    if (rc)
        return rc;
    size_t run = r.prompt_tokens - r.cached_tokens;
    double pp = r.prompt_seconds > 0 ? (double)run / r.prompt_seconds : 0;
    double tg = r.decode_seconds > 0 ? (double)r.token_count / r.decode_seconds : 0;
    if (o->json) {
        json_t *tokens = json_array();
        for (size_t i = 0; i < r.token_count; i++)
            json_array_append_new(tokens, json_integer(r.tokens[i]));
        json_t *out = json_pack("{s:s%, s:o, s:I, s:s, s:I, s:{s:f, s:f, s:f, s:f}}", "text",
                                r.text, r.text_length, "tokens", tokens, "prompt_tokens",
                                (json_int_t)r.prompt_tokens, "finish_reason",
                                finish_name(r.finish), "seed", (json_int_t)o->sampling.seed,
                                "timings", "prompt_seconds", r.prompt_seconds,
                                "prompt_tokens_per_second", pp, "decode_seconds",
                                r.decode_seconds, "decode_tokens_per_second", tg);
        char *dump = out ? json_dumps(out, JSON_ENSURE_ASCII) : NULL;
        json_decref(out);
        if (!dump) {
            conversation_answer_clear(&r);
            return runtime_error("cannot write the JSON answer");
        }
        printf("%s\n", dump);
        free(dump);
    } else {
        printf("\n");
        fprintf(stderr,
                "[prompt: %zu tokens (%zu from the cache), %.3f s, %.1f tokens/s; answer: %zu "
                "tokens, %.3f s, %.1f tokens/s; %s]\n",
                r.prompt_tokens, r.cached_tokens, r.prompt_seconds, pp, r.token_count,
                r.decode_seconds, tg, finish_name(r.finish));
    }
    fflush(stdout);
    if (answer_text)
        *answer_text = strdup(r.text);
    conversation_answer_clear(&r);
    if (answer_text && !*answer_text)
        return runtime_error("out of memory");
    return 0;
}

/* The conversation so far, rendered, tokenized and answered; the answer joins it. */
static int chat_turn(session *s, const char *user)
{
    json_array_append_new(s->messages, json_pack("{s:s, s:s}", "role", "user", "content", user));
    char *messages = json_dumps(s->messages, 0);
    if (!messages)
        return runtime_error("out of memory");
    char *prompt = NULL;
    size_t length = 0;
    clattn_status st = clattn_llm_apply_chat_template(s->text, messages, s->template_text, 1,
                                                      &prompt, &length);
    free(messages);
    if (st != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    int32_t *ids = NULL;
    size_t n = 0;
    st = clattn_llm_tokenize(s->text, prompt, length, 0, 1, &ids, &n);
    clattn_llm_free(prompt);
    if (st != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    if (n == 0) {
        clattn_llm_free(ids);
        return runtime_error("the chat template rendered an empty prompt");
    }
    char *reply = NULL;
    int rc = answer(s, ids, n, &reply);
    clattn_llm_free(ids);
    if (rc)
        return rc;
    json_array_append_new(s->messages,
                          json_pack("{s:s, s:s}", "role", "assistant", "content", reply));
    free(reply);
    return 0;
}

static int raw_completion(session *s, const char *prompt)
{
    int32_t *ids = NULL;
    size_t n = 0;
    if (clattn_llm_tokenize(s->text, prompt, strlen(prompt), 1, 0, &ids, &n) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    if (n == 0) {
        clattn_llm_free(ids);
        return runtime_error("the prompt gives no tokens (and the file adds no BOS)");
    }
    if (!s->o->json) {
        fputs(prompt, stdout);
        fflush(stdout);
    }
    int rc = answer(s, ids, n, NULL);
    clattn_llm_free(ids);
    return rc;
}

static int interactive(session *s)
{
    bool tty = isatty(STDIN_FILENO);
    char *line = NULL;
    size_t cap = 0;
    int rc = 0;
    for (;;) {
        if (tty) {
            fputs("> ", stderr);
            fflush(stderr);
        }
        ssize_t got = getline(&line, &cap, stdin);
        if (got < 0)
            break;
        while (got > 0 && (line[got - 1] == '\n' || line[got - 1] == '\r'))
            line[--got] = '\0';
        if (strcmp(line, "/exit") == 0)
            break;
        if (got == 0)
            continue;
        rc = chat_turn(s, line);
        if (rc)
            break;
    }
    free(line);
    return rc;
}

static int run(const options *o)
{
    session s = {0};
    s.o = o;
    int rc = 0;
    if (o->template_file) {
        s.template_text = read_file(o->template_file, &rc);
        if (!s.template_text)
            return rc;
    }
    clattn_context *ctx = NULL;
    rc = cli_context_create(o->device, &ctx);
    if (!rc && clattn_llm_load(ctx, o->model, &s.llm) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(NULL));
    if (!rc && o->int8 && clattn_llm_set_precision(s.llm, CLATTN_PRECISION_INT8) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(ctx));
    if (!rc && clattn_llm_text_from_model(s.llm, &s.text) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(NULL));
    if (!rc && !o->no_chat && !s.template_text && !clattn_llm_chat_template(s.text))
        rc = runtime_error("%s has no chat template (tokenizer.chat_template): give one with "
                           "--chat-template FILE, or use --no-chat",
                           o->model);
    if (!rc && clattn_llm_get_info(s.llm, &s.info) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(NULL));
    /* One prompt (-p) needs no cache kept: a cache of its own size, as clattn_llm_generate's. */
    conversation_init(&s.conv, s.llm, &s.info, !o->prompt && !o->no_prefix_reuse);
    s.messages = json_array();
    if (!rc && o->system)
        json_array_append_new(s.messages,
                              json_pack("{s:s, s:s}", "role", "system", "content", o->system));
    if (!rc) {
        if (o->no_chat)
            rc = raw_completion(&s, o->prompt);
        else if (o->prompt)
            rc = chat_turn(&s, o->prompt);
        else
            rc = interactive(&s);
    }
    json_decref(s.messages);
    conversation_release(&s.conv);
    clattn_llm_destroy(&s.llm);
    clattn_llm_text_destroy(&s.text);
    clattn_context_destroy(&ctx);
    free(s.template_text);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("chat");
    options o = {0};
    int rc = parse_options(argc, argv, &o);
    if (rc < 0)
        rc = run(&o);
    free(o.stop);
    return rc;
}
