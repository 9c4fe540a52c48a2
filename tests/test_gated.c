/*
 * The encoder's gated feed-forward (SwiGLU, GeGLU) and layers without biases against PyTorch in
 * float64 (tests/golden/gated, tools/gen_gated_golden.py) on the auto, fused and unfused
 * attention paths, loaded by name and from the file with its metadata (clattn_encoder_load_file);
 * the configuration's checks, sizes and counts.
 */
#include "common/hf_golden.h"
#include "common/test_util.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GATED_DIR GOLDEN_DIR "/gated"

/* A clattn_weight_lookup over a safetensors file that counts the tensors it handed out. */
typedef struct file_lookup {
    const clattn_safetensors *st;
    clattn_host_tensor *t; /* one per tensor of the file: valid until the load returns */
    bool *used;
} file_lookup;

static file_lookup file_lookup_make(const clattn_safetensors *st)
{
    file_lookup l = {st, calloc(st->tensor_count + 1, sizeof(clattn_host_tensor)),
                     calloc(st->tensor_count + 1, sizeof(bool))};
    assert_non_null(l.t);
    assert_non_null(l.used);
    return l;
}

static void file_lookup_free(file_lookup *l)
{
    free(l->t), free(l->used);
}

static const clattn_host_tensor *lookup(void *user, const char *name)
{
    file_lookup *l = user;
    const clattn_safetensors_tensor *s = clattn_safetensors_find(l->st, name);
    if (!s)
        return NULL;
    size_t i = (size_t)(s - l->st->tensors);
    l->used[i] = true;
    clattn_host_tensor *t = &l->t[i];
    t->data = s->data;
    t->ndim = s->ndim;
    for (int d = 0; d < s->ndim; d++)
        t->shape[d] = s->shape[d];
    return t;
}

static size_t config_int(json_t *config, const char *key)
{
    json_t *v = json_object_get(config, key);
    assert_true(json_is_integer(v));
    return (size_t)json_integer_value(v);
}

static clattn_activation activation_named(const char *name)
{
    if (strcmp(name, "relu") == 0)
        return CLATTN_ACTIVATION_RELU;
    if (strcmp(name, "gelu") == 0)
        return CLATTN_ACTIVATION_GELU;
    if (strcmp(name, "gelu_tanh") == 0)
        return CLATTN_ACTIVATION_GELU_TANH;
    assert_string_equal(name, "silu");
    return CLATTN_ACTIVATION_SILU;
}

