/*
 * Whole encoder–decoder models (clattn/transformer.h) against PyTorch: a small nn.Transformer
 * trained to reverse digit strings (tests/golden/toy_reverse, written by
 * tools/train_toy_seq2seq.py; tests/golden/TOY.md). Teacher-forced logits against the float64
 * PyTorch model's; greedy decoding token for token against PyTorch's; beam search token for token
 * against the script's reference beam search (the rule in clattn/transformer.h and TOY.md); both
 * also solve the task. Invalid arguments and bad model files.
 */
#include "common/test_util.h"
#include "models/transformer_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define TOY_DIR GOLDEN_DIR "/toy_reverse"

static clattn_npy_array *load_ids(const char *name)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", TOY_DIR, name);
    clattn_npy_array *a = NULL;
    clattn_status status = clattn_npy_read_i64(&a, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return a;
}

static clattn_npy_array *load_floats(const char *name)
{
    char path[1100];
    snprintf(path, sizeof(path), "%s/%s", TOY_DIR, name);
    clattn_npy_array *a = NULL;
    clattn_status status = clattn_npy_read_f32(&a, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
    return a;
}

/* The toy model and its source batch. */
typedef struct toy {
    clattn_transformer *model;
    clattn_transformer_info info;
    clattn_npy_array *src, *src_mask;
    uint8_t *padding; /* [B, S] */
    size_t batch, src_len;
    json_t *meta;
} toy;

static void toy_load(clattn_context *ctx, toy *t)
{
    memset(t, 0, sizeof(*t));
    clattn_status status = clattn_transformer_load(ctx, &t->model, TOY_DIR "/model.safetensors");
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    assert_int_equal(clattn_transformer_get_info(t->model, &t->info), CLATTN_OK);
    t->src = load_ids("src.npy");
    t->src_mask = load_ids("src_mask.npy");
    assert_int_equal(t->src->ndim, 2);
    t->batch = t->src->shape[0], t->src_len = t->src->shape[1];
    assert_int_equal(t->src_mask->numel, t->src->numel);
    t->padding = malloc(t->src->numel);
    assert_non_null(t->padding);
    for (size_t i = 0; i < t->src->numel; i++)
        t->padding[i] = t->src_mask->i64[i] != 0;
    json_error_t error;
    t->meta = json_load_file(TOY_DIR "/meta.json", 0, &error);
    assert_non_null(t->meta);
}

static void toy_free(toy *t)
{
    clattn_transformer_destroy(&t->model);
    assert_null(t->model);
    clattn_npy_array_destroy(&t->src), clattn_npy_array_destroy(&t->src_mask);
    free(t->padding);
    json_decref(t->meta);
}

static void info_matches_the_model_file(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    assert_int_equal(t.info.d_model, 64);
    assert_int_equal(t.info.nhead, 4);
    assert_int_equal(t.info.num_encoder_layers, 2);
    assert_int_equal(t.info.num_decoder_layers, 2);
    assert_int_equal(t.info.dim_feedforward, 128);
    assert_int_equal(t.info.src_vocab, 13);
    assert_int_equal(t.info.tgt_vocab, 13);
    assert_int_equal(t.info.pad_id, 10);
    assert_int_equal(t.info.bos_id, 11);
    assert_int_equal(t.info.eos_id, 12);
    assert_int_equal(t.info.num_kv_heads, 4); /* no "num_kv_heads": nhead */
    toy_free(&t);
}

/* Teacher-forced logits [B, T, V]: every position against PyTorch without a target padding mask
 * (the library has none), and the real (non-padding) positions against PyTorch with it. */
static void teacher_forced_logits_match_pytorch(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_npy_array *tgt = load_ids("tgt_in.npy"), *tgt_mask = load_ids("tgt_mask.npy");
    clattn_npy_array *want = load_floats("logits_no_tgt_mask.npy");
    clattn_npy_array *want_masked = load_floats("logits.npy");
    size_t T = tgt->shape[1], V = t.info.tgt_vocab;
    assert_int_equal(want->numel, t.batch * T * V);
    clattn_tensor *logits = test_tensor_from(f->ctx, 3, (size_t[]){t.batch, T, V}, NULL);
    clattn_status status = clattn_transformer_forward(t.model, t.src->i64, t.batch, t.src_len,
                                                      t.padding, tgt->i64, T, logits);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(f->ctx));
    assert_int_equal(status, CLATTN_OK);
    float *got = test_tensor_to_host(logits);
    double err = test_max_abs_diff(got, want->f32, want->numel);
    print_message("    teacher-forced logits [%zu, %zu, %zu]: largest error against PyTorch "
                  "(float64) %.2e\n",
                  t.batch, T, V, err);
    assert_close(got, want->f32, want->numel, 1e-4);
    double err_real = 0.0;
    size_t real = 0;
    for (size_t p = 0; p < t.batch * T; p++) {
        if (tgt_mask->i64[p])
            continue;
        real++;
        double e = test_max_abs_diff(got + p * V, want_masked->f32 + p * V, V);
        err_real = e > err_real ? e : err_real;
    }
    assert_true(real > t.batch);
    assert_true(err_real < 1e-4);
    /* Without the source padding the padded sentences' logits change: the mask is applied. */
    assert_int_equal(clattn_transformer_forward(t.model, t.src->i64, t.batch, t.src_len, NULL,
                                                tgt->i64, T, logits),
                     CLATTN_OK);
    float *unmasked = test_tensor_to_host(logits);
    assert_true(test_max_abs_diff(unmasked, want->f32, want->numel) > 1e-3);
    free(got), free(unmasked);
    clattn_tensor_destroy(&logits);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&tgt_mask);
    clattn_npy_array_destroy(&want), clattn_npy_array_destroy(&want_masked);
    toy_free(&t);
}

