/*
 * Model files: PyTorch encoders exported by tools/export_torch.py (tests/golden/enc_*) give
 * PyTorch's outputs (tolerance: each case's, 1e-4); a file written here loads the same weights
 * as the lookup path; and corrupted, truncated and hostile files give named errors and never
 * crash (a fuzz-style loop over mutated files).
 */
#include "common/test_util.h"
#include "common/weight_bank.h"

#include <dirent.h>
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#ifndef GOLDEN_DIR
#error "GOLDEN_DIR must name tests/golden"
#endif

typedef struct fixture {
    clattn_context *ctx;
    char dir[256]; /* temporary files */
} fixture;

static int setup(void **state)
{
    test_require_device();
    fixture *f = calloc(1, sizeof(*f));
    f->ctx = test_context_create(NULL);
    if (test_temp_dir_create(f->dir, sizeof(f->dir), "clattn-model-") != 0)
        return -1;
    *state = f;
    return f->ctx ? 0 : -1;
}

static int teardown(void **state)
{
    fixture *f = *state;
    clattn_context_destroy(&f->ctx);
    test_temp_dir_remove(f->dir);
    free(f);
    return 0;
}

/* ---- PyTorch golden encoders ---- */

static void load_array(const char *dir, const char *name, clattn_npy_array **a, bool ints)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    clattn_status status = ints ? clattn_npy_read_i64(a, path) : clattn_npy_read_f32(a, path);
    if (status != CLATTN_OK) {
        print_error("%s\n", clattn_last_error(NULL));
        fail();
    }
}

