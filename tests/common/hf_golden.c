/* Golden folders of Hugging Face model families: see hf_golden.h. */
#include "common/hf_golden.h"

#include <stdio.h>
#include <stdlib.h>

json_t *hf_golden_load_json(const char *path)
{
    json_error_t error;
    json_t *root = json_load_file(path, 0, &error);
    if (!root)
        print_error("%s: %s\n", path, error.text);
    assert_non_null(root);
    return root;
}

json_t *hf_golden_load_json_gz(const char *path)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "gzip -dc '%s'", path);
    FILE *p = popen(cmd, "r");
    if (!p)
        return NULL;
    json_error_t error;
    json_t *j = json_loadf(p, JSON_ALLOW_NUL, &error);
    if (!j)
        fprintf(stderr, "%s: %s (line %d)\n", path, error.text, error.line);
    if (pclose(p) != 0) {
        json_decref(j);
        return NULL;
    }
    return j;
}

clattn_npy_array *hf_golden_load_npy(const char *dir, const char *name, bool ints)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    clattn_npy_array *a = NULL;
    clattn_status status = ints ? clattn_npy_read_i64(&a, path) : clattn_npy_read_f32(&a, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return a;
}

json_t *hf_golden_load_meta(const char *dir)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/meta.json", dir);
    return hf_golden_load_json(path);
}

clattn_encoder *hf_golden_load_encoder(clattn_context *ctx, const char *dir)
{
    clattn_encoder *enc = NULL;
    clattn_status status = clattn_encoder_load_hf(ctx, &enc, dir);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    return enc;
}

clattn_tensor *hf_golden_key_padding_mask(clattn_context *ctx,
                                          const clattn_npy_array *attention_mask)
{
    size_t B = attention_mask->shape[0], N = attention_mask->shape[1];
    float *pad = malloc(B * N * sizeof(float));
    for (size_t i = 0; i < B * N; i++)
        pad[i] = attention_mask->i64[i] ? 0.0f : 1.0f;
    clattn_tensor *mask = test_tensor_from(ctx, 2, (size_t[]){B, N}, pad);
    free(pad);
    return mask;
}

double hf_golden_compare_tensor(const clattn_tensor *t, const float *want, double tol)
{
    size_t n = clattn_tensor_numel(t);
    float *got = test_tensor_to_host(t);
    double err = test_max_abs_diff(got, want, n);
    assert_close(got, want, n, tol);
    free(got);
    return err;
}

double hf_golden_compare_pooling(clattn_context *ctx, const clattn_tensor *out,
                                 const clattn_tensor *mask, clattn_pooling pooling,
                                 int normalize, clattn_tensor *pooled, const char *dir,
                                 const char *file, double tol)
{
    clattn_npy_array *want = hf_golden_load_npy(dir, file, false);
    assert_int_equal(clattn_pool(ctx, out, mask, pooling, normalize, pooled), CLATTN_OK);
    double err = hf_golden_compare_tensor(pooled, want->f32, tol);
    clattn_npy_array_destroy(&want);
    return err;
}

/* enc (of configuration cfg) on dir's inputs against its hidden states and mean poolings. */
static double compare_hidden_and_mean_pooling(clattn_context *ctx, clattn_encoder *enc,
                                              const clattn_encoder_config *cfg, const char *dir,
                                              clattn_attention_path path, double tol)
{
    clattn_npy_array *ids = hf_golden_load_npy(dir, "input_ids.npy", true);
    clattn_npy_array *attention = hf_golden_load_npy(dir, "attention_mask.npy", true);
    clattn_npy_array *expect = hf_golden_load_npy(dir, "last_hidden_state.npy", false);
    size_t B = ids->shape[0], N = ids->shape[1], d = cfg->d_model;
    clattn_tensor *mask = hf_golden_key_padding_mask(ctx, attention);
    clattn_tensor *out = test_tensor_from(ctx, 3, (size_t[]){B, N, d}, NULL);
    clattn_encoder_forward_params params;
    clattn_encoder_forward_params_default(&params);
    params.key_padding_mask = mask;
    params.path = path;
    assert_int_equal(clattn_encoder_forward_tokens(enc, ids->i64, B, N, out, &params), CLATTN_OK);
    double worst = hf_golden_compare_tensor(out, expect->f32, tol);

    static const char *const files[2] = {"mean_pooled.npy", "mean_pooled_normalized.npy"};
    clattn_tensor *pooled = test_tensor_from(ctx, 2, (size_t[]){B, d}, NULL);
    for (int normalize = 0; normalize <= 1; normalize++) {
        double err = hf_golden_compare_pooling(ctx, out, mask, CLATTN_POOLING_MEAN, normalize,
                                               pooled, dir, files[normalize], tol);
        worst = err > worst ? err : worst;
    }
    clattn_tensor_destroy(&pooled);
    clattn_tensor_destroy(&mask), clattn_tensor_destroy(&out);
    clattn_npy_array_destroy(&ids), clattn_npy_array_destroy(&attention);
    clattn_npy_array_destroy(&expect);
    return worst;
}