/* Row b of a generated [B, width] array (lengths[b] used) against row b of an expected [B, W]
 * array: the same ids up to its length, pad_id after (in the expected row). */
static void assert_rows_equal(const int64_t *got, size_t width, const size_t *lengths,
                              const clattn_npy_array *want, int64_t pad, const char *what)
{
    size_t W = want->shape[1];
    for (size_t b = 0; b < want->shape[0]; b++) {
        const int64_t *w = want->i64 + b * W;
        size_t n = 0;
        while (n < W && w[n] != pad)
            n++;
        bool same = lengths[b] == n;
        for (size_t i = 0; same && i < n; i++)
            same = got[b * width + i] == w[i];
        for (size_t i = lengths[b]; same && i < width; i++)
            same = got[b * width + i] == pad;
        if (!same) {
            print_error("%s: sentence %zu differs (length %zu, expected %zu):", what, b,
                        lengths[b], n);
            for (size_t i = 0; i < lengths[b]; i++)
                print_error(" %lld", (long long)got[b * width + i]);
            print_error("\n");
        }
        assert_true(same);
    }
}

/* Every row ends with eos and reverses the source digits (the answers). */
static void assert_solves_the_task(const int64_t *got, size_t width, const size_t *lengths)
{
    clattn_npy_array *answers = load_ids("answers.npy");
    size_t W = answers->shape[1];
    for (size_t b = 0; b < answers->shape[0]; b++) {
        const int64_t *a = answers->i64 + b * W;
        size_t n = 0;
        while (a[n] != 12)
            n++;
        assert_int_equal(lengths[b], n + 1);
        assert_memory_equal(got + b * width, a, (n + 1) * sizeof(int64_t));
    }
    clattn_npy_array_destroy(&answers);
}

static void generate(toy *t, size_t beam, size_t max_new, int64_t **out, size_t **lengths)
{
    clattn_generate_params params;
    clattn_generate_params_default(&params);
    params.beam = beam;
    params.max_new = max_new;
    params.alpha = 0.6f;
    *out = malloc(t->batch * max_new * sizeof(int64_t));
    *lengths = malloc(t->batch * sizeof(size_t));
    assert_non_null(*out);
    assert_non_null(*lengths);
    clattn_status status = clattn_transformer_generate(t->model, t->src->i64, t->batch,
                                                       t->src_len, t->padding, &params, *out,
                                                       *lengths);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(NULL));
    assert_int_equal(status, CLATTN_OK);
}

static void greedy_decoding_matches_pytorch(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_npy_array *want = load_ids("greedy.npy");
    size_t max_new = t.src_len + 50;
    int64_t *out;
    size_t *lengths;
    generate(&t, 1, max_new, &out, &lengths);
    assert_rows_equal(out, max_new, lengths, want, t.info.pad_id, "greedy");
    assert_solves_the_task(out, max_new, lengths);
    free(out), free(lengths);
    /* max_new cuts the output: 2 tokens, no eos. */
    generate(&t, 1, 2, &out, &lengths);
    for (size_t b = 0; b < t.batch; b++) {
        assert_int_equal(lengths[b], 2);
        assert_memory_equal(out + b * 2, want->i64 + b * want->shape[1], 2 * sizeof(int64_t));
    }
    free(out), free(lengths);
    clattn_npy_array_destroy(&want);
    toy_free(&t);
}

static void beam_search_matches_the_reference(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_npy_array *want = load_ids("beam.npy");
    size_t max_new = t.src_len + 50;
    int64_t *out;
    size_t *lengths;
    generate(&t, 4, max_new, &out, &lengths);
    assert_rows_equal(out, max_new, lengths, want, t.info.pad_id, "beam search (k = 4)");
    assert_solves_the_task(out, max_new, lengths);
    free(out), free(lengths);
    clattn_npy_array_destroy(&want);
    toy_free(&t);
}