static double run_golden(clattn_context *ctx, const char *dir, json_t *meta)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/model.safetensors", dir);
    clattn_encoder *enc = NULL;
    clattn_status status = clattn_encoder_load_file(ctx, &enc, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    clattn_encoder_config cfg;
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    assert_int_equal(cfg.num_layers, json_integer_value(json_object_get(meta, "num_layers")));
    assert_int_equal(cfg.final_norm, json_is_true(json_object_get(meta, "final_norm")));

    clattn_npy_array *expect = NULL, *input = NULL, *tokens = NULL, *mask = NULL;
    load_array(dir, "out.npy", &expect, false);
    clattn_tensor *out = test_tensor_from(ctx, expect->ndim, expect->shape, NULL);
    clattn_tensor *tmask = NULL, *tin = NULL;
    clattn_encoder_forward_params p;
    clattn_encoder_forward_params_default(&p);
    p.causal = json_is_true(json_object_get(meta, "causal"));
    if (json_is_true(json_object_get(meta, "key_padding_mask"))) {
        load_array(dir, "key_padding_mask.npy", &mask, false);
        tmask = test_tensor_from(ctx, mask->ndim, mask->shape, mask->f32);
        p.key_padding_mask = tmask;
    }
    if (strcmp(json_string_value(json_object_get(meta, "input")), "tokens") == 0) {
        load_array(dir, "tokens.npy", &tokens, true);
        status = clattn_encoder_forward_tokens(enc, tokens->i64, tokens->shape[0], tokens->shape[1],
                                               out, &p);
    } else {
        load_array(dir, "input.npy", &input, false);
        tin = test_tensor_from(ctx, input->ndim, input->shape, input->f32);
        status = clattn_encoder_forward(enc, tin, out, &p);
    }
    if (status != CLATTN_OK)
        print_error("%s: %s\n", dir, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *got = test_tensor_to_host(out);
    double err = test_max_abs_diff(got, expect->f32, expect->numel);
    assert_close(got, expect->f32, expect->numel,
                 json_real_value(json_object_get(meta, "tolerance")));
    free(got);
    /* And on the unfused attention path (the default above is the fused one; its variant, global
     * or staged through __local memory, is the device's or the one CLATTN_TUNE forces). */
    p.path = CLATTN_PATH_UNFUSED;
    assert_int_equal(clattn_tensor_fill(out, NAN), CLATTN_OK);
    status = tokens ? clattn_encoder_forward_tokens(enc, tokens->i64, tokens->shape[0],
                                                        tokens->shape[1], out, &p)
                        : clattn_encoder_forward(enc, tin, out, &p);
    if (status != CLATTN_OK)
        print_error("%s (unfused): %s\n", dir, clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    got = test_tensor_to_host(out);
    double err_unfused = test_max_abs_diff(got, expect->f32, expect->numel);
    if (err_unfused > err)
        err = err_unfused;
    assert_close(got, expect->f32, expect->numel,
                 json_real_value(json_object_get(meta, "tolerance")));
    free(got);
    clattn_npy_array_destroy(&expect), clattn_npy_array_destroy(&input);
    clattn_npy_array_destroy(&tokens), clattn_npy_array_destroy(&mask);
    clattn_tensor_destroy(&out), clattn_tensor_destroy(&tin), clattn_tensor_destroy(&tmask);
    clattn_encoder_destroy(&enc);
    return err;
}

static int compare_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void exported_pytorch_encoders_match_pytorch(void **state)
{
    fixture *f = *state;
    DIR *d = opendir(GOLDEN_DIR);
    assert_non_null(d);
    char *names[64];
    size_t count = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL && count < 64;)
        if (strncmp(e->d_name, "enc_", 4) == 0)
            names[count++] = strdup(e->d_name);
    closedir(d);
    qsort(names, count, sizeof(names[0]), compare_names);
    assert_true(count >= 16);
    double worst = 0.0;
    for (size_t i = 0; i < count; i++) {
        char dir[700], path[800];
        snprintf(dir, sizeof(dir), "%s/%s", GOLDEN_DIR, names[i]);
        snprintf(path, sizeof(path), "%s/meta.json", dir);
        json_error_t jerr;
        json_t *meta = json_load_file(path, 0, &jerr);
        assert_non_null(meta);
        double err = run_golden(f->ctx, dir, meta);
        printf("    golden %-26s max abs error %.3g\n", names[i], err);
        if (err > worst)
            worst = err;
        json_decref(meta);
        free(names[i]);
    }
    printf("    largest error against PyTorch over %zu encoder cases: %.3g\n", count, worst);
}

/* ---- files written here ---- */

/* Writes the bank's weights and `meta` (NULL-terminated key/value pairs) as a model file. */
static void write_model(const char *path, weight_bank *bank, const char *const *meta)
{
    clattn_safetensors_tensor tensors[BANK_MAX];
    size_t n = 0;
    for (size_t i = 0; i < bank->count; i++) {
        if (!bank->names[i][0])
            continue;
        memset(&tensors[n], 0, sizeof(tensors[n]));
        tensors[n].name = bank->names[i];
        tensors[n].ndim = bank->tensors[i].ndim;
        for (int d = 0; d < bank->tensors[i].ndim; d++)
            tensors[n].shape[d] = bank->tensors[i].shape[d];
        tensors[n].data = (float *)bank->tensors[i].data;
        n++;
    }
    clattn_safetensors_metadata_entry md[16];
    size_t m = 0;
    for (; meta[2 * m]; m++)
        md[m] = (clattn_safetensors_metadata_entry){(char *)meta[2 * m], (char *)meta[2 * m + 1]};
    clattn_status status = clattn_safetensors_write(path, tensors, n, md, m);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
}

static const char *const good_meta[] = {
    "d_model", "8",          "nhead", "2",         "num_layers", "2",
    "dim_feedforward", "16", "activation", "gelu", "norm_first", "true",
    "layer_norm_eps", "1e-05", "positional", "sinusoidal", NULL,
};

static void small_config(clattn_encoder_config *c)
{
    clattn_encoder_config_default(c, 8, 2, 2, 16);
    c->activation = CLATTN_ACTIVATION_GELU;
    c->norm_first = 1;
    c->positional = CLATTN_POSITIONAL_SINUSOIDAL;
    c->final_norm = 1;
    c->vocab_size = 5;
}

static void a_written_file_loads_the_same_weights(void **state)
{
    fixture *f = *state;
    clattn_encoder_config c;
    small_config(&c);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c, true, 1);
    char path[512];
    snprintf(path, sizeof(path), "%s/model.safetensors", f->dir);
    write_model(path, bank, good_meta);

    clattn_encoder *from_file = NULL, *from_lookup = NULL;
    assert_int_equal(clattn_encoder_load_file(f->ctx, &from_file, path), CLATTN_OK);
    clattn_encoder_config got;
    assert_int_equal(clattn_encoder_get_config(from_file, &got), CLATTN_OK);
    assert_int_equal(got.d_model, 8);
    assert_int_equal(got.num_layers, 2);
    assert_int_equal(got.activation, CLATTN_ACTIVATION_GELU);
    assert_int_equal(got.norm_first, 1);
    assert_int_equal(got.final_norm, 1);
    assert_int_equal(got.vocab_size, 5);
    assert_int_equal(got.positional, CLATTN_POSITIONAL_SINUSOIDAL);
    assert_true(got.layer_norm_eps == 1e-5f);
    assert_int_equal(clattn_encoder_create(f->ctx, &from_lookup, &c), CLATTN_OK);
    assert_int_equal(clattn_encoder_load_weights(from_lookup, bank_lookup, bank), CLATTN_OK);

    int64_t ids[6] = {0, 4, 2, 2, 1, 3};
    float a[48], b[48];
    clattn_tensor *y = test_tensor_from(f->ctx, 3, (size_t[]){2, 3, 8}, NULL);
    assert_int_equal(clattn_encoder_forward_tokens(from_file, ids, 2, 3, y, NULL), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(y, a, 48), CLATTN_OK);
    assert_int_equal(clattn_encoder_forward_tokens(from_lookup, ids, 2, 3, y, NULL), CLATTN_OK);
    assert_int_equal(clattn_tensor_read(y, b, 48), CLATTN_OK);
    assert_memory_equal(a, b, sizeof(a));
    clattn_tensor_destroy(&y);
    clattn_encoder_destroy(&from_file);
    clattn_encoder_destroy(&from_lookup);
    bank_free(bank);
    free(bank);
}

