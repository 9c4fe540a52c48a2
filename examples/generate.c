/*
 * generate: runs an encoder–decoder Transformer model file (nn.Transformer with embeddings and a
 * generator, clattn/transformer.h) on an OpenCL device: teacher-forced logits with --tgt, else
 * generation by greedy decoding or beam search. A model file without embeddings (nn.Transformer
 * alone) takes float inputs and runs the teacher-forced forward only.
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error, 130 when interrupted
 * (SIGINT: nothing is written); every error names its cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"

#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

enum { EXIT_INTERRUPTED = 130 }; /* 128 + SIGINT, as a shell reports a process SIGINT ended */

typedef struct options {
    const char *model, *device, *src, *tgt, *src_mask, *output;
    size_t max_new, beam;
    float alpha;
    bool json, half_cache;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: generate --model FILE [--device SPEC]\n"
            "                --src SRC.npy [--tgt TGT.npy] [--src-mask PAD.npy] [--output OUT.npy]\n"
            "                [--max-new N] [--beam K] [--alpha A] [--half-cache] [--json]\n"
            "\n"
            "Runs an encoder-decoder model file (safetensors with nn.Transformer's names, the\n"
            "source and target embeddings and a generator; see clattn/transformer.h). A file\n"
            "without embeddings (nn.Transformer alone) takes float inputs: --src float32\n"
            "[B, S, E] and --tgt float32 [B, T, E] (required), and --output receives the\n"
            "decoder output [B, T, E] (logits [B, T, V] if the file has a generator).\n"
            "\n"
            "  --model FILE       the model file\n"
            "  --device SPEC      gpu, cpu, P:D, or part of a device name (default: $CLATTN_DEVICE,\n"
            "                     else the first GPU, else the first CPU)\n"
            "  --src SRC.npy      source token ids, an integer array [B, S] (float32 [B, S, E]\n"
            "                     for a model without embeddings)\n"
            "  --src-mask PAD.npy source padding [B, S] (bool or integer; nonzero = padding), used\n"
            "                     as src_key_padding_mask and memory_key_padding_mask\n"
            "  --tgt TGT.npy      target token ids [B, T] (float32 [B, T, E] for a model without\n"
            "                     embeddings): teacher-forced forward with the causal mask;\n"
            "                     --output then receives the logits, float32 [B, T, V]\n"
            "  --output OUT.npy   without --tgt: the generated ids, int64 [B, L] right-padded with\n"
            "                     the model's pad_id (without --output: one JSON array per\n"
            "                     sentence on stdout)\n"
            "                     (a new file, or a regular file replaced whole once the\n"
            "                     result is ready; a link to one is followed; a FIFO, device\n"
            "                     or directory is refused and left unchanged)\n"
            "  --max-new N        tokens to generate at most (default: source length + 50; at\n"
            "                     most 1048576); a key/value cache larger than the device's\n"
            "                     memory is refused before generating. On a terminal, stderr\n"
            "                     shows the progress; Ctrl-C (SIGINT) stops with exit 130\n"
            "                     and writes nothing\n"
            "  --beam K           1: greedy (default); K > 1: beam search with K hypotheses\n"
            "  --alpha A          the GNMT length penalty's exponent (default 0.6)\n"
            "  --half-cache       keep the decoder's keys and values in half floats (half the\n"
            "                     cache memory; outputs within a few 1e-4 of the float cache's)\n"
            "  --json             one JSON object on stdout: the ids (unless --output), each\n"
            "                     result's score (its log-probability / the length penalty),\n"
            "                     the time, tokens/s, the device and the model\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error, 130 interrupted.\n");
}