/* Sentence by sentence (batch 1, its own unpadded length) gives the batch's answers: the source
 * padding mask and the beam bookkeeping keep sentences apart. */
static void one_sentence_at_a_time_equals_the_batch(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_npy_array *want = load_ids("answers.npy");
    clattn_generate_params params;
    clattn_generate_params_default(&params);
    params.beam = 3;
    int64_t out[64];
    size_t length = 0;
    for (size_t b = 0; b < t.batch; b++) {
        size_t S = 0;
        while (S < t.src_len && !t.padding[b * t.src_len + S])
            S++;
        params.max_new = 64;
        assert_int_equal(clattn_transformer_generate(t.model, t.src->i64 + b * t.src_len, 1, S,
                                                     NULL, &params, out, &length),
                         CLATTN_OK);
        const int64_t *a = want->i64 + b * want->shape[1];
        assert_int_equal(length, S); /* the digits reversed and eos: as long as the source */
        assert_memory_equal(out, a, length * sizeof(int64_t));
    }
    clattn_npy_array_destroy(&want);
    toy_free(&t);
}

static void rejects_bad_arguments(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    toy t;
    toy_load(ctx, &t);
    int64_t out[8];
    size_t lengths[1];
    clattn_generate_params params;
    clattn_generate_params_default(&params);
    params.max_new = 8;
    const int64_t src[3] = {1, 2, 12}, bad_src[3] = {1, 13, 12}, tgt[2] = {11, 99};
    assert_status_msg(NULL, clattn_transformer_generate(NULL, src, 1, 3, NULL, &params, out,
                                                        lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "model is NULL");
    assert_status_msg(ctx, clattn_transformer_generate(t.model, NULL, 1, 3, NULL, &params, out,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "src is NULL");
    assert_status_msg(ctx, clattn_transformer_generate(t.model, src, 0, 3, NULL, &params, out,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "must be positive");
    assert_status_msg(ctx, clattn_transformer_generate(t.model, src, 1, 3, NULL, &params, NULL,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "out is NULL");
    assert_int_not_equal(clattn_transformer_generate(t.model, bad_src, 1, 3, NULL, &params, out,
                                                     lengths),
                         CLATTN_OK);
    assert_non_null(strstr(clattn_last_error(ctx), "13"));
    params.alpha = -1.0f;
    assert_status_msg(ctx, clattn_transformer_generate(t.model, src, 1, 3, NULL, &params, out,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "alpha");
    params.alpha = 0.6f;
    params.half_cache = 2;
    assert_status_msg(ctx, clattn_transformer_generate(t.model, src, 1, 3, NULL, &params, out,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "half_cache is 2 (0 or 1)");
    params.half_cache = 0;
    params.reserved[3] = 1;
    assert_status_msg(ctx, clattn_transformer_generate(t.model, src, 1, 3, NULL, &params, out,
                                                       lengths),
                      CLATTN_ERROR_INVALID_ARGUMENT, "reserved");
    clattn_tensor *logits = test_tensor_from(ctx, 3, (size_t[]){1, 2, 13}, NULL);
    clattn_tensor *wrong = test_tensor_from(ctx, 3, (size_t[]){1, 2, 12}, NULL);
    assert_status_msg(ctx, clattn_transformer_forward(t.model, src, 1, 3, NULL, tgt, 2, logits),
                      CLATTN_ERROR_OUT_OF_RANGE, "target id 99 at [0, 1] is outside the vocabulary");
    const int64_t good_tgt[2] = {11, 3};
    assert_status_msg(ctx, clattn_transformer_forward(t.model, src, 1, 3, NULL, good_tgt, 2, wrong),
                      CLATTN_ERROR_SHAPE_MISMATCH, "logits");
    assert_status_msg(ctx, clattn_transformer_forward(t.model, src, 1, 3, NULL, NULL, 2, logits),
                      CLATTN_ERROR_INVALID_ARGUMENT, "tgt is NULL");
    assert_int_equal(clattn_transformer_forward(t.model, src, 1, 3, NULL, good_tgt, 2, logits),
                     CLATTN_OK);
    clattn_tensor_destroy(&logits), clattn_tensor_destroy(&wrong);
    toy_free(&t);

    /* Bad model files: missing, and a decoder-only golden model (no encoder, no embeddings). */
    clattn_transformer *m = (clattn_transformer *)0x1;
    assert_int_not_equal(clattn_transformer_load(ctx, &m, "/no/such/model.safetensors"), CLATTN_OK);
    assert_null(m);
    assert_non_null(strstr(clattn_last_error(ctx), "/no/such/model.safetensors"));
    m = (clattn_transformer *)0x1;
    assert_int_not_equal(clattn_transformer_load(ctx, &m, GOLDEN_DIR "/dec_padding/model.safetensors"),
                         CLATTN_OK);
    assert_null(m);
    print_message("    a decoder-only file: %s\n", clattn_last_error(ctx));
    assert_status_msg(NULL, clattn_transformer_load(ctx, NULL, TOY_DIR "/model.safetensors"),
                      CLATTN_ERROR_INVALID_ARGUMENT, "NULL");
    clattn_transformer_destroy(NULL);
}

/* Writes the toy model's tensors (all but generator.*) and metadata to path, with the extra
 * metadata entry and extra tensors given (NULL: none; an extra tensor replaces the toy's of the
 * same name, or is added: generator.* ones). */
static void write_variant(const char *path, const char *extra_key, const char *extra_value,
                          const clattn_safetensors_tensor *generator, size_t generator_count)
{
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, TOY_DIR "/model.safetensors"), CLATTN_OK);
    clattn_safetensors_tensor *tensors = calloc(st->tensor_count + generator_count,
                                                sizeof(*tensors));
    clattn_safetensors_metadata_entry *meta = calloc(st->metadata_count + 1, sizeof(*meta));
    assert_non_null(tensors);
    assert_non_null(meta);
    size_t n = 0, m = 0;
    for (size_t i = 0; i < st->tensor_count; i++) {
        bool replaced = false;
        for (size_t e = 0; e < generator_count; e++)
            replaced = replaced || strcmp(generator[e].name, st->tensors[i].name) == 0;
        if (!replaced && strncmp(st->tensors[i].name, "generator.", 10) != 0)
            tensors[n++] = st->tensors[i];
    }
    for (size_t i = 0; i < generator_count; i++)
        tensors[n++] = generator[i];
    for (size_t i = 0; i < st->metadata_count; i++)
        meta[m++] = st->metadata[i];
    if (extra_key)
        meta[m++] = (clattn_safetensors_metadata_entry){(char *)extra_key, (char *)extra_value};
    assert_int_equal(clattn_safetensors_write(path, tensors, n, meta, m), CLATTN_OK);
    free(tensors), free(meta);
    clattn_safetensors_destroy(&st);
}

static float *variant_logits(clattn_context *ctx, const char *path, const toy *t,
                             const clattn_npy_array *tgt)
{
    clattn_transformer *model = NULL;
    clattn_status status = clattn_transformer_load(ctx, &model, path);
    if (status != CLATTN_OK)
        print_error("%s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    size_t T = tgt->shape[1];
    clattn_tensor *logits = test_tensor_from(ctx, 3, (size_t[]){t->batch, T, 13}, NULL);
    assert_int_equal(clattn_transformer_forward(model, t->src->i64, t->batch, t->src_len,
                                                t->padding, tgt->i64, T, logits),
                     CLATTN_OK);
    float *host = test_tensor_to_host(logits);
    clattn_tensor_destroy(&logits);
    clattn_transformer_destroy(&model);
    return host;
}

/* tie_embeddings "true": logits through tgt_embedding.weight without bias, the same as an untied
 * file whose generator.weight is a copy of tgt_embedding.weight and whose bias is zero. */
static void tied_embeddings_equal_an_explicit_copy(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, TOY_DIR "/model.safetensors"), CLATTN_OK);
    const clattn_safetensors_tensor *emb = clattn_safetensors_find(st, "tgt_embedding.weight");
    assert_non_null(emb);
    float zeros[13] = {0};
    clattn_safetensors_tensor generator[2] = {
        {(char *)"generator.weight", CLATTN_SAFETENSORS_F32, 2, {13, 64}, 13 * 64, emb->data},
        {(char *)"generator.bias", CLATTN_SAFETENSORS_F32, 1, {13}, 13, zeros},
    };
    char dir[] = "/tmp/clattn-transformer.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char tied[64], copied[64];
    snprintf(tied, sizeof(tied), "%s/tied.safetensors", dir);
    snprintf(copied, sizeof(copied), "%s/copied.safetensors", dir);
    write_variant(tied, "tie_embeddings", "true", NULL, 0);
    write_variant(copied, NULL, NULL, generator, 2);
    clattn_npy_array *tgt = load_ids("tgt_in.npy");
    float *a = variant_logits(f->ctx, tied, &t, tgt), *b = variant_logits(f->ctx, copied, &t, tgt);
    size_t n = t.batch * tgt->shape[1] * 13;
    assert_close(a, b, n, 1e-5);
    /* and they differ from the trained generator's logits: the tie is used */
    clattn_npy_array *trained = load_floats("logits_no_tgt_mask.npy");
    assert_true(test_max_abs_diff(a, trained->f32, n) > 1e-2);
    /* An untied file without generator.weight names what is missing. */
    write_variant(copied, NULL, NULL, NULL, 0);
    clattn_transformer *m = NULL;
    assert_int_not_equal(clattn_transformer_load(f->ctx, &m, copied), CLATTN_OK);
    assert_non_null(strstr(clattn_last_error(f->ctx), "generator.weight"));
    free(a), free(b);
    remove(tied), remove(copied), rmdir(dir);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&trained);
    clattn_safetensors_destroy(&st);
    toy_free(&t);
}

/* Grouped-query attention from a model file: the toy's decoder with kv heads 0 and 2 only
 * (metadata num_kv_heads "2"; K/V rows [2·16, 64]) gives the same logits as a file whose K/V rows
 * repeat them for heads 0, 1 and 2, 3 (ordinary multi-head attention), and not the toy's. */
static void grouped_query_attention_from_a_model_file(void **state)
{
    test_fixture *f = *state;
    toy t;
    toy_load(f->ctx, &t);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, TOY_DIR "/model.safetensors"), CLATTN_OK);
    enum { E = 64, D = 16, PARTS = 8 };           /* 2 layers x 2 attentions x weight, bias */
    static float grouped[PARTS][(E + 2 * 2 * D) * E], repeated[PARTS][3 * E * E];
    static char names[PARTS][80];
    clattn_safetensors_tensor g[PARTS + 2], r[PARTS + 2];
    const clattn_safetensors_tensor *gen = clattn_safetensors_find(st, "generator.weight");
    const clattn_safetensors_tensor *gen_b = clattn_safetensors_find(st, "generator.bias");
    assert_non_null(gen);
    assert_non_null(gen_b);
    for (int part = 0; part < PARTS; part++) {
        int layer = part / 4, cross = part / 2 % 2, bias = part % 2;
        snprintf(names[part], sizeof(names[part]), "decoder.layers.%d.%s.in_proj_%s", layer,
                 cross ? "multihead_attn" : "self_attn", bias ? "bias" : "weight");
        const clattn_safetensors_tensor *full = clattn_safetensors_find(st, names[part]);
        assert_non_null(full);
        size_t row = bias ? 1 : E; /* floats per row */
        /* q rows as they are; K and V: heads {0, 2} (grouped), {0, 0, 2, 2} (repeated) */
        memcpy(grouped[part], full->data, E * row * sizeof(float));
        memcpy(repeated[part], full->data, E * row * sizeof(float));
        for (int kv = 0; kv < 2; kv++)      /* K, then V */
            for (int h = 0; h < 4; h++) {
                const float *from = full->data + (E + kv * E + (h / 2) * 2 * D) * row;
                memcpy(repeated[part] + (E + kv * E + h * D) * row, from, D * row * sizeof(float));
                if (h % 2 == 0)
                    memcpy(grouped[part] + (E + kv * 2 * D + h / 2 * D) * row, from,
                           D * row * sizeof(float));
            }
        size_t g_rows = E + 4 * D, r_rows = 3 * E;
        g[part] = (clattn_safetensors_tensor){names[part], CLATTN_SAFETENSORS_F32, bias ? 1 : 2,
                                              {g_rows, E}, g_rows * row, grouped[part]};
        r[part] = (clattn_safetensors_tensor){names[part], CLATTN_SAFETENSORS_F32, bias ? 1 : 2,
                                              {r_rows, E}, r_rows * row, repeated[part]};
    }
    g[PARTS] = r[PARTS] = *gen;
    g[PARTS + 1] = r[PARTS + 1] = *gen_b;
    char dir[] = "/tmp/clattn-transformer.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char grouped_path[64], repeated_path[64];
    snprintf(grouped_path, sizeof(grouped_path), "%s/grouped.safetensors", dir);
    snprintf(repeated_path, sizeof(repeated_path), "%s/repeated.safetensors", dir);
    write_variant(grouped_path, "num_kv_heads", "2", g, PARTS + 2);
    write_variant(repeated_path, NULL, NULL, r, PARTS + 2);
    clattn_transformer *m = NULL;
    assert_int_equal(clattn_transformer_load(f->ctx, &m, grouped_path), CLATTN_OK);
    clattn_transformer_info info;
    assert_int_equal(clattn_transformer_get_info(m, &info), CLATTN_OK);
    assert_int_equal(info.num_kv_heads, 2);
    clattn_transformer_destroy(&m);
    clattn_npy_array *tgt = load_ids("tgt_in.npy");
    float *a = variant_logits(f->ctx, grouped_path, &t, tgt);
    float *b = variant_logits(f->ctx, repeated_path, &t, tgt);
    size_t n = t.batch * tgt->shape[1] * 13;
    assert_close(a, b, n, 1e-5);
    clattn_npy_array *trained = load_floats("logits_no_tgt_mask.npy");
    assert_true(test_max_abs_diff(a, trained->f32, n) > 1e-2);
    /* Beam search (the cache reordered between beams) decodes the same ids from both. */
    int64_t *ids[2];
    size_t *lengths[2];
    toy variant = t;
    const char *paths[2] = {grouped_path, repeated_path};
    for (int v = 0; v < 2; v++) {
        assert_int_equal(clattn_transformer_load(f->ctx, &variant.model, paths[v]), CLATTN_OK);
        generate(&variant, 3, 12, &ids[v], &lengths[v]);
        clattn_transformer_destroy(&variant.model);
    }
    assert_memory_equal(lengths[0], lengths[1], t.batch * sizeof(size_t));
    assert_memory_equal(ids[0], ids[1], t.batch * 12 * sizeof(int64_t));
    free(ids[0]), free(ids[1]), free(lengths[0]), free(lengths[1]);
    /* num_kv_heads must divide nhead, and the weights must have its widths. */
    write_variant(repeated_path, "num_kv_heads", "3", r, PARTS + 2);
    assert_status_msg(f->ctx, clattn_transformer_load(f->ctx, &m, repeated_path),
                      CLATTN_ERROR_FORMAT, "metadata \"num_kv_heads\" 3 does not divide nhead 4");
    write_variant(repeated_path, "num_kv_heads", "2", r, PARTS + 2);
    assert_int_not_equal(clattn_transformer_load(f->ctx, &m, repeated_path), CLATTN_OK);
    assert_non_null(strstr(clattn_last_error(f->ctx), "in_proj_weight"));
    assert_null(m);
    free(a), free(b);
    remove(grouped_path), remove(repeated_path), rmdir(dir);
    clattn_npy_array_destroy(&tgt), clattn_npy_array_destroy(&trained);
    clattn_safetensors_destroy(&st);
    toy_free(&t);
}

