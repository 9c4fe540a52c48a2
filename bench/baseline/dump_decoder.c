/*
 * dump_decoder: runs one decoder golden case of tests/golden (dec_* or decpos_*) through the
 * public clattn_decoder_* calls and writes what the library computes, so that two builds can be
 * compared byte for byte (tools/byte-baseline.sh compiles and runs it; it is not a test: it
 * checks nothing against the golden's expected values).
 *
 *   dump_decoder CASE_DIR OUT_PREFIX
 *
 * Writes, float32 [B, T, d_model] each:
 *   OUT_PREFIX-forward-fused.npy    clattn_decoder_forward, the case's masks, the fused path
 *   OUT_PREFIX-forward-unfused.npy  the same on the unfused path
 *   OUT_PREFIX-forward-auto.npy     the same on the automatic path
 * and with incremental decoding (clattn_decoder_step), the target fed in the case's "steps"
 * chunks (one token at a time when the case has none), memory padding as the case has it:
 *   OUT_PREFIX-steps.npy            a float cache
 *   OUT_PREFIX-steps-half.npy       a half-precision cache
 * The configuration comes from the case's meta.json (the keys that tests/test_decoder.c and
 * tests/test_decoder_positions.c read). Exit status 0 on success, 1 on any error (message on
 * stderr), 2 on a usage error.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "clattn/clattn.h"

static void fail(const char *what, clattn_context *ctx)
{
    fprintf(stderr, "dump_decoder: %s: %s\n", what, clattn_last_error(ctx));
    exit(1);
}

static size_t size_of(json_t *meta, const char *key)
{
    return (size_t)json_integer_value(json_object_get(meta, key));
}

static int flag(json_t *meta, const char *key)
{
    return json_is_true(json_object_get(meta, key));
}

/* The case's array NAME as float32, or NULL when the case has no such file. */
static clattn_npy_array *load(const char *dir, const char *name)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fclose(f);
    clattn_npy_array *a = NULL;
    if (clattn_npy_read_f32(&a, path) != CLATTN_OK)
        fail(path, NULL);
    return a;
}

static clattn_tensor *device_tensor(clattn_context *ctx, int ndim, const size_t *shape,
                                    const float *data)
{
    clattn_tensor *t = NULL;
    if (clattn_tensor_create(ctx, &t, ndim, shape) != CLATTN_OK)
        fail("clattn_tensor_create", ctx);
    if (data && clattn_tensor_write(t, data, clattn_tensor_numel(t)) != CLATTN_OK)
        fail("clattn_tensor_write", ctx);
    return t;
}

static void write_out(const char *prefix, const char *suffix, const float *data,
                      const size_t *shape)
{
    char path[4096];
    snprintf(path, sizeof(path), "%s-%s.npy", prefix, suffix);
    if (clattn_npy_write_f32(path, data, 3, shape) != CLATTN_OK)
        fail(path, NULL);
}

static const clattn_host_tensor *lookup(void *user, const char *name)
{
    static clattn_host_tensor view;
    const clattn_safetensors_tensor *t = clattn_safetensors_find(user, name);
    if (!t)
        return NULL;
    memset(&view, 0, sizeof(view));
    view.data = t->data;
    view.ndim = t->ndim;
    for (int d = 0; d < t->ndim && d < CLATTN_MAX_DIMS; d++)
        view.shape[d] = t->shape[d];
    return &view;
}

