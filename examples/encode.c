/*
 * encode: runs a Transformer encoder on an OpenCL device (usage: docs/library.md, `encode --help`).
 *
 * Exit status: 0 on success, 2 on a usage error, 1 on a runtime error; every error names its
 * cause on stderr.
 */
#include <clattn/clattn.h>

#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


typedef struct options {
    const char *device;
    int precision; /* clattn_precision (--precision) */
    bool list_devices;
    const char *model;
    const char *preset;
    unsigned long long seed;
    const char *input;
    const char *tokens;
    size_t batch, seq;
    bool batch_given, seq_given;
    const char *mask;
    bool causal;
    const char *positional; /* NULL: the model's */
    const char *output;
    unsigned long repeat;
    bool profile;
    bool json;
} options;

static void usage(FILE *out)
{
    fprintf(out,
            "usage: encode [--device SPEC] [--list-devices] [--precision fp32|bf16|int8]\n"
            "              [--model FILE.safetensors | --config PRESET] [--seed S]\n"
            "              [--input X.npy | --tokens IDS.npy | --batch B --seq N]\n"
            "              [--mask PAD.npy] [--causal] [--positional sinusoidal|none]\n"
            "              [--output Y.npy] [--repeat R] [--profile] [--json]\n"
            "\n"
            "Runs a Transformer encoder. Without arguments: the paper's base configuration with\n"
            "seeded random weights on a seeded random batch (--batch 2 --seq 128).\n"
            "\n"
            "  --device SPEC       gpu, cpu, P:D, or part of a device name (default: $CLATTN_DEVICE,\n"
            "                      else the first GPU, else the first CPU)\n"
            "  --list-devices      print every OpenCL device and its facts, then exit\n"
            "  --precision P       fp32 (default), bf16 or int8: the GEMMs' number format (CPU\n"
            "                      devices with oneDNN; bf16 needs AVX512_BF16 or AMX, int8 VNNI\n"
            "                      or AMX)\n"
            "  --model FILE        a safetensors model (tools/export_torch.py writes one)\n"
            "  --config PRESET     a Table 3 configuration with seeded random weights:\n"
            "                      ");
    const char *const *names = clattn_encoder_preset_names();
    for (size_t i = 0; names[i]; i++)
        fprintf(out, "%s%s", names[i], names[i + 1] ? (i % 8 == 7 ? ",\n                      " : ", ") : "\n");
    fprintf(out,
            "  --seed S            seed of the random weights and input (default 0)\n"
            "  --input X.npy       float32 [batch, seq, d_model] or [seq, d_model]\n"
            "  --tokens IDS.npy    integer token ids [batch, seq] or [seq]; needs embedding.weight\n"
            "  --batch B --seq N   size of the random input (default 2 and 128)\n"
            "  --mask PAD.npy      key-padding mask [batch, seq]: true/nonzero = padding\n"
            "  --causal            each position attends only to itself and earlier ones\n"
            "  --positional P      sinusoidal or none: overrides the model's setting\n"
            "  --output Y.npy      write the float32 [batch, seq, d_model] result\n"
            "                      (a new file, or a regular file replaced whole once the\n"
            "                      result is ready; a link to one is followed; a FIFO, device\n"
            "                      or directory is refused and left unchanged)\n"
            "  --repeat R          R timed forward passes after one warm-up; report the median\n"
            "  --profile           per-kernel time table (OpenCL profiling events)\n"
            "  --json              one JSON object on stdout instead of text\n"
            "\n"
            "Exit status: 0 success, 2 usage error, 1 runtime error.\n");
}