/* PE[pos] of the paper (section 3.5), layer-normalised (mean 0, variance 1, eps 1e-5), in
 * double: the reference of the position probe below. */
static void normalised_position(size_t pos, size_t E, double *out)
{
    double mean = 0.0, var = 0.0;
    for (size_t c = 0; c < E; c++) {
        double angle = (double)pos / pow(10000.0, (double)(c - c % 2) / (double)E);
        out[c] = c % 2 == 0 ? sin(angle) : cos(angle);
        mean += out[c] / (double)E;
    }
    for (size_t c = 0; c < E; c++)
        var += (out[c] - mean) * (out[c] - mean) / (double)E;
    for (size_t c = 0; c < E; c++)
        out[c] = (out[c] - mean) / sqrt(var + 1e-5);
}

/* Cached decoding sees each new token at its own position: a probe made from the toy model whose
 * decoder output is LayerNorm(PE[t]) alone (token embeddings, attention and feed-forward outputs
 * zero, norms the identity) and whose generator rows are LayerNorm(PE[k]), so that position t's
 * logits peak at id t (by 3 or more; eos_id is 12). Teacher-forced logits on [bos, 0, ..., 11]
 * against the double-precision reference at every position; greedy generation, which embeds
 * step t alone at offset t with the key/value cache, must then emit 0, 1, ..., 12 (eos). */