/* One case on every attention path; returns the largest error. */
static double run_case(clattn_context *ctx, const char *name)
{
    char dir[1024], path[1100];
    snprintf(dir, sizeof(dir), "%s/%s", GATED_DIR, name);
    json_t *meta = hf_golden_load_meta(dir);
    double tol = json_real_value(json_object_get(meta, "tolerance"));
    assert_true(tol > 0.0 && tol <= 1e-5);
    json_t *jc = json_object_get(meta, "config");
    clattn_encoder_config cfg;
    clattn_encoder_config_default(&cfg, config_int(jc, "d_model"), config_int(jc, "nhead"),
                                  config_int(jc, "num_layers"),
                                  config_int(jc, "dim_feedforward"));
    cfg.activation = activation_named(json_string_value(json_object_get(jc, "activation")));
    cfg.ffn_gated = (uint8_t)config_int(jc, "ffn_gated");
    cfg.norm_first = (int)config_int(jc, "norm_first");
    cfg.linear_no_bias = (uint8_t)config_int(jc, "linear_no_bias");
    cfg.norm_no_bias = (uint8_t)config_int(jc, "norm_no_bias");
    cfg.final_norm = (int)config_int(jc, "final_norm");
    cfg.layer_norm_eps = (float)json_real_value(json_object_get(jc, "layer_norm_eps"));

    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, path), CLATTN_OK);
    file_lookup fl = file_lookup_make(st);
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &cfg), CLATTN_OK);
    clattn_status status = clattn_encoder_load_weights(enc, lookup, &fl);
    if (status != CLATTN_OK)
        print_error("%s: %s\n", name, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    /* Every tensor of the file is a weight of this configuration. */
    for (size_t i = 0; i < st->tensor_count; i++) {
        if (!fl.used[i])
            print_error("%s: %s was not loaded\n", name, st->tensors[i].name);
        assert_true(fl.used[i]);
    }

    clattn_npy_array *input = hf_golden_load_npy(dir, "input.npy", false);
    clattn_npy_array *kpm = hf_golden_load_npy(dir, "key_padding_mask.npy", false);
    clattn_npy_array *want = hf_golden_load_npy(dir, "out.npy", false);
    assert_int_equal(input->ndim, 3);
    assert_int_equal(input->shape[2], cfg.d_model);
    size_t B = input->shape[0], N = input->shape[1];
    clattn_tensor *tin = test_tensor_from(ctx, 3, input->shape, input->f32);
    clattn_tensor *tkpm = test_tensor_from(ctx, 2, (size_t[]){B, N}, kpm->f32);
    clattn_tensor *tout = test_tensor_from(ctx, 3, input->shape, NULL);
    static const clattn_attention_path paths[] = {CLATTN_PATH_AUTO, CLATTN_PATH_FUSED,
                                                  CLATTN_PATH_UNFUSED};
    double worst = 0.0;
    for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
        clattn_encoder_forward_params params;
        clattn_encoder_forward_params_default(&params);
        params.key_padding_mask = tkpm;
        params.path = paths[p];
        status = clattn_encoder_forward(enc, tin, tout, &params);
        if (status != CLATTN_OK)
            print_error("%s: %s\n", name, clattn_last_error(ctx));
        assert_int_equal(status, CLATTN_OK);
        float *got = test_tensor_to_host(tout);
        double err = test_max_abs_diff(got, want->f32, want->numel);
        worst = fmax(worst, err);
        if (err > tol)
            print_error("%s, path %d: largest error %.3g\n", name, (int)paths[p], err);
        assert_close(got, want->f32, want->numel, tol);
        free(got);
    }
    /* The same file through clattn_encoder_load_file: the configuration from its metadata. */
    clattn_encoder *from_file = NULL;
    status = clattn_encoder_load_file(ctx, &from_file, path);
    if (status != CLATTN_OK)
        print_error("%s: %s\n", name, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_encoder_config got_cfg;
    assert_int_equal(clattn_encoder_get_config(from_file, &got_cfg), CLATTN_OK);
    assert_int_equal(got_cfg.ffn_gated, cfg.ffn_gated);
    assert_int_equal(got_cfg.linear_no_bias, cfg.linear_no_bias);
    assert_int_equal(got_cfg.norm_no_bias, cfg.norm_no_bias);
    assert_int_equal(got_cfg.activation, cfg.activation);
    assert_int_equal(got_cfg.final_norm, cfg.final_norm);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = tkpm;
    assert_int_equal(clattn_encoder_forward(from_file, tin, tout, &params), CLATTN_OK);
    float *got = test_tensor_to_host(tout);
    worst = fmax(worst, test_max_abs_diff(got, want->f32, want->numel));
    assert_close(got, want->f32, want->numel, tol);
    free(got);
    clattn_encoder_destroy(&from_file);

    clattn_tensor_destroy(&tin), clattn_tensor_destroy(&tkpm), clattn_tensor_destroy(&tout);
    clattn_npy_array_destroy(&input), clattn_npy_array_destroy(&kpm);
    clattn_npy_array_destroy(&want);
    clattn_encoder_destroy(&enc);
    file_lookup_free(&fl);
    clattn_safetensors_destroy(&st);
    json_decref(meta);
    return worst;
}

static void golden_cases_match_pytorch(void **state)
{
    test_fixture *f = *state;
    static const char *const cases[] = {"swiglu_pre_ln",          "geglu_post_ln",
                                        "geglu_tanh_pre_ln",      "swiglu_no_bias_post_ln",
                                        "no_bias_pre_ln",         "linear_no_bias_post_ln",
                                        "silu_post_ln"};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        double err = run_case(f->ctx, cases[c]);
        print_message("    %-24s largest error against PyTorch (float64) %.2e\n", cases[c], err);
    }
}