/* Returns -1 when the options are good, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    enum { O_DEVICE = 256, O_PRECISION, O_LIST, O_MODEL, O_CONFIG, O_SEED, O_INPUT, O_TOKENS, O_BATCH, O_SEQ,
           O_MASK, O_CAUSAL, O_POSITIONAL, O_OUTPUT, O_REPEAT, O_PROFILE, O_JSON, O_HELP };
    static const struct option longopts[] = {
        {"device", required_argument, NULL, O_DEVICE},
        {"precision", required_argument, NULL, O_PRECISION},
        {"list-devices", no_argument, NULL, O_LIST},
        {"model", required_argument, NULL, O_MODEL},
        {"config", required_argument, NULL, O_CONFIG},
        {"seed", required_argument, NULL, O_SEED},
        {"input", required_argument, NULL, O_INPUT},
        {"tokens", required_argument, NULL, O_TOKENS},
        {"batch", required_argument, NULL, O_BATCH},
        {"seq", required_argument, NULL, O_SEQ},
        {"mask", required_argument, NULL, O_MASK},
        {"causal", no_argument, NULL, O_CAUSAL},
        {"positional", required_argument, NULL, O_POSITIONAL},
        {"output", required_argument, NULL, O_OUTPUT},
        {"repeat", required_argument, NULL, O_REPEAT},
        {"profile", no_argument, NULL, O_PROFILE},
        {"json", no_argument, NULL, O_JSON},
        {"help", no_argument, NULL, O_HELP},
        {NULL, 0, NULL, 0},
    };
    memset(o, 0, sizeof(*o));
    o->batch = 2;
    o->seq = 128;
    opterr = 0;
    int c;
    unsigned long long v;
    while ((c = getopt_long(argc, argv, ":h", longopts, NULL)) != -1) {
        switch (c) {
        case O_DEVICE: o->device = optarg; break;
        case O_PRECISION:
            if (!cli_parse_precision(optarg, &o->precision))
                return usage_error("--precision is fp32, bf16 or int8, not \"%s\"", optarg);
            break;
        case O_LIST: o->list_devices = true; break;
        case O_MODEL: o->model = optarg; break;
        case O_CONFIG: o->preset = optarg; break;
        case O_SEED:
            if (!parse_count(optarg, ~0ull, &o->seed))
                return usage_error("--seed needs a non-negative integer, not '%s'", optarg);
            break;
        case O_INPUT: o->input = optarg; break;
        case O_TOKENS: o->tokens = optarg; break;
        case O_BATCH:
        case O_SEQ:
            if (!parse_count(optarg, 1ull << 30, &v) || v == 0)
                return usage_error("--%s needs a positive integer, not '%s'",
                                   c == O_BATCH ? "batch" : "seq", optarg);
            if (c == O_BATCH)
                o->batch = (size_t)v, o->batch_given = true;
            else
                o->seq = (size_t)v, o->seq_given = true;
            break;
        case O_MASK: o->mask = optarg; break;
        case O_CAUSAL: o->causal = true; break;
        case O_POSITIONAL:
            if (strcmp(optarg, "sinusoidal") != 0 && strcmp(optarg, "none") != 0)
                return usage_error("--positional must be sinusoidal or none, not '%s'", optarg);
            o->positional = optarg;
            break;
        case O_OUTPUT: o->output = optarg; break;
        case O_REPEAT:
            if (!parse_count(optarg, 1000000, &v) || v == 0)
                return usage_error("--repeat needs a positive integer, not '%s'", optarg);
            o->repeat = (unsigned long)v;
            break;
        case O_PROFILE: o->profile = true; break;
        case O_JSON: o->json = true; break;
        case 'h':
        case O_HELP: usage(stdout); return 0;
        case ':': return usage_error("option '%s' needs a value", argv[optind - 1]);
        default: return usage_error("unknown option '%s'", argv[optind - 1]);
        }
    }
    if (optind < argc)
        return usage_error("unexpected argument '%s'", argv[optind]);
    if (o->model && o->preset)
        return usage_error("give either --model or --config, not both");
    if (o->input && o->tokens)
        return usage_error("give either --input or --tokens, not both");
    if ((o->input || o->tokens) && (o->batch_given || o->seq_given))
        return usage_error("--batch and --seq size the random input; they do not apply to "
                           "--%s", o->input ? "input" : "tokens");
    int rc = cli_check_output("--output", o->output);
    if (rc >= 0)
        return rc;
    const char *const names[4] = {"model", "input", "tokens", "mask"};
    const char *const paths[4] = {o->model, o->input, o->tokens, o->mask};
    return refuse_output_over_inputs(o->output, names, paths, 4);
}

static int list_devices(void)
{
    size_t count = 0;
    if (clattn_list_devices(NULL, 0, &count) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    clattn_device_info *infos = calloc(count ? count : 1, sizeof(*infos));
    if (!infos)
        return runtime_error("out of memory");
    if (clattn_list_devices(infos, count, &count) != CLATTN_OK) {
        free(infos);
        return runtime_error("%s", clattn_last_error(NULL));
    }
    for (size_t i = 0; i < count; i++) {
        const clattn_device_info *d = &infos[i];
        printf("[%u:%u] %s\n", d->platform_index, d->device_index, d->name);
        printf("    platform:          %s\n", d->platform_name);
        printf("    vendor:            %s\n", d->vendor);
        printf("    driver version:    %s\n", d->driver_version);
        printf("    OpenCL version:    %s\n", d->opencl_version);
        printf("    type:              %s\n", clattn_device_type_name(d->type));
        printf("    compute units:     %u\n", d->compute_units);
        printf("    max clock:         %u MHz\n", d->max_clock_mhz);
        printf("    global memory:     %.1f MiB\n", (double)d->global_mem_bytes / 1048576.0);
        printf("    local memory:      %.1f KiB (%s)\n", (double)d->local_mem_bytes / 1024.0,
               d->local_mem_is_global ? "emulated in global memory" : "dedicated");
        printf("    max allocation:    %.1f MiB\n", (double)d->max_alloc_bytes / 1048576.0);
        printf("    max work-group:    %zu\n", d->max_work_group_size);
        printf("    fp16:              %s\n", d->fp16 ? "yes" : "no");
        printf("    fp64:              %s\n", d->fp64 ? "yes" : "no");
    }
    if (count == 0)
        printf("no OpenCL devices found\n");
    free(infos);
    return 0;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int compare_doubles(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Everything a run needs, released by run_free. */