static clattn_decoder *case_decoder(clattn_context *ctx, const char *dir, json_t *meta)
{
    clattn_decoder_config cfg;
    clattn_decoder_config_default(&cfg, size_of(meta, "d_model"), size_of(meta, "nhead"),
                                  size_of(meta, "num_layers"), size_of(meta, "dim_feedforward"));
    const char *act = json_string_value(json_object_get(meta, "activation"));
    if (act && strcmp(act, "gelu") == 0)
        cfg.activation = CLATTN_ACTIVATION_GELU;
    else if (act && strcmp(act, "relu") != 0) {
        fprintf(stderr, "dump_decoder: %s: activation \"%s\" unknown here\n", dir, act);
        exit(1);
    }
    cfg.num_kv_heads = size_of(meta, "num_kv_heads");
    cfg.norm_first = flag(meta, "norm_first");
    cfg.final_norm = flag(meta, "final_norm");
    cfg.layer_norm_eps = (float)json_number_value(json_object_get(meta, "layer_norm_eps"));
    const char *positions = json_string_value(json_object_get(meta, "positions"));
    if (positions && strcmp(positions, "alibi") == 0) {
        cfg.alibi = 1;
    } else if (positions && strcmp(positions, "rope") == 0) {
        cfg.rope_theta = (float)json_number_value(json_object_get(meta, "rope_theta"));
        cfg.rotary_dim = (uint32_t)size_of(meta, "rotary_dim");
        cfg.rope_interleaved = (uint8_t)flag(meta, "rope_interleaved");
    } else if (positions) {
        fprintf(stderr, "dump_decoder: %s: positions \"%s\" unknown here\n", dir, positions);
        exit(1);
    }
    clattn_decoder *dec = NULL;
    if (clattn_decoder_create(ctx, &dec, &cfg) != CLATTN_OK)
        fail("clattn_decoder_create", ctx);
    char file[4096];
    snprintf(file, sizeof(file), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    if (clattn_safetensors_read(&st, file) != CLATTN_OK)
        fail(file, NULL);
    if (clattn_decoder_load_weights(dec, lookup, st) != CLATTN_OK)
        fail("clattn_decoder_load_weights", ctx);
    clattn_safetensors_destroy(&st);
    return dec;
}

/* tgt [B, T, E] through a new state in the case's steps (1 token each without any). */
static float *decode_in_steps(clattn_context *ctx, clattn_decoder *dec, json_t *meta,
                              const float *tgt, const size_t *shape, clattn_tensor *memory,
                              clattn_tensor *memory_padding, int half_cache)
{
    size_t B = shape[0], T = shape[1], E = shape[2];
    clattn_decoder_state_params sp;
    clattn_decoder_state_params_default(&sp, B, T);
    sp.half_cache = half_cache;
    clattn_decoder_state *st = NULL;
    if (clattn_decoder_state_create_with(dec, &st, &sp) != CLATTN_OK)
        fail("clattn_decoder_state_create_with", ctx);
    if (clattn_decoder_state_set_memory(st, memory, memory_padding) != CLATTN_OK)
        fail("clattn_decoder_state_set_memory", ctx);
    float *out = malloc(B * T * E * sizeof(float));
    float *rows = malloc(B * T * E * sizeof(float));
    if (!out || !rows) {
        fprintf(stderr, "dump_decoder: out of memory\n");
        exit(1);
    }
    json_t *steps = json_object_get(meta, "steps");
    size_t t0 = 0;
    for (size_t s = 0; t0 < T; s++) {
        size_t n = json_array_size(steps) ? (size_t)json_integer_value(json_array_get(steps, s))
                                          : 1;
        if (n == 0 || t0 + n > T) {
            fprintf(stderr, "dump_decoder: the case's steps do not add up to tgt_len\n");
            exit(1);
        }
        for (size_t b = 0; b < B; b++)
            memcpy(rows + b * n * E, tgt + (b * T + t0) * E, n * E * sizeof(float));
        clattn_tensor *x = device_tensor(ctx, 3, (size_t[]){B, n, E}, rows);
        clattn_tensor *y = device_tensor(ctx, 3, (size_t[]){B, n, E}, NULL);
        if (clattn_decoder_step(st, x, y) != CLATTN_OK)
            fail("clattn_decoder_step", ctx);
        if (clattn_tensor_read(y, rows, B * n * E) != CLATTN_OK)
            fail("clattn_tensor_read", ctx);
        for (size_t b = 0; b < B; b++)
            memcpy(out + (b * T + t0) * E, rows + b * n * E, n * E * sizeof(float));
        clattn_tensor_destroy(&x), clattn_tensor_destroy(&y);
        t0 += n;
    }
    free(rows);
    clattn_decoder_state_destroy(&st);
    return out;
}

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: dump_decoder CASE_DIR OUT_PREFIX\n");
        return 2;
    }
    const char *dir = argv[1], *prefix = argv[2];
    char file[4096];
    snprintf(file, sizeof(file), "%s/meta.json", dir);
    json_error_t error;
    json_t *meta = json_load_file(file, 0, &error);
    if (!meta) {
        fprintf(stderr, "dump_decoder: %s: %s\n", file, error.text);
        return 1;
    }
    clattn_context *ctx = NULL;
    if (clattn_context_create(&ctx, NULL) != CLATTN_OK)
        fail("clattn_context_create", NULL);
    clattn_decoder *dec = case_decoder(ctx, dir, meta);
    clattn_npy_array *tgt = load(dir, "tgt.npy"), *memory = load(dir, "memory.npy");
    if (!tgt || !memory || tgt->ndim != 3 || memory->ndim != 3) {
        fprintf(stderr, "dump_decoder: %s needs tgt.npy and memory.npy [B, T|S, E]\n", dir);
        exit(1);
    }
    clattn_npy_array *tkp = load(dir, "tgt_key_padding_mask.npy");
    clattn_npy_array *mkp = load(dir, "memory_key_padding_mask.npy");
    clattn_tensor *t_tgt = device_tensor(ctx, 3, tgt->shape, tgt->f32);
    clattn_tensor *t_mem = device_tensor(ctx, 3, memory->shape, memory->f32);
    clattn_tensor *t_out = device_tensor(ctx, 3, tgt->shape, NULL);
    clattn_tensor *t_tkp = tkp ? device_tensor(ctx, 2, tkp->shape, tkp->f32) : NULL;
    clattn_tensor *t_mkp = mkp ? device_tensor(ctx, 2, mkp->shape, mkp->f32) : NULL;
    float *host = malloc(tgt->numel * sizeof(float));
    if (!host) {
        fprintf(stderr, "dump_decoder: out of memory\n");
        exit(1);
    }

    /* dec_* cases say "causal"; decpos_* cases are causal (they decode). */
    json_t *causal = json_object_get(meta, "causal");
    clattn_decoder_forward_params params;
    clattn_decoder_forward_params_default(&params);
    params.tgt_is_causal = causal ? json_is_true(causal) : 1;
    params.tgt_key_padding_mask = t_tkp;
    params.memory_key_padding_mask = t_mkp;
    static const struct {
        clattn_attention_path path;
        const char *name;
    } paths[] = {{CLATTN_PATH_FUSED, "forward-fused"},
                 {CLATTN_PATH_UNFUSED, "forward-unfused"},
                 {CLATTN_PATH_AUTO, "forward-auto"}};
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        params.path = paths[p].path;
        if (clattn_decoder_forward(dec, t_tgt, t_mem, t_out, &params) != CLATTN_OK)
            fail("clattn_decoder_forward", ctx);
        if (clattn_tensor_read(t_out, host, tgt->numel) != CLATTN_OK)
            fail("clattn_tensor_read", ctx);
        write_out(prefix, paths[p].name, host, tgt->shape);
    }
    if (params.tgt_is_causal) { /* incremental decoding is causal by nature */
        for (int half = 0; half < 2; half++) {
            float *steps = decode_in_steps(ctx, dec, meta, tgt->f32, tgt->shape, t_mem, t_mkp,
                                           half);
            write_out(prefix, half ? "steps-half" : "steps", steps, tgt->shape);
            free(steps);
        }
    }

    free(host);
    clattn_tensor_destroy(&t_tgt), clattn_tensor_destroy(&t_mem), clattn_tensor_destroy(&t_out);
    clattn_tensor_destroy(&t_tkp), clattn_tensor_destroy(&t_mkp);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&memory);
    clattn_npy_array_destroy(&tkp), clattn_npy_array_destroy(&mkp);
    clattn_decoder_destroy(&dec);
    clattn_context_destroy(&ctx);
    json_decref(meta);
    return 0;
}
