/* Golden folders of Hugging Face model families (tests/golden/<family>/<case>, written by
 * tools/gen_*_golden.py): reading their JSON and .npy files, and the comparison every family's
 * test runs on them (hidden states and mean poolings on each attention path). Each helper fails
 * the calling cmocka test, printing the file's or the library's message, when something cannot
 * be read or loaded. */
#ifndef CLATTN_TEST_HF_GOLDEN_H
#define CLATTN_TEST_HF_GOLDEN_H

#include "common/test_util.h"

#include <jansson.h>
#include <stdbool.h>

/* The parsed JSON file at path (json_decref it). */
json_t *hf_golden_load_json(const char *path);

/* The gzip'd JSON file at path, parsed (gzip -dc: no zlib in the tests; JSON_ALLOW_NUL); unlike
 * the other helpers it does not fail the test but returns NULL, the reason printed, so that a
 * cmocka group setup can refuse to run. */
json_t *hf_golden_load_json_gz(const char *path);

/* dir/name as int64 (ints) or float32 (clattn_npy_array_destroy it). */
clattn_npy_array *hf_golden_load_npy(const char *dir, const char *name, bool ints);

/* dir/meta.json. */
json_t *hf_golden_load_meta(const char *dir);

/* clattn_encoder_load_hf on the folder dir. */
clattn_encoder *hf_golden_load_encoder(clattn_context *ctx, const char *dir);

/* A [B, N] key padding mask from an int64 attention_mask [B, N]: 1 where attention_mask is 0. */
clattn_tensor *hf_golden_key_padding_mask(clattn_context *ctx,
                                          const clattn_npy_array *attention_mask);

/* t's values against want (as many floats) within tol; returns the largest error. */
double hf_golden_compare_tensor(const clattn_tensor *t, const float *want, double tol);

/* clattn_pool of out ([B, N, d], key padding mask `mask`) into pooled ([B, d]) against
 * dir/file within tol; returns the largest error. */
double hf_golden_compare_pooling(clattn_context *ctx, const clattn_tensor *out,
                                 const clattn_tensor *mask, clattn_pooling pooling,
                                 int normalize, clattn_tensor *pooled, const char *dir,
                                 const char *file, double tol);

/* A family's assertions on the configuration its config.json maps to, against meta.json. */
typedef void (*hf_golden_check_config_fn)(const clattn_encoder_config *cfg, json_t *meta);

/* One case, family_dir/name, on one attention path. Its meta.json's "tolerance" must lie in
 * (0, 1e-5]; the encoder is loaded from the case's folder, or from family_dir/<model_from> when
 * meta.json names one (a case that holds inputs and outputs only), and its configuration goes
 * through check_config. Then the encoder runs the folder's input_ids.npy with
 * attention_mask.npy as the key padding mask on `path`; its hidden states and clattn_pool's mean
 * pooling, plain and normalized, are compared with last_hidden_state.npy, mean_pooled.npy and
 * mean_pooled_normalized.npy within the tolerance. Returns the largest error of the three. */
double hf_golden_run_case(clattn_context *ctx, const char *family_dir, const char *name,
                          clattn_attention_path path, hf_golden_check_config_fn check_config);

/* hf_golden_run_case for every case on the auto, fused and unfused paths, printing for each
 * "    <case> <path> largest error against <against> <error>" with the case's name padded to
 * name_width columns. */
void hf_golden_run_cases_on_every_path(clattn_context *ctx, const char *family_dir,
                                       const char *const *cases, size_t count,
                                       hf_golden_check_config_fn check_config, int name_width,
                                       const char *against);

/* A fresh temporary folder "<prefix>XXXXXX" (its name in dir) holding the files `files`
 * (space-separated) of family_dir/case_name and its config.json with the text `from` replaced by
 * `to` (sed syntax); fails the test when `to` is then not in the file. Remove it with
 * test_temp_dir_remove. */
void hf_golden_copy_with_config_edit(char *dir, size_t size, const char *family_dir,
                                     const char *case_name, const char *files,
                                     const char *prefix, const char *from, const char *to);

/* hf_golden_copy_with_config_edit of family_dir/basic's model.safetensors. */
void hf_golden_basic_copy_with_config_edit(char *dir, size_t size, const char *family_dir,
                                           const char *prefix, const char *from, const char *to);

/* family_dir/case_name's model.safetensors with config.json's `from` replaced by `to`
 * (hf_golden_copy_with_config_edit) must be refused by clattn_encoder_load_hf with `status` and
 * a message holding `message`, the encoder left NULL. */
void hf_golden_expect_config_refused(clattn_context *ctx, const char *family_dir,
                                     const char *case_name, const char *prefix, const char *from,
                                     const char *to, clattn_status status, const char *message);

/* family_dir/case_name's config.json and model.safetensors, with the tensor name `from` in the
 * latter changed to `to` (of the same length: sed on the file's header), must be refused by
 * clattn_encoder_load_hf with `status` and a message holding `message`, the encoder left NULL. */
void hf_golden_expect_tensor_refused(clattn_context *ctx, const char *family_dir,
                                     const char *case_name, const char *prefix, const char *from,
                                     const char *to, clattn_status status, const char *message);

#endif