/* The new fields came out of the reserved bytes: the struct keeps its size. */
static void config_keeps_its_size(void **state)
{
    (void)state;
    if (sizeof(void *) == 8) {
        assert_int_equal(sizeof(clattn_encoder_config), 144);
        assert_int_equal(offsetof(clattn_encoder_config, reserved) + 4, 144);
    }
    clattn_encoder_config c;
    memset(&c, 0xff, sizeof(c));
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    assert_int_equal(c.ffn_gated, 0);
    assert_int_equal(c.linear_no_bias, 0);
    assert_int_equal(c.norm_no_bias, 0);
    assert_int_equal(c.alibi, 0);
    assert_true(c.rope_theta == 0.0f);
    assert_int_equal(c.rotary_dim, 0);
    assert_int_equal(c.rope_interleaved, 0);
    assert_int_equal(c.first_norm1_identity, 0);
    assert_int_equal(c.global_every, 0);
    assert_int_equal(c.local_window, 0);
    assert_true(c.local_rope_theta == 0.0f);
}

static void bad_flags_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_encoder_config c;
    clattn_encoder *enc = NULL;
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.ffn_gated = 2;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ffn_gated (2)");
    assert_null(enc);
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.norm_no_bias = 7;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "norm_no_bias (7)");
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.activation = (clattn_activation)4;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "activation is 4");
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.alibi = 2;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "alibi (2)");
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.rope_theta = -1.0f;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "rope_theta is -1");
    c.rope_theta = 0.5f; /* a base below 1 (tiny ones overflow the inverse frequencies) */
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "rope_theta is 0.5");
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.rope_theta = 1000.0f;
    c.rotary_dim = 10; /* d_k is 8 */
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "rotary_dim is 10");
    c.rotary_dim = 3;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "rotary_dim is 3");
    clattn_encoder_config_default(&c, 36, 4, 2, 48); /* d_k 9 */
    c.rope_theta = 1000.0f;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "all of d_k = 9, which is odd");
    c.rotary_dim = 8;
    assert_int_equal(clattn_encoder_create(f->ctx, &enc, &c), CLATTN_OK);
    clattn_encoder_destroy(&enc);
    assert_null(enc);
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.reserved[0] = 1;
    assert_status_msg(f->ctx, clattn_encoder_create(f->ctx, &enc, &c),
                      CLATTN_ERROR_INVALID_ARGUMENT, "reserved");
}

/* A file lookup that hides one tensor. */
typedef struct hiding {
    file_lookup file;
    const char *hide;
} hiding;

static const clattn_host_tensor *lookup_hiding(void *user, const char *name)
{
    hiding *h = user;
    return h->hide && strcmp(name, h->hide) == 0 ? NULL : lookup(&h->file, name);
}

static clattn_status load_case(clattn_context *ctx, const char *name, const char *hide,
                               int gated, int no_bias)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s/model.safetensors", GATED_DIR, name);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, path), CLATTN_OK);
    hiding h = {file_lookup_make(st), hide};
    clattn_encoder_config c;
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    c.ffn_gated = (uint8_t)gated;
    c.linear_no_bias = (uint8_t)no_bias;
    c.norm_no_bias = (uint8_t)no_bias;
    c.activation = CLATTN_ACTIVATION_SILU;
    clattn_encoder *enc = NULL;
    assert_int_equal(clattn_encoder_create(ctx, &enc, &c), CLATTN_OK);
    clattn_status status = clattn_encoder_load_weights(enc, lookup_hiding, &h);
    clattn_encoder_destroy(&enc);
    file_lookup_free(&h.file);
    clattn_safetensors_destroy(&st);
    return status;
}