typedef struct run {
    options opt;
    clattn_context *ctx;
    clattn_device_info device;
    clattn_encoder *enc;
    clattn_encoder_config cfg;
    const char *config_name;
    size_t batch, seq;
    clattn_npy_array *input_array, *tokens_array, *mask_array;
    float *random_input;
    clattn_tensor *input, *output, *mask;
    double *times;
    double setup_ms;
} run;

static void run_free(run *r)
{
    clattn_npy_array_destroy(&r->input_array);
    clattn_npy_array_destroy(&r->tokens_array);
    clattn_npy_array_destroy(&r->mask_array);
    free(r->random_input);
    free(r->times);
    clattn_tensor_destroy(&r->input);
    clattn_tensor_destroy(&r->output);
    clattn_tensor_destroy(&r->mask);
    clattn_encoder_destroy(&r->enc);
    clattn_context_destroy(&r->ctx);
}

static int build_encoder(run *r)
{
    const options *o = &r->opt;
    if (o->model) {
        if (clattn_encoder_load_file(r->ctx, &r->enc, o->model) != CLATTN_OK)
            return runtime_error("%s", clattn_last_error(r->ctx));
        r->config_name = o->model;
    } else {
        r->config_name = o->preset ? o->preset : "base";
        if (clattn_encoder_preset(r->config_name, &r->cfg) != CLATTN_OK)
            return usage_error("--config: %s", clattn_last_error(NULL));
        if (clattn_encoder_create(r->ctx, &r->enc, &r->cfg) != CLATTN_OK ||
            clattn_encoder_init_random(r->enc, o->seed) != CLATTN_OK)
            return runtime_error("%s", clattn_last_error(r->ctx));
    }
    if (o->positional &&
        clattn_encoder_set_positional(r->enc, strcmp(o->positional, "sinusoidal") == 0
                                                  ? CLATTN_POSITIONAL_SINUSOIDAL
                                                  : CLATTN_POSITIONAL_NONE) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(r->ctx));
    clattn_encoder_get_config(r->enc, &r->cfg);
    return 0;
}