/* Writes the good model with one metadata value replaced (or removed when value is NULL) and
 * expects loading it to fail with `status` and a message containing `needle`. */
static void expect_meta_error(fixture *f, const char *key, const char *value,
                              clattn_status status, const char *needle)
{
    clattn_encoder_config c;
    small_config(&c);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c, true, 2);
    const char *meta[20];
    size_t n = 0;
    bool replaced = false;
    for (size_t i = 0; good_meta[i]; i += 2) {
        replaced |= strcmp(good_meta[i], key) == 0;
        if (strcmp(good_meta[i], key) == 0 && !value)
            continue;
        meta[n++] = good_meta[i];
        meta[n++] = strcmp(good_meta[i], key) == 0 ? value : good_meta[i + 1];
    }
    if (!replaced && value) /* an optional key */
        meta[n++] = key, meta[n++] = value;
    meta[n] = NULL;
    char path[512];
    snprintf(path, sizeof(path), "%s/meta-%s.safetensors", f->dir, key);
    write_model(path, bank, meta);
    clattn_encoder *enc = (clattn_encoder *)0x1;
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, path), status, needle);
    assert_null(enc);
    assert_non_null(strstr(clattn_last_error(f->ctx), path));
    bank_free(bank);
    free(bank);
}

static void bad_metadata_is_named(void **state)
{
    fixture *f = *state;
    expect_meta_error(f, "nhead", NULL, CLATTN_ERROR_FORMAT, "__metadata__ has no \"nhead\"");
    expect_meta_error(f, "d_model", "eight", CLATTN_ERROR_FORMAT,
                      "\"d_model\" is \"eight\", not a positive integer");
    expect_meta_error(f, "num_layers", "0", CLATTN_ERROR_FORMAT, "not a positive integer");
    expect_meta_error(f, "activation", "tanh", CLATTN_ERROR_FORMAT,
                      "\"activation\" is \"tanh\", not one of relu, gelu");
    expect_meta_error(f, "norm_first", "yes", CLATTN_ERROR_FORMAT, "not one of false, true");
    expect_meta_error(f, "ffn_gated", "1", CLATTN_ERROR_FORMAT,
                      "\"ffn_gated\" is \"1\", not one of false, true");
    expect_meta_error(f, "ffn_gated", "true", CLATTN_ERROR_FORMAT,
                      "missing tensor layers.0.linear1_gate.weight");
    expect_meta_error(f, "layer_norm_eps", "-1", CLATTN_ERROR_FORMAT, "layer_norm_eps");
    expect_meta_error(f, "positional", "rotary", CLATTN_ERROR_FORMAT,
                      "not one of none, sinusoidal");
    expect_meta_error(f, "nhead", "3", CLATTN_ERROR_FORMAT,
                      "inconsistent configuration: d_model 8 is not divisible by nhead 3");
    expect_meta_error(f, "dim_feedforward", "17", CLATTN_ERROR_SHAPE_MISMATCH,
                      "tensor layers.0.linear1.weight has shape [16, 8] but the configuration "
                      "needs [17, 8]");
}

