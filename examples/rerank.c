/*
 * rerank: documents ranked for a query by a cross-encoder (a Hugging Face
 * *ForSequenceClassification folder with one label, such as cross-encoder/ms-marco-MiniLM-L-6-v2
 * or BAAI/bge-reranker-base) on an OpenCL device: the scores sentence-transformers'
 * CrossEncoder.rank gives, best first.
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error; every error names its
 * cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"
#include "embed/text_lines.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct options {
    const char *model, *device, *query, *input; /* input NULL: the positional documents */
    size_t top_k;                               /* 0: every document */
    size_t max_length, batch_size;              /* 0: the model's, the library's */
    int precision;                              /* clattn_precision */
    bool raw_scores, json;
    char **documents;
    size_t document_count;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: rerank --model DIR --query QUERY [--input DOCS.txt|- | DOCUMENT ...]\n"
            "              [--top-k K] [--raw-scores] [--json] [--device SPEC]\n"
            "              [--precision P] [--max-length N] [--batch-size N]\n"
            "\n"
            "Ranks documents for a query with a cross-encoder (a reranker: a Hugging Face\n"
            "folder of BertForSequenceClassification, RobertaForSequenceClassification,\n"
            "XLMRobertaForSequenceClassification or ModernBertForSequenceClassification with\n"
            "one label), as sentence-transformers' CrossEncoder.rank does: each (query,\n"
            "document) pair is scored, the best first.\n"
            "\n"
            "  --model DIR        the model folder (config.json, model.safetensors, the\n"
            "                     tokenizer)\n"
            "  --query QUERY      the query\n"
            "  --input FILE       the documents, one per line (UTF-8; the line end is not part of\n"
            "                     the document; an empty line is an empty document); - reads\n"
            "                     standard input\n"
            "  DOCUMENT ...       the documents, when there is no --input\n"
            "  --top-k K          print only the K best (default: all)\n"
            "  --raw-scores       the model's logits, not the probabilities (without it: the\n"
            "                     model's default activation, the sigmoid unless its config.json\n"
            "                     names another, as sentence-transformers)\n"
            "  --json             a JSON array [{\"index\", \"score\", \"text\"}, ...], best\n"
            "                     first, as text-embeddings-inference's /rerank answers\n"
            "  --device SPEC      gpu, cpu, P:D, or part of a device name (default:\n"
            "                     $CLATTN_DEVICE, else the first GPU, else the first CPU)\n"
            CLI_PRECISION_USAGE
            "                     (as CrossEncoder's precision=; bf16 and int8 scores are\n"
            "                     close to fp32's, not the same)\n"
            "  --max-length N     truncate each pair to N tokens (default: the model's)\n"
            "  --batch-size N     pairs per batch at most (default 32)\n"
            "\n"
            "Output: one line per document, best first: its index (from 0, in the order given),\n"
            "a tab, its score, a tab, the document. Equal scores keep the documents' order.\n"
            "A model with several labels (a classifier, not a reranker) is refused. Errors name\n"
            "a document as pair N, from 1 (line N of --input); the query is text_a, the\n"
            "document text_b.\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error.\n");
}

/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_MODEL = 256, O_QUERY, O_INPUT, O_TOP_K, O_RAW_SCORES, O_JSON, O_DEVICE,
           O_PRECISION, O_MAX_LENGTH, O_BATCH_SIZE, O_HELP };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"query", required_argument, NULL, O_QUERY},
        {"input", required_argument, NULL, O_INPUT},
        {"top-k", required_argument, NULL, O_TOP_K},
        {"raw-scores", no_argument, NULL, O_RAW_SCORES},
        {"json", no_argument, NULL, O_JSON},
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"max-length", required_argument, NULL, O_MAX_LENGTH},
        {"batch-size", required_argument, NULL, O_BATCH_SIZE},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    opterr = 0;
    int c;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_QUERY: o->query = optarg; break;
        case O_INPUT: o->input = optarg; break;
        case O_TOP_K:
            if (!parse_count(optarg, (unsigned long long)1 << 40, &v) || v == 0)
                return usage_error("--top-k needs a positive integer, not '%s'", optarg);
            o->top_k = (size_t)v;
            break;
        case O_RAW_SCORES: o->raw_scores = true; break;
        case O_JSON: o->json = true; break;
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION:
            if (!cli_parse_precision(optarg, &o->precision))
                return usage_error("--precision is fp32, bf16 or int8, not \"%s\"", optarg);
            break;
        case O_MAX_LENGTH:
            if (!parse_count(optarg, 1u << 30, &v) || v < 2)
                return usage_error("--max-length needs an integer of at least 2, not '%s'",
                                   optarg);
            o->max_length = (size_t)v;
            break;
        case O_BATCH_SIZE:
            if (!parse_count(optarg, 1u << 20, &v) || v == 0)
                return usage_error("--batch-size needs a positive integer, not '%s'", optarg);
            o->batch_size = (size_t)v;
            break;
        case 'h':
        case O_HELP: usage(stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    o->documents = argv + optind;
    o->document_count = (size_t)(argc - optind);
    if (!o->model)
        return usage_error("--model DIR is required");
    if (!o->query)
        return usage_error("--query QUERY is required");
    int rc = text_list_check_source(o->input, o->documents, o->document_count, "documents");
    if (rc >= 0)
        return rc;
    return -1;
}