/* The cached steps' logits against the teacher-forced logits at every position: the source
 * through the encoder, then one target token a step at its position (internal entries, as
 * generate.c runs them), each step's logits against clattn_transformer_forward's row for that
 * position. A step that loses its position offset (or any cached state) changes its logits. */
static void cached_step_logits_equal_teacher_forced_logits(void **state)
{
    test_fixture *f = *state;
    clattn_context *ctx = f->ctx;
    toy t;
    toy_load(ctx, &t);
    size_t B = t.batch, S = t.src_len, T = 10, E = t.info.d_model, V = t.info.tgt_vocab;
    int64_t *tgt = malloc(B * T * sizeof(int64_t)), *step_ids = malloc(B * sizeof(int64_t));
    test_rng rng = {17};
    for (size_t i = 0; i < B * T; i++)
        tgt[i] = i % T == 0 ? t.info.bos_id : (int64_t)(test_rng_next(&rng) % 10);
    clattn_tensor *forced = test_tensor_from(ctx, 3, (size_t[]){B, T, V}, NULL);
    clattn_status status = clattn_transformer_forward(t.model, t.src->i64, B, S, t.padding, tgt,
                                                      T, forced);
    if (status != CLATTN_OK)
        print_error("forward: %s\n", clattn_last_error(ctx));
    assert_int_equal(status, CLATTN_OK);
    float *want = test_tensor_to_host(forced);

    clattn_tensor *memory = NULL, *mask = NULL;
    assert_int_equal(clattn__transformer_encode(t.model, "test", t.src->i64, B, S, t.padding,
                                                &memory, &mask),
                     CLATTN_OK);
    clattn_decoder_state *st = NULL;
    assert_int_equal(clattn_decoder_state_create(t.model->decoder, &st, B, T), CLATTN_OK);
    assert_int_equal(clattn_decoder_state_set_memory(st, memory, mask), CLATTN_OK);
    clattn_tensor *x = test_tensor_from(ctx, 3, (size_t[]){B, 1, E}, NULL);
    clattn_tensor *h = test_tensor_from(ctx, 3, (size_t[]){B, 1, E}, NULL);
    clattn_tensor *logits = test_tensor_from(ctx, 2, (size_t[]){B, V}, NULL);
    float *got = malloc(B * V * sizeof(float)), *row = malloc(B * V * sizeof(float));
    for (size_t i = 0; i < T; i++) {
        for (size_t b = 0; b < B; b++)
            step_ids[b] = tgt[b * T + i];
        assert_int_equal(clattn__transformer_embed(t.model, "test", step_ids, B, 1, i, x),
                         CLATTN_OK);
        assert_int_equal(clattn_decoder_step(st, x, h), CLATTN_OK);
        assert_int_equal(clattn__transformer_logits(t.model, h, B, logits), CLATTN_OK);
        assert_int_equal(clattn_tensor_read(logits, got, B * V), CLATTN_OK);
        for (size_t b = 0; b < B; b++)
            memcpy(row + b * V, want + (b * T + i) * V, V * sizeof(float));
        print_message("position %zu: max |cached - teacher-forced| = %.3g\n", i,
                      test_max_abs_diff(got, row, B * V));
        assert_close(got, row, B * V, 1e-4);
    }
    free(got), free(row), free(want), free(tgt), free(step_ids);
    clattn_tensor_destroy(&x), clattn_tensor_destroy(&h), clattn_tensor_destroy(&logits);
    clattn_tensor_destroy(&forced), clattn_tensor_destroy(&memory), clattn_tensor_destroy(&mask);
    clattn_decoder_state_destroy(&st);
    toy_free(&t);
}