static clattn_tensor *device_tensor(run *r, size_t d0, size_t d1, size_t d2, int ndim,
                                    const float *data)
{
    size_t shape[3] = {d0, d1, d2};
    clattn_tensor *t = NULL;
    if (clattn_tensor_create(r->ctx, &t, ndim, shape) != CLATTN_OK)
        return NULL;
    if (data && clattn_tensor_write(t, data, clattn_tensor_numel(t)) != CLATTN_OK)
        clattn_tensor_destroy(&t);
    return t;
}

/* Formats a shape like numpy: "(2, 10, 64)", "(0,)". */
static const char *shape_text(char *buf, size_t cap, int ndim, const size_t *shape)
{
    size_t used = (size_t)snprintf(buf, cap, "(");
    for (int d = 0; d < ndim && used < cap; d++)
        used += (size_t)snprintf(buf + used, cap - used, d ? ", %zu" : "%zu", shape[d]);
    if (used < cap)
        snprintf(buf + used, cap - used, ndim == 1 ? ",)" : ")");
    return buf;
}

/* a * b, false on overflow. */
static bool mul_size(size_t a, size_t b, size_t *out)
{
    if (b != 0 && a > SIZE_MAX / b)
        return false;
    *out = a * b;
    return true;
}

/*
 * Checks every buffer a run of r->batch x r->seq needs against the device's limits before any of
 * them (or the random input on the host) is allocated: each buffer at most the device's largest
 * allocation, all of them together at most its global memory, and no byte count overflowing.
 */
static int check_sizes(run *r)
{
    const options *o = &r->opt;
    const clattn_encoder_config *c = &r->cfg;
    size_t tokens, act, hidden, ids;
    bool fits = mul_size(r->batch, r->seq, &tokens) && mul_size(tokens, c->d_model, &act) &&
                mul_size(act, sizeof(float), &act) &&
                mul_size(tokens, c->dim_feedforward, &hidden) &&
                mul_size(hidden, sizeof(float), &hidden) && mul_size(tokens, sizeof(float), &ids);
    if (!fits)
        return runtime_error("a batch of [%zu, %zu] is too large: the byte size of its activations "
                             "([%zu, %zu, %zu] and [%zu, %zu, %zu] floats) overflows size_t",
                             r->batch, r->seq, r->batch, r->seq, c->d_model, r->batch, r->seq,
                             c->dim_feedforward);
    /* encode's input and output, the encoder's three activation buffers and its feed-forward
     * layer, the token ids, the mask. */
    struct { const char *what; size_t bytes; bool used; } buffers[] = {
        {"the input", act, !o->tokens},
        {"the output", act, true},
        {"each of the encoder's 3 activation buffers", act, true},
        {"the feed-forward hidden layer", hidden, true},
        {"the token ids", ids, o->tokens != NULL},
        {"the key-padding mask", ids, o->mask != NULL},
    };
    uint64_t total = 0;
    for (size_t i = 0; i < sizeof(buffers) / sizeof(buffers[0]); i++) {
        if (!buffers[i].used)
            continue;
        if (buffers[i].bytes > r->device.max_alloc_bytes)
            return runtime_error("a batch of [%zu, %zu] is too large for the device: %s needs "
                                 "%zu bytes, more than its largest allocation (%llu bytes); use "
                                 "a smaller batch or sequence",
                                 r->batch, r->seq, buffers[i].what, buffers[i].bytes,
                                 (unsigned long long)r->device.max_alloc_bytes);
        uint64_t times = i == 2 ? 3 : 1, bytes = buffers[i].bytes;
        uint64_t add = bytes > UINT64_MAX / times ? UINT64_MAX : bytes * times;
        total = total > UINT64_MAX - add ? UINT64_MAX : total + add;
    }
    if (total > r->device.global_mem_bytes)
        return runtime_error("a batch of [%zu, %zu] is too large for the device: its buffers need "
                             "%llu bytes, more than its global memory (%llu bytes); use a smaller "
                             "batch or sequence",
                             r->batch, r->seq, (unsigned long long)total,
                             (unsigned long long)r->device.global_mem_bytes);
    return 0;
}