/* ---- the documents ---- */

/* ---- ranking ---- */

typedef struct ranked {
    size_t index;
    float score;
} ranked;

/* Best first; equal scores in the documents' order. */
static int by_score(const void *a, const void *b)
{
    const ranked *x = a, *y = b;
    if (x->score != y->score)
        return x->score > y->score ? -1 : 1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* A document as a JSON string or, in the plain output, as it is. */
static void print_text(const char *text, size_t length, bool json)
{
    if (!json) {
        fwrite(text, 1, length, stdout);
        return;
    }
    char *copy = malloc(length + 1); /* print_json_string takes a C string */
    if (copy) {
        memcpy(copy, text, length);
        copy[length] = '\0';
        print_json_string(copy);
    }
    free(copy);
}

static void print_ranking(const options *o, const text_list *d, const ranked *r, size_t n)
{
    if (o->json)
        putchar('[');
    for (size_t i = 0; i < n; i++) {
        const char *text = d->texts[r[i].index];
        size_t length = d->lengths[r[i].index];
        if (o->json) {
            printf("%s{\"index\": %zu, \"score\": %.9g, \"text\": ", i ? ", " : "",
                   r[i].index, r[i].score);
            print_text(text, length, true);
            putchar('}');
        } else {
            printf("%zu\t%.9g\t", r[i].index, r[i].score);
            print_text(text, length, false);
            putchar('\n');
        }
    }
    if (o->json)
        puts("]");
}

static int rerank(const options *o, const text_list *d)
{
    clattn_context *ctx = NULL;
    if (cli_context_create_precision(o->device, o->precision, &ctx))
        return EXIT_RUNTIME;
    clattn_cross_encoder *model = NULL;
    clattn_cross_encoder_info info;
    if (clattn_cross_encoder_load(ctx, &model, o->model) != CLATTN_OK ||
        clattn_cross_encoder_get_info(model, &info) != CLATTN_OK) {
        int rc = runtime_error("--model: %s", clattn_last_error(ctx));
        clattn_context_destroy(&ctx);
        return rc;
    }
    int rc = 0;
    if (info.num_labels != 1) {
        char labels[512] = "";
        for (size_t k = 0; k < info.num_labels && strlen(labels) < 400; k++)
            snprintf(labels + strlen(labels), sizeof(labels) - strlen(labels), "%s%s",
                     k ? ", " : "", info.labels[k]);
        rc = runtime_error("--model %s: ranking needs a model with one label (a reranker); this "
                           "%s has %zu (%s): a classifier of pairs, not a ranker",
                           o->model, info.architecture, info.num_labels, labels);
    }
    if (!rc && o->max_length > info.max_length)
        cli_note("--max-length %zu is more than the model's %zu tokens: pairs are truncated to "
                 "%zu",
                 o->max_length, info.max_length, info.max_length);
    const char **queries = calloc(d->count, sizeof(*queries));
    size_t *query_lengths = calloc(d->count, sizeof(size_t));
    float *scores = calloc(d->count, sizeof(float));
    ranked *order = calloc(d->count, sizeof(ranked));
    if (!rc && (!queries || !query_lengths || !scores || !order))
        rc = runtime_error("out of memory for %zu documents", d->count);
    for (size_t i = 0; !rc && i < d->count; i++)
        queries[i] = o->query, query_lengths[i] = strlen(o->query);
    clattn_cross_encoder_params params;
    clattn_cross_encoder_params_default(&params);
    params.max_length = o->max_length;
    params.batch_size = o->batch_size;
    params.activation = o->raw_scores ? CLATTN_SCORES_RAW : CLATTN_SCORES_DEFAULT;
    if (!rc && clattn_cross_encoder_score(model, queries, query_lengths, d->texts, d->lengths,
                                          d->count, scores, &params, NULL) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(ctx));
    for (size_t i = 0; !rc && i < d->count; i++) {
        if (isnan(scores[i]))
            rc = runtime_error("the score of %s %zu is NaN: the model's weights hold such values "
                               "or its computation overflowed",
                               o->input ? "line" : "document", i + 1);
        order[i].index = i, order[i].score = scores[i];
    }
    if (!rc) {
        qsort(order, d->count, sizeof(ranked), by_score);
        size_t shown = o->top_k && o->top_k < d->count ? o->top_k : d->count;
        print_ranking(o, d, order, shown);
        if (fflush(stdout) != 0 || ferror(stdout))
            rc = runtime_error("writing the ranking failed: %s", strerror(errno));
    }
    free(queries), free(query_lengths), free(scores), free(order);
    clattn_cross_encoder_destroy(&model);
    clattn_context_destroy(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("rerank");
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    text_list d;
    rc = text_list_load(o.input, o.documents, o.document_count, "document", &d);
    if (!rc)
        rc = rerank(&o, &d);
    text_list_free(&d);
    return rc;
}
