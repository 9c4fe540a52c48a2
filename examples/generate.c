/*
 * generate: runs an encoder–decoder Transformer model file (nn.Transformer with embeddings and a
 * generator, clattn/transformer.h) on an OpenCL device: teacher-forced logits with --tgt, else
 * generation by greedy decoding or beam search.
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error; every error names its
 * cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"

#include <getopt.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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
            "source and target embeddings and a generator; see clattn/transformer.h).\n"
            "\n"
            "  --model FILE       the model file\n"
            "  --device SPEC      gpu, cpu, P:D, or part of a device name (default: $CLATTN_DEVICE,\n"
            "                     else the first GPU, else the first CPU)\n"
            "  --src SRC.npy      source token ids, an integer array [B, S]\n"
            "  --src-mask PAD.npy source padding [B, S] (bool or integer; nonzero = padding), used\n"
            "                     as src_key_padding_mask and memory_key_padding_mask\n"
            "  --tgt TGT.npy      target token ids [B, T]: teacher-forced forward with the causal\n"
            "                     mask; --output then receives the logits, float32 [B, T, V]\n"
            "  --output OUT.npy   without --tgt: the generated ids, int64 [B, L] right-padded with\n"
            "                     the model's pad_id (without --output: one JSON array per\n"
            "                     sentence on stdout)\n"
            "  --max-new N        tokens to generate at most (default: source length + 50)\n"
            "  --beam K           1: greedy (default); K > 1: beam search with K hypotheses\n"
            "  --alpha A          the GNMT length penalty's exponent (default 0.6)\n"
            "  --half-cache       keep the decoder's keys and values in half floats (half the\n"
            "                     cache memory; outputs within a few 1e-4 of the float cache's)\n"
            "  --json             one JSON object on stdout: the ids (unless --output), the time,\n"
            "                     tokens/s, the device and the model\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error.\n");
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

/* The inputs, read and checked against each other and the model. */
typedef struct inputs {
    clattn_npy_array *src, *tgt, *mask;
    uint8_t *padding; /* [B, S] or NULL */
    size_t batch, src_len, tgt_len;
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
    int rc = read_ids("src", o->src, &in->src);
    if (rc)
        return rc;
    in->batch = in->src->shape[0], in->src_len = in->src->shape[1];
    if ((rc = check_ids("src", in->src, info->src_vocab)))
        return rc;
    if (o->tgt) {
        if ((rc = read_ids("tgt", o->tgt, &in->tgt)) || (rc = check_ids("tgt", in->tgt, info->tgt_vocab)))
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

/* Teacher-forced logits [B, T, V] into --output. */
static int forward(const options *o, clattn_context *ctx, clattn_transformer *model,
                   const clattn_transformer_info *info, const inputs *in, double *seconds)
{
    size_t shape[3] = {in->batch, in->tgt_len, info->tgt_vocab};
    size_t count = shape[0] * shape[1] * shape[2];
    clattn_tensor *logits = NULL;
    float *host = NULL;
    int rc = 0;
    if (clattn_tensor_create(ctx, &logits, 3, shape) != CLATTN_OK)
        return runtime_error("logits [%zu, %zu, %zu]: %s", shape[0], shape[1], shape[2],
                             clattn_last_error(ctx));
    double start = now_s();
    if (!(host = malloc(count * sizeof(float))))
        rc = runtime_error("out of memory for %zu logits", count);
    else if (clattn_transformer_forward(model, in->src->i64, in->batch, in->src_len, in->padding,
                                        in->tgt->i64, in->tgt_len, logits) != CLATTN_OK ||
             clattn_tensor_read(logits, host, count) != CLATTN_OK)
        rc = runtime_error("%s", clattn_last_error(ctx));
    *seconds = now_s() - start;
    if (!rc && clattn_npy_write_f32(o->output, host, 3, shape) != CLATTN_OK)
        rc = runtime_error("--output: %s", clattn_last_error(NULL));
    free(host);
    clattn_tensor_destroy(&logits);
    return rc;
}

/* The generated ids: [B, width] rows, lengths[b] of them used. */
typedef struct generated {
    int64_t *ids;
    size_t *lengths, width, tokens;
} generated;

/* Generation into g; with --output, the ids [B, L] (L the longest output, at least 1) right-padded
 * with pad_id go to the file. */
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
    if (!g->ids || !g->lengths)
        return runtime_error("out of memory for %zu x %zu ids", in->batch, g->width);
    double start = now_s();
    clattn_status status = clattn_transformer_generate(model, in->src->i64, in->batch,
                                                       in->src_len, in->padding, &params, g->ids,
                                                       g->lengths);
    *seconds = now_s() - start;
    if (status != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(ctx));
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

static int run(const options *o)
{
    clattn_context_params cp;
    clattn_context_params_default(&cp);
    cp.device = o->device;
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, &cp) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    clattn_transformer *model = NULL;
    clattn_transformer_info info;
    inputs in = {0};
    int rc = 0;
    double seconds = 0;
    generated g = {0};
    if (clattn_transformer_load(ctx, &model, o->model) != CLATTN_OK ||
        clattn_transformer_get_info(model, &info) != CLATTN_OK)
        rc = runtime_error("--model: %s", clattn_last_error(ctx));
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
    inputs_free(&in);
    clattn_transformer_destroy(&model);
    clattn_context_destroy(&ctx);
    return rc;
}

int main(int argc, char **argv)
{
    cli_set_program("generate");
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    return run(&o);
}