static int load_inputs(run *r)
{
    const options *o = &r->opt;
    size_t d = r->cfg.d_model;
    char shape[256];
    int rc;
    if (o->input) {
        if (clattn_npy_read_f32(&r->input_array, o->input) != CLATTN_OK)
            return runtime_error("--input: %s", clattn_last_error(NULL));
        const clattn_npy_array *a = r->input_array;
        shape_text(shape, sizeof(shape), a->ndim, a->shape);
        if (a->ndim != 3 && a->ndim != 2)
            return runtime_error("--input: %s must be float [batch, seq, %zu] or [seq, %zu] for "
                                 "this model (d_model %zu); it has %d dimensions, shape %s",
                                 o->input, d, d, d, a->ndim, shape);
        if (a->shape[a->ndim - 1] != d)
            return runtime_error("--input: %s has shape %s: its last dimension is %zu, but this "
                                 "model's d_model is %zu",
                                 o->input, shape, a->shape[a->ndim - 1], d);
        r->batch = a->ndim == 3 ? a->shape[0] : 1;
        r->seq = a->shape[a->ndim - 2];
        if (r->batch == 0 || r->seq == 0)
            return runtime_error("--input: %s has shape %s: %s is 0; it needs at least one %s",
                                 o->input, shape, r->batch == 0 ? "the batch" : "seq",
                                 r->batch == 0 ? "sequence" : "position");
    } else if (o->tokens) {
        if (r->cfg.vocab_size == 0)
            return runtime_error("--tokens: the model has no token embedding (embedding.weight); "
                                 "give --input instead");
        if (clattn_npy_read_i64(&r->tokens_array, o->tokens) != CLATTN_OK)
            return runtime_error("--tokens: %s", clattn_last_error(NULL));
        const clattn_npy_array *a = r->tokens_array;
        shape_text(shape, sizeof(shape), a->ndim, a->shape);
        if (a->ndim != 2 && a->ndim != 1)
            return runtime_error("--tokens: %s must be integer ids [batch, seq] or [seq], not "
                                 "%d-dimensional (shape %s)", o->tokens, a->ndim, shape);
        r->batch = a->ndim == 2 ? a->shape[0] : 1;
        r->seq = a->shape[a->ndim - 1];
        if (a->numel == 0)
            return runtime_error("--tokens: %s holds no token ids (shape %s): %s is 0", o->tokens,
                                 shape, r->batch == 0 ? "the batch" : "seq");
    } else {
        r->batch = o->batch;
        r->seq = o->seq;
    }
    if ((rc = check_sizes(r)))
        return rc;
    if (!o->input && !o->tokens) {
        size_t n = r->batch * r->seq * d; /* checked by check_sizes */
        r->random_input = malloc(n * sizeof(float));
        if (!r->random_input)
            return runtime_error("out of memory for a random input of %zu floats", n);
        unsigned long long state = o->seed * 2654435761ull + 12345;
        for (size_t i = 0; i < n; i++) { /* uniform(-1, 1), the same on every platform */
            state = state * 6364136223846793005ull + 1442695040888963407ull;
            r->random_input[i] = (float)((double)(state >> 11) / 4503599627370496.0 - 1.0);
        }
    }
    if (!o->tokens) {
        r->input = device_tensor(r, r->batch, r->seq, d, 3,
                                 o->input ? r->input_array->f32 : r->random_input);
        if (!r->input)
            return runtime_error("%s", clattn_last_error(r->ctx));
    }
    if (o->mask) {
        if (clattn_npy_read_f32(&r->mask_array, o->mask) != CLATTN_OK)
            return runtime_error("--mask: %s", clattn_last_error(NULL));
        const clattn_npy_array *m = r->mask_array;
        if (m->numel != r->batch * r->seq || m->ndim < 1 || m->ndim > 2 ||
            m->shape[m->ndim - 1] != r->seq)
            return runtime_error("--mask: %s has shape %s; it must be [batch, seq] = [%zu, %zu]",
                                 o->mask, shape_text(shape, sizeof(shape), m->ndim, m->shape),
                                 r->batch, r->seq);
        r->mask = device_tensor(r, r->batch, r->seq, 0, 2, m->f32);
        if (!r->mask)
            return runtime_error("%s", clattn_last_error(r->ctx));
    }
    r->output = device_tensor(r, r->batch, r->seq, d, 3, NULL);
    if (!r->output)
        return runtime_error("%s", clattn_last_error(r->ctx));
    return 0;
}