/* A num_layers other than the layers the tensors hold is another model, fewer or more. */
static void a_layer_count_unlike_the_tensors_is_named(void **state)
{
    fixture *f = *state;
    expect_meta_error(f, "num_layers", "1", CLATTN_ERROR_FORMAT,
                      "metadata num_layers is 1 but the file holds layers 0-1");
    expect_meta_error(f, "num_layers", "3", CLATTN_ERROR_FORMAT,
                      "metadata num_layers is 3 but the file holds layers 0-1");
    /* Layer 0 taken out whole: the file holds layer 1 only. */
    clattn_encoder_config c;
    small_config(&c);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c, true, 4);
    static const char *const layer0[] = {
        "self_attn.in_proj_weight", "self_attn.in_proj_bias", "self_attn.out_proj.weight",
        "self_attn.out_proj.bias", "linear1.weight", "linear1.bias", "linear2.weight",
        "linear2.bias", "norm1.weight", "norm1.bias", "norm2.weight", "norm2.bias"};
    for (size_t i = 0; i < sizeof(layer0) / sizeof(layer0[0]); i++) {
        char name[96];
        snprintf(name, sizeof(name), "layers.0.%s", layer0[i]);
        assert_non_null(bank_find(bank, name));
        bank_remove(bank, name);
    }
    char path[512];
    snprintf(path, sizeof(path), "%s/layer-1-only.safetensors", f->dir);
    write_model(path, bank, good_meta);
    clattn_encoder *enc = (clattn_encoder *)0x1;
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, path), CLATTN_ERROR_FORMAT,
                      "metadata num_layers is 2 but the file holds layer 1");
    assert_null(enc);
    bank_free(bank);
    free(bank);
}