static void cached_steps_see_their_positions(void **state)
{
    test_fixture *f = *state;
    enum { E = 64, V = 13, FF = 128, T = 12, N = 29 };
    static float zeros[E * FF], ones[E], generator[V * E];
    static char names[N][64];
    for (size_t c = 0; c < E; c++)
        ones[c] = 1.0f;
    static double ref[V][E];
    for (size_t k = 0; k < V; k++) {
        normalised_position(k, E, ref[k]);
        for (size_t c = 0; c < E; c++)
            generator[k * E + c] = (float)ref[k][c];
    }
    clattn_safetensors_tensor t[N];
    size_t n = 0;
#define PROBE(shape0, shape1, data, ...)                                                      \
    do {                                                                                      \
        snprintf(names[n], sizeof(names[n]), __VA_ARGS__);                                    \
        t[n] = (clattn_safetensors_tensor){names[n], CLATTN_SAFETENSORS_F32, (shape1) ? 2 : 1, \
                                           {(shape0), (shape1)}, (shape0) * ((shape1) ? (shape1) : 1), \
                                           (data)};                                           \
        n++;                                                                                  \
    } while (0)
    for (int layer = 0; layer < 2; layer++) {
        const char *attn[2] = {"self_attn", "multihead_attn"};
        for (int a = 0; a < 2; a++) {
            PROBE(E, E, zeros, "decoder.layers.%d.%s.out_proj.weight", layer, attn[a]);
            PROBE(E, 0, zeros, "decoder.layers.%d.%s.out_proj.bias", layer, attn[a]);
        }
        PROBE(E, FF, zeros, "decoder.layers.%d.linear2.weight", layer);
        PROBE(E, 0, zeros, "decoder.layers.%d.linear2.bias", layer);
        for (int norm = 1; norm <= 3; norm++) {
            PROBE(E, 0, ones, "decoder.layers.%d.norm%d.weight", layer, norm);
            PROBE(E, 0, zeros, "decoder.layers.%d.norm%d.bias", layer, norm);
        }
    }
    PROBE(E, 0, ones, "decoder.norm.weight");
    PROBE(E, 0, zeros, "decoder.norm.bias");
    PROBE(V, E, zeros, "tgt_embedding.weight");
    PROBE(V, E, generator, "generator.weight");
    PROBE(V, 0, zeros, "generator.bias");
#undef PROBE
    assert_int_equal(n, N);
    char dir[] = "/tmp/clattn-transformer.XXXXXX";
    assert_non_null(mkdtemp(dir));
    char path[64];
    snprintf(path, sizeof(path), "%s/probe.safetensors", dir);
    write_variant(path, NULL, NULL, t, N);
    toy probe;
    toy_load(f->ctx, &probe);
    clattn_transformer_destroy(&probe.model);
    assert_int_equal(clattn_transformer_load(f->ctx, &probe.model, path), CLATTN_OK);

    /* Teacher-forced: position t's logits are E·corr(PE[t], PE[k]) (LayerNorm is idempotent). */
    int64_t tgt[T], src[3] = {1, 2, 12};
    tgt[0] = 11;
    for (int i = 1; i < T; i++)
        tgt[i] = i - 1;
    clattn_tensor *logits = test_tensor_from(f->ctx, 3, (size_t[]){1, T, V}, NULL);
    assert_int_equal(clattn_transformer_forward(probe.model, src, 1, 3, NULL, tgt, T, logits),
                     CLATTN_OK);
    float *got = test_tensor_to_host(logits), want[T * V];
    for (size_t pos = 0; pos < T; pos++)
        for (size_t k = 0; k < V; k++) {
            double dot = 0.0;
            for (size_t c = 0; c < E; c++)
                dot += ref[pos][c] * ref[k][c];
            want[pos * V + k] = (float)dot;
        }
    assert_close(got, want, T * V, 2e-3);
    /* Generation: ids 0, 1, ..., 12, each the arg-max of its step's logits. */
    clattn_generate_params params;
    clattn_generate_params_default(&params);
    params.max_new = 20;
    int64_t out[20];
    size_t length = 0;
    for (int beam = 1; beam <= 2; beam++) {
        params.beam = (size_t)beam;
        assert_int_equal(clattn_transformer_generate(probe.model, src, 1, 3, NULL, &params, out,
                                                     &length),
                         CLATTN_OK);
        if (length != V)
            print_error("beam %d: %zu ids, first %lld %lld\n", beam, length, (long long)out[0],
                        (long long)out[1]);
        assert_int_equal(length, V);
        for (size_t i = 0; i < V; i++)
            assert_int_equal(out[i], (int64_t)i);
    }
    free(got);
    clattn_tensor_destroy(&logits);
    remove(path), rmdir(dir);
    toy_free(&probe);
}