static clattn_status forward_once(run *r)
{
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.key_padding_mask = r->mask;
    p.causal = r->opt.causal;
    clattn_status status =
        r->opt.tokens ? clattn_encoder_forward_tokens(r->enc, r->tokens_array->i64, r->batch,
                                                      r->seq, r->output, &p)
                      : clattn_encoder_forward(r->enc, r->input, r->output, &p);
    if (status == CLATTN_OK)
        status = clattn_context_finish(r->ctx);
    return status;
}

static const char *activation_name(clattn_activation a)
{
    return a == CLATTN_ACTIVATION_GELU ? "gelu" : "relu";
}

/* The output's sum and mean |y| over all its values; non_finite counts NaNs and infinities
 * (then the sums are not finite either). */
typedef struct summary {
    double checksum, mean_abs;
    size_t non_finite;
} summary;

static void print_text(run *r, const clattn_stats *stats, double median, const summary *sum,
                       unsigned long timed)
{
    const clattn_encoder_config *c = &r->cfg;
    uint64_t per_pass = stats->total_macs / (timed + 1);
    printf("device:        %s (%s, %s)\n", r->device.name, clattn_device_type_name(r->device.type),
           r->device.platform_name);
    printf("configuration: %s: %zu layers, d_model %zu, %zu heads (d_k %zu, d_v %zu), d_ff %zu, "
           "%s, %s, eps %g, positional %s%s%s\n",
           r->config_name, c->num_layers, c->d_model, c->nhead, c->head_dim_qk, c->head_dim_v,
           c->dim_feedforward, activation_name(c->activation), c->norm_first ? "pre-LN" : "post-LN",
           (double)c->layer_norm_eps,
           c->positional == CLATTN_POSITIONAL_SINUSOIDAL ? "sinusoidal" : "none",
           c->final_norm ? ", final norm" : "", r->opt.causal ? ", causal" : "");
    printf("output:        [%zu, %zu, %zu]\n", r->batch, r->seq, c->d_model);
    printf("checksum:      sum %.6f, mean |y| %.6f", sum->checksum, sum->mean_abs);
    if (sum->non_finite)
        printf(" (%zu non-finite values)", sum->non_finite);
    printf("\n");
    printf("executed:      %llu FLOPs = %.3f GFLOP per forward pass (multiply-adds, fvcore "
           "convention)\n",
           (unsigned long long)per_pass, (double)per_pass * 1e-9);
    if (timed > 0)
        printf("time:          %.2f ms median of %lu forward passes (after one warm-up), "
               "%.2f GFLOP/s\n",
               median, timed, (double)per_pass * 1e-6 / median);
    else
        printf("time:          %.2f ms (one forward pass, including first-use compilation; "
               "use --repeat for steady-state timing)\n",
               median);
    printf("setup:         %.1f ms (context, kernels, weights)\n", r->setup_ms);
    if (r->opt.profile && stats->kernel_count > 0) {
        printf("\nper-kernel time over %lu forward pass%s:\n", timed + 1, timed ? "es" : "");
        printf("  %-28s %10s %12s %8s\n", "kernel", "launches", "total ms", "share");
        for (size_t i = 0; i < stats->kernel_count; i++)
            printf("  %-28s %10llu %12.3f %7.1f%%\n", stats->kernels[i].name,
                   (unsigned long long)stats->kernels[i].launches, stats->kernels[i].total_ms,
                   100.0 * stats->kernels[i].total_ms / stats->total_kernel_ms);
        printf("  %-28s %10s %12.3f\n", "total", "", stats->total_kernel_ms);
    }
}