double hf_golden_run_case(clattn_context *ctx, const char *family_dir, const char *name,
                          clattn_attention_path path, hf_golden_check_config_fn check_config)
{
    char dir[1024], model_dir[1024];
    snprintf(dir, sizeof(dir), "%s/%s", family_dir, name);
    json_t *meta = hf_golden_load_meta(dir);
    double tol = json_real_value(json_object_get(meta, "tolerance"));
    assert_true(tol > 0.0 && tol <= 1e-5);
    const char *model_from = json_string_value(json_object_get(meta, "model_from"));
    snprintf(model_dir, sizeof(model_dir), "%s/%s", family_dir, model_from ? model_from : name);
    clattn_encoder *enc = hf_golden_load_encoder(ctx, model_dir);
    clattn_encoder_config cfg;
    assert_int_equal(clattn_encoder_get_config(enc, &cfg), CLATTN_OK);
    check_config(&cfg, meta);
    double worst = compare_hidden_and_mean_pooling(ctx, enc, &cfg, dir, path, tol);
    clattn_encoder_destroy(&enc);
    json_decref(meta);
    return worst;
}

void hf_golden_run_cases_on_every_path(clattn_context *ctx, const char *family_dir,
                                       const char *const *cases, size_t count,
                                       hf_golden_check_config_fn check_config, int name_width,
                                       const char *against)
{
    static const struct {
        clattn_attention_path path;
        const char *name;
    } paths[] = {{CLATTN_PATH_AUTO, "auto"},
                 {CLATTN_PATH_FUSED, "fused"},
                 {CLATTN_PATH_UNFUSED, "unfused"}};
    for (size_t c = 0; c < count; c++)
        for (size_t p = 0; p < sizeof(paths) / sizeof(paths[0]); p++) {
            double err =
                hf_golden_run_case(ctx, family_dir, cases[c], paths[p].path, check_config);
            print_message("    %-*s %-7s largest error against %s %.2e\n", name_width, cases[c],
                          paths[p].name, against, err);
        }
}

void hf_golden_copy_with_config_edit(char *dir, size_t size, const char *family_dir,
                                     const char *case_name, const char *files,
                                     const char *prefix, const char *from, const char *to)
{
    assert_int_equal(test_temp_dir_create(dir, size, prefix), 0);
    char cmd[4096];
    snprintf(cmd, sizeof(cmd),
             "cd %s/%s && cp %s %s/ && sed 's/%s/%s/' config.json > %s/config.json && "
             "grep -q '%s' %s/config.json",
             family_dir, case_name, files, dir, from, to, dir, to, dir);
    assert_int_equal(system(cmd), 0);
}

void hf_golden_basic_copy_with_config_edit(char *dir, size_t size, const char *family_dir,
                                           const char *prefix, const char *from, const char *to)
{
    hf_golden_copy_with_config_edit(dir, size, family_dir, "basic", "model.safetensors", prefix,
                                    from, to);
}

/* clattn_encoder_load_hf on dir must fail with status and message; dir is removed. */
static void expect_refused(clattn_context *ctx, const char *dir, clattn_status status,
                           const char *message)
{
    clattn_encoder *enc = (clattn_encoder *)0x1;
    assert_status_msg(ctx, clattn_encoder_load_hf(ctx, &enc, dir), status, message);
    assert_null(enc);
    test_temp_dir_remove(dir);
}

void hf_golden_expect_config_refused(clattn_context *ctx, const char *family_dir,
                                     const char *case_name, const char *prefix, const char *from,
                                     const char *to, clattn_status status, const char *message)
{
    char dir[1024];
    hf_golden_copy_with_config_edit(dir, sizeof(dir), family_dir, case_name, "model.safetensors",
                                    prefix, from, to);
    expect_refused(ctx, dir, status, message);
}

void hf_golden_expect_tensor_refused(clattn_context *ctx, const char *family_dir,
                                     const char *case_name, const char *prefix, const char *from,
                                     const char *to, clattn_status status, const char *message)
{
    char dir[1024], cmd[2048];
    hf_golden_copy_with_config_edit(dir, sizeof(dir), family_dir, case_name, "model.safetensors",
                                    prefix, "{", "{");
    snprintf(cmd, sizeof(cmd), "sed -i 's/%s/%s/' %s/model.safetensors", from, to, dir);
    assert_int_equal(system(cmd), 0);
    expect_refused(ctx, dir, status, message);
}