/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_MODEL = 256, O_DEVICE, O_SRC, O_TGT, O_SRC_MASK, O_OUTPUT, O_MAX_NEW, O_BEAM,
           O_ALPHA, O_HALF_CACHE, O_JSON, O_HELP };
    static const struct option longopts[] = {
        {"model", required_argument, NULL, O_MODEL},
        {"device", required_argument, NULL, O_DEVICE},
        {"src", required_argument, NULL, O_SRC},
        {"tgt", required_argument, NULL, O_TGT},
        {"src-mask", required_argument, NULL, O_SRC_MASK},
        {"output", required_argument, NULL, O_OUTPUT},
        {"max-new", required_argument, NULL, O_MAX_NEW},
        {"beam", required_argument, NULL, O_BEAM},
        {"alpha", required_argument, NULL, O_ALPHA},
        {"half-cache", no_argument, NULL, O_HALF_CACHE},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->beam = 1;
    o->alpha = 0.6f;
    bool beam_given = false, alpha_given = false, max_new_given = false, half_given = false;
    opterr = 0;
    int c;
    unsigned long long v;
    char *end;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_MODEL: o->model = optarg; break;
        case O_DEVICE: o->device = optarg; break;
        case O_SRC: o->src = optarg; break;
        case O_TGT: o->tgt = optarg; break;
        case O_SRC_MASK: o->src_mask = optarg; break;
        case O_OUTPUT: o->output = optarg; break;
        case O_JSON: o->json = true; break;
        case O_HALF_CACHE: o->half_cache = half_given = true; break;
        case O_MAX_NEW:
            if (!parse_count(optarg, 1u << 20, &v) || v == 0)
                return usage_error("--max-new needs a positive integer (at most 1048576), not "
                                   "'%s'",
                                   optarg);
            o->max_new = (size_t)v, max_new_given = true;
            break;
        case O_BEAM:
            if (!parse_count(optarg, 256, &v) || v == 0)
                return usage_error("--beam needs an integer from 1 to 256, not '%s'", optarg);
            o->beam = (size_t)v, beam_given = true;
            break;
        case O_ALPHA: {
            float a = strtof(optarg, &end);
            if (!optarg[0] || *end || !isfinite(a) || a < 0 || a > 10)
                return usage_error("--alpha needs a number from 0 to 10, not '%s'", optarg);
            o->alpha = a, alpha_given = true;
            break;
        }
        case 'h':
        case O_HELP: usage(stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (!o->model)
        return usage_error("--model FILE is required");
    if (!o->src)
        return usage_error("--src SRC.npy is required");
    if (o->tgt && (beam_given || alpha_given || max_new_given || half_given))
        return usage_error("--tgt runs a teacher-forced forward: --max-new, --beam, --alpha and "
                           "--half-cache are for generation");
    if (o->tgt && !o->output)
        return usage_error("--tgt writes logits [B, T, V]: give --output OUT.npy");
    int rc = cli_check_output("--output", o->output);
    if (rc >= 0)
        return rc;
    const char *const names[4] = {"model", "src", "tgt", "src-mask"};
    const char *const paths[4] = {o->model, o->src, o->tgt, o->src_mask};
    return refuse_output_over_inputs(o->output, names, paths, 4);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* ---- SIGINT: stop generating, write nothing, exit 130 ---- */

static volatile sig_atomic_t interrupted;

static void on_sigint(int signo)
{
    (void)signo;
    interrupted = 1;
}

/* Catches SIGINT unless it is ignored (a background job of a non-interactive shell, nohup). */
static void catch_sigint(void)
{
    struct sigaction old, sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sa.sa_flags = SA_RESTART; /* the OpenCL driver's system calls go on; the next step stops */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGINT, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
        sigaction(SIGINT, &sa, NULL);
}

static int interrupted_exit(const char *when)
{
    fprintf(stderr, "generate: interrupted %s: no output written\n", when);
    return EXIT_INTERRUPTED;
}

/* The progress line on a terminal, and the SIGINT check after every step. */
typedef struct progress {
    bool shown;    /* stderr is a terminal */
    bool printed;  /* a line is on it */
    double start, last;
    size_t step, max_new;
} progress;

static int on_step(void *user, size_t step, size_t max_new, size_t sequences)
{
    progress *p = user;
    p->step = step, p->max_new = max_new;
    double now = now_s();
    if (p->shown && (now - p->last >= 0.5 || step == max_new)) {
        double elapsed = now - p->start;
        fprintf(stderr, "\rgenerate: %zu of %zu tokens x %zu sequences, %.1f tokens/s, %.0f s "
                        "(Ctrl-C stops)   ",
                step, max_new, sequences, elapsed > 0 ? (double)(step * sequences) / elapsed : 0.0,
                elapsed);
        fflush(stderr);
        p->last = now;
        p->printed = true;
    }
    return interrupted != 0;
}

static void progress_end(progress *p)
{
    if (p->printed)
        fputc('\n', stderr);
    p->printed = false;
}

/* The inputs, read and checked against each other and the model. */
typedef struct inputs {
    clattn_npy_array *src, *tgt, *mask;
    uint8_t *padding; /* [B, S] or NULL */
    size_t batch, src_len, tgt_len;
    bool floats;      /* a model of float inputs: src [B, S, E], tgt [B, T, E] in ->f32 */
} inputs;

static void inputs_free(inputs *in)
{
    clattn_npy_array_destroy(&in->src);
    clattn_npy_array_destroy(&in->tgt);
    clattn_npy_array_destroy(&in->mask);
    free(in->padding);
}

static int read_ids(const char *option, const char *path, clattn_npy_array **out)
{
    if (clattn_npy_read_i64(out, path) != CLATTN_OK)
        return runtime_error("--%s: %s", option, clattn_last_error(NULL));
    if ((*out)->ndim != 2 || (*out)->shape[0] == 0 || (*out)->shape[1] == 0)
        return runtime_error("--%s: %s must be a non-empty [B, length] array of token ids, not "
                             "%d-dimensional with %zu elements",
                             option, path, (*out)->ndim, (*out)->numel);
    return 0;
}

/* A model of float inputs: a non-empty [B, length, E] array. */
static int read_floats(const char *option, const char *path, size_t E, clattn_npy_array **out)
{
    if (clattn_npy_read_f32(out, path) != CLATTN_OK)
        return runtime_error("--%s: %s", option, clattn_last_error(NULL));
    const clattn_npy_array *a = *out;
    if (a->ndim != 3 || a->shape[0] == 0 || a->shape[1] == 0 || a->shape[2] != E)
        return runtime_error("--%s: %s must be a non-empty float array [B, length, %zu] (the "
                             "model has no embeddings: it takes vectors of d_model %zu), not "
                             "%d-dimensional with %zu elements",
                             option, path, E, E, a->ndim, a->numel);
    return 0;
}

static int check_ids(const char *option, const clattn_npy_array *a, size_t vocab)
{
    for (size_t i = 0; i < a->numel; i++)
        if (a->i64[i] < 0 || (uint64_t)a->i64[i] >= vocab)
            return runtime_error("--%s: id %lld at [%zu, %zu] is outside the vocabulary "
                                 "[0, %zu)",
                                 option, (long long)a->i64[i], i / a->shape[1], i % a->shape[1],
                                 vocab);
    return 0;
}

static int read_inputs(const options *o, const clattn_transformer_info *info, inputs *in)
{
    memset(in, 0, sizeof(*in));
    in->floats = info->src_vocab == 0;
    int rc = in->floats ? read_floats("src", o->src, info->d_model, &in->src)
                        : read_ids("src", o->src, &in->src);
    if (rc)
        return rc;
    in->batch = in->src->shape[0], in->src_len = in->src->shape[1];
    if (!in->floats && (rc = check_ids("src", in->src, info->src_vocab)))
        return rc;
    if (o->tgt) {
        if (in->floats ? (rc = read_floats("tgt", o->tgt, info->d_model, &in->tgt))
                       : ((rc = read_ids("tgt", o->tgt, &in->tgt)) ||
                          (rc = check_ids("tgt", in->tgt, info->tgt_vocab))))
            return rc;
        if (in->tgt->shape[0] != in->batch)
            return runtime_error("--tgt has %zu sentences but --src %zu", in->tgt->shape[0],
                                 in->batch);
        in->tgt_len = in->tgt->shape[1];
    }
    if (o->src_mask) {
        if (clattn_npy_read_i64(&in->mask, o->src_mask) != CLATTN_OK)
            return runtime_error("--src-mask: %s", clattn_last_error(NULL));
        if (in->mask->ndim != 2 || in->mask->shape[0] != in->batch ||
            in->mask->shape[1] != in->src_len)
            return runtime_error("--src-mask must have the source's shape [%zu, %zu]", in->batch,
                                 in->src_len);
        if (!(in->padding = malloc(in->mask->numel)))
            return runtime_error("out of memory");
        for (size_t i = 0; i < in->mask->numel; i++)
            in->padding[i] = in->mask->i64[i] != 0;
    }
    return 0;
}

static void print_ids(const int64_t *ids, size_t n)
{
    putchar('[');
    for (size_t i = 0; i < n; i++)
        printf("%s%lld", i ? ", " : "", (long long)ids[i]);
    putchar(']');
}

/* A float model's forward: src and tgt uploaded, out [B, T, width]. */
static clattn_status forward_floats(clattn_context *ctx, clattn_transformer *model,
                                    const inputs *in, size_t E, clattn_tensor *out)
{
    clattn_tensor *src = NULL, *tgt = NULL;
    size_t src_shape[3] = {in->batch, in->src_len, E}, tgt_shape[3] = {in->batch, in->tgt_len, E};
    clattn_status status;
    if (!(status = clattn_tensor_create(ctx, &src, 3, src_shape)) &&
        !(status = clattn_tensor_create(ctx, &tgt, 3, tgt_shape)) &&
        !(status = clattn_tensor_write(src, in->src->f32, in->src->numel)) &&
        !(status = clattn_tensor_write(tgt, in->tgt->f32, in->tgt->numel)))
        status = clattn_transformer_forward_float(model, src, in->padding, tgt, out);
    clattn_tensor_destroy(&src);
    clattn_tensor_destroy(&tgt);
    return status;
}

/* Teacher-forced logits [B, T, V] (a float model without generator: the decoder output
 * [B, T, E]) into --output. */
static int forward(const options *o, clattn_context *ctx, clattn_transformer *model,
                   const clattn_transformer_info *info, const inputs *in, double *seconds)
{
    size_t width = info->tgt_vocab ? info->tgt_vocab : info->d_model;
    size_t shape[3] = {in->batch, in->tgt_len, width};
    size_t count = shape[0] * shape[1] * shape[2];
    clattn_tensor *logits = NULL;
    float *host = NULL;
    int rc = 0;
    if (clattn_tensor_create(ctx, &logits, 3, shape) != CLATTN_OK)
        return runtime_error("output [%zu, %zu, %zu]: %s", shape[0], shape[1], shape[2],
                             clattn_last_error(ctx));
    double start = now_s();
    clattn_status status = CLATTN_OK;
    if (!(host = malloc(count * sizeof(float))))
        rc = runtime_error("out of memory for %zu outputs", count);
    else if ((status = in->floats ? forward_floats(ctx, model, in, info->d_model, logits)
                                  : clattn_transformer_forward(model, in->src->i64, in->batch,
                                                               in->src_len, in->padding,
                                                               in->tgt->i64, in->tgt_len,
                                                               logits)) != CLATTN_OK ||
             clattn_tensor_read(logits, host, count) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(ctx));
    *seconds = now_s() - start;
    if (!rc && interrupted)
        rc = interrupted_exit("before writing the output");
    if (!rc && clattn_npy_write_f32(o->output, host, 3, shape) != CLATTN_OK)
        rc = runtime_error("--output: %s", clattn_last_error(NULL));
    free(host);
    clattn_tensor_destroy(&logits);
    return rc;
}

/* The generated ids: [B, width] rows, lengths[b] of them used, and each result's score. */
typedef struct generated {
    int64_t *ids;
    size_t *lengths, width, tokens;
    double *scores;
} generated;

/* Generation into g; with --output, the ids [B, L] (L the longest output, at least 1) right-padded
 * with pad_id go to the file. SIGINT stops it: exit 130, nothing written. */
static int generate(const options *o, clattn_context *ctx, clattn_transformer *model,
                    const inputs *in, double *seconds, generated *g)
{
    clattn_generate_params params;
    clattn_generate_params_default(&params);
    params.max_new = o->max_new ? o->max_new : in->src_len + 50;
    params.beam = o->beam;
    params.alpha = o->alpha;
    params.half_cache = o->half_cache;
    g->width = params.max_new;
    g->ids = malloc(in->batch * g->width * sizeof(int64_t));
    g->lengths = malloc(in->batch * sizeof(size_t));
    g->scores = malloc(in->batch * sizeof(double));
    if (!g->ids || !g->lengths || !g->scores)
        return runtime_error("out of memory for %zu x %zu ids", in->batch, g->width);
    progress p = {isatty(STDERR_FILENO) != 0, false, now_s(), 0.0, 0, params.max_new};
    params.scores = g->scores;
    params.progress = on_step;
    params.progress_user_data = &p;
    if (interrupted)
        return interrupted_exit("before generating");
    double start = now_s();
    p.start = start;
    clattn_status status = clattn_transformer_generate(model, in->src->i64, in->batch,
                                                       in->src_len, in->padding, &params, g->ids,
                                                       g->lengths);
    *seconds = now_s() - start;
    progress_end(&p);
    if (status == CLATTN_ERROR_TOO_LARGE)
        return runtime_error("%s (a smaller --max-new, --beam or batch fits)",
                             clattn_last_error(ctx));
    if (status != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(ctx));
    if (interrupted) {
        char when[96];
        snprintf(when, sizeof(when), "after %zu of at most %zu tokens", p.step, p.max_new);
        return interrupted_exit(when);
    }
    size_t longest = 1;
    for (size_t b = 0; b < in->batch; b++) {
        g->tokens += g->lengths[b];
        longest = g->lengths[b] > longest ? g->lengths[b] : longest;
    }
    if (!o->output)
        return 0;
    for (size_t b = 0; b < in->batch; b++)
        memmove(g->ids + b * longest, g->ids + b * g->width, longest * sizeof(int64_t));
    g->width = longest;
    /* written through a temporary file renamed over --output: never a partial file */
    if (clattn_npy_write_i64(o->output, g->ids, 2, (size_t[]){in->batch, longest}) != CLATTN_OK)
        return runtime_error("--output: %s", clattn_last_error(NULL));
    return 0;
}

static void print_all_ids(const generated *g, size_t batch, bool json)
{
    for (size_t b = 0; b < batch; b++) {
        if (json && b)
            printf(", ");
        print_ids(g->ids + b * g->width, g->lengths[b]);
        if (!json)
            putchar('\n');
    }
}

static void print_scores(const generated *g, size_t batch)
{
    printf("\"scores\": [");
    for (size_t b = 0; b < batch; b++) {
        if (isfinite(g->scores[b]))
            printf("%s%.10g", b ? ", " : "", g->scores[b]);
        else
            printf("%snull", b ? ", " : "");
    }
    printf("], ");
}

static int run(const options *o)
{
    clattn_context *ctx = NULL;
    if (cli_context_create(o->device, &ctx))
        return EXIT_RUNTIME;
    clattn_transformer *model = NULL;
    clattn_transformer_info info;
    inputs in = {0};
    int rc = 0;
    double seconds = 0;
    generated g = {0};
    if (clattn_transformer_load(ctx, &model, o->model) != CLATTN_OK ||
        clattn_transformer_get_info(model, &info) != CLATTN_OK)
        rc = runtime_error("--model: %s", clattn_last_error(ctx));
    if (!rc && info.src_vocab == 0 && !o->tgt)
        rc = usage_error("--model %s has no embeddings: it takes float inputs and runs the "
                         "teacher-forced forward only (nothing to generate from): give --tgt "
                         "TGT.npy, float32 [B, T, %zu], and --output OUT.npy",
                         o->model, info.d_model);
    if (!rc)
        rc = read_inputs(o, &info, &in);
    if (!rc)
        rc = o->tgt ? forward(o, ctx, model, &info, &in, &seconds)
                    : generate(o, ctx, model, &in, &seconds, &g);
    if (!rc && !o->json && !o->tgt && !o->output)
        print_all_ids(&g, in.batch, false);
    if (!rc && o->json) {
        printf("{");
        if (!o->tgt && !o->output) {
            printf("\"ids\": [");
            print_all_ids(&g, in.batch, true);
            printf("], ");
        }
        if (!o->tgt)
            print_scores(&g, in.batch);
        clattn_device_info dev;
        clattn_context_device_info(ctx, &dev);
        printf("\"model\": ");
        print_json_string(o->model);
        printf(", \"device\": ");
        print_json_string(dev.name);
        printf(", \"batch\": %zu, \"src_len\": %zu, ", in.batch, in.src_len);
        if (o->tgt)
            printf("\"tgt_len\": %zu, ", in.tgt_len);
        else
            printf("\"beam\": %zu, \"half_cache\": %s, \"generated_tokens\": %zu, "
                   "\"tokens_per_s\": %.1f, ",
                   o->beam, o->half_cache ? "true" : "false", g.tokens,
                   seconds > 0 ? (double)g.tokens / seconds : 0.0);
        if (o->output) {
            printf("\"output\": ");
            print_json_string(o->output);
            printf(", ");
        }
        printf("\"seconds\": %.4f}\n", seconds);
    }
    free(g.ids);
    free(g.lengths);
    free(g.scores);
    inputs_free(&in);
    clattn_transformer_destroy(&model);
    clattn_context_destroy(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("generate");
    catch_sigint();
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return run(&o);
}