/* A JSON number, or null for NaN and infinities (which JSON cannot hold). */
static json_t *json_number(double v)
{
    return isfinite(v) ? json_real(v) : json_null();
}

static void print_json(run *r, const clattn_stats *stats, double median, const summary *sum,
                       unsigned long timed)
{
    const clattn_encoder_config *c = &r->cfg;
    uint64_t per_pass = stats->total_macs / (timed + 1);
    json_t *root = json_object();
    json_t *device = json_object();
    json_object_set_new(device, "name", json_string(r->device.name));
    json_object_set_new(device, "platform", json_string(r->device.platform_name));
    json_object_set_new(device, "type", json_string(clattn_device_type_name(r->device.type)));
    json_object_set_new(device, "driver_version", json_string(r->device.driver_version));
    json_object_set_new(root, "device", device);
    json_t *cfg = json_object();
    json_object_set_new(cfg, "name", json_string(r->config_name));
    json_object_set_new(cfg, "num_layers", json_integer((json_int_t)c->num_layers));
    json_object_set_new(cfg, "d_model", json_integer((json_int_t)c->d_model));
    json_object_set_new(cfg, "nhead", json_integer((json_int_t)c->nhead));
    json_object_set_new(cfg, "head_dim_qk", json_integer((json_int_t)c->head_dim_qk));
    json_object_set_new(cfg, "head_dim_v", json_integer((json_int_t)c->head_dim_v));
    json_object_set_new(cfg, "dim_feedforward", json_integer((json_int_t)c->dim_feedforward));
    json_object_set_new(cfg, "activation", json_string(activation_name(c->activation)));
    json_object_set_new(cfg, "norm_first", json_boolean(c->norm_first));
    char eps[32]; /* the float's shortest decimal form, not its double expansion */
    snprintf(eps, sizeof(eps), "%g", (double)c->layer_norm_eps);
    json_object_set_new(cfg, "layer_norm_eps", json_real(strtod(eps, NULL)));
    json_object_set_new(cfg, "final_norm", json_boolean(c->final_norm));
    json_object_set_new(cfg, "positional", json_string(c->positional ? "sinusoidal" : "none"));
    json_object_set_new(cfg, "causal", json_boolean(r->opt.causal));
    json_object_set_new(root, "configuration", cfg);
    json_t *shape = json_pack("[I, I, I]", (json_int_t)r->batch, (json_int_t)r->seq,
                              (json_int_t)c->d_model);
    json_object_set_new(root, "shape", shape);
    json_object_set_new(root, "forward_ms_median", json_number(median));
    json_object_set_new(root, "timed_passes", json_integer((json_int_t)timed));
    json_object_set_new(root, "flops", json_integer((json_int_t)per_pass));
    json_t *by_op = json_object();
    for (int op = 0; op < CLATTN_OP_COUNT; op++)
        json_object_set_new(by_op, clattn_op_name((clattn_op)op),
                            json_integer((json_int_t)(stats->macs[op] / (timed + 1))));
    json_object_set_new(root, "flops_by_operation", by_op);
    json_object_set_new(root, "gflops_per_s", json_number((double)per_pass * 1e-6 / median));
    json_object_set_new(root, "checksum", json_number(sum->checksum));
    json_object_set_new(root, "mean_abs", json_number(sum->mean_abs));
    json_object_set_new(root, "non_finite", json_integer((json_int_t)sum->non_finite));
    json_object_set_new(root, "setup_ms", json_real(r->setup_ms));
    if (r->opt.profile) {
        json_t *kernels = json_array();
        for (size_t i = 0; i < stats->kernel_count; i++)
            json_array_append_new(kernels,
                                  json_pack("{s:s, s:I, s:f}", "name", stats->kernels[i].name,
                                            "launches", (json_int_t)stats->kernels[i].launches,
                                            "total_ms", stats->kernels[i].total_ms));
        json_object_set_new(root, "kernels", kernels);
    }
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (text)
        printf("%s\n", text);
    free(text);
    json_decref(root);
}