/* The whole-model parameter count: the paper's base model by hand (6 encoder layers of
 * 3152384, 6 decoder layers of 4204032, two final norms of 1024, a 37000 x 512 embedding), and
 * the toy model file's own tensors (its separate embeddings and generator added). */
static void parameter_counts(void **state)
{
    (void)state;
    clattn_encoder_config c;
    uint64_t params = 0;
    assert_int_equal(clattn_encoder_preset("base", &c), CLATTN_OK);
    assert_int_equal(clattn_transformer_count_params(&c, 37000, &params), CLATTN_OK);
    assert_int_equal(params, 6 * 3152384ull + 6 * 4204032ull + 2048 + 37000ull * 512);
    clattn_encoder_config_default(&c, 64, 4, 2, 128);
    assert_int_equal(clattn_transformer_count_params(&c, 0, &params), CLATTN_OK);
    clattn_safetensors *st = NULL;
    assert_int_equal(clattn_safetensors_read(&st, TOY_DIR "/model.safetensors"), CLATTN_OK);
    uint64_t in_file = 0;
    for (size_t i = 0; i < st->tensor_count; i++)
        in_file += st->tensors[i].numel;
    clattn_safetensors_destroy(&st);
    assert_int_equal(in_file, params + 3 * 13 * 64 + 13);
    assert_status_msg(NULL, clattn_transformer_count_params(&c, 37000, NULL),
                      CLATTN_ERROR_INVALID_ARGUMENT, "params is NULL");
    assert_status_msg(NULL, clattn_transformer_count_params(NULL, 37000, &params),
                      CLATTN_ERROR_INVALID_ARGUMENT, "config is NULL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(info_matches_the_model_file),
        cmocka_unit_test(teacher_forced_logits_match_pytorch),
        cmocka_unit_test(greedy_decoding_matches_pytorch),
        cmocka_unit_test(beam_search_matches_the_reference),
        cmocka_unit_test(one_sentence_at_a_time_equals_the_batch),
        cmocka_unit_test(rejects_bad_arguments),
        cmocka_unit_test(tied_embeddings_equal_an_explicit_copy),
        cmocka_unit_test(grouped_query_attention_from_a_model_file),
        cmocka_unit_test(cached_steps_see_their_positions),
        cmocka_unit_test(cached_step_logits_equal_teacher_forced_logits),
        cmocka_unit_test(parameter_counts),
    };
    return cmocka_run_group_tests(tests, test_fixture_setup, test_fixture_teardown);
}
