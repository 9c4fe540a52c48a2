/*
 * rerank_bench: the time libclattn takes to score one query against N documents with a
 * cross-encoder (clattn_cross_encoder_score over all the pairs, tokenization included), for
 * bench/rerank_bench.py. Prints one JSON object on stdout and writes the scores to a .npy file.
 *
 * usage: rerank_bench --model DIR --query QUERY --input DOCS.txt --output SCORES.npy
 *                     [--device SPEC] [--batch-size N]
 *
 * DOCS.txt holds one document per line (UTF-8, '\n' ends a line; the last line must end with
 * one). Every pair is (QUERY, document i); the scores are the model's default activation (the
 * sigmoid for a one-label reranker), written as a float32 .npy of shape [N, num_labels].
 *
 * Output: {"engine": "clattn", "device", "count", "tokens", "max_length", "batch_size",
 *          "context_s", "load_s", "seconds"}:
 *   context_s  clattn_context_create (the OpenCL kernels are built there)
 *   load_s     clattn_cross_encoder_load (weights, head, tokenizer)
 *   seconds    clattn_cross_encoder_score over the N pairs (the timed part)
 *   tokens     the real tokens run (special tokens included, padding excluded)
 * Exit status: 0 success, 2 usage error, 1 runtime error (the cause on stderr).
 */
#include <clattn/clattn.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int usage(const char *why)
{
    fprintf(stderr,
            "rerank_bench: %s\nusage: rerank_bench --model DIR --query QUERY --input DOCS.txt "
            "--output SCORES.npy [--device SPEC] [--batch-size N]\n",
            why);
    return 2;
}

static int fail(const char *what, const char *why)
{
    fprintf(stderr, "rerank_bench: %s: %s\n", what, why);
    return 1;
}

/* The documents: the lines of one file read whole; texts[i] points into buffer. */
typedef struct documents {
    char *buffer;
    const char **texts; /* [count] */
    size_t *lengths;    /* [count], bytes, without the '\n' */
    size_t count;
} documents;

static void documents_free(documents *d)
{
    free(d->buffer), free(d->texts), free(d->lengths);
    memset(d, 0, sizeof(*d));
}

static int read_documents(const char *path, documents *d)
{
    memset(d, 0, sizeof(*d));
    FILE *f = fopen(path, "rb");
    if (!f)
        return fail(path, strerror(errno));
    long size = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        size = ftell(f);
    rewind(f);
    d->buffer = size >= 0 ? malloc((size_t)size + 1) : NULL;
    size_t got = d->buffer ? fread(d->buffer, 1, (size_t)size, f) : 0;
    fclose(f);
    if (!d->buffer || got != (size_t)size)
        return fail(path, d->buffer ? "short read" : "cannot size or allocate the file");
    if (size == 0 || d->buffer[size - 1] != '\n')
        return fail(path, size ? "the last line does not end with '\\n'" : "no documents");
    for (long i = 0; i < size; i++)
        d->count += d->buffer[i] == '\n';
    d->texts = calloc(d->count, sizeof(*d->texts));
    d->lengths = calloc(d->count, sizeof(*d->lengths));
    if (!d->texts || !d->lengths)
        return fail(path, "out of memory for the lines");
    char *line = d->buffer;
    for (size_t i = 0; i < d->count; i++) {
        char *end = memchr(line, '\n', (size_t)(d->buffer + size - line));
        d->texts[i] = line, d->lengths[i] = (size_t)(end - line);
        line = end + 1;
    }
    return 0;
}

typedef struct options {
    const char *model, *query, *input, *output, *device;
    size_t batch_size; /* 0: the library's default */
} options;

static int parse_options(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof(*o));
    for (int i = 1; i < argc; i++) {
        const char *name = argv[i];
        if (i + 1 >= argc)
            return usage(strncmp(name, "--", 2) == 0 ? "an option lacks its value"
                                                     : "unexpected argument");
        const char *value = argv[++i];
        if (!strcmp(name, "--model"))
            o->model = value;
        else if (!strcmp(name, "--query"))
            o->query = value;
        else if (!strcmp(name, "--input"))
            o->input = value;
        else if (!strcmp(name, "--output"))
            o->output = value;
        else if (!strcmp(name, "--device"))
            o->device = value;
        else if (!strcmp(name, "--batch-size")) {
            char *end;
            unsigned long v = strtoul(value, &end, 10);
            if (end == value || *end || value[0] == '-' || v == 0 || v > 1u << 20)
                return usage("--batch-size needs a positive integer");
            o->batch_size = (size_t)v;
        } else
            return usage("unknown option");
    }
    if (!o->model || !o->query || !o->input || !o->output)
        return usage("--model, --query, --input and --output are required");
    return 0;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void print_json_string(const char *s)
{
    putchar('"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

static int run(const options *o, const documents *d)
{
    clattn_context_params cp;
    clattn_context_params_default(&cp);
    cp.device = o->device;
    clattn_context *ctx = NULL;
    double t0 = now_s();
    if (clattn_context_create(&ctx, &cp) != CLATTN_OK)
        return fail("context", clattn_last_error(NULL));
    double context_s = now_s() - t0;

    clattn_cross_encoder *model = NULL;
    clattn_cross_encoder_info info;
    t0 = now_s();
    if (clattn_cross_encoder_load(ctx, &model, o->model) != CLATTN_OK ||
        clattn_cross_encoder_get_info(model, &info) != CLATTN_OK) {
        int rc = fail(o->model, clattn_last_error(ctx));
        clattn_context_destroy(&ctx);
        return rc;
    }
    double load_s = now_s() - t0;

    /* One reranking request: the same query beside every document. */
    const char **queries = malloc(d->count * sizeof(*queries));
    float *scores = malloc(d->count * info.num_labels * sizeof(float)); /* [count, num_labels] */
    int rc = 0;
    if (!queries || !scores)
        rc = fail("scores", "out of memory");
    for (size_t i = 0; !rc && i < d->count; i++)
        queries[i] = o->query;

    clattn_cross_encoder_params params;
    clattn_cross_encoder_params_default(&params);
    params.batch_size = o->batch_size;
    size_t tokens = 0;
    double seconds = 0;
    if (!rc) {
        t0 = now_s();
        if (clattn_cross_encoder_score(model, queries, NULL, d->texts, d->lengths, d->count,
                                       scores, &params, &tokens) != CLATTN_OK)
            rc = fail("clattn_cross_encoder_score", clattn_last_error(ctx));
        seconds = now_s() - t0;
    }
    if (!rc && clattn_npy_write_f32(o->output, scores, 2,
                                    (size_t[]){d->count, info.num_labels}) != CLATTN_OK)
        rc = fail(o->output, clattn_last_error(NULL));
    if (!rc) {
        clattn_device_info dev;
        clattn_context_device_info(ctx, &dev);
        printf("{\"engine\": \"clattn\", \"device\": ");
        print_json_string(dev.name);
        printf(", \"count\": %zu, \"tokens\": %zu, \"max_length\": %zu, \"batch_size\": %zu, "
               "\"context_s\": %.3f, \"load_s\": %.3f, \"seconds\": %.4f}\n",
               d->count, tokens, info.max_length,
               o->batch_size ? o->batch_size : (size_t)32, context_s, load_s, seconds);
    }
    free(queries), free(scores);
    clattn_cross_encoder_destroy(&model);
    clattn_context_destroy(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc)
        return rc;
    documents d;
    rc = read_documents(o.input, &d);
    if (!rc)
        rc = run(&o, &d);
    documents_free(&d);
    return rc;
}