/* The library's log: warnings (and notes) go to stderr; errors are dropped here because encode
 * prints every error it gets back itself, so each is printed once. */
static void log_message(void *user_data, clattn_log_level level, const char *message)
{
    (void)user_data;
    if (level >= CLATTN_LOG_ERROR)
        return;
    fprintf(stderr, "encode: %s: %s\n", level == CLATTN_LOG_WARNING ? "warning" : "note", message);
}

static int execute(run *r)
{
    const options *o = &r->opt;
    double start = now_ms();
    clattn_context_params params;
    clattn_context_params_default(&params);
    params.device = o->device;
    params.precision = o->precision;
    params.profiling = o->profile;
    params.log_callback = log_message;
    if (clattn_context_create(&r->ctx, &params) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(NULL));
    clattn_context_device_info(r->ctx, &r->device);
    int rc;
    if ((rc = build_encoder(r)) || (rc = load_inputs(r)))
        return rc;
    r->setup_ms = now_ms() - start;

    /* One pass (the warm-up when repeating), then the timed ones. */
    unsigned long timed = o->repeat;
    r->times = calloc(timed + 1, sizeof(double));
    if (!r->times)
        return runtime_error("out of memory");
    clattn_stats_reset(r->ctx);
    for (unsigned long i = 0; i <= timed; i++) {
        double t0 = now_ms();
        if (forward_once(r) != CLATTN_OK)
            return runtime_error("%s", clattn_last_error(r->ctx));
        r->times[i] = now_ms() - t0;
    }
    double median = r->times[0];
    if (timed > 0) {
        qsort(r->times + 1, timed, sizeof(double), compare_doubles);
        median = timed % 2 ? r->times[1 + timed / 2]
                           : 0.5 * (r->times[timed / 2] + r->times[1 + timed / 2]);
    }
    clattn_stats stats;
    if (clattn_stats_get(r->ctx, &stats) != CLATTN_OK)
        return runtime_error("%s", clattn_last_error(r->ctx));

    size_t n = r->batch * r->seq * r->cfg.d_model; /* checked by check_sizes */
    float *y = malloc(n * sizeof(float));
    if (!y)
        return runtime_error("out of memory for the output");
    if (clattn_tensor_read(r->output, y, n) != CLATTN_OK) {
        free(y);
        return runtime_error("%s", clattn_last_error(r->ctx));
    }
    summary sum = {0.0, 0.0, 0};
    for (size_t i = 0; i < n; i++) {
        sum.checksum += y[i];
        sum.mean_abs += fabs(y[i]);
        sum.non_finite += !isfinite(y[i]);
    }
    sum.mean_abs /= (double)n;
    if (o->output &&
        clattn_npy_write_f32(o->output, y, 3, (size_t[]){r->batch, r->seq, r->cfg.d_model}) !=
            CLATTN_OK) {
        free(y);
        return runtime_error("--output: %s", clattn_last_error(NULL));
    }
    free(y);
    if (sum.non_finite)
        fprintf(stderr, "encode: warning: the output holds %zu non-finite values\n",
                sum.non_finite);
    if (o->json)
        print_json(r, &stats, median, &sum, timed);
    else
        print_text(r, &stats, median, &sum, timed);
    return 0;
}

int main(int argc, char **argv)
{
    cli_set_program("encode");
    run r;
    memset(&r, 0, sizeof(r));
    int rc = parse_options(argc, argv, &r.opt);
    if (rc >= 0)
        return rc;
    if (r.opt.list_devices)
        return list_devices();
    rc = execute(&r);
    run_free(&r);
    return rc;
}