static void missing_tensors_are_named(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    assert_int_equal(load_case(ctx, "swiglu_pre_ln", NULL, 1, 0), CLATTN_OK);
    assert_status_msg(ctx, load_case(ctx, "swiglu_pre_ln", "layers.1.linear1_gate.weight", 1, 0),
                      CLATTN_ERROR_FORMAT, "missing tensor layers.1.linear1_gate.weight");
    assert_status_msg(ctx, load_case(ctx, "swiglu_pre_ln", "layers.0.linear1_gate.bias", 1, 0),
                      CLATTN_ERROR_FORMAT, "missing tensor layers.0.linear1_gate.bias");
    /* Without biases they are not asked for: a file that has them loads as well. */
    assert_int_equal(load_case(ctx, "swiglu_pre_ln", "layers.0.linear1_gate.bias", 1, 1),
                     CLATTN_OK);
    assert_int_equal(load_case(ctx, "swiglu_no_bias_post_ln", NULL, 1, 1), CLATTN_OK);
    assert_status_msg(ctx, load_case(ctx, "swiglu_no_bias_post_ln", NULL, 1, 0),
                      CLATTN_ERROR_FORMAT, "missing tensor layers.0.self_attn.in_proj_bias");
    /* An ungated file has no gate. */
    assert_status_msg(ctx, load_case(ctx, "no_bias_pre_ln", NULL, 1, 1), CLATTN_ERROR_FORMAT,
                      "missing tensor layers.0.linear1_gate.weight");

    /* Random weights for every combination. */
    for (int flags = 0; flags < 8; flags++) {
        clattn_encoder_config c;
        clattn_encoder_config_default(&c, 32, 4, 1, 48);
        c.ffn_gated = flags & 1;
        c.linear_no_bias = (flags >> 1) & 1;
        c.norm_no_bias = (flags >> 2) & 1;
        c.final_norm = 1;
        clattn_encoder *enc = NULL;
        assert_int_equal(clattn_encoder_create(ctx, &enc, &c), CLATTN_OK);
        assert_int_equal(clattn_encoder_init_random(enc, 5), CLATTN_OK);
        clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){2, 5, 32}, NULL);
        assert_int_equal(clattn_encoder_forward(enc, x, x, NULL), CLATTN_OK);
        clattn_tensor_destroy(&x);
        clattn_encoder_destroy(&enc);
    }
}

static void counts_follow_the_flags(void **state)
{
    (void)state;
    clattn_encoder_config c;
    clattn_encoder_config_default(&c, 32, 4, 2, 48);
    uint64_t plain, macs_plain[CLATTN_OP_COUNT], macs[CLATTN_OP_COUNT], n;
    assert_int_equal(clattn_encoder_count_params(&c, &plain), CLATTN_OK);
    assert_int_equal(clattn_encoder_count_macs(&c, 3, 7, macs_plain), CLATTN_OK);
    c.ffn_gated = 1;
    assert_int_equal(clattn_encoder_count_params(&c, &n), CLATTN_OK);
    assert_int_equal(n, plain + 2 * (48 * 32 + 48)); /* linear1_gate per layer */
    assert_int_equal(clattn_encoder_count_macs(&c, 3, 7, macs), CLATTN_OK);
    assert_int_equal(macs[CLATTN_OP_FEED_FORWARD] * 2, macs_plain[CLATTN_OP_FEED_FORWARD] * 3);
    c.ffn_gated = 0;
    c.linear_no_bias = 1;
    assert_int_equal(clattn_encoder_count_params(&c, &n), CLATTN_OK);
    assert_int_equal(n, plain - 2 * (3 * 32 + 32 + 48 + 32));
    c.linear_no_bias = 0;
    c.norm_no_bias = 1;
    c.final_norm = 1;
    assert_int_equal(clattn_encoder_count_params(&c, &n), CLATTN_OK);
    assert_int_equal(n, plain - 2 * 2 * 32 + 32);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(golden_cases_match_pytorch),
        cmocka_unit_test(config_keeps_its_size),
        cmocka_unit_test(bad_flags_are_named),
        cmocka_unit_test(missing_tensors_are_named),
        cmocka_unit_test(counts_follow_the_flags),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