static void missing_and_misshapen_tensors_are_named(void **state)
{
    fixture *f = *state;
    clattn_encoder_config c;
    small_config(&c);
    weight_bank *bank = malloc(sizeof(*bank));
    bank_init(bank, &c, true, 3);
    char path[512];
    snprintf(path, sizeof(path), "%s/missing.safetensors", f->dir);
    bank_remove(bank, "layers.1.norm2.bias");
    write_model(path, bank, good_meta);
    clattn_encoder *enc = NULL;
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, path), CLATTN_ERROR_FORMAT,
                      "missing tensor layers.1.norm2.bias");
    bank_free(bank);
    bank_init(bank, &c, true, 3);
    bank_find(bank, "embedding.weight")->shape[1] = 4; /* [5, 8] data written as [10, 4] */
    bank_find(bank, "embedding.weight")->shape[0] = 10;
    write_model(path, bank, good_meta);
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, path),
                      CLATTN_ERROR_SHAPE_MISMATCH, "embedding.weight must be [vocab, d_model = 8]");
    bank_free(bank);
    free(bank);
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, "/no/such/model.safetensors"),
                      CLATTN_ERROR_IO, "/no/such/model.safetensors");
    assert_status_msg(NULL, clattn_encoder_load_file(NULL, &enc, path),
                      CLATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "path is NULL");
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, NULL, path),
                      CLATTN_ERROR_INVALID_ARGUMENT, "encoder is NULL");
}

static void corrupted_files_never_crash(void **state)
{
    fixture *f = *state;
    char good[512], bad[512];
    snprintf(good, sizeof(good), "%s/%s", GOLDEN_DIR, "enc_tokens/model.safetensors");
    snprintf(bad, sizeof(bad), "%s/mutated.safetensors", f->dir);
    size_t size;
    unsigned char *bytes = test_read_file(good, &size);
    unsigned char *copy = malloc(size);
    clattn_encoder *enc = NULL;

    /* Truncations: every length of the header region, then a few into the data. */
    for (size_t n = 0; n < size; n += n < 1024 ? 1 : 997) {
        test_write_file(bad, bytes, n);
        clattn_status status = clattn_encoder_load_file(f->ctx, &enc, bad);
        assert_int_not_equal(status, CLATTN_OK);
        assert_null(enc);
        assert_true(strlen(clattn_last_error(f->ctx)) > 0);
    }
    /* An absurd header length. */
    memcpy(copy, bytes, size);
    memset(copy, 0xff, 8);
    test_write_file(bad, copy, size);
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, bad), CLATTN_ERROR_FORMAT,
                      bad);
    /* Invalid JSON. */
    memcpy(copy, bytes, size);
    copy[8] = '[';
    test_write_file(bad, copy, size);
    assert_status_msg(f->ctx, clattn_encoder_load_file(f->ctx, &enc, bad), CLATTN_ERROR_FORMAT,
                      "JSON");
    /* Seeded mutations: any status but OK-with-garbage; never a crash. */
    test_rng rng = {2024};
    size_t header = 8 + (size_t)(bytes[0] | bytes[1] << 8 | bytes[2] << 16);
    int ok = 0;
    for (int iter = 0; iter < (test_small_mode() ? 50 : 400); iter++) {
        memcpy(copy, bytes, size);
        int flips = 1 + (int)(test_rng_next(&rng) % 4);
        for (int i = 0; i < flips; i++) {
            /* Mostly the header, where the structure lives. */
            size_t at = test_rng_next(&rng) % 4 ? test_rng_next(&rng) % header
                                                : test_rng_next(&rng) % size;
            copy[at] = (unsigned char)test_rng_next(&rng);
        }
        test_write_file(bad, copy, size);
        clattn_status status = clattn_encoder_load_file(f->ctx, &enc, bad);
        if (status == CLATTN_OK) {
            ok++;
            clattn_encoder_destroy(&enc);
        } else {
            assert_null(enc);
        }
    }
    printf("    %d of the mutated files still loaded (mutations inside values or padding)\n", ok);
    free(copy);
    free(bytes);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(exported_pytorch_encoders_match_pytorch),
        cmocka_unit_test(a_written_file_loads_the_same_weights),
        cmocka_unit_test(bad_metadata_is_named),
        cmocka_unit_test(a_layer_count_unlike_the_tensors_is_named),
        cmocka_unit_test(missing_and_misshapen_tensors_are_named),
        cmocka_unit_test(corrupted_files_never_crash),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
